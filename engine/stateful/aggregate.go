package stateful

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine/internal/box"
	"github.com/lockstep-dev/lockstep/engine/state"
)

var _ Operator = (*Aggregate)(nil)

// AggregateConfig describes an aggregate step to NewAggregate.
type AggregateConfig struct {
	// Name is the operator's name in the checkpoint (v1.Step.StatefulName).
	Name string
	Spec *v1.Aggregate
	// Input holds the columns flowing into the step.
	Input v1.Columns
	// EventTime is the event-time column in force at the step
	// (plan.Step.EventTime), "" when the query has no watermark before it.
	EventTime string
	// WindowTime reports that EventTime is an earlier aggregate's window_end
	// (plan.Step.WindowTime): a window or session on it takes each row at
	// its window's last instant, 1 µs before window_end (Spark's
	// window_time).
	WindowTime bool
	Mode       v1.OutputMode
	// GapOf computes a row's session gap, for a session window with a gapExpr
	// (NewSession); false for a null gap.
	GapOf func(Row) (time.Duration, bool)
	// Size and Slide are the window's, Gap a session window's fixed gap
	// (plan.Durations).
	Size, Slide, Gap time.Duration
}

// Aggregate groups rows by its keys (columns and an event-time window) and
// computes its aggregates per group, keeping one state row per group.
type Aggregate struct {
	name   string
	mode   v1.OutputMode
	keys   []keyPart
	window *window
	// evict says how the watermark closes groups.
	evict    evictKind
	evictCol int // the input column of evictColumn
	aggs     []aggSpec
	out      v1.Columns
	meta     state.Metadata
	// scratch holds per-batch tables (*aggScratch), reused across batches.
	scratch sync.Pool
	// index lists each state partition's keys by eviction time, when the
	// watermark evicts (Evicts).
	index []evictIndex
}

type evictKind int

const (
	evictNone   evictKind = iota
	evictWindow           // by window end
	evictColumn           // by the event-time key column
)

// keyPart is one grouping key: an input column, or the window.
type keyPart struct {
	col    int
	window bool
}

// window is a tumbling (slide == size) or sliding event-time window, in
// nanoseconds, aligned to the epoch. A row's time is its column's less
// shift (windowTimeShift over an earlier aggregate's windows, else 0).
type window struct {
	col         int
	size, slide int64
	shift       int64
	// pane is the width of the panes a sliding window's rows are grouped in
	// first (gcd(size, slide)): every window starts and ends on a pane's
	// edge, so all rows of a pane are in the same windows. 0 for a tumbling
	// window, whose pane is the window.
	pane int64
}

// gcd is the greatest common divisor of two positive numbers.
func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// windowTimeShift is how far before an earlier aggregate's window_end its
// window's time is: 1 µs, the window's last instant (Spark's window_time).
const windowTimeShift = int64(time.Microsecond)

// shiftOf is the shift of a window or session on column: windowTimeShift
// when column is an earlier aggregate's window_end, else 0.
func shiftOf(cfg AggregateConfig, column string) int64 {
	if cfg.WindowTime && column == cfg.EventTime {
		return windowTimeShift
	}
	return 0
}

// aggSpec is one compiled aggregation.
type aggSpec struct {
	fn  v1.AggregateFunction
	col int // -1 for count of rows
	in  v1.ColumnType
}

