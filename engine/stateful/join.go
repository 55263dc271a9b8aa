package stateful

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine/state"
)

// Suffixes of the operator names of a join's two state stores:
// state/<name>.left/ and state/<name>.right/. A step name is an identifier,
// which holds no dot, so they cannot clash with another step's state.
const (
	JoinLeftSuffix  = ".left"
	JoinRightSuffix = ".right"
)

// StreamJoinConfig describes a stream–stream join to NewStreamJoin: left
// is the stream so far, right the second source. A left row l and a right
// row r match when their keys are equal (pairwise, in order; a null key
// matches nothing) and
//
//	r[RightTime] BETWEEN l[LeftTime] - Lower AND l[LeftTime] + Upper
type StreamJoinConfig struct {
	// Name is the operator's name in the checkpoint (v1.Step.StatefulName).
	Name        string
	Type        v1.JoinType
	Left, Right v1.Columns
	// LeftKeys and RightKeys name the equality keys, pairwise; the types of
	// a pair must be equal.
	LeftKeys, RightKeys []string
	// LeftTime and RightTime are the sides' event-time (watermark) columns.
	LeftTime, RightTime string
	// Lower and Upper bound the right time around the left time; Lower +
	// Upper must not be negative.
	Lower, Upper time.Duration
}

// StreamJoin is a symmetric stream–stream join (Spark's
// StreamingSymmetricHashJoinExec). Each side's rows are buffered in that
// side's state store, keyed by join key and event time, until the
// watermark passes the time bound: then no future row of the other side can
// match them, and they are evicted — emitted first, with nulls, when their
// side is outer and they never matched. A batch's left rows join the right
// rows of earlier batches; its right rows then join every buffered left row,
// this batch's included; so each matching pair is emitted exactly once, in
// the batch where its second row arrives.
//
// A full outer join emits both sides' unmatched rows at eviction. A left semi
// join (Spark's LeftSemi) emits a left row once, at its first match, with
// nulls for the right columns (the step keeps the left ones): a left row
// that matches an earlier right row is emitted and never buffered; a
// buffered left row that a later right row matches is emitted and removed
// from the state; right rows are buffered as for an inner join.
//
// Rows at or behind the late-event watermark (the batch before's, Batch)
// are dropped as late; a row between it and the batch's watermark is
// buffered, and evicted in the same batch. A row with a null key
// or event time can match nothing, and is emitted at once with nulls if its
// side is outer, else dropped. Output is deterministic given the batch's
// input rows and state: per partition, the left rows' matches in input
// order, then the right rows', then evicted outer rows in key order.
type StreamJoin struct {
	name         string
	typ          v1.JoinType
	left, right  joinSide
	leftN, outN  int
	lower, upper int64
	// idx indexes the buffered rows by key for the stores it was built
	// from, at version idxVersion; nil until the first Process.
	idx        []partIndex
	idxStores  [2]*state.Store
	idxVersion int64
}

// joinSide is one compiled side of a join.
type joinSide struct {
	cols v1.Columns
	keys []int // key columns, in order
	time int   // event-time column
	// rest holds the columns a state value carries: the ones neither a
	// key nor the event time (those are in the state key).
	rest []int
	// outer: unmatched rows are emitted when evicted.
	outer bool
	// before and after bound the other side's time around this side's:
	// [t - before, t + after]. A row is evictable once t + after < watermark:
	// Spark's state watermark for an inclusive bound is 1ms below the bound
	// (StreamingJoinHelper.getStateValueWatermark), and it evicts at or behind it.
	before, after int64
	meta          state.Metadata
}

// partIndex indexes one partition's buffered rows of each side.
type partIndex [2]sideIndex

// sideIndex maps a join key's encoding to its rows, sorted by event time
// then state key; floor is the oldest event time among them.
type sideIndex struct {
	byKey map[string][]joinEntry
	floor int64
}

type joinEntry struct {
	t   int64
	key string
}

// flag bytes at the start of a state value.
const (
	joinUnmatched = 0
	joinMatched   = 1
)

