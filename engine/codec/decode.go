package codec

import (
	"bytes"
	"encoding/binary"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/internal/box"
)

// Malformed is a record that does not parse against the schema.
type Malformed struct {
	// Line is the record's line (JSON, CSV) or row (Parquet), from 1; 0 when
	// the whole file is unreadable.
	Line   int64
	Reason string
	// Record is the raw record, when there is one.
	Record string
}

// Decoder turns the bytes of one file into rows of the schema's columns. It
// holds no state between calls and is safe for concurrent use.
type Decoder struct {
	cols  v1.Columns
	index map[string]int
}

// NewDecoder returns the decoder of rows with the columns cols.
func NewDecoder(cols v1.Columns) *Decoder {
	index := make(map[string]int, len(cols))
	for i, c := range cols {
		index[c.Name] = i
	}
	return &Decoder{cols: cols, index: index}
}

// Decode parses data in format (json, csv or parquet), calling bad for every
// malformed record, and returns the rows that parsed:
//
//   - json: one object per line; blank lines are skipped; a missing key or
//     null is null; a value of another type makes the record malformed.
//   - csv: one record per line, columns in schema order, no header; an empty
//     field is null.
//   - parquet: columns are found by name; a column the file lacks is null.
//
// Timestamps are RFC 3339 strings or epoch milliseconds in JSON and CSV, and
// Parquet timestamps (or INT96) in Parquet; they come out as UTC instants.
func (d *Decoder) Decode(format v1.FileFormat, data []byte, bad func(Malformed)) []engine.Row {
	switch format {
	case v1.FormatJSON:
		return d.jsonLines(data, bad)
	case v1.FormatCSV:
		return d.csvLines(data, bad)
	case v1.FormatParquet:
		return d.parquet(data, bad)
	}
	bad(Malformed{Reason: fmt.Sprintf("unknown format %q", format)})
	return nil
}

// jsonLines parses one JSON object per line. Blank lines are skipped; a
// missing key is null; a value of the wrong type makes the record malformed.
func (d *Decoder) jsonLines(data []byte, bad func(Malformed)) []engine.Row {
	n := bytes.Count(data, []byte{'\n'}) + 1
	rows := make([]engine.Row, 0, n)
	// The rows are cut from one allocation; a malformed record's slot is
	// reused by the next.
	vals := make([]any, n*len(d.cols))
	var boxes box.Slab // the rows' values, boxed a few hundred at a time
	var line int64
	for raw := range bytes.Lines(data) {
		line++
		text := bytes.TrimSpace(raw)
		if len(text) == 0 {
			continue
		}
		row := engine.Row(vals[:len(d.cols):len(d.cols)])
		if err := d.jsonRecord(text, row, &boxes); err != nil {
			clear(row)
			bad(Malformed{Line: line, Reason: err.Error(), Record: string(text)})
			continue
		}
		vals = vals[len(d.cols):]
		rows = append(rows, row)
	}
	return rows
}

// parseTimestamp reads an RFC 3339 time, as a UTC instant.
func parseTimestamp(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not an RFC 3339 timestamp", s)
	}
	return t.UTC(), nil
}

// csvLines parses one record per line, columns in schema order, no header.
// An empty field is null (for strings too).
func (d *Decoder) csvLines(data []byte, bad func(Malformed)) []engine.Row {
	rows := make([]engine.Row, 0, bytes.Count(data, []byte{'\n'})+1)
	var line int64
	var fields []string
	for raw := range bytes.Lines(data) {
		line++
		text := strings.TrimRight(string(raw), "\r\n")
		if strings.TrimSpace(text) == "" {
			continue
		}
		var err error
		fields, err = splitCSV(text, fields[:0])
		if err == nil {
			var row engine.Row
			if row, err = d.csvRecord(fields); err == nil {
				rows = append(rows, row)
				continue
			}
		}
		bad(Malformed{Line: line, Reason: err.Error(), Record: text})
	}
	return rows
}

// splitCSV splits one CSV line; quoted fields may hold commas and doubled
// quotes but not line breaks.
func splitCSV(line string, out []string) ([]string, error) {
	if !strings.Contains(line, `"`) {
		for f := range strings.SplitSeq(line, ",") {
			out = append(out, f)
		}
		return out, nil
	}
	r := csv.NewReader(strings.NewReader(line))
	r.FieldsPerRecord = -1
	rec, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("not a CSV record: %w", err)
	}
	return append(out, rec...), nil
}

func (d *Decoder) csvRecord(fields []string) (engine.Row, error) {
	if len(fields) != len(d.cols) {
		return nil, fmt.Errorf("%d fields, want %d (%s)", len(fields), len(d.cols), strings.Join(d.cols.Names(), ", "))
	}
	row := make(engine.Row, len(d.cols))
	for i, c := range d.cols {
		f := fields[i]
		if f == "" {
			continue
		}
		v, err := textValue(c.Type, f)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", c.Name, err)
		}
		row[i] = v
	}
	return row, nil
}

func textValue(t v1.ColumnType, s string) (any, error) {
	switch t {
	case v1.TypeString:
		return s, nil
	case v1.TypeLong:
		i, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a long", s)
		}
		return i, nil
	case v1.TypeDouble:
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a double", s)
		}
		return f, nil
	case v1.TypeBoolean:
		b, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("%q is not a boolean", s)
		}
		return b, nil
	case v1.TypeTimestamp:
		s = strings.TrimSpace(s)
		if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
			return time.UnixMilli(ms).UTC(), nil
		}
		return parseTimestamp(s)
	}
	return nil, fmt.Errorf("unknown column type %q", t)
}