// NewAggregate compiles an aggregate step. The spec must be valid
// (v1.StreamingQuery.Validate).
func NewAggregate(cfg AggregateConfig) (*Aggregate, error) {
	a := &Aggregate{name: cfg.Name, mode: cfg.Mode, evictCol: -1}
	l := newAggregateLayout()
	for _, g := range cfg.Spec.GroupBy {
		if w := g.Window; w != nil {
			col := columnIndex(cfg.Input, w.Column)
			size, slide := cfg.Size, cfg.Slide
			if col < 0 || size <= 0 {
				return nil, fmt.Errorf("aggregate %s: invalid window on %q of %q", cfg.Name, w.Column, w.Duration)
			}
			if slide <= 0 || slide > size {
				return nil, fmt.Errorf("aggregate %s: invalid window slide %q", cfg.Name, w.Slide)
			}
			a.window = &window{col: col, size: int64(size), slide: int64(slide), shift: shiftOf(cfg, w.Column)}
			if slide < size {
				a.window.pane = gcd(int64(size), int64(slide))
			}
			l.addWindow(col, keyDesc{Window: &windowDesc{w.Column, size.String(), slide.String(), a.window.shift != 0}})
			input := w.Column
			if a.window.shift != 0 {
				input = "window_time(" + w.Column + ")"
			}
			l.keySchema = append(l.keySchema, state.Field{Name: v1.ColumnWindowStart, Type: string(v1.TypeTimestamp),
				Function: "window(" + size.String() + ", " + slide.String() + ")", Input: input})
			if cfg.EventTime != "" && w.Column == cfg.EventTime {
				a.evict = evictWindow
			}
			continue
		}
		col := columnIndex(cfg.Input, g.Column)
		if col < 0 {
			return nil, fmt.Errorf("aggregate %s: no column %q", cfg.Name, g.Column)
		}
		l.addColumn(col, g.Column, cfg.Input[col].Type)
		if cfg.EventTime != "" && g.Column == cfg.EventTime && a.evictCol < 0 {
			a.evictCol = col
		}
	}
	if a.evict == evictNone && a.evictCol >= 0 {
		a.evict = evictColumn
	}
	switch a.evict {
	case evictWindow, evictColumn:
		l.desc.Eviction = cfg.EventTime
	}
	var err error
	if a.aggs, a.meta, err = l.finish(cfg); err != nil {
		return nil, err
	}
	a.keys, a.out = l.keys, l.out
	return a, nil
}

// aggregateDesc is an aggregate step's JSON description (by windows or by sessions), what
// its state's fingerprint is computed from.
type aggregateDesc struct {
	Kind       string    `json:"kind"`
	Format     int       `json:"format"`
	Keys       []keyDesc `json:"keys"`
	Aggregates []aggDesc `json:"aggregates"`
	Eviction   string    `json:"eviction,omitempty"`
}

// keyDesc describes a group key in aggregateDesc: a column, a time window or a session.
type keyDesc struct {
	Column  string       `json:"column,omitempty"`
	Type    string       `json:"type,omitempty"`
	Window  *windowDesc  `json:"window,omitempty"`
	Session *sessionDesc `json:"session,omitempty"`
}

type windowDesc struct {
	Column     string `json:"column"`
	Duration   string `json:"duration"`
	Slide      string `json:"slide"`
	WindowTime bool   `json:"windowTime,omitempty"`
}

type sessionDesc struct {
	Column     string `json:"column"`
	Gap        string `json:"gap,omitempty"`
	GapExpr    string `json:"gapExpr,omitempty"`
	WindowTime bool   `json:"windowTime,omitempty"`
}

// aggregateLayout gathers what an aggregate step (by windows or by sessions) derives from
// its group keys and aggregations: the key's parts, the output columns, the description
// and the state's schemas.
type aggregateLayout struct {
	keys                   []keyPart
	out                    v1.Columns
	desc                   aggregateDesc
	keySchema, valueSchema []state.Field
}

func newAggregateLayout() *aggregateLayout {
	return &aggregateLayout{desc: aggregateDesc{Kind: string(v1.StepAggregate), Format: 1, Keys: []keyDesc{}}}
}

// addColumn adds the group key column col, named name, of type t.
func (l *aggregateLayout) addColumn(col int, name string, t v1.ColumnType) {
	l.keys = append(l.keys, keyPart{col: col})
	l.out = append(l.out, v1.Column{Name: name, Type: t})
	l.desc.Keys = append(l.desc.Keys, keyDesc{Column: name, Type: string(t)})
	l.keySchema = append(l.keySchema, state.Field{Name: name, Type: string(t)})
}

