package kafka

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/hamba/avro/v2"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine/internal/box"
)

// A flat plan decodes the records of a writer schema straight from their bytes into the row,
// without the generic reader's map per record: records of primitive fields (nullable or not),
// nested records (read through a__b columns), enums and decimals — the usual shapes of a
// topic's value, and the benchmarks'. A schema with anything else (an array, a map, a union of
// two non-null types), or a column read in a way the plan does not cover, keeps the generic
// path; both give the same values.
type flatField struct {
	typ     avro.Type
	logical avro.LogicalType // timestamp-millis, timestamp-micros, date, decimal or ""
	null    int              // the null branch of a ["null", T] union (0 or 1); -1 for no union
	col     int              // the column the field fills; -1 for none (the field is skipped)
	double  bool             // an int or long read into a double column
	// fields are a nested record's (typ avro.Record).
	fields []flatField
	// symbols are an enum's (typ avro.Enum).
	symbols []string
	// size is a fixed's byte count (typ avro.Fixed); scale a decimal's, and decString
	// reports that it fills a string column (the exact decimal) rather than a double.
	size      int
	scale     int
	decString bool
}

var errTruncated = errors.New("record ends early")

// newFlatPlan returns the flat plan of writer schema s for cols, whose fields paths resolved
// (paths[i] is column i's field path, nil when the writer lacks it); nil when s holds a type
// the plan does not cover or a column reads its field in a way the plan does not cover.
func newFlatPlan(s avro.Schema, paths [][]string, cols v1.Columns) []flatField {
	rec, ok := s.(*avro.RecordSchema)
	if !ok {
		return nil
	}
	byPath := map[string]int{}
	for i, p := range paths {
		if p != nil {
			byPath[strings.Join(p, ".")] = i
		}
	}
	fields, ok := flatRecord(rec, "", byPath, cols)
	if !ok {
		return nil
	}
	return fields
}

// flatRecord plans the fields of rec, whose path from the top record is prefix ("" for the
// top record, else "a.b.").
func flatRecord(rec *avro.RecordSchema, prefix string, byPath map[string]int, cols v1.Columns) ([]flatField, bool) {
	fields := make([]flatField, 0, len(rec.Fields()))
	for _, f := range rec.Fields() {
		ff := flatField{null: -1, col: -1}
		t := f.Type()
		if u, ok := t.(*avro.UnionSchema); ok {
			types := u.Types()
			if len(types) != 2 {
				return nil, false
			}
			switch {
			case types[0].Type() == avro.Null:
				ff.null, t = 0, types[1]
			case types[1].Type() == avro.Null:
				ff.null, t = 1, types[0]
			default:
				return nil, false
			}
		}
		if r, ok := t.(*avro.RefSchema); ok {
			t = r.Schema()
		}
		ff.typ = t.Type()
		if l, ok := t.(avro.LogicalTypeSchema); ok && l.Logical() != nil {
			ff.logical = l.Logical().Type()
			if dec, ok := l.Logical().(*avro.DecimalLogicalSchema); ok {
				ff.scale = dec.Scale()
			}
		}
		path := prefix + f.Name()
		switch st := t.(type) {
		case *avro.RecordSchema:
			if _, read := byPath[path]; read {
				return nil, false // a whole record into one column: the generic path says why not
			}
			nested, ok := flatRecord(st, path+".", byPath, cols)
			if !ok {
				return nil, false
			}
			ff.fields = nested
			fields = append(fields, ff)
			continue
		case *avro.EnumSchema:
			ff.symbols = st.Symbols()
		case *avro.FixedSchema:
			if ff.logical != avro.Decimal {
				return nil, false
			}
			ff.size = st.Size()
		default:
			if !flatPrimitive(ff.typ, ff.logical) {
				return nil, false
			}
		}
		if i, ok := byPath[path]; ok {
			ff.col = i
			if !flatReads(cols[i].Type, ff.typ, ff.logical) {
				return nil, false
			}
			ff.double = cols[i].Type == v1.TypeDouble && (ff.typ == avro.Int || ff.typ == avro.Long)
			ff.decString = ff.logical == avro.Decimal && cols[i].Type == v1.TypeString
		}
		fields = append(fields, ff)
	}
	return fields, true
}