// NewStreamJoin compiles a stream–stream join.
func NewStreamJoin(cfg StreamJoinConfig) (*StreamJoin, error) {
	if !slices.Contains(v1.JoinTypes(), cfg.Type) {
		return nil, fmt.Errorf("join %s: unknown join type %q; use one of %v", cfg.Name, cfg.Type, v1.JoinTypes())
	}
	if len(cfg.LeftKeys) == 0 || len(cfg.LeftKeys) != len(cfg.RightKeys) {
		return nil, fmt.Errorf("join %s: %d left keys and %d right keys; name at least one pair", cfg.Name, len(cfg.LeftKeys), len(cfg.RightKeys))
	}
	if cfg.Lower+cfg.Upper < 0 {
		return nil, fmt.Errorf("join %s: time bound [-%s, +%s] around the left time is empty", cfg.Name, cfg.Lower, cfg.Upper)
	}
	j := &StreamJoin{name: cfg.Name, typ: cfg.Type, lower: int64(cfg.Lower), upper: int64(cfg.Upper), idxVersion: -1}
	type keyDesc struct {
		Left  string `json:"left"`
		Right string `json:"right"`
		Type  string `json:"type"`
	}
	var keys []keyDesc
	for i := range cfg.LeftKeys {
		l, r := columnIndex(cfg.Left, cfg.LeftKeys[i]), columnIndex(cfg.Right, cfg.RightKeys[i])
		if l < 0 || r < 0 {
			return nil, fmt.Errorf("join %s: no key column %q on the left or %q on the right", cfg.Name, cfg.LeftKeys[i], cfg.RightKeys[i])
		}
		if lt, rt := cfg.Left[l].Type, cfg.Right[r].Type; lt != rt {
			return nil, fmt.Errorf("join %s: key %s is %s on the left but %s is %s on the right; cast one side", cfg.Name, cfg.LeftKeys[i], lt, cfg.RightKeys[i], rt)
		}
		keys = append(keys, keyDesc{cfg.LeftKeys[i], cfg.RightKeys[i], string(cfg.Left[l].Type)})
	}
	desc := struct {
		Kind      string      `json:"kind"`
		Format    int         `json:"format"`
		Type      v1.JoinType `json:"type"`
		Side      string      `json:"side"`
		Keys      []keyDesc   `json:"keys"`
		LeftTime  string      `json:"leftTime"`
		RightTime string      `json:"rightTime"`
		Lower     string      `json:"lower"`
		Upper     string      `json:"upper"`
		Columns   []string    `json:"columns"`
	}{Kind: "join", Format: 1, Type: cfg.Type, Keys: keys, LeftTime: cfg.LeftTime, RightTime: cfg.RightTime,
		Lower: cfg.Lower.String(), Upper: cfg.Upper.String()}
	build := func(s *joinSide, suffix string, cols v1.Columns, keyNames []string, timeCol string) error {
		s.cols = cols
		if s.time = columnIndex(cols, timeCol); s.time < 0 || cols[s.time].Type != v1.TypeTimestamp {
			return fmt.Errorf("join %s: the %s event-time column %q is not a timestamp column", cfg.Name, strings.TrimPrefix(suffix, "."), timeCol)
		}
		inKey := make([]bool, len(cols))
		var keySchema, valueSchema []state.Field
		for _, k := range keyNames {
			i := columnIndex(cols, k)
			s.keys = append(s.keys, i)
			inKey[i] = true
			keySchema = append(keySchema, state.Field{Name: k, Type: string(cols[i].Type)})
		}
		keySchema = append(keySchema, state.Field{Name: timeCol, Type: string(v1.TypeTimestamp)})
		inKey[s.time] = true
		desc.Columns = desc.Columns[:0]
		for i, c := range cols {
			desc.Columns = append(desc.Columns, c.Name+" "+string(c.Type))
			if !inKey[i] {
				s.rest = append(s.rest, i)
				valueSchema = append(valueSchema, state.Field{Name: c.Name, Type: string(c.Type)})
			}
		}
		desc.Side = strings.TrimPrefix(suffix, ".")
		c := computes(desc)
		s.meta = state.Metadata{
			Operator:    cfg.Name + suffix,
			Kind:        "join",
			KeySchema:   keySchema,
			ValueSchema: valueSchema,
			Eviction:    timeCol,
			Computes:    c,
			Fingerprint: state.Fingerprint(c),
		}
		return nil
	}
	if err := build(&j.left, JoinLeftSuffix, cfg.Left, cfg.LeftKeys, cfg.LeftTime); err != nil {
		return nil, err
	}
	if err := build(&j.right, JoinRightSuffix, cfg.Right, cfg.RightKeys, cfg.RightTime); err != nil {
		return nil, err
	}
	j.left.outer, j.right.outer = cfg.Type.OuterLeft(), cfg.Type.OuterRight()
	// A left row at l matches right rows in [l - lower, l + upper]; a right
	// row at r matches left rows in [r - upper, r + lower].
	j.left.before, j.left.after = j.lower, j.upper
	j.right.before, j.right.after = j.upper, j.lower
	j.leftN, j.outN = len(cfg.Left), len(cfg.Left)+len(cfg.Right)
	return j, nil
}