// addWindow adds a time window or session on column col, output as window_start and
// window_end and described by d; its state fields are the caller's.
func (l *aggregateLayout) addWindow(col int, d keyDesc) {
	l.keys = append(l.keys, keyPart{col: col, window: true})
	l.out = append(l.out, v1.Column{Name: v1.ColumnWindowStart, Type: v1.TypeTimestamp}, v1.Column{Name: v1.ColumnWindowEnd, Type: v1.TypeTimestamp})
	l.desc.Keys = append(l.desc.Keys, d)
}

// finish compiles the step's aggregations after its keys and returns them with the state's
// metadata.
func (l *aggregateLayout) finish(cfg AggregateConfig) ([]aggSpec, state.Metadata, error) {
	aggs, out, descs, fields, err := compileAggregations(cfg.Name, cfg.Spec.Aggregates, cfg.Input)
	if err != nil {
		return nil, state.Metadata{}, err
	}
	l.out = append(l.out, out...)
	l.desc.Aggregates = append(l.desc.Aggregates, descs...)
	l.valueSchema = append(l.valueSchema, fields...)
	return aggs, aggregateMetadata(cfg.Name, l.desc, l.desc.Eviction, l.keySchema, l.valueSchema), nil
}

// aggregateMetadata is the state metadata of an aggregate step (by windows or by sessions):
// desc, its JSON description, is what the fingerprint is computed from.
func aggregateMetadata(name string, desc any, eviction string, keySchema, valueSchema []state.Field) state.Metadata {
	c := computes(desc)
	return state.Metadata{
		Operator:    name,
		Kind:        string(v1.StepAggregate),
		KeySchema:   keySchema,
		ValueSchema: valueSchema,
		Eviction:    eviction,
		Computes:    c,
		Fingerprint: state.Fingerprint(c),
	}
}

// aggDesc describes an aggregation in the state's fingerprint (state.Metadata.Computes).
type aggDesc struct {
	Function string `json:"function"`
	Input    string `json:"input,omitempty"`
	Type     string `json:"type,omitempty"`
}

// compileAggregations compiles the aggregations of the aggregate step name over the columns
// in: each one's input column, its output column, its description in the state's fingerprint
// and its field in the state's value schema. A window's and a session's aggregate share it.
func compileAggregations(name string, specs []v1.Aggregation, in v1.Columns) (aggs []aggSpec, out v1.Columns, descs []aggDesc, fields []state.Field, err error) {
	for _, ag := range specs {
		s := aggSpec{fn: ag.Function, col: -1}
		if ag.Column != "" {
			if s.col = columnIndex(in, ag.Column); s.col < 0 {
				return nil, nil, nil, nil, fmt.Errorf("aggregate %s: no column %q", name, ag.Column)
			}
			s.in = in[s.col].Type
		}
		var t v1.ColumnType
		switch ag.Function {
		case v1.AggCount, v1.AggCountDistinct:
			t = v1.TypeLong
		case v1.AggAvg:
			t = v1.TypeDouble
		case v1.AggSum, v1.AggMin, v1.AggMax:
			t = s.in
		default:
			return nil, nil, nil, nil, fmt.Errorf("aggregate %s: unknown function %q", name, ag.Function)
		}
		if ag.Function != v1.AggCount && s.col < 0 {
			return nil, nil, nil, nil, fmt.Errorf("aggregate %s: %s needs an input column", name, ag.Function)
		}
		aggs = append(aggs, s)
		out = append(out, v1.Column{Name: ag.Name, Type: t})
		descs = append(descs, aggDesc{Function: string(ag.Function), Input: ag.Column, Type: string(s.in)})
		fields = append(fields, state.Field{Name: ag.Name, Type: string(t), Function: string(ag.Function), Input: ag.Column})
	}
	return aggs, out, descs, fields, nil
}

// Columns returns the step's output columns: the keys in order (a window
// as window_start, window_end), then the aggregates.
func (a *Aggregate) Columns() v1.Columns { return a.out }

// Metadata describes the operator's state.
func (a *Aggregate) Metadata() state.Metadata { return a.meta }

// Evicts reports whether the watermark closes groups, so that state stays
// bounded (in append and update mode).
func (a *Aggregate) Evicts() bool { return a.evict != evictNone && a.mode != v1.OutputComplete }