// flatPrimitive reports whether a flat plan reads (or skips) a field of type t.
func flatPrimitive(t avro.Type, logical avro.LogicalType) bool {
	switch t {
	case avro.String, avro.Boolean, avro.Float, avro.Double, avro.Null:
		return logical == ""
	case avro.Bytes:
		return logical == "" || logical == avro.Decimal
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
		return t == avro.String || t == avro.Bytes || t == avro.Enum || logical == avro.Decimal
	case v1.TypeLong:
		return (t == avro.Int || t == avro.Long) && logical == ""
	case v1.TypeDouble:
		return (t == avro.Int || t == avro.Long) && logical == "" || t == avro.Float || t == avro.Double || logical == avro.Decimal
	case v1.TypeBoolean:
		return t == avro.Boolean
	case v1.TypeTimestamp:
		return logical != "" && logical != avro.Decimal
	}
	return false
}

// decodeFlat fills row from b, a record of the plan's writer schema. The columns of a null
// nested record are left as they are (nil: the caller clears the row).
func decodeFlat(fields []flatField, b []byte, row []any, vals *box.Slab) error {
	_, err := decodeFields(fields, b, row, vals)
	return err
}

// decodeFields decodes the fields of one record from b and returns what follows it.
func decodeFields(fields []flatField, b []byte, row []any, vals *box.Slab) ([]byte, error) {
	for i := range fields {
		f := &fields[i]
		if f.null >= 0 {
			branch, n := binary.Varint(b)
			if n <= 0 {
				return nil, errTruncated
			}
			b = b[n:]
			if branch == int64(f.null) {
				continue
			}
			if branch != int64(1-f.null) {
				return nil, fmt.Errorf("union branch %d of 2", branch)
			}
		}
		var err error
		if b, err = decodeField(f, b, row, vals); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// decodeField decodes the value of field f from b into its column, if any, and returns what
// follows it.
func decodeField(f *flatField, b []byte, row []any, vals *box.Slab) ([]byte, error) {
	switch f.typ {
	case avro.Null:
	case avro.Record:
		return decodeFields(f.fields, b, row, vals)
	case avro.Enum:
		v, n := binary.Varint(b)
		if n <= 0 {
			return nil, errTruncated
		}
		if v < 0 || v >= int64(len(f.symbols)) {
			return nil, fmt.Errorf("enum index %d of %d symbols", v, len(f.symbols))
		}
		if f.col >= 0 {
			row[f.col] = vals.String(f.symbols[v])
		}
		return b[n:], nil
	case avro.String, avro.Bytes, avro.Fixed:
		size, n := f.size, 0
		if f.typ != avro.Fixed {
			l, m := binary.Varint(b)
			if m <= 0 || l < 0 || l > int64(len(b)-m) {
				return nil, errTruncated
			}
			size, n = int(l), m
		} else if size > len(b) {
			return nil, errTruncated
		}
		if f.col >= 0 {
			if f.logical == avro.Decimal {
				row[f.col] = decimal(b[n:n+size], f.scale, f.decString, vals)
			} else {
				row[f.col] = vals.Bytes(b[n : n+size])
			}
		}
		return b[n+size:], nil
	case avro.Int, avro.Long:
		v, n := binary.Varint(b)
		if n <= 0 {
			return nil, errTruncated
		}
		if f.col >= 0 {
			row[f.col] = f.integer(v, vals)
		}
		return b[n:], nil
	case avro.Float:
		if len(b) < 4 {
			return nil, errTruncated
		}
		if f.col >= 0 {
			row[f.col] = vals.Float64(float64(math.Float32frombits(binary.LittleEndian.Uint32(b))))
		}
		return b[4:], nil
	case avro.Double:
		if len(b) < 8 {
			return nil, errTruncated
		}
		if f.col >= 0 {
			row[f.col] = vals.Float64(math.Float64frombits(binary.LittleEndian.Uint64(b)))
		}
		return b[8:], nil
	case avro.Boolean:
		if len(b) < 1 {
			return nil, errTruncated
		}
		if f.col >= 0 {
			row[f.col] = b[0] == 1
		}
		return b[1:], nil
	}
	return b, nil
}

// integer converts an int or long field's value to its column's: a date or timestamp, a
// double, or a long.
func (f *flatField) integer(v int64, vals *box.Slab) any {
	switch f.logical {
	case avro.Date:
		return vals.Time(time.Unix(v*int64(24*time.Hour/time.Second), 0).UTC())
	case avro.TimestampMillis:
		return vals.Time(time.UnixMilli(v).UTC())
	case avro.TimestampMicros:
		return vals.Time(time.UnixMicro(v).UTC())
	}
	if f.double {
		return vals.Float64(float64(v))
	}
	return vals.Int64(v)
}

// pow10 are the powers of ten a float64 holds exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// decimal converts an Avro decimal (the unscaled value, big-endian two's complement, and its
// scale) as the generic path does: the nearest double, or the exact decimal string. An
// unscaled value that fits 64 bits is converted without big numbers (as a double: one
// correctly rounded division when it fits 53 bits, over an exact power of ten); anything
// larger goes through big.Rat.
func decimal(b []byte, scale int, exact bool, vals *box.Slab) any {
	if u, ok := unscaled64(b); ok {
		switch {
		case exact:
			return vals.String(formatDecimal(u, scale))
		case scale < len(pow10) && u > -1<<53 && u < 1<<53:
			return vals.Float64(float64(u) / pow10[scale])
		}
	}
	unscaled := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		unscaled.Sub(unscaled, new(big.Int).Lsh(big.NewInt(1), uint(len(b)*8)))
	}
	r := new(big.Rat).SetFrac(unscaled, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil))
	if exact {
		return vals.String(r.FloatString(scale))
	}
	f, _ := r.Float64()
	return vals.Float64(f)
}

