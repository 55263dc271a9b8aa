package stateful

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine/internal/box"
	"github.com/lockstep-dev/lockstep/engine/state"
)

var _ Operator = (*Session)(nil)

// Session is an aggregate with a session window among its group keys
// (Spark's session_window): each row at event time t opens the session
// [t, t+gap) of its key (the other group keys); sessions of a key that
// overlap or touch merge into one, their aggregates merged, within a batch
// and across batches. A row is late when its own session [t, t+gap) ended
// at or before the late-event watermark (Batch). A session closes when the
// watermark reaches its end, after the rows of the batch that runs with that
// watermark merged into it (as Spark: a row between the two watermarks may
// still extend it): in append mode it is written then, once; in update mode
// each batch writes the open sessions that took rows, and a closed session
// is dropped.
//
// State: one row per key (the other group keys' values, in order); its value
// is the key's open sessions, sorted by start and disjoint:
//
//	uvarint n, then n times: varint start, varint end (nanoseconds since
//	the epoch), the session's accumulators (encodeAccs)
type Session struct {
	name string
	mode v1.OutputMode
	// keys are the group keys in order; the session's is marked window.
	keys []keyPart
	col  int   // the session column
	gap  int64 // nanoseconds, when gapOf is nil
	// shift is subtracted from the column's time: windowTimeShift over an
	// earlier aggregate's windows, else 0.
	shift int64
	// gapOf computes a row's gap (gapExpr); false for a null one.
	gapOf func(Row) (time.Duration, bool)
	// evicts is false only when the watermark is not on the session
	// column, which validation refuses; then nothing is late or closed.
	evicts bool
	aggs   []aggSpec
	out    v1.Columns
	meta   state.Metadata
}

// session is one open session of a key.
type session struct {
	start, end int64
	accs       []acc
	// changed marks a session that took rows in the batch.
	changed bool
}

// NewSession compiles an aggregate step whose group keys hold a session
// window (cfg.Spec.Session() is not nil). The spec must be valid
// (v1.StreamingQuery.Validate).
func NewSession(cfg AggregateConfig) (*Session, error) {
	sw := cfg.Spec.Session()
	if sw == nil {
		return nil, fmt.Errorf("aggregate %s: no session window", cfg.Name)
	}
	var gap time.Duration
	switch {
	case sw.GapExpr != "":
		if cfg.GapOf == nil {
			return nil, fmt.Errorf("aggregate %s: gapExpr %q without its compiled GapOf", cfg.Name, sw.GapExpr)
		}
	default:
		if gap = cfg.Gap; gap <= 0 {
			return nil, fmt.Errorf("aggregate %s: invalid session gap %q", cfg.Name, sw.Gap)
		}
	}
	s := &Session{name: cfg.Name, mode: cfg.Mode, col: columnIndex(cfg.Input, sw.Column), gap: int64(gap), gapOf: cfg.GapOf,
		evicts: cfg.EventTime != "" && cfg.EventTime == sw.Column, shift: shiftOf(cfg, sw.Column)}
	if s.col < 0 {
		return nil, fmt.Errorf("aggregate %s: no column %q", cfg.Name, sw.Column)
	}
	l := newAggregateLayout()
	for _, g := range cfg.Spec.GroupBy {
		if g.Session != nil {
			d := &sessionDesc{Column: sw.Column, GapExpr: sw.GapExpr, WindowTime: s.shift != 0}
			if sw.GapExpr == "" {
				d.Gap = gap.String()
			}
			l.addWindow(s.col, keyDesc{Session: d})
			continue
		}
		col := columnIndex(cfg.Input, g.Column)
		if col < 0 || g.Window != nil {
			return nil, fmt.Errorf("aggregate %s: invalid group key %q", cfg.Name, g.Column)
		}
		l.addColumn(col, g.Column, cfg.Input[col].Type)
	}
	if s.evicts {
		l.desc.Eviction = cfg.EventTime
	}
	// The value holds the key's sessions: their bounds, then the aggregates.
	fn := "session(" + gap.String() + ")"
	if sw.GapExpr != "" {
		fn = "session(" + sw.GapExpr + ")"
	}
	l.valueSchema = append(l.valueSchema,
		state.Field{Name: v1.ColumnWindowStart, Type: string(v1.TypeTimestamp), Function: fn, Input: sw.Column},
		state.Field{Name: v1.ColumnWindowEnd, Type: string(v1.TypeTimestamp), Function: fn, Input: sw.Column})
	var err error
	if s.aggs, s.meta, err = l.finish(cfg); err != nil {
		return nil, err
	}
	s.keys, s.out = l.keys, l.out
	return s, nil
}