// acc is the running value of one aggregation of one group.
type acc struct {
	n   int64   // count; avg's count
	i   int64   // sum of longs
	f   float64 // sum of doubles; avg's sum
	has bool    // sum, min, max: a value was seen
	v   any     // min, max
	set map[string]struct{}
}

// batchTable pre-aggregates one batch's rows per partition before they are
// merged into the state.
type batchTable struct {
	idx  []map[string]int32
	accs []acc
	n    int
}

func (t *batchTable) reset(parts, n int) {
	if len(t.idx) != parts {
		t.idx = make([]map[string]int32, parts)
		for i := range t.idx {
			t.idx[i] = map[string]int32{}
		}
	}
	for _, m := range t.idx {
		clear(m)
	}
	clear(t.accs)
	t.accs, t.n = t.accs[:0], n
}

// group returns the number (in order of addition) and accumulators of key in
// partition part, adding them. The slice is valid until the next call.
func (t *batchTable) group(key []byte, part int) (int, []acc) {
	m := t.idx[part]
	i, ok := m[string(key)]
	if !ok {
		i = int32(len(t.accs) / t.n)
		m[string(key)] = i
		for range t.n {
			t.accs = append(t.accs, acc{})
		}
	}
	return int(i), t.accs[int(i)*t.n : (int(i)+1)*t.n]
}

// accsOf returns the accumulators of group i.
func (t *batchTable) accsOf(i int) []acc { return t.accs[i*t.n : (i+1)*t.n] }

// aggScratch is an aggregate's per-batch tables.
type aggScratch struct {
	// groups pre-aggregates the batch's rows per group and state partition.
	groups batchTable
	// panes pre-aggregates a sliding window's rows per pane and key columns
	// (window.pane), with a row of each pane group, from which its windows'
	// keys are built.
	panes batchTable
	rep   []int32
}

// Process aggregates one batch into st and returns the rows the output mode
// asks for (see the package doc). When the watermark evicts, a row is added
// to each of its windows (or its event-time group) that ends after the
// batch's late-event watermark, and dropped as late when none does; groups
// that end at or behind the batch's watermark are then evicted.
func (a *Aggregate) Process(st *state.Store, rows []Row, b Batch) ([]Row, Metrics, error) {
	parts := st.Partitions()
	wm, lateWm := b.watermarkNanos(), b.lateNanos()
	dropLate := a.Evicts()
	sc, _ := a.scratch.Get().(*aggScratch)
	if sc == nil {
		sc = &aggScratch{}
	}
	defer a.scratch.Put(sc)
	bt := &sc.groups
	bt.reset(parts, len(a.aggs))
	var (
		m       Metrics
		key     = make([]byte, 0, 64)
		scratch []byte
	)
	add := func(r Row, key []byte) {
		_, accs := bt.group(key, state.PartitionOf(key, parts))
		for j := range a.aggs {
			scratch = a.aggs[j].update(&accs[j], r, scratch)
		}
	}
	switch {
	case a.window != nil && a.window.pane > 0:
		m.DroppedByWatermark = a.addPanes(sc, rows, dropLate, lateWm)
	case a.window != nil:
		for _, r := range rows {
			ts, ok := nanos(r[a.window.col])
			if !ok {
				continue // no window holds a null event time (Spark drops it too)
			}
			ts -= a.window.shift
			start := floorDiv(ts, a.window.slide) * a.window.slide
			end := start + a.window.size
			if dropLate && end <= lateWm {
				m.DroppedByWatermark++
				continue
			}
			key = a.appendKey(key[:0], r, start, end)
			add(r, key)
		}
	case a.evict == evictColumn:
		for _, r := range rows {
			ts, ok := nanos(r[a.evictCol])
			if !ok {
				ts = math.MaxInt64 // a null event time is never evicted
			}
			if dropLate && ts <= lateWm {
				m.DroppedByWatermark++
				continue
			}
			key = a.appendKey(key[:0], r, 0, ts)
			add(r, key)
		}
	default:
		for _, r := range rows {
			key = a.appendKey(key[:0], r, 0, 0)
			add(r, key)
		}
	}

	if a.Evicts() && len(a.index) != parts {
		a.index = make([]evictIndex, parts)
	}
	outs := make([][]Row, parts)
	err := st.Update(func(p *state.Partition) error {
		out, err := a.merge(p, bt, wm)
		outs[p.ID()] = out
		return err
	})
	if err != nil {
		return nil, m, fmt.Errorf("aggregate %s: %w", a.name, err)
	}
	n := 0
	for _, o := range outs {
		n += len(o)
	}
	var out []Row // nil when the batch writes nothing
	if n > 0 {
		out = make([]Row, 0, n)
	}
	for _, o := range outs {
		out = append(out, o...)
	}
	m.Emitted = int64(len(out))
	return out, m, nil
}