// unscaled64 reads a big-endian two's complement integer that fits an int64 (a fixed may
// carry more bytes than its value needs: they are sign extension).
func unscaled64(b []byte) (int64, bool) {
	var ext byte
	if len(b) > 0 && b[0]&0x80 != 0 {
		ext = 0xff
	}
	for len(b) > 8 {
		if b[0] != ext {
			return 0, false
		}
		b = b[1:]
	}
	if len(b) == 8 && (b[0]&0x80 != 0) != (ext == 0xff) {
		return 0, false // the sign bit of the 64 bits is not the value's
	}
	u := int64(0)
	if ext == 0xff {
		u = -1
	}
	for _, c := range b {
		u = u<<8 | int64(c)
	}
	return u, true
}

// formatDecimal writes u / 10^scale with scale digits after the point, as
// big.Rat.FloatString(scale) does: "-0.05", "12.50", "7" for scale 0.
func formatDecimal(u int64, scale int) string {
	var buf [48]byte
	neg := u < 0
	abs := uint64(u)
	if neg {
		abs = -abs
	}
	digits := strconv.AppendUint(buf[:0], abs, 10)
	var out [80]byte
	s := out[:0]
	if neg {
		s = append(s, '-')
	}
	if scale == 0 {
		return string(append(s, digits...))
	}
	if len(digits) <= scale {
		s = append(s, '0', '.')
		for range scale - len(digits) {
			s = append(s, '0')
		}
		return string(append(s, digits...))
	}
	s = append(s, digits[:len(digits)-scale]...)
	s = append(s, '.')
	return string(append(s, digits[len(digits)-scale:]...))
}
