package kafka

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine/codec"
)

// decoder fills the record columns of a row from a record's value, in the
// source's format. Its rules are the files source's: a missing key, a JSON
// null and an empty CSV field are null; a value of the wrong type makes the
// record malformed; timestamps are RFC 3339 strings or epoch milliseconds.
type decoder struct {
	format v1.KafkaFormat
	cols   v1.Columns
	index  map[string]int
	csvDec *codec.Decoder
}

func newDecoder(format v1.KafkaFormat, cols v1.Columns) *decoder {
	index := make(map[string]int, len(cols))
	for i, c := range cols {
		index[c.Name] = i
	}
	return &decoder{format: format, cols: cols, index: index, csvDec: codec.NewDecoder(cols)}
}

// decode fills row[:len(d.cols)] from value.
func (d *decoder) decode(value []byte, row []any) error {
	switch d.format {
	case v1.KafkaRaw:
		if value != nil {
			row[0] = string(value)
		}
		return nil
	case v1.KafkaCSV:
		return d.csv(value, row)
	default:
		return d.json(value, row)
	}
}

// json parses one JSON object. It is a small scanner rather than
// encoding/json because decoding is most of a Kafka source's CPU.
func (d *decoder) json(data []byte, row []any) error {
	s := scanner{data: data}
	s.space()
	if !s.consume('{') {
		return errors.New("not a JSON object")
	}
	s.space()
	if !s.consume('}') {
		for {
			s.space()
			key, err := s.key()
			if err != nil {
				return fmt.Errorf("object key: %w", err)
			}
			s.space()
			if !s.consume(':') {
				return fmt.Errorf("want ':' after key %q at byte %d", key, s.i)
			}
			s.space()
			i, known := d.index[string(key)] // no allocation for the lookup
			if !known {
				if err := s.skip(0); err != nil {
					return err
				}
			} else {
				v, err := s.value(d.cols[i].Type)
				if err != nil {
					return fmt.Errorf("column %s: %w", d.cols[i].Name, err)
				}
				row[i] = v
			}
			s.space()
			if s.consume(',') {
				continue
			}
			if s.consume('}') {
				break
			}
			return fmt.Errorf("want ',' or '}' at byte %d", s.i)
		}
	}
	s.space()
	if s.i != len(s.data) {
		return errors.New("text after the JSON object")
	}
	return nil
}

type scanner struct {
	data []byte
	i    int
}