// addPanes adds rows to sc.groups by a sliding window (window.pane > 0): each
// row to its pane's group (the pane and the key columns), then each pane
// group to every window that holds its pane. That is a map update a row and
// one a pane group's window, where adding each row to each of its windows
// takes size/slide a row. It returns the rows dropped as late: those whose
// every window ends at or before lateWm.
func (a *Aggregate) addPanes(sc *aggScratch, rows []Row, dropLate bool, lateWm int64) (dropped int64) {
	w := a.window
	pt, bt := &sc.panes, &sc.groups
	pt.reset(1, len(a.aggs))
	sc.rep = sc.rep[:0]
	paneOf := func(r Row) (int64, bool) {
		ts, ok := nanos(r[w.col])
		return floorDiv(ts-w.shift, w.pane) * w.pane, ok
	}
	var key, scratch []byte
	for i, r := range rows {
		pane, ok := paneOf(r)
		if !ok {
			continue // no window holds a null event time (Spark drops it too)
		}
		if dropLate && floorDiv(pane, w.slide)*w.slide+w.size <= lateWm {
			dropped++ // its last window is closed, so all are
			continue
		}
		key = binary.AppendVarint(key[:0], pane)
		for _, k := range a.keys {
			if !k.window {
				key = appendValue(key, r[k.col])
			}
		}
		g, accs := pt.group(key, 0)
		if g == len(sc.rep) {
			sc.rep = append(sc.rep, int32(i))
		}
		for j := range a.aggs {
			scratch = a.aggs[j].update(&accs[j], r, scratch)
		}
	}
	parts := len(bt.idx)
	for g, i := range sc.rep {
		pane, _ := paneOf(rows[i])
		src := pt.accsOf(g)
		for start := floorDiv(pane, w.slide) * w.slide; start > pane-w.size; start -= w.slide {
			end := start + w.size
			if dropLate && end <= lateWm {
				continue
			}
			key = a.appendKey(key[:0], rows[i], start, end)
			_, dst := bt.group(key, state.PartitionOf(key, parts))
			for j := range a.aggs {
				a.aggs[j].merge(&dst[j], &src[j])
			}
		}
	}
	return dropped
}

// evictIndex lists the keys of one state partition by eviction time, so that
// the watermark evicts the closed groups without scanning every key.
type evictIndex struct {
	// p is the partition listed; nil before the first batch.
	p      *state.Partition
	byTime map[int64][]string
}

// sync lists p's keys afresh when the index is not p's or p was loaded since
// (Load sets Hint to math.MinInt64), and sets p.Hint to the earliest time.
func (x *evictIndex) sync(p *state.Partition) {
	if x.p == p && p.Hint != math.MinInt64 {
		return
	}
	x.p, x.byTime = p, map[int64][]string{}
	p.Hint = math.MaxInt64
	for key := range p.All() {
		x.add(p, key)
	}
}

// close removes the keys of eviction time at or before wm from the index and
// returns them sorted, and sets p.Hint to the earliest time left.
func (x *evictIndex) close(p *state.Partition, wm int64) []string {
	var closed []string
	p.Hint = math.MaxInt64
	for t, keys := range x.byTime {
		if t > wm {
			p.Hint = min(p.Hint, t)
			continue
		}
		closed = append(closed, keys...)
		delete(x.byTime, t)
	}
	slices.Sort(closed)
	return closed
}

