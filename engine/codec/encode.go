package codec

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
)

// Encode writes rows with the columns cols in format: json (one object per
// line, keys in column order, timestamps as RFC 3339 with nanoseconds, null
// for nulls and for non-finite doubles) or parquet. Every row must have a
// value of its column's type, or nil, per column.
func Encode(format v1.FileFormat, cols v1.Columns, rows []engine.Row) ([]byte, error) {
	e, err := NewEncoder(format, cols)
	if err != nil {
		return nil, err
	}
	if err := e.Write(rows); err != nil {
		return nil, err
	}
	return e.Close()
}

// Encoder encodes rows into one file as Encode does, a chunk of rows at a
// time: it keeps the file's bytes, not the rows.
type Encoder struct {
	format v1.FileFormat
	cols   v1.Columns
	json   []byte
	// parquet: the writer into buf, and leaf[i], the file column of cols[i].
	buf  bytes.Buffer
	pw   *parquet.GenericWriter[any]
	leaf []int
	prow []parquet.Row
	vals []parquet.Value
}

// NewEncoder returns an encoder of rows with the columns cols in format.
func NewEncoder(format v1.FileFormat, cols v1.Columns) (*Encoder, error) {
	e := &Encoder{format: format, cols: cols}
	switch format {
	case v1.FormatJSON:
	case v1.FormatParquet:
		schema, err := ParquetSchema(cols)
		if err != nil {
			return nil, err
		}
		// A group orders its fields by name: leaf[i] is the file column of cols[i].
		e.leaf = make([]int, len(cols))
		for i, c := range cols {
			l, _ := schema.Lookup(c.Name)
			e.leaf[i] = l.ColumnIndex
		}
		e.pw = parquet.NewGenericWriter[any](&e.buf, schema, parquet.Compression(&parquet.Snappy))
		e.prow = make([]parquet.Row, 0, parquetChunk)
		e.vals = make([]parquet.Value, parquetChunk*len(cols))
	default:
		return nil, fmt.Errorf("encode rows: format %q is not json or parquet", format)
	}
	return e, nil
}

// Write encodes rows; they are the encoder's only until it returns.
func (e *Encoder) Write(rows []engine.Row) error {
	if e.pw == nil {
		var err error
		if e.json, err = AppendJSON(e.json, e.cols, rows); err != nil {
			return err
		}
		return nil
	}
	return e.writeParquet(rows)
}

// Close ends the file and returns its bytes.
func (e *Encoder) Close() ([]byte, error) {
	if e.pw == nil {
		return e.json, nil
	}
	if err := e.flushParquet(); err != nil {
		return nil, err
	}
	if err := e.pw.Close(); err != nil {
		return nil, fmt.Errorf("encode parquet: %w", err)
	}
	return e.buf.Bytes(), nil
}

// AppendJSON appends rows with the columns cols to b as Encode writes JSON,
// one object per line, and returns the extended buffer: a caller that
// encodes batch after batch can reuse one. On error it returns nil.
func AppendJSON(b []byte, cols v1.Columns, rows []engine.Row) ([]byte, error) {
	// keys[i] is what precedes column i's value: `{"name":` or `,"name":`.
	keys := make([][]byte, len(cols))
	for i, c := range cols {
		sep := byte(',')
		if i == 0 {
			sep = '{'
		}
		keys[i] = append(appendString([]byte{sep}, c.Name), ':')
	}
	// The text of the last timestamp written: the rows of a batch often
	// share one (records of the same millisecond), and formatting one costs
	// more than the rest of a row.
	var (
		lastTime time.Time
		lastText []byte
	)
	if b == nil {
		b = make([]byte, 0, 64*len(cols))
	}
	start := len(b)
	for n, r := range rows {
		if len(r) == 0 {
			b = append(b, '{')
		}
		for i, v := range r {
			b = append(b, keys[i]...)
			switch v := v.(type) {
			case nil:
				b = append(b, "null"...)
			case string:
				b = appendString(b, v)
			case int64:
				b = strconv.AppendInt(b, v, 10)
			case float64:
				b = appendDouble(b, v)
			case bool:
				b = strconv.AppendBool(b, v)
			case time.Time:
				if lastText == nil || !v.Equal(lastTime) {
					lastTime = v
					lastText = append(lastText[:0], '"')
					lastText = v.UTC().AppendFormat(lastText, time.RFC3339Nano)
					lastText = append(lastText, '"')
				}
				b = append(b, lastText...)
			default:
				return nil, fmt.Errorf("encode column %s: unexpected %T", cols[i].Name, v)
			}
		}
		b = append(b, '}', '\n')
		if n == 0 && len(rows) > 1 {
			// Make room for the other rows, sized by the first.
			b = slices.Grow(b, (len(rows)-1)*(len(b)-start)*9/8)
		}
	}
	return b, nil
}

