package delta

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
)

// A merge (Mode Merge) is copy-on-write: the files that may hold one of the
// batch's keys are read; each that does hold one is removed, and replaced by
// a file of its other rows and the batch's rows of the keys it held. The
// batch's new keys go to a file of their own. Which files may hold a key is
// decided by their partition values and per-file min/max/null-count stats,
// so a batch that touches few keys rewrites few files. A replacement holds
// the keys of the file it replaces and no others, so its stats stay as
// narrow: were the kept rows of all rewritten files written together with
// the new keys (as before), every merge would widen that one file's range
// until each batch of a windowed aggregation rewrote all the rows it had
// ever written (docs/benchmarks.md). Deletion vectors are not used (writer
// version 2 has none).

// mergeWrite is what a merge commits: the files it removes, and the rows
// that replace them, each tagged with the file it goes to (the index of the
// removed file it replaces, len(removes) for the new keys).
type mergeWrite struct {
	plan    writePlan // over the table's columns plus the write's new ones
	rows    []Row     // in plan's column order
	origins []int     // per row
	removes []Add
}

// planMerge decides a merge of w into snap. p is the plan of w.
func (t *Table) planMerge(ctx context.Context, snap *Snapshot, w Write, p writePlan) (mergeWrite, error) {
	var m mergeWrite
	cols := w.Columns
	if snap.Exists() {
		var err error
		if p.metadata != nil {
			cols, err = ParseSchema(p.metadata.SchemaString)
		} else {
			cols, err = snap.Columns()
		}
		if err != nil {
			return m, fmt.Errorf("delta table %s: %w", t.Location(), err)
		}
	}
	// The write's rows in the order of cols; columns the write lacks are null.
	pos := make([]int, len(w.Columns))
	for i, c := range w.Columns {
		pos[i] = slices.IndexFunc(cols, func(x v1.Column) bool { return x.Name == c.Name })
	}
	keyIdx := make([]int, len(w.Keys))
	keyCols := make(v1.Columns, len(w.Keys))
	for i, k := range w.Keys {
		j := slices.IndexFunc(cols, func(x v1.Column) bool { return x.Name == k })
		if j < 0 || !slices.Contains(w.Columns.Names(), k) {
			return m, fmt.Errorf("delta table %s: merge key %q is not an output column", t.Location(), k)
		}
		keyIdx[i], keyCols[i] = j, cols[j]
	}
	// The batch's rows by key: a later row of a key replaces an earlier one.
	byKey := map[string]int{}
	var batch []Row
	for r, row := range w.Rows {
		if len(row) < len(w.Columns) {
			return m, fmt.Errorf("delta table %s: row %d has %d values, want %d", t.Location(), r, len(row), len(w.Columns))
		}
		out := make(Row, len(cols))
		for i, j := range pos {
			out[j] = row[i]
		}
		k := rowKey(keyCols, keyIdx, out)
		if i, ok := byKey[k]; ok {
			batch[i] = out
			continue
		}
		byKey[k] = len(batch)
		batch = append(batch, out)
	}
	origin, err := t.takeFiles(ctx, snap, cols, keyCols, keyIdx, batch, byKey, &m)
	if err != nil {
		return m, err
	}
	for i, row := range batch {
		m.rows = append(m.rows, row)
		if origin[i] < 0 {
			origin[i] = len(m.removes)
		}
		m.origins = append(m.origins, origin[i])
	}
	full := w
	full.Columns = cols
	if m.plan, err = t.plan(snap, full); err != nil {
		return m, err
	}
	return m, nil
}

// takeFiles adds to m the files of snap that hold a key of batch (rows of columns cols, keyed
// by keyCols at keyIdx; byKey indexes batch by key): each file is removed and its rows of
// other keys written again. It returns per batch row the index in m.removes of the file
// that held its key, or -1.
func (t *Table) takeFiles(ctx context.Context, snap *Snapshot, cols, keyCols v1.Columns, keyIdx []int, batch []Row, byKey map[string]int, m *mergeWrite) ([]int, error) {
	origin := slices.Repeat([]int{-1}, len(batch)) // per batch row: the removed file that held its key
	if len(batch) == 0 {
		return origin, nil
	}
	keys := make([][]any, len(batch))
	for i, row := range batch {
		keys[i] = make([]any, len(keyIdx))
		for j, ki := range keyIdx {
			keys[i][j], _ = normalize(keyCols[j].Type, row[ki])
		}
	}
	for _, f := range snap.Files() {
		if !mayHoldAny(f, keyCols, keys) {
			continue
		}
		rows, err := t.ReadFile(ctx, f, cols)
		if err != nil {
			return nil, err
		}
		kept := rows[:0]
		var held []int // the batch's rows whose keys the file holds
		for _, row := range rows {
			i, replaced := byKey[rowKey(keyCols, keyIdx, row)]
			if !replaced {
				kept = append(kept, row)
			} else if origin[i] < 0 {
				held = append(held, i)
			}
		}
		if len(kept) == len(rows) {
			continue // the stats could not rule the file out, but it holds none of the keys
		}
		for _, i := range held {
			origin[i] = len(m.removes)
		}
		m.removes = append(m.removes, f)
		m.rows = append(m.rows, kept...)
		m.origins = append(m.origins, slices.Repeat([]int{len(m.removes) - 1}, len(kept))...)
	}
	return origin, nil
}

