package delta

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine/codec"
)

// Row is one row of a write or a read, its values in the order of the
// columns it goes with. A value is nil (null) or of the column type's Go
// type: string, int64, float64, bool, time.Time (UTC instants; stored with
// microsecond precision). Writes also take int and int32 for long columns
// and float32 for double columns.
type Row []any

// maxStatsString is how many characters of a string column's minimum a
// file's stats keep, as Delta does; longer maxima are left out.
const maxStatsString = 32

// encodeDataFile writes rows as a Parquet file of the columns cols (the
// table's data columns: partition columns are not stored in the file) and
// returns the file with its stats. idx maps each of cols to its position
// in the rows.
func encodeDataFile(cols v1.Columns, idx []int, rows []Row) ([]byte, Stats, error) {
	group := parquet.Group{}
	for _, c := range cols {
		group[c.Name] = parquet.Optional(parquetNode(c.Type))
	}
	schema := parquet.NewSchema("spark_schema", group)
	// Leaf columns are ordered by name in the file; order[i] is the position
	// in cols of the file's i-th column.
	names := cols.Names()
	sorted := slices.Sorted(slices.Values(names))
	order := make([]int, len(sorted))
	for i, n := range sorted {
		order[i] = slices.Index(names, n)
	}

	stats := newStatsBuilder(cols)
	var buf bytes.Buffer
	w := parquet.NewWriter(&buf, schema, parquet.Compression(&parquet.Snappy))
	const chunk = 1024
	prows := make([]parquet.Row, 0, chunk)
	for r, row := range rows {
		prow := make(parquet.Row, len(order))
		for i, ci := range order {
			c := cols[ci]
			val := row[idx[ci]]
			pv, err := parquetValue(c.Type, val)
			if err != nil {
				return nil, Stats{}, fmt.Errorf("row %d, column %q: %w", r, c.Name, err)
			}
			if val == nil {
				prow[i] = parquet.NullValue().Level(0, 0, i)
			} else {
				prow[i] = pv.Level(0, 1, i)
			}
			stats.add(ci, val)
		}
		prows = append(prows, prow)
		if len(prows) == chunk {
			if _, err := w.WriteRows(prows); err != nil {
				return nil, Stats{}, fmt.Errorf("write parquet: %w", err)
			}
			prows = prows[:0]
		}
	}
	if _, err := w.WriteRows(prows); err != nil {
		return nil, Stats{}, fmt.Errorf("write parquet: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, Stats{}, fmt.Errorf("write parquet: %w", err)
	}
	return buf.Bytes(), stats.stats(int64(len(rows))), nil
}

func parquetNode(t v1.ColumnType) parquet.Node {
	switch t {
	case v1.TypeString:
		return parquet.String()
	case v1.TypeLong:
		return parquet.Int(64)
	case v1.TypeDouble:
		return parquet.Leaf(parquet.DoubleType)
	case v1.TypeBoolean:
		return parquet.Leaf(parquet.BooleanType)
	case v1.TypeTimestamp:
		return parquet.Timestamp(parquet.Microsecond) // isAdjustedToUTC, as Delta requires
	}
	panic("delta: unknown column type " + string(t)) // columns are checked before
}

// normalize returns v as the Go type of t (int64 for int, …), or an error.
func normalize(t v1.ColumnType, v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch t {
	case v1.TypeString:
		if s, ok := v.(string); ok {
			return s, nil
		}
	case v1.TypeLong:
		switch x := v.(type) {
		case int64:
			return x, nil
		case int:
			return int64(x), nil
		case int32:
			return int64(x), nil
		}
	case v1.TypeDouble:
		switch x := v.(type) {
		case float64:
			return x, nil
		case float32:
			return float64(x), nil
		}
	case v1.TypeBoolean:
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case v1.TypeTimestamp:
		if ts, ok := v.(time.Time); ok {
			return ts.UTC(), nil
		}
	}
	return nil, fmt.Errorf("value %v (%T) is not a %s", v, v, t)
}

func parquetValue(t v1.ColumnType, v any) (parquet.Value, error) {
	v, err := normalize(t, v)
	if err != nil {
		return parquet.Value{}, err
	}
	return codec.ParquetValue(v)
}

// statsBuilder gathers a file's min, max and null count per column.
type statsBuilder struct {
	cols     v1.Columns
	min, max []any
	nulls    []int64
}

func newStatsBuilder(cols v1.Columns) *statsBuilder {
	return &statsBuilder{cols: cols, min: make([]any, len(cols)), max: make([]any, len(cols)), nulls: make([]int64, len(cols))}
}

func (b *statsBuilder) add(i int, v any) {
	v, _ = normalize(b.cols[i].Type, v)
	if v == nil {
		b.nulls[i]++
		return
	}
	if f, ok := v.(float64); ok && math.IsNaN(f) {
		return
	}
	if _, ok := v.(bool); ok {
		return // Delta keeps no min/max for booleans
	}
	if b.min[i] == nil || less(v, b.min[i]) {
		b.min[i] = v
	}
	if b.max[i] == nil || less(b.max[i], v) {
		b.max[i] = v
	}
}

func less(a, b any) bool {
	switch x := a.(type) {
	case string:
		return x < b.(string)
	case int64:
		return x < b.(int64)
	case float64:
		return x < b.(float64)
	case time.Time:
		return x.Before(b.(time.Time))
	}
	return false
}

// stats renders the statistics: timestamps in milliseconds (minimum rounded
// down, maximum up), long strings' minimum cut to 32 characters and their
// maximum left out, so that the bounds hold.
func (b *statsBuilder) stats(n int64) Stats {
	s := Stats{NumRecords: n, MinValues: map[string]any{}, MaxValues: map[string]any{}, NullCount: map[string]int64{}}
	for i, c := range b.cols {
		s.NullCount[c.Name] = b.nulls[i]
		if b.min[i] == nil {
			continue
		}
		switch lo := b.min[i].(type) {
		case time.Time:
			s.MinValues[c.Name] = lo.Truncate(time.Millisecond).Format(statsTimeFormat)
			hi := b.max[i].(time.Time)
			if t := hi.Truncate(time.Millisecond); t.Before(hi) {
				hi = t.Add(time.Millisecond)
			}
			s.MaxValues[c.Name] = hi.Format(statsTimeFormat)
		case string:
			s.MinValues[c.Name] = truncateRunes(lo, maxStatsString)
			if hi := b.max[i].(string); len([]rune(hi)) <= maxStatsString {
				s.MaxValues[c.Name] = hi
			}
		case float64:
			if !math.IsInf(lo, 0) {
				s.MinValues[c.Name] = lo
			}
			if hi := b.max[i].(float64); !math.IsInf(hi, 0) {
				s.MaxValues[c.Name] = hi
			}
		default:
			s.MinValues[c.Name] = lo
			s.MaxValues[c.Name] = b.max[i]
		}
	}
	return s
}

const statsTimeFormat = "2006-01-02T15:04:05.000Z07:00"

func truncateRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n])
}