// appendDouble appends v as strconv.AppendFloat(b, v, 'g', -1, 64) does,
// and null for infinities and NaN. Values with at most two decimals below
// a million (amounts of money, mostly) take a shortcut: their shortest
// form is those digits.
func appendDouble(b []byte, v float64) []byte {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return append(b, "null"...)
	}
	// c is v in hundredths when that is exact: then the decimal c/100
	// reads back as v, and no other decimal with as few digits does (two
	// such decimals below a million differ by 0.01 or more, far more than
	// float64s there are apart).
	c := v * 100
	if v == 0 || math.Abs(v) >= 1e6 || c != math.Trunc(c) || c/100 != v {
		return strconv.AppendFloat(b, v, 'g', -1, 64)
	}
	n := int64(c)
	if n < 0 {
		b = append(b, '-')
		n = -n
	}
	b = strconv.AppendInt(b, n/100, 10)
	switch frac := n % 100; {
	case frac == 0:
	case frac%10 == 0:
		b = append(b, '.', byte('0'+frac/10))
	default:
		b = append(b, '.', byte('0'+frac/10), byte('0'+frac%10))
	}
	return b
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	// Copy the longest prefix that needs no escaping in one go: most
	// strings are all of it.
	i := 0
	for i < len(s) && s[i] >= 0x20 && s[i] < utf8.RuneSelf && s[i] != '"' && s[i] != '\\' {
		i++
	}
	b = append(b, s[:i]...)
	for i < len(s) {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
			i++
		case c < 0x20:
			switch c {
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
		case c < utf8.RuneSelf:
			b = append(b, c)
			i++
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, `\ufffd`...)
			} else {
				b = append(b, s[i:i+size]...)
			}
			i += size
		}
	}
	return append(b, '"')
}

// ParquetSchema returns the Parquet schema the files sink writes for cols:
// every column optional.
func ParquetSchema(cols v1.Columns) (*parquet.Schema, error) {
	group := parquet.Group{}
	for _, c := range cols {
		var n parquet.Node
		switch c.Type {
		case v1.TypeString:
			n = parquet.String()
		case v1.TypeLong:
			n = parquet.Int(64)
		case v1.TypeDouble:
			n = parquet.Leaf(parquet.DoubleType)
		case v1.TypeBoolean:
			n = parquet.Leaf(parquet.BooleanType)
		case v1.TypeTimestamp:
			n = parquet.Timestamp(parquet.Microsecond)
		default:
			return nil, fmt.Errorf("column %s: type %q has no Parquet type", c.Name, c.Type)
		}
		group[c.Name] = parquet.Optional(n)
	}
	return parquet.NewSchema("lockstep", group), nil
}

// parquetChunk is how many rows the encoder hands the Parquet writer at a time.
const parquetChunk = 1024

func (e *Encoder) writeParquet(rows []engine.Row) error {
	width := len(e.cols)
	for _, r := range rows {
		k := len(e.prow)
		pr := parquet.Row(e.vals[k*width : (k+1)*width : (k+1)*width])
		for i, v := range r {
			pv, err := ParquetValue(v)
			if err != nil {
				return fmt.Errorf("encode column %s: %w", e.cols[i].Name, err)
			}
			def := 1
			if v == nil {
				def = 0
			}
			pr[e.leaf[i]] = pv.Level(0, def, e.leaf[i])
		}
		e.prow = append(e.prow, pr)
		if len(e.prow) == parquetChunk {
			if err := e.flushParquet(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (e *Encoder) flushParquet() error {
	if _, err := e.pw.WriteRows(e.prow); err != nil {
		return fmt.Errorf("encode parquet: %w", err)
	}
	e.prow = e.prow[:0]
	return nil
}

// ParquetValue is the Parquet value of an engine value of a column type: a
// string, int64, float64, bool, time.Time (microseconds) or nil.
func ParquetValue(v any) (parquet.Value, error) {
	switch v := v.(type) {
	case nil:
		return parquet.NullValue(), nil
	case string:
		return parquet.ByteArrayValue([]byte(v)), nil
	case int64:
		return parquet.Int64Value(v), nil
	case float64:
		return parquet.DoubleValue(v), nil
	case bool:
		return parquet.BooleanValue(v), nil
	case time.Time:
		return parquet.Int64Value(v.UnixMicro()), nil
	}
	return parquet.Value{}, fmt.Errorf("unexpected %T", v)
}
