package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/engine/internal/box"
	"github.com/lockstep-dev/lockstep/plan"
)

// staticJoinStep is a compiled stream–static join: each batch's rows are hash-joined with the
// snapshot of the static side that the batch's offsets entry records. The hash table is
// built once per snapshot and kept while batches join against the same one.
type staticJoinStep struct {
	name      string
	kind      v1.StaticSideKind
	side      string // v1.StaticSide.ID
	spec      *v1.Join
	outer     bool
	leftKeys  []int
	rightKeys []int
	// keyType is the type of a single key column; "" for a composite key.
	keyType v1.ColumnType
	// fromLeft and fromRight say which output columns come from which side's columns.
	fromLeft, fromRight []columnCopy
	out                 []plan.OutputColumn
	every               time.Duration
	onNew               bool

	// table is set by the run (build), which opens the static side.
	table StaticTable
	// snap names the snapshot index holds; nil before the first batch.
	snap  Snapshot
	index *hashIndex
}

// JoinProgress describes the static side a batch joined against.
type JoinProgress struct {
	// Join is the join's name in the checkpoint.
	Join string `json:"join"`
	// Snapshot names the snapshot, as the offsets entry records it: {"version": N} for a
	// Delta table, a fingerprint and listing for files.
	Snapshot json.RawMessage `json:"snapshot"`
	// ReadAtMs is when the snapshot was first read (a batch timestamp).
	ReadAtMs int64 `json:"readAtMs"`
	// Rows counts the static side's rows; Loaded reports that this batch read them (a new
	// snapshot, or the first batch of a run).
	Rows   int64 `json:"rows"`
	Loaded bool  `json:"loaded,omitempty"`
}

// compileJoin compiles a step of the plan, a join with a static side.
func compileJoin(ps *plan.Step) (step, *field.Error) {
	st, cols, right := ps.Spec, ps.In, ps.Right
	p := ps.Path.Child("join")
	j := st.Join
	if j.Static == nil {
		return nil, field.NotSupported(p.Child("stream"), "stream", []string{"static"})
	}
	if right == nil {
		return nil, field.Required(p.Child("static", "schema"), "the static side's columns")
	}
	s := &staticJoinStep{
		name:  ps.JoinName,
		kind:  ps.StaticKind,
		side:  j.Static.ID(),
		spec:  j,
		outer: ps.JoinType == v1.JoinLeftOuter,
		out:   ps.JoinOutput,
	}
	for k, c := range s.out {
		if c.Side == v1.SideLeft {
			s.fromLeft = append(s.fromLeft, columnCopy{out: k, in: c.Index})
		} else {
			s.fromRight = append(s.fromRight, columnCopy{out: k, in: c.Index})
		}
	}
	li, ri := columnIndex(cols), columnIndex(right)
	if len(j.Keys) == 1 {
		if c, ok := right.Lookup(j.Keys[0].Right); ok {
			s.keyType = c.Type
		}
	}
	for _, k := range j.Keys {
		s.leftKeys = append(s.leftKeys, li[k.Left])
		s.rightKeys = append(s.rightKeys, ri[k.Right])
	}
	if r := j.Static.Refresh; r != nil {
		s.onNew, s.every = r.OnNewVersion, ps.Durations.Refresh
	}
	return s, nil
}

// process joins rows with the loaded snapshot (loadJoins).
func (s *staticJoinStep) process(_ *stepBatch, rows []Row) ([]Row, error) {
	return s.join(rows), nil
}

// join joins rows with the loaded snapshot: for each row in order, one output row per
// matching static row (in the snapshot's order), or, in a left outer join, one with nulls
// when none matches.
func (s *staticJoinStep) join(rows []Row) []Row {
	out := make([]Row, 0, len(rows))
	w := len(s.out)
	var cells box.Slab // one allocation for many output rows
	next := func() Row { return cells.Row(w) }
	var kb []byte
	for _, l := range rows {
		head := int32(-1)
		if s.index != nil {
			head, kb = s.index.lookup(l, s.leftKeys, kb)
		}
		if head < 0 {
			if s.outer {
				row := next()
				for _, c := range s.fromLeft {
					row[c.out] = l[c.in]
				}
				out = append(out, row)
			}
			continue
		}
		for k := head; k >= 0; k = s.index.next[k] {
			row, r := next(), s.index.rows[k]
			for _, c := range s.fromLeft {
				row[c.out] = l[c.in]
			}
			for _, c := range s.fromRight {
				row[c.out] = r[c.in]
			}
			out = append(out, row)
		}
	}
	return out
}

// columnCopy copies column in of a side's row to column out of an output row.
type columnCopy struct{ out, in int }