// parquet reads the schema's columns by name from a Parquet file. A column
// the file lacks is null; a value that cannot be converted to the column's
// type makes its row malformed; an unreadable file is one malformed record
// with line 0.
func (d *Decoder) parquet(data []byte, bad func(Malformed)) (rows []engine.Row) {
	defer func() {
		if p := recover(); p != nil {
			bad(Malformed{Reason: fmt.Sprintf("unreadable Parquet file: %v", p)})
			rows = nil
		}
	}()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		bad(Malformed{Reason: fmt.Sprintf("unreadable Parquet file: %v", err)})
		return nil
	}
	// byLeaf maps a file column index to the schema column it fills.
	type target struct {
		col  int
		conv func(parquet.Value) (any, error)
	}
	byLeaf := map[int]target{}
	for i, c := range d.cols {
		leaf, ok := f.Schema().Lookup(c.Name)
		if !ok {
			continue
		}
		conv, err := parquetConverter(c.Type, leaf.Node.Type())
		if err != nil {
			bad(Malformed{Reason: fmt.Sprintf("column %s: %v", c.Name, err)})
			return nil
		}
		byLeaf[leaf.ColumnIndex] = target{col: i, conv: conv}
	}
	r := parquet.NewReader(f)
	defer r.Close()
	rows = make([]engine.Row, 0, r.NumRows())
	buf := make([]parquet.Row, 256)
	var line int64
	for {
		n, err := r.ReadRows(buf)
		for _, pr := range buf[:n] {
			line++
			row := make(engine.Row, len(d.cols))
			var convErr error
			for _, v := range pr {
				t, ok := byLeaf[v.Column()]
				if !ok || v.IsNull() {
					continue
				}
				val, err := t.conv(v)
				if err != nil {
					convErr = fmt.Errorf("column %s: %w", d.cols[t.col].Name, err)
					break
				}
				row[t.col] = val
			}
			if convErr != nil {
				bad(Malformed{Line: line, Reason: convErr.Error()})
				continue
			}
			rows = append(rows, row)
		}
		if errors.Is(err, io.EOF) {
			return rows
		}
		if err != nil {
			bad(Malformed{Line: line + 1, Reason: fmt.Sprintf("unreadable Parquet row: %v", err)})
			return rows
		}
	}
}

// parquetConverter returns how to read values of a Parquet column type as
// a column of type t.
func parquetConverter(t v1.ColumnType, pt parquet.Type) (func(parquet.Value) (any, error), error) {
	kind := pt.Kind()
	switch t {
	case v1.TypeString:
		if kind == parquet.ByteArray || kind == parquet.FixedLenByteArray {
			return func(v parquet.Value) (any, error) { return string(v.ByteArray()), nil }, nil
		}
	case v1.TypeLong:
		switch kind {
		case parquet.Int32:
			return func(v parquet.Value) (any, error) { return int64(v.Int32()), nil }, nil
		case parquet.Int64:
			return func(v parquet.Value) (any, error) { return v.Int64(), nil }, nil
		}
	case v1.TypeDouble:
		switch kind {
		case parquet.Float:
			return func(v parquet.Value) (any, error) { return float64(v.Float()), nil }, nil
		case parquet.Double:
			return func(v parquet.Value) (any, error) { return v.Double(), nil }, nil
		case parquet.Int32:
			return func(v parquet.Value) (any, error) { return float64(v.Int32()), nil }, nil
		case parquet.Int64:
			return func(v parquet.Value) (any, error) { return float64(v.Int64()), nil }, nil
		}
	case v1.TypeBoolean:
		if kind == parquet.Boolean {
			return func(v parquet.Value) (any, error) { return v.Boolean(), nil }, nil
		}
	case v1.TypeTimestamp:
		switch kind {
		case parquet.Int64:
			unit := time.Millisecond
			if lt := pt.LogicalType(); lt != nil {
				if ts, ok := lt.Value.(*format.TimestampType); ok && ts.Unit.Value != nil {
					unit = ts.Unit.Value.Duration()
				}
			}
			return func(v parquet.Value) (any, error) {
				return time.Unix(0, 0).Add(time.Duration(v.Int64()) * unit).UTC(), nil
			}, nil
		case parquet.Int96:
			// Legacy Impala/Spark timestamps: nanoseconds of the day, then
			// the Julian day, little-endian.
			return func(v parquet.Value) (any, error) {
				b := v.Bytes()
				if len(b) != 12 {
					return nil, fmt.Errorf("INT96 timestamp of %d bytes", len(b))
				}
				nanos := int64(binary.LittleEndian.Uint64(b[:8]))
				day := int64(binary.LittleEndian.Uint32(b[8:]))
				const unixEpochJulianDay = 2440588
				return time.Unix((day-unixEpochJulianDay)*86400, nanos).UTC(), nil
			}, nil
		case parquet.ByteArray:
			return func(v parquet.Value) (any, error) { return parseTimestamp(string(v.ByteArray())) }, nil
		}
	}
	return nil, fmt.Errorf("a Parquet %s column cannot be read as %s", kind, t)
}
