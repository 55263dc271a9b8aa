package kafka

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path"

	"github.com/twmb/franz-go/pkg/kgo"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
)

// rowBatch turns the records of one Read into rows. Rows are kept per
// partition and returned in partition order, each partition's in offset
// order, so that a replayed batch yields the same rows in the same order
// (a webhook sink's chunks, and their keys, depend on it).
type rowBatch struct {
	s         *Source
	batch     int64
	index     map[topicPartition]int
	parts     [][]engine.Row
	slab      []any
	malformed int64
	dead      bytes.Buffer
	err       error
}

func (s *Source) newBatch(batch int64, spans []span) *rowBatch {
	b := &rowBatch{s: s, batch: batch, index: make(map[topicPartition]int, len(spans)), parts: make([][]engine.Row, len(spans))}
	for i, sp := range spans {
		b.index[sp.tp] = i
	}
	return b
}

// rows returns the batch's rows in order.
func (b *rowBatch) rows() []engine.Row {
	if len(b.parts) == 1 {
		return b.parts[0]
	}
	n := 0
	for _, p := range b.parts {
		n += len(p)
	}
	rows := make([]engine.Row, 0, n)
	for _, p := range b.parts {
		rows = append(rows, p...)
	}
	return rows
}

// add appends the row of r, or handles r as malformed.
func (b *rowBatch) add(r *kgo.Record) {
	if b.err != nil {
		return
	}
	w := b.s.width
	if len(b.slab) < w {
		b.slab = make([]any, 1024*w) // one allocation for many rows
	}
	row := engine.Row(b.slab[:w:w])
	b.slab = b.slab[w:]
	if err := b.s.dec.decode(r.Value, row); err != nil {
		clear(row)
		b.bad(r, err)
		return
	}
	n := len(b.s.dec.cols)
	if r.Key != nil {
		row[n] = string(r.Key)
	}
	row[n+1] = r.Topic
	row[n+2] = int64(r.Partition)
	row[n+3] = r.Offset
	row[n+4] = r.Timestamp.UTC()
	i := b.index[topicPartition{r.Topic, r.Partition}]
	b.parts[i] = append(b.parts[i], row)
}

func (b *rowBatch) bad(r *kgo.Record, err error) {
	switch b.s.onMalformed {
	case v1.MalformedSkip:
		b.malformed++
	case v1.MalformedDeadLetter:
		b.malformed++
		line, _ := json.Marshal(deadLetter{
			Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
			Key: keyString(r.Key), Value: string(r.Value), Reason: err.Error(),
		})
		b.dead.Write(line)
		b.dead.WriteByte('\n')
	default:
		b.err = fmt.Errorf("malformed record at topic %s partition %d offset %d: %w (onMalformed: fail)", r.Topic, r.Partition, r.Offset, err)
	}
}

// deadLetter is one line of a dead-letter file.
type deadLetter struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Offset    int64   `json:"offset"`
	Key       *string `json:"key"`
	Value     string  `json:"value"`
	Reason    string  `json:"reason"`
}

func keyString(k []byte) *string {
	if k == nil {
		return nil
	}
	s := string(k)
	return &s
}

// flushDeadLetters writes the batch's malformed records to
// <deadLetterPath>/<query id>/<source>/<batch>.jsonl, the same file again on a
// replay.
func (b *rowBatch) flushDeadLetters(ctx context.Context) error {
	if b.dead.Len() == 0 || b.s.deadLetter == nil {
		return nil
	}
	key := path.Join(b.s.queryID, b.s.name, fmt.Sprintf("%020d.jsonl", b.batch))
	if err := b.s.deadLetter.Put(ctx, key, b.dead.Bytes()); err != nil {
		return fmt.Errorf("write dead letters %s: %w", key, err)
	}
	return nil
}