// Columns returns the step's output columns: the group keys in order (the
// session as window_start, window_end), then the aggregates.
func (s *Session) Columns() v1.Columns { return s.out }

// Metadata describes the operator's state.
func (s *Session) Metadata() state.Metadata { return s.meta }

// pendingRow is a row of the batch waiting to join its key's sessions.
type pendingRow struct {
	ts, end int64 // the row's own session [ts, end)
	row     Row
}

// Process merges the batch's rows into their keys' sessions in st, closes
// the sessions the watermark reached, and returns the rows the output mode
// asks for, sorted by key and session start.
func (s *Session) Process(st *state.Store, rows []Row, b Batch) ([]Row, Metrics, error) {
	parts := st.Partitions()
	wm, lateWm := b.watermarkNanos(), b.lateNanos()
	var m Metrics
	groups := make([]map[string][]pendingRow, parts)
	for i := range groups {
		groups[i] = map[string][]pendingRow{}
	}
	key := make([]byte, 0, 64)
	for _, r := range rows {
		ts, ok := nanos(r[s.col])
		if !ok {
			continue // no session holds a null event time (Spark drops it too)
		}
		ts -= s.shift
		gap := s.gap
		if s.gapOf != nil {
			g, ok := s.gapOf(r)
			if !ok || g <= 0 {
				continue // no session of a null or non-positive gap (Spark drops the row too)
			}
			gap = int64(g)
		}
		if s.evicts && addSat(ts, gap) <= lateWm {
			m.DroppedByWatermark++
			continue
		}
		key = s.appendKey(key[:0], r)
		g := groups[state.PartitionOf(key, parts)]
		g[string(key)] = append(g[string(key)], pendingRow{ts: ts, end: addSat(ts, gap), row: r})
	}
	outs := make([][]keyedRow, parts)
	err := st.Update(func(p *state.Partition) error {
		out, err := s.merge(p, groups[p.ID()], wm)
		outs[p.ID()] = out
		return err
	})
	if err != nil {
		return nil, m, fmt.Errorf("aggregate %s: %w", s.name, err)
	}
	var emit []keyedRow
	for _, o := range outs {
		emit = append(emit, o...)
	}
	slices.SortFunc(emit, func(x, y keyedRow) int { return strings.Compare(x.key, y.key) })
	out := make([]Row, len(emit))
	for i, e := range emit {
		out[i] = e.row
	}
	m.Emitted = int64(len(out))
	return out, m, nil
}

// merge folds the batch's rows of partition p into their keys' sessions,
// closes sessions the watermark reached, and returns the rows to emit.
func (s *Session) merge(p *state.Partition, batch map[string][]pendingRow, wm int64) ([]keyedRow, error) {
	var emit []keyedRow
	slab := new(box.Slab) // the output rows' cells and values
	for key, pending := range batch {
		var sessions []session
		if old, ok := p.Get(key); ok {
			// The stored sessions all end after the late-event watermark
			// (the batch before evicted the others): a row of the batch
			// may still extend one the watermark now reaches, and the
			// merged session closes (Spark merges before it evicts).
			stored, err := s.decode(old)
			if err != nil {
				return nil, fmt.Errorf("partition %d: %w", p.ID(), err)
			}
			sessions = stored
		}
		for _, pr := range pending {
			accs := make([]acc, len(s.aggs))
			var scratch []byte
			for j := range s.aggs {
				scratch = s.aggs[j].update(&accs[j], pr.row, scratch)
			}
			sessions = append(sessions, session{start: pr.ts, end: pr.end, accs: accs, changed: true})
		}
		sessions = s.mergeSessions(sessions)
		open, out, err := s.close(slab, key, sessions, wm, true)
		if err != nil {
			return nil, err
		}
		emit = append(emit, out...)
		s.store(p, key, open)
	}
	if !s.evicts || wm < p.Hint {
		return emit, nil
	}
	// The watermark may have closed sessions of keys without rows in the
	// batch: scan the partition, and note its earliest open end.
	floor := int64(math.MaxInt64)
	for key, val := range p.All() {
		if _, done := batch[key]; done {
			if end, ok := firstEnd(val); ok {
				floor = min(floor, end)
			}
			continue
		}
		if end, ok := firstEnd(val); ok && end > wm {
			floor = min(floor, end)
			continue
		}
		sessions, err := s.decode(val)
		if err != nil {
			return nil, fmt.Errorf("partition %d: %w", p.ID(), err)
		}
		open, out, err := s.close(slab, key, sessions, wm, false)
		if err != nil {
			return nil, err
		}
		emit = append(emit, out...)
		s.store(p, key, open)
		for _, o := range open {
			floor = min(floor, o.end)
		}
	}
	p.Hint = floor
	return emit, nil
}