// Metadata describes the state of the left and of the right side, in that
// order: one store each (operators <name>.left and <name>.right).
func (j *StreamJoin) Metadata() [2]state.Metadata {
	return [2]state.Metadata{j.left.meta, j.right.meta}
}

// JoinMetrics count what a join's Process did.
type JoinMetrics struct {
	// LeftDroppedByWatermark and RightDroppedByWatermark count each side's
	// input rows dropped as late.
	LeftDroppedByWatermark, RightDroppedByWatermark int64
	// Emitted counts the rows returned.
	Emitted int64
}

// joinItem is one input row on its way into a partition.
type joinItem struct {
	row Row
	seq int    // index among its side's input rows
	key string // encoding of the join key
	t   int64
}

// Process joins one batch: leftRows and rightRows are the rows of each
// side, left and right its loaded stores (the caller commits both). It
// returns the joined rows (left columns, then right columns).
func (j *StreamJoin) Process(left, right *state.Store, leftRows, rightRows []Row, b Batch) ([]Row, JoinMetrics, error) {
	var m JoinMetrics
	parts := left.Partitions()
	if err := j.ensureIndex(left, right); err != nil {
		return nil, m, fmt.Errorf("join %s: %w", j.name, err)
	}
	j.idxVersion = -1 // until Process succeeds
	wm, lateWm := b.watermarkNanos(), b.lateNanos()
	var direct []Row // outer rows that can match nothing
	split := func(s *joinSide, rows []Row, isLeft bool, dropped *int64) [][]joinItem {
		byPart := make([][]joinItem, parts)
		buf := make([]byte, 0, 32)
	rows:
		for i, r := range rows {
			t, ok := nanos(r[s.time])
			if ok && t <= lateWm {
				*dropped++
				continue
			}
			buf = buf[:0]
			for _, k := range s.keys {
				ok = ok && r[k] != nil
				buf = appendValue(buf, r[k])
			}
			if !ok {
				if s.outer {
					direct = append(direct, j.combine(r, isLeft, nil))
				}
				continue rows
			}
			p := state.PartitionOf(buf, parts)
			byPart[p] = append(byPart[p], joinItem{row: r, seq: i, key: string(buf), t: t})
		}
		return byPart
	}
	lin := split(&j.left, leftRows, true, &m.LeftDroppedByWatermark)
	rin := split(&j.right, rightRows, false, &m.RightDroppedByWatermark)
	outs := make([][]Row, parts)
	err := state.UpdatePaired(left, right, func(pl, pr *state.Partition) error {
		out, err := j.processPartition(pl, pr, lin[pl.ID()], rin[pl.ID()], left.Version(), wm)
		outs[pl.ID()] = out
		return err
	})
	if err != nil {
		j.idx = nil
		return nil, m, fmt.Errorf("join %s: %w", j.name, err)
	}
	out := direct
	for _, o := range outs {
		out = append(out, o...)
	}
	j.idxVersion = left.Version() + 1
	m.Emitted = int64(len(out))
	return out, m, nil
}

// processPartition joins one partition's rows of the batch and evicts its
// rows the watermark passed.
func (j *StreamJoin) processPartition(pl, pr *state.Partition, lin, rin []joinItem, version int64, wm int64) ([]Row, error) {
	ix := &j.idx[pl.ID()]
	var out []Row
	// Left rows against the right rows of earlier batches, then buffered.
	for _, it := range lin {
		if j.typ == v1.JoinLeftSemi {
			if j.semiMatch(&ix[1], it) {
				out = append(out, j.combine(it.row, true, nil))
				continue // matched once: never buffered
			}
			j.buffer(&ix[0], pl, &j.left, it, version, false)
			continue
		}
		matched, err := j.probe(&ix[1], pr, &j.right, &j.left, it, false, &out)
		if err != nil {
			return nil, err
		}
		j.buffer(&ix[0], pl, &j.left, it, version, matched)
	}
	// Right rows against every buffered left row, this batch's included.
	for _, it := range rin {
		var (
			matched bool
			err     error
		)
		if j.typ == v1.JoinLeftSemi {
			err = j.semiTake(&ix[0], pl, it, &out)
		} else {
			matched, err = j.probe(&ix[0], pl, &j.left, &j.right, it, true, &out)
		}
		if err != nil {
			return nil, err
		}
		j.buffer(&ix[1], pr, &j.right, it, version, matched)
	}
	type outerRow struct {
		key string
		row Row
	}
	var outer []outerRow
	for side, p := range []*state.Partition{pl, pr} {
		s, si := &j.left, &ix[0]
		if side == 1 {
			s, si = &j.right, &ix[1]
		}
		if si.floor == math.MaxInt64 || addSat(si.floor, s.after) >= wm {
			continue
		}
		floor := int64(math.MaxInt64)
		for k, es := range si.byKey {
			n := 0
			for n < len(es) && addSat(es[n].t, s.after) < wm {
				e := es[n]
				if s.outer {
					val, _ := p.Get(e.key)
					if len(val) > 0 && val[0] == joinUnmatched {
						row, err := s.decode(e.key, val)
						if err != nil {
							return nil, fmt.Errorf("partition %d: %w", p.ID(), err)
						}
						outer = append(outer, outerRow{e.key, j.combine(row, side == 0, nil)})
					}
				}
				p.Delete(e.key)
				n++
			}
			switch {
			case n == len(es):
				delete(si.byKey, k)
				continue
			case n > 0:
				es = es[n:]
				si.byKey[k] = es
			}
			floor = min(floor, es[0].t)
		}
		si.floor = floor
	}
	slices.SortFunc(outer, func(a, b outerRow) int { return strings.Compare(a.key, b.key) })
	for _, o := range outer {
		out = append(out, o.row)
	}
	return out, nil
}