func (s Stats) encode() string {
	b, _ := json.Marshal(s)
	return string(b)
}

// ParseStats reads an add action's stats; empty stats read as zero Stats.
func ParseStats(stats string) (Stats, error) {
	var s Stats
	if stats == "" {
		return s, nil
	}
	d := json.NewDecoder(strings.NewReader(stats))
	d.UseNumber()
	if err := d.Decode(&s); err != nil {
		return Stats{}, fmt.Errorf("parse stats: %w", err)
	}
	return s, nil
}

// partitionTimeFormat is how timestamp partition values are written: ISO
// 8601 with microseconds in UTC, which the protocol allows.
const partitionTimeFormat = "2006-01-02T15:04:05.000000Z"

// formatPartitionValue serializes a partition value as the protocol says;
// nil stays nil (a null partition).
func formatPartitionValue(t v1.ColumnType, v any) (*string, error) {
	v, err := normalize(t, v)
	if err != nil || v == nil {
		return nil, err
	}
	var s string
	switch x := v.(type) {
	case string:
		if x == "" {
			return nil, nil // Delta writes empty partition strings as null
		}
		s = x
	case int64:
		s = strconv.FormatInt(x, 10)
	case float64:
		s = strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		s = strconv.FormatBool(x)
	case time.Time:
		s = x.UTC().Truncate(time.Microsecond).Format(partitionTimeFormat)
	}
	return &s, nil
}

// parsePartitionValue reads a serialized partition value as a value of t.
func parsePartitionValue(t v1.ColumnType, s *string) (any, error) {
	if s == nil {
		return nil, nil
	}
	switch t {
	case v1.TypeString:
		return *s, nil
	case v1.TypeLong:
		return strconv.ParseInt(*s, 10, 64)
	case v1.TypeDouble:
		return strconv.ParseFloat(*s, 64)
	case v1.TypeBoolean:
		return strconv.ParseBool(*s)
	case v1.TypeTimestamp:
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999", "2006-01-02 15:04:05", "2006-01-02"} {
			if ts, err := time.Parse(layout, *s); err == nil {
				return ts.UTC(), nil
			}
		}
		return nil, fmt.Errorf("timestamp partition value %q: unknown format", *s)
	}
	return nil, fmt.Errorf("column type %q", t)
}

// hiveDefaultPartition names the folder of null partition values.
const hiveDefaultPartition = "__HIVE_DEFAULT_PARTITION__"

// escapePartition escapes a partition value for a folder name the way Hive
// does (%XX for characters that paths or keys cannot hold), so that the
// folder names stay valid store keys.
func escapePartition(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' && i > 0 {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}