// add lists a new key.
func (x *evictIndex) add(p *state.Partition, key string) {
	t := evictTime(key)
	x.byTime[t] = append(x.byTime[t], key)
	p.Hint = min(p.Hint, t)
}

// keyedRow is an output row with its state key, to sort output.
type keyedRow struct {
	key string
	row Row
}

// merge folds the batch's groups of partition p into its state, evicts
// closed groups, and returns the partition's output rows.
func (a *Aggregate) merge(p *state.Partition, bt *batchTable, wm int64) ([]Row, error) {
	n := len(a.aggs)
	tmp := make([]acc, n)
	var (
		emit []keyedRow
		ix   *evictIndex
		slab = new(box.Slab) // the output rows' cells and values
	)
	if a.Evicts() {
		ix = &a.index[p.ID()]
		ix.sync(p)
	}
	for key, gi := range bt.idx[p.ID()] {
		clear(tmp)
		if old, ok := p.Get(key); ok {
			if err := a.decodeAccs(old, tmp); err != nil {
				return nil, fmt.Errorf("partition %d: %w", p.ID(), err)
			}
		} else if ix != nil {
			ix.add(p, key)
		}
		batch := bt.accs[int(gi)*n : (int(gi)+1)*n]
		for j := range a.aggs {
			a.aggs[j].merge(&tmp[j], &batch[j])
		}
		p.Put(key, a.encodeAccs(tmp))
		if a.mode == v1.OutputUpdate {
			row, err := a.row(slab, key, tmp)
			if err != nil {
				return nil, err
			}
			emit = append(emit, keyedRow{key, row})
		}
	}
	switch {
	case a.mode == v1.OutputComplete:
		// The whole result, every batch; nothing is evicted. Not sorted:
		// the sinks of complete mode replace their output.
		out := make([]Row, 0, p.Len())
		for key, val := range p.All() {
			row, err := a.stateRow(slab, key, val, tmp)
			if err != nil {
				return nil, fmt.Errorf("partition %d: %w", p.ID(), err)
			}
			out = append(out, row)
		}
		return out, nil
	case ix != nil && wm >= p.Hint:
		// The closed groups, in key order (a sorted output is the same on a
		// replay): written in append mode, dropped from the state.
		var out []Row
		for _, key := range ix.close(p, wm) {
			if a.mode == v1.OutputAppend {
				val, _ := p.Get(key)
				row, err := a.stateRow(slab, key, val, tmp)
				if err != nil {
					return nil, fmt.Errorf("partition %d: %w", p.ID(), err)
				}
				out = append(out, row)
			}
			p.Delete(key)
		}
		if a.mode == v1.OutputAppend {
			return out, nil
		}
	}
	slices.SortFunc(emit, func(x, y keyedRow) int { return strings.Compare(x.key, y.key) })
	out := make([]Row, len(emit))
	for i, e := range emit {
		out[i] = e.row
	}
	return out, nil
}

// stateRow builds the output row of the group key from its state value val,
// decoding it into tmp.
func (a *Aggregate) stateRow(slab *box.Slab, key string, val []byte, tmp []acc) (Row, error) {
	clear(tmp)
	if err := a.decodeAccs(val, tmp); err != nil {
		return nil, err
	}
	return a.row(slab, key, tmp)
}

// appendKey appends the state key of row r: the eviction time (window end,
// or the event-time column) when the operator evicts, then each grouping
// key's value in order, the window as its start.
func (a *Aggregate) appendKey(b []byte, r Row, windowStart, evictAt int64) []byte {
	if a.evict != evictNone {
		b = appendEvictTime(b, evictAt)
	}
	for _, k := range a.keys {
		if k.window {
			b = appendNanos(b, windowStart)
		} else {
			b = appendValue(b, r[k.col])
		}
	}
	return b
}