// hashIndex finds the static rows with a key: a chain per key, in the rows' order.
type hashIndex struct {
	rows []Row
	next []int32
	// str and one hold the chains of a single-column key by its value (str for a string
	// column, the common case, which hashes faster than an interface); many those of a
	// composite key by its encoding.
	str  map[string]int32
	one  map[any]int32
	many map[string]int32
}

func newHashIndex(rows []Row, keys []int, keyType v1.ColumnType) *hashIndex {
	h := &hashIndex{rows: rows, next: make([]int32, len(rows))}
	switch {
	case len(keys) == 1 && keyType == v1.TypeString:
		h.str = make(map[string]int32, len(rows))
	case len(keys) == 1:
		h.one = make(map[any]int32, len(rows))
	default:
		h.many = make(map[string]int32, len(rows))
	}
	var kb []byte
	// Backwards, so that each chain runs in the rows' order.
	for i := len(rows) - 1; i >= 0; i-- {
		h.next[i] = -1
		if h.str != nil {
			k, ok := rows[i][keys[0]].(string)
			if !ok {
				continue
			}
			if head, found := h.str[k]; found {
				h.next[i] = head
			}
			h.str[k] = int32(i)
			continue
		}
		if len(keys) == 1 {
			k, ok := joinKeyValue(rows[i][keys[0]])
			if !ok {
				continue
			}
			if head, found := h.one[k]; found {
				h.next[i] = head
			}
			h.one[k] = int32(i)
			continue
		}
		var ok bool
		if kb, ok = appendJoinKey(kb[:0], rows[i], keys); !ok {
			continue
		}
		if head, found := h.many[string(kb)]; found {
			h.next[i] = head
		}
		h.many[string(kb)] = int32(i)
	}
	return h
}

// lookup returns the first static row whose key equals row's key columns, -1 if none. kb is
// scratch space, returned for reuse.
func (h *hashIndex) lookup(row Row, keys []int, kb []byte) (int32, []byte) {
	if h.str != nil {
		if k, ok := row[keys[0]].(string); ok {
			if head, found := h.str[k]; found {
				return head, kb
			}
		}
		return -1, kb
	}
	if h.one != nil {
		k, ok := joinKeyValue(row[keys[0]])
		if !ok {
			return -1, kb
		}
		if head, found := h.one[k]; found {
			return head, kb
		}
		return -1, kb
	}
	var ok bool
	if kb, ok = appendJoinKey(kb[:0], row, keys); !ok {
		return -1, kb
	}
	if head, found := h.many[string(kb)]; found {
		return head, kb
	}
	return -1, kb
}

// joinKeyValue normalizes a key value so that equal values are equal map keys: a timestamp
// as its Unix nanoseconds, -0 as 0. A null or NaN key matches nothing (ok false).
func joinKeyValue(v any) (any, bool) {
	switch x := v.(type) {
	case nil:
		return nil, false
	case time.Time:
		return x.UnixNano(), true
	case float64:
		if math.IsNaN(x) {
			return nil, false
		}
		if x == 0 {
			return float64(0), true
		}
	}
	return v, true
}

// appendJoinKey encodes the key columns of row, each with a type tag and strings
// length-prefixed, so that distinct keys never share an encoding.
func appendJoinKey(b []byte, row Row, keys []int) ([]byte, bool) {
	for _, k := range keys {
		v, ok := joinKeyValue(row[k])
		if !ok {
			return b, false
		}
		switch x := v.(type) {
		case string:
			b = append(b, 's')
			b = strconv.AppendInt(b, int64(len(x)), 10)
			b = append(b, ':')
			b = append(b, x...)
		case int64:
			b = append(b, 'l')
			b = strconv.AppendInt(b, x, 10)
			b = append(b, ';')
		case float64:
			b = append(b, 'd')
			b = strconv.AppendUint(b, math.Float64bits(x), 16)
			b = append(b, ';')
		case bool:
			if x {
				b = append(b, 't')
			} else {
				b = append(b, 'f')
			}
		default:
			b = fmt.Appendf(b, "?%v;", x)
		}
	}
	return b, true
}

// staticJoins returns the query's stream–static join steps, in order.
func (q *Query) staticJoins() []*staticJoinStep {
	var out []*staticJoinStep
	for _, st := range q.steps {
		if s, ok := st.(*staticJoinStep); ok {
			out = append(out, s)
		}
	}
	return out
}