// mergeSessions sorts sessions by start and merges those that overlap or
// touch (the next starts at or before the current one's end), merging
// their aggregates.
func (s *Session) mergeSessions(sessions []session) []session {
	slices.SortStableFunc(sessions, func(x, y session) int {
		switch {
		case x.start < y.start:
			return -1
		case x.start > y.start:
			return 1
		}
		return 0
	})
	out := sessions[:0]
	for _, cur := range sessions {
		if n := len(out); n > 0 && cur.start <= out[n-1].end {
			last := &out[n-1]
			last.end = max(last.end, cur.end)
			last.changed = last.changed || cur.changed
			for j := range s.aggs {
				s.aggs[j].merge(&last.accs[j], &cur.accs[j])
			}
			continue
		}
		out = append(out, cur)
	}
	return out
}

// close splits a key's sessions into those still open and the rows to emit:
// in append mode the sessions the watermark closed; in update mode, when
// updated is set, the sessions that took rows in the batch.
func (s *Session) close(slab *box.Slab, key string, sessions []session, wm int64, updated bool) (open []session, emit []keyedRow, err error) {
	for _, ss := range sessions {
		closed := s.evicts && ss.end <= wm
		if closed && s.mode == v1.OutputAppend || !closed && updated && ss.changed && s.mode != v1.OutputAppend {
			row, err := s.row(slab, key, ss)
			if err != nil {
				return nil, nil, err
			}
			emit = append(emit, keyedRow{key: key + string(appendEvictTime(nil, ss.start)), row: row})
		}
		if !closed {
			open = append(open, ss)
		}
	}
	return open, emit, nil
}

// store writes a key's open sessions, or deletes the key when none is, and
// lowers the partition's hint to their earliest end.
func (s *Session) store(p *state.Partition, key string, open []session) {
	if len(open) == 0 {
		if _, ok := p.Get(key); ok {
			p.Delete(key)
		}
		return
	}
	b := binary.AppendUvarint(nil, uint64(len(open)))
	for _, ss := range open {
		b = binary.AppendVarint(b, ss.start)
		b = binary.AppendVarint(b, ss.end)
		b = appendAccs(b, s.aggs, ss.accs)
		p.Hint = min(p.Hint, ss.end)
	}
	p.Put(key, b)
}

// decode reads a key's sessions.
func (s *Session) decode(b []byte) ([]session, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)) {
		return nil, errCorrupt
	}
	b = b[w:]
	out := make([]session, 0, n)
	for range n {
		var ss session
		var w1, w2 int
		ss.start, w1 = binary.Varint(b)
		if w1 <= 0 {
			return nil, errCorrupt
		}
		ss.end, w2 = binary.Varint(b[w1:])
		if w2 <= 0 {
			return nil, errCorrupt
		}
		ss.accs = make([]acc, len(s.aggs))
		rest, err := readAccs(b[w1+w2:], s.aggs, ss.accs)
		if err != nil {
			return nil, err
		}
		b = rest
		out = append(out, ss)
	}
	if len(b) != 0 {
		return nil, errCorrupt
	}
	return out, nil
}

// firstEnd returns the earliest end among a stored key's sessions without
// decoding the aggregates: the sessions are disjoint and sorted by start,
// so the first ends first.
func firstEnd(b []byte) (int64, bool) {
	_, w := binary.Uvarint(b)
	if w <= 0 {
		return 0, false
	}
	_, w1 := binary.Varint(b[w:])
	if w1 <= 0 {
		return 0, false
	}
	end, w2 := binary.Varint(b[w+w1:])
	return end, w2 > 0
}

// appendKey appends the state key of row r: the values of the group keys
// other than the session, in order.
func (s *Session) appendKey(b []byte, r Row) []byte {
	for _, k := range s.keys {
		if !k.window {
			b = appendValue(b, r[k.col])
		}
	}
	return b
}

// row builds the output row of a session of key, its cells and values from slab.
func (s *Session) row(slab *box.Slab, key string, ss session) (Row, error) {
	row := slab.Row(len(s.out))[:0]
	b := keyBytes(key)
	for _, k := range s.keys {
		if k.window {
			row = append(row, slab.Time(time.Unix(0, ss.start).UTC()), slab.Time(time.Unix(0, ss.end).UTC()))
			continue
		}
		v, rest, err := readValueIn(b, slab)
		if err != nil {
			return nil, fmt.Errorf("aggregate %s: key: %w", s.name, err)
		}
		b = rest
		row = append(row, v)
	}
	for j := range s.aggs {
		row = append(row, s.aggs[j].result(&ss.accs[j], slab))
	}
	return row, nil
}
