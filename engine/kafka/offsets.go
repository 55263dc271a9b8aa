package kafka

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math/bits"
	"slices"
)

// topicPartition names one partition.
type topicPartition struct {
	topic     string
	partition int32
}

func (tp topicPartition) String() string { return fmt.Sprintf("%s/%d", tp.topic, tp.partition) }

func compareTP(a, b topicPartition) int {
	return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
}

// offsets maps topic → partition → offset. Its JSON is Spark's,
// {"topic":{"0":12}}, which is also the source's offset in the offsets log
// (the next offset to read per partition).
type offsets map[string]map[int32]int64

func parseOffsets(raw []byte) (offsets, error) {
	var o offsets
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, fmt.Errorf("kafka offsets %s: want {\"topic\":{\"partition\":offset}}: %w", raw, err)
	}
	if o == nil {
		o = offsets{}
	}
	return o, nil
}

func (o offsets) json() []byte {
	if o == nil {
		return []byte("{}")
	}
	b, err := json.Marshal(o)
	if err != nil { // maps of strings and numbers always marshal
		panic(err)
	}
	return b
}

func (o offsets) get(tp topicPartition) (int64, bool) {
	off, ok := o[tp.topic][tp.partition]
	return off, ok
}

func (o offsets) set(tp topicPartition, off int64) {
	ps := o[tp.topic]
	if ps == nil {
		ps = map[int32]int64{}
		o[tp.topic] = ps
	}
	ps[tp.partition] = off
}

// partitions returns the partitions of o in order.
func (o offsets) partitions() []topicPartition {
	var tps []topicPartition
	for t, ps := range o {
		for p := range ps {
			tps = append(tps, topicPartition{t, p})
		}
	}
	slices.SortFunc(tps, compareTP)
	return tps
}

func (o offsets) clone() offsets {
	c := make(offsets, len(o))
	for t, ps := range o {
		c[t] = make(map[int32]int64, len(ps))
		for p, off := range ps {
			c[t][p] = off
		}
	}
	return c
}

// span is the range [from, to) a batch reads of one partition.
type span struct {
	tp       topicPartition
	from, to int64
}

// limit caps the total of the spans at max, shrinking each in proportion to
// its size. The shares are exact: they sum to max, and the records a share
// rounds away go to the spans with the largest remainders (ties to the first
// partition in order). spans must be sorted.
func limit(spans []span, max int64) {
	var total int64
	for _, s := range spans {
		total += s.to - s.from
	}
	if total <= max {
		return
	}
	type rem struct {
		i int
		r uint64
	}
	rems := make([]rem, 0, len(spans))
	var given int64
	for i := range spans {
		size := spans[i].to - spans[i].from
		if size <= 0 {
			continue
		}
		// share = max*size/total without overflow: max < total, so the
		// high word of the product is below total.
		hi, lo := bits.Mul64(uint64(max), uint64(size))
		q, r := bits.Div64(hi, lo, uint64(total))
		spans[i].to = spans[i].from + int64(q)
		given += int64(q)
		rems = append(rems, rem{i, r})
	}
	slices.SortStableFunc(rems, func(a, b rem) int { return cmp.Compare(b.r, a.r) })
	for _, r := range rems {
		if given >= max {
			break
		}
		spans[r.i].to++
		given++
	}
}