// probe joins item it of side s with the buffered rows of the other side
// o (index oi, partition op) in its time bound, appending the joined rows
// to out; itIsRight says which side it is on. It marks the rows of an outer
// o that it matched, and reports whether it matched any.
func (j *StreamJoin) probe(oi *sideIndex, op *state.Partition, o, s *joinSide, it joinItem, itIsRight bool, out *[]Row) (bool, error) {
	es := oi.byKey[it.key]
	if len(es) == 0 {
		return false, nil
	}
	from, to := addSat(it.t, -s.before), addSat(it.t, s.after)
	i, _ := slices.BinarySearchFunc(es, from, func(e joinEntry, t int64) int {
		if e.t < t {
			return -1
		}
		return 1
	})
	matched := false
	for ; i < len(es) && es[i].t <= to; i++ {
		val, ok := op.Get(es[i].key)
		if !ok {
			return false, fmt.Errorf("partition %d: indexed row missing from the state", op.ID())
		}
		other, err := o.decode(es[i].key, val)
		if err != nil {
			return false, fmt.Errorf("partition %d: %w", op.ID(), err)
		}
		if itIsRight {
			*out = append(*out, j.combine(other, true, it.row))
		} else {
			*out = append(*out, j.combine(it.row, true, other))
		}
		matched = true
		if o.outer && val[0] == joinUnmatched {
			flagged := slices.Clone(val)
			flagged[0] = joinMatched
			op.Put(es[i].key, flagged)
		}
	}
	return matched, nil
}

// semiMatch reports whether left item it has a match among the buffered
// right rows (index ri).
func (j *StreamJoin) semiMatch(ri *sideIndex, it joinItem) bool {
	es := ri.byKey[it.key]
	from, to := addSat(it.t, -j.left.before), addSat(it.t, j.left.after)
	i, _ := slices.BinarySearchFunc(es, from, func(e joinEntry, t int64) int {
		if e.t < t {
			return -1
		}
		return 1
	})
	return i < len(es) && es[i].t <= to
}

// semiTake emits the buffered left rows (index li, partition pl) that right
// item it matches, each for the first and last time, and removes them from
// the state and the index.
func (j *StreamJoin) semiTake(li *sideIndex, pl *state.Partition, it joinItem, out *[]Row) error {
	es := li.byKey[it.key]
	if len(es) == 0 {
		return nil
	}
	from, to := addSat(it.t, -j.right.before), addSat(it.t, j.right.after)
	i, _ := slices.BinarySearchFunc(es, from, func(e joinEntry, t int64) int {
		if e.t < t {
			return -1
		}
		return 1
	})
	k := i
	for ; k < len(es) && es[k].t <= to; k++ {
		val, ok := pl.Get(es[k].key)
		if !ok {
			return fmt.Errorf("partition %d: indexed row missing from the state", pl.ID())
		}
		row, err := j.left.decode(es[k].key, val)
		if err != nil {
			return fmt.Errorf("partition %d: %w", pl.ID(), err)
		}
		*out = append(*out, j.combine(row, true, nil))
		pl.Delete(es[k].key)
	}
	if k == i {
		return nil
	}
	if es = slices.Delete(es, i, k); len(es) == 0 {
		delete(li.byKey, it.key)
	} else {
		li.byKey[it.key] = es
	}
	return nil
}