func (s *scanner) space() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) consume(c byte) bool {
	if s.i < len(s.data) && s.data[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *scanner) literal(lit string) bool {
	if bytes.HasPrefix(s.data[s.i:], []byte(lit)) {
		s.i += len(lit)
		return true
	}
	return false
}

// value reads a value for a column of type t; null is nil.
func (s *scanner) value(t v1.ColumnType) (any, error) {
	if s.i >= len(s.data) {
		return nil, errors.New("unexpected end of JSON")
	}
	switch c := s.data[s.i]; {
	case c == 'n':
		if s.literal("null") {
			return nil, nil
		}
	case c == 't' || c == 'f':
		if t != v1.TypeBoolean {
			break
		}
		if s.literal("true") {
			return true, nil
		}
		if s.literal("false") {
			return false, nil
		}
	case c == '"':
		if t != v1.TypeString && t != v1.TypeTimestamp {
			break
		}
		str, err := s.str()
		if err != nil {
			return nil, err
		}
		if t == v1.TypeTimestamp {
			ts, err := time.Parse(time.RFC3339Nano, str)
			if err != nil {
				return nil, fmt.Errorf("%q is not an RFC 3339 timestamp", str)
			}
			return ts.UTC(), nil
		}
		return str, nil
	case c == '-' || (c >= '0' && c <= '9'):
		num := s.number()
		switch t {
		case v1.TypeLong:
			n, err := strconv.ParseInt(num, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s is not a long", strings.Clone(num))
			}
			return n, nil
		case v1.TypeDouble:
			f, err := strconv.ParseFloat(num, 64)
			if err != nil {
				return nil, fmt.Errorf("%s is not a double", strings.Clone(num))
			}
			return f, nil
		case v1.TypeTimestamp:
			ms, err := strconv.ParseInt(num, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s is not a timestamp in epoch milliseconds", strings.Clone(num))
			}
			return time.UnixMilli(ms).UTC(), nil
		}
		return nil, fmt.Errorf("want a %s, got a number", t)
	}
	start := s.i
	if err := s.skip(0); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("want a %s, got %s", t, jsonKind(s.data[start]))
}

func jsonKind(c byte) string {
	switch c {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	}
	return "a number"
}

// number reads a JSON number's text. The string shares data's memory (no
// allocation); it must not outlive the record and is only parsed.
func (s *scanner) number() string {
	start := s.i
	for s.i < len(s.data) {
		c := s.data[s.i]
		if (c < '0' || c > '9') && c != '-' && c != '+' && c != '.' && c != 'e' && c != 'E' {
			break
		}
		s.i++
	}
	if s.i == start {
		return ""
	}
	return unsafe.String(&s.data[start], s.i-start)
}

// key reads an object key: its bytes in data when it has no escapes, else a
// copy.
func (s *scanner) key() ([]byte, error) {
	if !s.consume('"') {
		return nil, fmt.Errorf("want a string at byte %d", s.i)
	}
	start := s.i
	for s.i < len(s.data) {
		c := s.data[s.i]
		if c == '"' {
			s.i++
			return s.data[start : s.i-1], nil
		}
		if c == '\\' || c < 0x20 {
			str, err := s.strSlow(start)
			return []byte(str), err
		}
		s.i++
	}
	return nil, errors.New("unterminated string")
}

// str reads a JSON string.
func (s *scanner) str() (string, error) {
	if !s.consume('"') {
		return "", fmt.Errorf("want a string at byte %d", s.i)
	}
	start := s.i
	for s.i < len(s.data) {
		c := s.data[s.i]
		if c == '"' {
			out := string(s.data[start:s.i])
			s.i++
			return out, nil
		}
		if c == '\\' || c < 0x20 {
			return s.strSlow(start)
		}
		s.i++
	}
	return "", errors.New("unterminated string")
}

// strSlow reads the rest of a string with escapes, from start (just after
// the opening quote).
func (s *scanner) strSlow(start int) (string, error) {
	buf := append([]byte(nil), s.data[start:s.i]...)
	for s.i < len(s.data) {
		c := s.data[s.i]
		switch {
		case c == '"':
			s.i++
			return string(buf), nil
		case c < 0x20:
			return "", fmt.Errorf("control character in string at byte %d", s.i)
		case c != '\\':
			buf = append(buf, c)
			s.i++
			continue
		}
		if s.i+1 >= len(s.data) {
			break
		}
		e := s.data[s.i+1]
		s.i += 2
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := s.hex4()
			if !ok {
				return "", fmt.Errorf("bad \\u escape at byte %d", s.i)
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if s.i+1 < len(s.data) && s.data[s.i] == '\\' && s.data[s.i+1] == 'u' {
					s.i += 2
					if r2, ok = s.hex4(); !ok {
						return "", fmt.Errorf("bad \\u escape at byte %d", s.i)
					}
				}
				r = utf16.DecodeRune(r, r2)
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", fmt.Errorf("bad escape \\%c at byte %d", e, s.i-1)
		}
	}
	return "", errors.New("unterminated string")
}

func (s *scanner) hex4() (rune, bool) {
	if s.i+4 > len(s.data) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(s.data[s.i:s.i+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	s.i += 4
	return rune(n), true
}

// skip passes over one value of any kind.
func (s *scanner) skip(depth int) error {
	if depth > 1000 {
		return errors.New("JSON nested too deeply")
	}
	if s.i >= len(s.data) {
		return errors.New("unexpected end of JSON")
	}
	switch c := s.data[s.i]; {
	case c == '"':
		_, err := s.str()
		return err
	case c == '{' || c == '[':
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		s.i++
		s.space()
		if s.consume(end) {
			return nil
		}
		for {
			s.space()
			if c == '{' {
				if _, err := s.str(); err != nil {
					return err
				}
				s.space()
				if !s.consume(':') {
					return fmt.Errorf("want ':' at byte %d", s.i)
				}
				s.space()
			}
			if err := s.skip(depth + 1); err != nil {
				return err
			}
			s.space()
			if s.consume(',') {
				continue
			}
			if s.consume(end) {
				return nil
			}
			return fmt.Errorf("want ',' or '%c' at byte %d", end, s.i)
		}
	case c == 't':
		if s.literal("true") {
			return nil
		}
	case c == 'f':
		if s.literal("false") {
			return nil
		}
	case c == 'n':
		if s.literal("null") {
			return nil
		}
	case c == '-' || (c >= '0' && c <= '9'):
		if _, err := strconv.ParseFloat(s.number(), 64); err == nil {
			return nil
		}
		return fmt.Errorf("bad number before byte %d", s.i)
	}
	return fmt.Errorf("invalid JSON at byte %d", s.i)
}

// csv parses one CSV record with the files source's rules (engine/codec):
// columns in schema order, no header, an empty field is null.
func (d *decoder) csv(value []byte, row []any) error {
	var bad error
	rows := d.csvDec.Decode(v1.FormatCSV, value, func(m codec.Malformed) { bad = errors.New(m.Reason) })
	switch {
	case bad != nil:
		return bad
	case len(rows) != 1:
		return fmt.Errorf("want one CSV record, got %d", len(rows))
	}
	copy(row, rows[0])
	return nil
}
