package kafka

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/hamba/avro/v2"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine/internal/box"
)

// A flat plan decodes the records of a writer schema that is a record of primitive fields
// (nullable or not) straight from their bytes into the row, without the generic reader's map
// per record: the usual shape of a topic's value, and the benchmark's. Any other schema, or a
// column read in a way the plan does not cover, keeps the generic path; both give the same
// values.
type flatField struct {
	typ     avro.Type
	logical avro.LogicalType // timestamp-millis, timestamp-micros, date or ""
	null    int              // the null branch of a ["null", T] union (0 or 1); -1 for no union
	col     int              // the column the field fills; -1 for none (the field is skipped)
	double  bool             // an int or long read into a double column
}

var errTruncated = errors.New("record ends early")

// newFlatPlan returns the flat plan of writer schema s for cols, whose fields paths resolved
// (paths[i] is column i's field path, nil when the writer lacks it); nil when s is not flat
// or a column reads its field in a way the plan does not cover.
func newFlatPlan(s avro.Schema, paths [][]string, cols v1.Columns) []flatField {
	rec, ok := s.(*avro.RecordSchema)
	if !ok {
		return nil
	}
	byName := map[string]int{}
	for i, p := range paths {
		if p == nil {
			continue
		}
		if len(p) != 1 {
			return nil // a nested field
		}
		byName[p[0]] = i
	}
	fields := make([]flatField, 0, len(rec.Fields()))
	for _, f := range rec.Fields() {
		ff := flatField{null: -1, col: -1}
		t := f.Type()
		if u, ok := t.(*avro.UnionSchema); ok {
			types := u.Types()
			if len(types) != 2 {
				return nil
			}
			switch {
			case types[0].Type() == avro.Null:
				ff.null, t = 0, types[1]
			case types[1].Type() == avro.Null:
				ff.null, t = 1, types[0]
			default:
				return nil
			}
		}
		ff.typ = t.Type()
		if l, ok := t.(avro.LogicalTypeSchema); ok && l.Logical() != nil {
			ff.logical = l.Logical().Type()
		}
		if !flatPrimitive(ff.typ, ff.logical) {
			return nil
		}
		if i, ok := byName[f.Name()]; ok {
			ff.col = i
			if !flatReads(cols[i].Type, ff.typ, ff.logical) {
				return nil
			}
			ff.double = cols[i].Type == v1.TypeDouble && (ff.typ == avro.Int || ff.typ == avro.Long)
		}
		fields = append(fields, ff)
	}
	return fields
}

// flatPrimitive reports whether a flat plan reads (or skips) a field of type t.
func flatPrimitive(t avro.Type, logical avro.LogicalType) bool {
	switch t {
	case avro.String, avro.Boolean, avro.Float, avro.Double, avro.Null:
		return logical == ""
	case avro.Bytes:
		return logical == "" // a decimal keeps the generic path
	case avro.Int:
		return logical == "" || logical == avro.Date
	case avro.Long:
		return logical == "" || logical == avro.TimestampMillis || logical == avro.TimestampMicros
	}
	return false
}

// flatReads reports whether a flat plan reads a field of type t into a column of type c.
func flatReads(c v1.ColumnType, t avro.Type, logical avro.LogicalType) bool {
	switch c {
	case v1.TypeString:
		return t == avro.String || t == avro.Bytes
	case v1.TypeLong:
		return (t == avro.Int || t == avro.Long) && logical == ""
	case v1.TypeDouble:
		return (t == avro.Int || t == avro.Long) && logical == "" || t == avro.Float || t == avro.Double
	case v1.TypeBoolean:
		return t == avro.Boolean
	case v1.TypeTimestamp:
		return logical != ""
	}
	return false
}

// decodeFlat fills row from b, a record of the plan's writer schema.
func decodeFlat(fields []flatField, b []byte, row []any, vals *box.Slab) error {
	for _, f := range fields {
		if f.null >= 0 {
			branch, n := binary.Varint(b)
			if n <= 0 {
				return errTruncated
			}
			b = b[n:]
			if branch == int64(f.null) {
				continue
			}
			if branch != int64(1-f.null) {
				return fmt.Errorf("union branch %d of 2", branch)
			}
		}
		switch f.typ {
		case avro.Null:
		case avro.String, avro.Bytes:
			l, n := binary.Varint(b)
			if n <= 0 || l < 0 || l > int64(len(b)-n) {
				return errTruncated
			}
			if f.col >= 0 {
				row[f.col] = vals.Bytes(b[n : n+int(l)])
			}
			b = b[n+int(l):]
		case avro.Int, avro.Long:
			v, n := binary.Varint(b)
			if n <= 0 {
				return errTruncated
			}
			b = b[n:]
			if f.col < 0 {
				continue
			}
			switch f.logical {
			case avro.Date:
				row[f.col] = vals.Time(time.Unix(v*int64(24*time.Hour/time.Second), 0).UTC())
			case avro.TimestampMillis:
				row[f.col] = vals.Time(time.UnixMilli(v).UTC())
			case avro.TimestampMicros:
				row[f.col] = vals.Time(time.UnixMicro(v).UTC())
			default:
				if f.double {
					row[f.col] = vals.Float64(float64(v))
				} else {
					row[f.col] = vals.Int64(v)
				}
			}
		case avro.Float:
			if len(b) < 4 {
				return errTruncated
			}
			if f.col >= 0 {
				row[f.col] = vals.Float64(float64(math.Float32frombits(binary.LittleEndian.Uint32(b))))
			}
			b = b[4:]
		case avro.Double:
			if len(b) < 8 {
				return errTruncated
			}
			if f.col >= 0 {
				row[f.col] = vals.Float64(math.Float64frombits(binary.LittleEndian.Uint64(b)))
			}
			b = b[8:]
		case avro.Boolean:
			if len(b) < 1 {
				return errTruncated
			}
			if f.col >= 0 {
				row[f.col] = b[0] == 1
			}
			b = b[1:]
		}
	}
	return nil
}