// buffer adds item it to side s's state and index.
func (j *StreamJoin) buffer(si *sideIndex, p *state.Partition, s *joinSide, it joinItem, version int64, matched bool) {
	k := make([]byte, 0, len(it.key)+evictPrefix+6)
	k = append(k, it.key...)
	k = appendEvictTime(k, it.t)
	k = binary.AppendUvarint(k, uint64(version))
	k = binary.AppendUvarint(k, uint64(it.seq))
	key := string(k)
	flag := byte(joinUnmatched)
	if matched && s.outer {
		flag = joinMatched
	}
	val := []byte{flag}
	for _, c := range s.rest {
		val = appendValue(val, it.row[c])
	}
	p.Put(key, val)
	si.insert(it.key, joinEntry{t: it.t, key: key})
}

// combine builds an output row from a row of one side and a row (or nil)
// of the other: first is the left row when isLeft, else the right row.
func (j *StreamJoin) combine(first Row, isLeft bool, second Row) Row {
	out := make(Row, j.outN)
	l, r := first, second
	if !isLeft {
		l, r = second, first
	}
	if l != nil {
		copy(out, l)
	}
	if r != nil {
		copy(out[j.leftN:], r)
	}
	return out
}

// ensureIndex rebuilds the index of buffered rows unless it was built from
// these stores at their version.
func (j *StreamJoin) ensureIndex(left, right *state.Store) error {
	if j.idx != nil && j.idxStores == [2]*state.Store{left, right} && j.idxVersion == left.Version() && left.Version() == right.Version() {
		return nil
	}
	if left.Partitions() != right.Partitions() {
		return fmt.Errorf("%d partitions on the left, %d on the right", left.Partitions(), right.Partitions())
	}
	j.idx = make([]partIndex, left.Partitions())
	for i := range j.idx {
		for side, st := range []*state.Store{left, right} {
			s := &j.left
			if side == 1 {
				s = &j.right
			}
			si := &j.idx[i][side]
			si.byKey, si.floor = map[string][]joinEntry{}, math.MaxInt64
			for key := range st.Partition(i).All() {
				n, t, err := s.splitKey(key)
				if err != nil {
					return fmt.Errorf("%s partition %d: %w", s.meta.Operator, i, err)
				}
				// The index's key aliases the state key's bytes.
				si.byKey[key[:n]] = append(si.byKey[key[:n]], joinEntry{t: t, key: key})
				si.floor = min(si.floor, t)
			}
			for _, es := range si.byKey {
				slices.SortFunc(es, compareEntries)
			}
		}
	}
	j.idxStores = [2]*state.Store{left, right}
	j.idxVersion = left.Version()
	return nil
}

func compareEntries(a, b joinEntry) int {
	if a.t != b.t {
		if a.t < b.t {
			return -1
		}
		return 1
	}
	return strings.Compare(a.key, b.key)
}

// insert adds e under the join key k, in order.
func (si *sideIndex) insert(k string, e joinEntry) {
	es, ok := si.byKey[k]
	if !ok && len(e.key) >= len(k) {
		k = e.key[:len(k)] // alias the state key's bytes
	}
	i, _ := slices.BinarySearchFunc(es, e, compareEntries)
	si.byKey[k] = slices.Insert(es, i, e)
	si.floor = min(si.floor, e.t)
}

// splitKey returns the length of a state key's join-key part and its event
// time.
func (s *joinSide) splitKey(key string) (int, int64, error) {
	b := []byte(key)
	rest := b
	for range s.keys {
		_, r, err := readValue(rest)
		if err != nil {
			return 0, 0, err
		}
		rest = r
	}
	n := len(b) - len(rest)
	if len(rest) < evictPrefix {
		return 0, 0, errCorrupt
	}
	return n, evictTime(string(rest[:evictPrefix])), nil
}

// decode rebuilds a buffered row from its state key and value.
func (s *joinSide) decode(key string, val []byte) (Row, error) {
	row := make(Row, len(s.cols))
	b := []byte(key)
	for _, c := range s.keys {
		v, rest, err := readValue(b)
		if err != nil {
			return nil, err
		}
		row[c], b = v, rest
	}
	if len(b) < evictPrefix || len(val) == 0 {
		return nil, errCorrupt
	}
	if !slices.Contains(s.keys, s.time) {
		row[s.time] = time.Unix(0, evictTime(string(b[:evictPrefix]))).UTC()
	}
	v := val[1:]
	for _, c := range s.rest {
		x, rest, err := readValue(v)
		if err != nil {
			return nil, err
		}
		row[c], v = x, rest
	}
	return row, nil
}

// addSat adds saturating at the int64 bounds.
func addSat(a, b int64) int64 {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}