// row builds the output row of a group from its key and accumulators.
// Its cells and values come from slab.
func (a *Aggregate) row(slab *box.Slab, key string, accs []acc) (Row, error) {
	row := slab.Row(len(a.out))[:0]
	b := keyBytes(key)
	if a.evict != evictNone {
		b = b[evictPrefix:]
	}
	for _, k := range a.keys {
		v, rest, err := readValueIn(b, slab)
		if err != nil {
			return nil, fmt.Errorf("aggregate %s: key: %w", a.name, err)
		}
		b = rest
		if k.window {
			start, _ := v.(time.Time)
			row = append(row, v, slab.Time(start.Add(time.Duration(a.window.size))))
			continue
		}
		row = append(row, v)
	}
	for j := range a.aggs {
		row = append(row, a.aggs[j].result(&accs[j], slab))
	}
	return row, nil
}

func appendNanos(b []byte, ns int64) []byte {
	return appendValue(b, time.Unix(0, ns).UTC())
}

// update adds the row's input to one accumulator. scratch is a reusable
// buffer for count_distinct.
func (s *aggSpec) update(c *acc, r Row, scratch []byte) []byte {
	if s.col < 0 { // count of rows
		c.n++
		return scratch
	}
	v := r[s.col]
	if v == nil {
		return scratch // every aggregate ignores nulls, as in SQL
	}
	switch s.fn {
	case v1.AggCount:
		c.n++
	case v1.AggSum:
		if s.in == v1.TypeDouble {
			c.f += toFloat(v)
		} else {
			c.i += toInt(v)
		}
		c.has = true
	case v1.AggAvg:
		c.f += toFloat(v)
		c.n++
	case v1.AggMin:
		if !c.has || less(v, c.v) {
			c.v, c.has = v, true
		}
	case v1.AggMax:
		if !c.has || less(c.v, v) {
			c.v, c.has = v, true
		}
	case v1.AggCountDistinct:
		scratch = appendValue(scratch[:0], v)
		if c.set == nil {
			c.set = map[string]struct{}{}
		}
		if _, ok := c.set[string(scratch)]; !ok {
			c.set[string(scratch)] = struct{}{}
		}
	}
	return scratch
}

// merge folds src into dst.
func (s *aggSpec) merge(dst, src *acc) {
	switch s.fn {
	case v1.AggCount:
		dst.n += src.n
	case v1.AggSum:
		dst.i += src.i
		dst.f += src.f
		dst.has = dst.has || src.has
	case v1.AggAvg:
		dst.f += src.f
		dst.n += src.n
	case v1.AggMin:
		if src.has && (!dst.has || less(src.v, dst.v)) {
			dst.v, dst.has = src.v, true
		}
	case v1.AggMax:
		if src.has && (!dst.has || less(dst.v, src.v)) {
			dst.v, dst.has = src.v, true
		}
	case v1.AggCountDistinct:
		if dst.set == nil {
			dst.set = make(map[string]struct{}, len(src.set))
		}
		for k := range src.set {
			dst.set[k] = struct{}{}
		}
	}
}

// result is the aggregate's output value (null for a sum, min, max or avg
// of no value, as in SQL), boxed in slab.
func (s *aggSpec) result(c *acc, slab *box.Slab) any {
	switch s.fn {
	case v1.AggCount:
		return slab.Int64(c.n)
	case v1.AggSum:
		switch {
		case !c.has:
			return nil
		case s.in == v1.TypeDouble:
			return slab.Float64(c.f)
		}
		return slab.Int64(c.i)
	case v1.AggAvg:
		if c.n == 0 {
			return nil
		}
		return slab.Float64(c.f / float64(c.n))
	case v1.AggMin, v1.AggMax:
		if !c.has {
			return nil
		}
		return c.v
	case v1.AggCountDistinct:
		return slab.Int64(int64(len(c.set)))
	}
	return nil
}

// encodeAccs encodes a group's accumulators as its state value:
//
//	count           uvarint n
//	sum             0 (none) | 1 varint (long) or 8-byte double
//	min, max        a tagged value (tagNull for none)
//	avg             uvarint n, then the 8-byte double sum when n > 0
//	count_distinct  uvarint n, then n sorted length-prefixed encoded values
func (a *Aggregate) encodeAccs(accs []acc) []byte {
	return appendAccs(make([]byte, 0, 4*len(accs)+8), a.aggs, accs)
}