// buildJoins opens the static side of every stream–static join.
func (r *run) buildJoins(ctx context.Context) error {
	q := r.q
	for _, s := range q.staticJoins() {
		e, ok := q.reg.statics[s.kind]
		if !ok {
			return fmt.Errorf("join %s: static side kind %q is not registered (registered: %v)", s.name, s.kind, q.reg.StaticKinds())
		}
		t, err := e.new(ctx, s.spec.Static, StaticEnv{
			Join:   s.name,
			Open:   q.folderOpener(s.spec.Static.S3Connection(), s.name),
			Getenv: q.opts.getenv,
			Logger: q.opts.logger.With("join", s.name),
		})
		if err != nil {
			return fmt.Errorf("join %s: %w", s.name, err)
		}
		s.table = t
		s.snap, s.index = nil, nil
	}
	return nil
}

// planJoins decides the snapshot each stream–static join of the batch planned at `at` joins
// against: the one the previous batch recorded, unless none was recorded yet, it is of another
// static side (the join's table changed), or the join's refresh is due and the table has a
// newer one.
func (r *run) planJoins(ctx context.Context, at time.Time) ([]checkpoint.JoinSnapshot, error) {
	var out []checkpoint.JoinSnapshot
	for _, s := range r.q.staticJoins() {
		prev, ok := r.joinSnaps[s.name]
		ok = ok && s.reads(prev)
		due := !ok || s.onNew || s.every > 0 && at.UnixMilli()-prev.ReadAtMs >= s.every.Milliseconds()
		if !due {
			out = append(out, prev)
			continue
		}
		latest, err := s.table.Latest(ctx)
		if err != nil {
			return nil, fmt.Errorf("join %s: find the static side's newest snapshot: %w", s.name, err)
		}
		if ok && sameSnapshot(latest, prev.Snapshot) {
			if s.every > 0 {
				prev.ReadAtMs = at.UnixMilli() // read again, found unchanged: the next check is D away
			}
			out = append(out, prev)
			continue
		}
		out = append(out, checkpoint.JoinSnapshot{Join: s.name, ReadAtMs: at.UnixMilli(), Snapshot: latest, Side: s.side})
	}
	return out, nil
}

// reads reports whether rec is a snapshot of the side s reads: one of another side (the
// join's table changed since it was recorded) cannot be read from this one. A record that
// names no side predates the field and is taken as this side's.
func (s *staticJoinStep) reads(rec checkpoint.JoinSnapshot) bool {
	return rec.Side == "" || rec.Side == s.side
}

// loadJoins makes every stream–static join hold the snapshot batch bp joins against, reading
// it when it is not the one already loaded. A batch that recorded none for a join (a
// replayed batch planned before the join was added), or one of another static side (planned
// before the join's table changed), joins against the newest snapshot.
func (r *run) loadJoins(ctx context.Context, bp *batchPlan) ([]JoinProgress, error) {
	var out []JoinProgress
	for _, s := range r.q.staticJoins() {
		rec, ok := findJoin(bp.joins, s.name)
		if !ok || !s.reads(rec) {
			latest, err := s.table.Latest(ctx)
			if err != nil {
				return nil, fmt.Errorf("batch %d: join %s: %w", bp.id, s.name, err)
			}
			why := "its offsets entry records none for the join"
			if ok {
				why = "its offsets entry records a snapshot of " + rec.Side + ", and the join now reads " + s.side
			}
			rec = checkpoint.JoinSnapshot{Join: s.name, ReadAtMs: bp.time.UnixMilli(), Snapshot: latest, Side: s.side}
			r.q.opts.logger.Warn("Joined a replayed batch with the newest snapshot", "batch", bp.id, "join", s.name, "reason", why)
		}
		loaded := false
		if s.index == nil || !sameSnapshot(s.snap, rec.Snapshot) {
			rows, err := s.table.Read(ctx, rec.Snapshot)
			if err != nil {
				return nil, fmt.Errorf("batch %d: join %s: read snapshot %s: %w", bp.id, s.name, rec.Snapshot, err)
			}
			s.index = newHashIndex(rows, s.rightKeys, s.keyType)
			s.snap = rec.Snapshot
			loaded = true
		}
		out = append(out, JoinProgress{Join: s.name, Snapshot: rec.Snapshot, ReadAtMs: rec.ReadAtMs, Rows: int64(len(s.index.rows)), Loaded: loaded})
		r.joinSnaps[s.name] = rec
	}
	return out, nil
}

func findJoin(js []checkpoint.JoinSnapshot, name string) (checkpoint.JoinSnapshot, bool) {
	for _, j := range js {
		if j.Join == name {
			return j, true
		}
	}
	return checkpoint.JoinSnapshot{}, false
}

// sameSnapshot compares two snapshot names as JSON, ignoring blanks.
func sameSnapshot(a, b Snapshot) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}