// rowKey encodes the key values of row (at idx, of types cols) so that two
// rows have the same encoding exactly when their keys are equal, nulls
// equal to nulls (as grouping treats them), timestamps at the microsecond
// precision files store.
func rowKey(cols v1.Columns, idx []int, row Row) string {
	var b []byte
	for i, j := range idx {
		v, _ := normalize(cols[i].Type, row[j])
		b = appendKeyValue(b, v)
	}
	return string(b)
}

func appendKeyValue(b []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		b = append(b, 'n')
	case string:
		b = strconv.AppendQuote(append(b, 's'), x)
	case int64:
		b = strconv.AppendInt(append(b, 'i'), x, 10)
	case float64:
		b = strconv.AppendFloat(append(b, 'f'), x, 'g', -1, 64)
	case bool:
		b = strconv.AppendBool(append(b, 'b'), x)
	case time.Time:
		b = strconv.AppendInt(append(b, 't'), x.UnixMicro(), 10)
	}
	return append(b, 0)
}

// mayHoldAny reports whether file f may hold a row with one of keys (values
// of keyCols, normalized). It answers true when it cannot tell.
func mayHoldAny(f Add, keyCols v1.Columns, keys [][]any) bool {
	if len(keyCols) == 0 {
		return true // a global aggregate: every row has the empty key
	}
	stats, err := ParseStats(f.Stats)
	haveStats := err == nil && f.Stats != ""
	bounds := make([]columnBounds, len(keyCols))
	for i, c := range keyCols {
		bounds[i] = fileBounds(f, stats, haveStats, c)
	}
	for _, key := range keys {
		all := true
		for i, v := range key {
			if !bounds[i].mayHold(v) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// columnBounds is what a file's metadata says about one column's values.
type columnBounds struct {
	known     bool // else anything may be there
	partition bool // the value is the file's partition value, pv
	pv        any
	lo, hi    any  // non-null bounds, nil if unknown
	nulls     bool // nulls may be there
	nonNull   bool // non-null values may be there
}

func fileBounds(f Add, s Stats, haveStats bool, c v1.Column) columnBounds {
	if raw, ok := f.PartitionValues[c.Name]; ok {
		v, err := parsePartitionValue(c.Type, raw)
		if err != nil {
			return columnBounds{}
		}
		v, _ = normalize(c.Type, v)
		return columnBounds{known: true, partition: true, pv: v}
	}
	if !haveStats {
		return columnBounds{}
	}
	n, counted := s.NullCount[c.Name]
	if !counted {
		return columnBounds{} // a file written without stats of the column (or before it existed)
	}
	b := columnBounds{known: true, nulls: n > 0, nonNull: n < s.NumRecords}
	b.lo = statValue(c.Type, s.MinValues[c.Name])
	b.hi = statValue(c.Type, s.MaxValues[c.Name])
	return b
}

func (b columnBounds) mayHold(v any) bool {
	switch {
	case !b.known:
		return true
	case b.partition:
		return keyEqual(b.pv, v)
	case v == nil:
		return b.nulls
	case !b.nonNull:
		return false
	}
	if _, ok := v.(bool); ok {
		return true // no min/max for booleans
	}
	if b.lo != nil && less(v, b.lo) {
		return false
	}
	if b.hi != nil && less(b.hi, v) {
		return false
	}
	return true
}

func keyEqual(a, b any) bool {
	return string(appendKeyValue(nil, a)) == string(appendKeyValue(nil, b))
}

// statValue reads a min or max value of a file's stats as a value of t, nil
// when absent or unreadable (no bound).
func statValue(t v1.ColumnType, v any) any {
	switch t {
	case v1.TypeString:
		if s, ok := v.(string); ok {
			return s
		}
	case v1.TypeLong:
		if n, ok := v.(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				return i
			}
		}
	case v1.TypeDouble:
		if n, ok := v.(json.Number); ok {
			if f, err := n.Float64(); err == nil {
				return f
			}
		}
	case v1.TypeTimestamp:
		if s, ok := v.(string); ok {
			if ts, err := time.Parse(time.RFC3339Nano, s); err == nil {
				return ts.UTC()
			}
		}
	}
	return nil
}
