package delta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
)

// ReadFile reads the rows of one data file as columns cols (usually the
// table's): file columns by name, partition columns from the add action's
// partition values, and nulls for columns the file does not have (written
// before the column was added).
func (t *Table) ReadFile(ctx context.Context, f Add, cols v1.Columns) ([]Row, error) {
	data, err := t.store.Get(ctx, canonicalPath(f.Path))
	if err != nil {
		return nil, fmt.Errorf("delta table %s: read data file: %w", t.Location(), err)
	}
	rows, err := decodeDataFile(data, cols, f.PartitionValues)
	if err != nil {
		return nil, fmt.Errorf("delta table %s: data file %s: %w", t.Location(), f.Path, err)
	}
	return rows, nil
}

// ReadAll reads every row of snapshot s, file by file in path order.
func (t *Table) ReadAll(ctx context.Context, s *Snapshot) (v1.Columns, []Row, error) {
	cols, err := s.Columns()
	if err != nil {
		return nil, nil, err
	}
	var rows []Row
	for _, f := range s.Files() {
		r, err := t.ReadFile(ctx, f, cols)
		if err != nil {
			return nil, nil, err
		}
		rows = append(rows, r...)
	}
	return cols, rows, nil
}

func decodeDataFile(data []byte, cols v1.Columns, partitionValues map[string]*string) ([]Row, error) {
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, err
	}
	byColumn := columnTargets(f.Schema().Fields(), cols)
	var partition []struct {
		pos int
		val any
	}
	for j, c := range cols {
		pv, ok := partitionValues[c.Name]
		if !ok {
			continue
		}
		v, err := parsePartitionValue(c.Type, pv)
		if err != nil {
			return nil, fmt.Errorf("partition column %q: %w", c.Name, err)
		}
		partition = append(partition, struct {
			pos int
			val any
		}{j, v})
	}

	out := make([]Row, 0, f.NumRows())
	buf := make([]parquet.Row, 512)
	for _, rg := range f.RowGroups() {
		rr := rg.Rows()
		for {
			n, err := rr.ReadRows(buf)
			for _, prow := range buf[:n] {
				row := make(Row, len(cols))
				for _, p := range partition {
					row[p.pos] = p.val
				}
				for _, v := range prow {
					tg := byColumn[v.Column()]
					if tg == nil || v.IsNull() {
						continue
					}
					x, err := goValue(tg.typ, tg.unit, v)
					if err != nil {
						rr.Close()
						return nil, err
					}
					row[tg.pos] = x
				}
				out = append(out, row)
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				rr.Close()
				return nil, err
			}
		}
		rr.Close()
	}
	return out, nil
}

// leafTarget is where a file column goes in the row, and how to read it.
type leafTarget struct {
	pos  int
	typ  v1.ColumnType
	unit time.Duration // timestamps: the file's unit
}

// columnTargets maps the column indexes of a file's top-level leaves (of the schema fields
// leaves) that are among cols to where their values go in a row of cols.
func columnTargets(leaves []parquet.Field, cols v1.Columns) map[int]*leafTarget {
	targets := make([]*leafTarget, len(leaves))
	for i, field := range leaves {
		pos := -1
		for j, c := range cols {
			if c.Name == field.Name() {
				pos = j
			}
		}
		if pos < 0 || !field.Leaf() {
			continue
		}
		tg := &leafTarget{pos: pos, typ: cols[pos].Type}
		if lt := field.Type().LogicalType(); lt != nil {
			if ts, ok := lt.Value.(*format.TimestampType); ok {
				switch ts.Unit.Value.(type) {
				case *format.MilliSeconds:
					tg.unit = time.Millisecond
				case *format.NanoSeconds:
					tg.unit = time.Nanosecond
				default:
					tg.unit = time.Microsecond
				}
			}
		}
		targets[i] = tg
	}
	// Leaf column indexes of top-level leaves: nested fields are skipped,
	// but they still take column indexes.
	colIndex := make([]int, len(leaves))
	next := 0
	for i, field := range leaves {
		colIndex[i] = next
		next += countLeaves(field)
	}
	byColumn := map[int]*leafTarget{}
	for i, tg := range targets {
		if tg != nil {
			byColumn[colIndex[i]] = tg
		}
	}
	return byColumn
}

func countLeaves(f parquet.Field) int {
	if f.Leaf() {
		return 1
	}
	n := 0
	for _, c := range f.Fields() {
		n += countLeaves(c)
	}
	return n
}

func goValue(t v1.ColumnType, unit time.Duration, v parquet.Value) (any, error) {
	switch t {
	case v1.TypeString:
		if v.Kind() == parquet.ByteArray || v.Kind() == parquet.FixedLenByteArray {
			return string(v.ByteArray()), nil
		}
	case v1.TypeLong:
		switch v.Kind() {
		case parquet.Int64:
			return v.Int64(), nil
		case parquet.Int32:
			return int64(v.Int32()), nil
		}
	case v1.TypeDouble:
		switch v.Kind() {
		case parquet.Double:
			return v.Double(), nil
		case parquet.Float:
			return float64(v.Float()), nil
		}
	case v1.TypeBoolean:
		if v.Kind() == parquet.Boolean {
			return v.Boolean(), nil
		}
	case v1.TypeTimestamp:
		switch v.Kind() {
		case parquet.Int64:
			if unit == 0 {
				unit = time.Microsecond
			}
			return time.Unix(0, 0).Add(time.Duration(v.Int64()) * unit).UTC(), nil
		case parquet.Int96:
			return i96Time(v.Int96()), nil
		}
	}
	return nil, fmt.Errorf("a parquet %s value cannot be read as %s", v.Kind(), t)
}

// i96Time decodes Spark's legacy INT96 timestamps: nanoseconds of the day,
// then the Julian day.
func i96Time(i deprecated.Int96) time.Time {
	nanos := int64(i[1])<<32 | int64(i[0])
	julian := int64(i[2])
	const unixEpochJulian = 2440588
	return time.Unix((julian-unixEpochJulian)*86400, nanos).UTC()
}