// appendAccs appends the encoding of accs, one per spec (see encodeAccs).
func appendAccs(b []byte, specs []aggSpec, accs []acc) []byte {
	for j := range specs {
		s, c := &specs[j], &accs[j]
		switch s.fn {
		case v1.AggCount:
			b = binary.AppendUvarint(b, uint64(c.n))
		case v1.AggSum:
			switch {
			case !c.has:
				b = append(b, 0)
			case s.in == v1.TypeDouble:
				b = binary.BigEndian.AppendUint64(append(b, 1), math.Float64bits(c.f))
			default:
				b = binary.AppendVarint(append(b, 1), c.i)
			}
		case v1.AggMin, v1.AggMax:
			if c.has {
				b = appendValue(b, c.v)
			} else {
				b = append(b, tagNull)
			}
		case v1.AggAvg:
			b = binary.AppendUvarint(b, uint64(c.n))
			if c.n > 0 {
				b = binary.BigEndian.AppendUint64(b, math.Float64bits(c.f))
			}
		case v1.AggCountDistinct:
			vals := make([]string, 0, len(c.set))
			for k := range c.set {
				vals = append(vals, k)
			}
			slices.Sort(vals)
			b = binary.AppendUvarint(b, uint64(len(vals)))
			for _, v := range vals {
				b = binary.AppendUvarint(b, uint64(len(v)))
				b = append(b, v...)
			}
		}
	}
	return b
}

// decodeAccs is the inverse of encodeAccs, into zeroed accumulators.
func (a *Aggregate) decodeAccs(b []byte, accs []acc) error {
	rest, err := readAccs(b, a.aggs, accs)
	if err != nil {
		return err
	}
	if len(rest) != 0 {
		return errCorrupt
	}
	return nil
}

// readAccs decodes the accumulators appendAccs wrote at the start of b, into
// zeroed accs, and returns the bytes after them.
func readAccs(b []byte, specs []aggSpec, accs []acc) ([]byte, error) {
	for j := range specs {
		s, c := &specs[j], &accs[j]
		switch s.fn {
		case v1.AggCount:
			n, w := binary.Uvarint(b)
			if w <= 0 {
				return nil, errCorrupt
			}
			c.n, b = int64(n), b[w:]
		case v1.AggSum:
			if len(b) == 0 {
				return nil, errCorrupt
			}
			c.has, b = b[0] == 1, b[1:]
			if !c.has {
				break
			}
			if s.in == v1.TypeDouble {
				if len(b) < 8 {
					return nil, errCorrupt
				}
				c.f, b = math.Float64frombits(binary.BigEndian.Uint64(b)), b[8:]
				break
			}
			v, w := binary.Varint(b)
			if w <= 0 {
				return nil, errCorrupt
			}
			c.i, b = v, b[w:]
		case v1.AggMin, v1.AggMax:
			v, rest, err := readValue(b)
			if err != nil {
				return nil, err
			}
			c.v, c.has, b = v, v != nil, rest
		case v1.AggAvg:
			n, w := binary.Uvarint(b)
			if w <= 0 {
				return nil, errCorrupt
			}
			c.n, b = int64(n), b[w:]
			if c.n > 0 {
				if len(b) < 8 {
					return nil, errCorrupt
				}
				c.f, b = math.Float64frombits(binary.BigEndian.Uint64(b)), b[8:]
			}
		case v1.AggCountDistinct:
			n, w := binary.Uvarint(b)
			if w <= 0 {
				return nil, errCorrupt
			}
			b = b[w:]
			c.set = make(map[string]struct{}, n)
			for range n {
				l, w := binary.Uvarint(b)
				if w <= 0 || uint64(len(b)-w) < l {
					return nil, errCorrupt
				}
				c.set[string(b[w:w+int(l)])] = struct{}{}
				b = b[w+int(l):]
			}
		}
	}
	return b, nil
}
