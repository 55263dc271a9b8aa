package codec

import (
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/internal/box"
)

// DecodeJSON parses text, one JSON object, into row[:len(cols)] with the
// rules Decode applies to a line of JSON: a missing key or null is nil; a
// value of another type than its column's is an error naming the column;
// timestamps are RFC 3339 strings or epoch milliseconds, as UTC instants;
// the last of duplicate keys wins; other keys are skipped. row must hold at
// least len(cols) values; the ones after them are left alone. On error,
// row[:len(cols)] is all nil. It allocates only the values it stores, so a
// caller that reuses row pays nothing per record beyond them, and nothing
// for those but their strings' bytes when it passes vals (nil boxes each
// value with an allocation of its own).
//
// It reads the text once, converting the values of known keys straight to
// their column's type; it accepts exactly what encoding/json accepts at a
// fraction of its cost.
func (d *Decoder) DecodeJSON(text []byte, row engine.Row, vals *box.Slab) error {
	row = row[:len(d.cols)]
	for i, v := range row {
		if v != nil { // a fresh row costs no writes
			row[i] = nil
		}
	}
	if err := d.jsonRecord(text, row, vals); err != nil {
		clear(row)
		return err
	}
	return nil
}

// jsonRecord parses one JSON object into row, whose values are nil, boxing
// them from vals.
func (d *Decoder) jsonRecord(text []byte, row engine.Row, vals *box.Slab) error {
	s := jsonScanner{b: text, vals: vals}
	s.space()
	if !s.eat('{') {
		return syntaxf("not an object: starts with %s", s.what())
	}
	// bad holds the value error of each column, made on the first one; a
	// later duplicate key replaces it, as it replaces the value
	// (encoding/json keeps the last).
	var bad []error
	// next is the column the next key most likely names: records tend to
	// list their keys in the schema's order, and comparing one name is
	// cheaper than hashing the key.
	next := 0
	s.space()
	if !s.eat('}') {
		for {
			s.space()
			if s.peek() != '"' {
				return syntaxf("want a key at offset %d, found %s", s.i, s.what())
			}
			key, err := s.str()
			if err != nil {
				return err
			}
			s.space()
			if !s.eat(':') {
				return syntaxf("want ':' after key %q", key)
			}
			s.space()
			col, known := next, next < len(d.cols) && d.cols[next].Name == string(key)
			if !known {
				col, known = d.index[string(key)]
			}
			if known {
				next = col + 1
				v, err := s.value(d.cols[col].Type)
				if _, ok := err.(*syntaxError); ok { // value returns them unwrapped
					return err
				}
				row[col] = v
				if err != nil && bad == nil {
					bad = make([]error, len(d.cols))
				}
				if bad != nil {
					bad[col] = err
				}
			} else if err := s.skip(0); err != nil {
				return err
			}
			s.space()
			if s.eat(',') {
				continue
			}
			if s.eat('}') {
				break
			}
			return syntaxf("want ',' or '}' at offset %d, found %s", s.i, s.what())
		}
	}
	s.space()
	if s.i < len(s.b) {
		return syntaxf("text after the object")
	}
	for col, err := range bad {
		if err != nil {
			return fmt.Errorf("column %s: %w", d.cols[col].Name, err)
		}
	}
	return nil
}

// syntaxError is text that is not JSON; other errors are values of the
// wrong type for their column.
type syntaxError struct{ msg string }

func (e *syntaxError) Error() string { return "not valid JSON: " + e.msg }

func syntaxf(format string, args ...any) error {
	return &syntaxError{msg: fmt.Sprintf(format, args...)}
}

// maxDepth bounds the nesting of skipped values.
const maxDepth = 1000

// jsonScanner reads JSON from b at i; the values it returns are boxed from
// vals.
type jsonScanner struct {
	b    []byte
	i    int
	vals *box.Slab
}

func (s *jsonScanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *jsonScanner) eat(c byte) bool {
	if s.peek() == c && s.i < len(s.b) {
		s.i++
		return true
	}
	return false
}

func (s *jsonScanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// what describes the value starting at i, for messages.
func (s *jsonScanner) what() string {
	switch c := s.peek(); {
	case s.i >= len(s.b):
		return "the end"
	case c == '"':
		return "a string"
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	case c == '-' || c >= '0' && c <= '9':
		return "a number"
	default:
		return strconv.QuoteRune(rune(c))
	}
}

// value reads one value as a column of type t; null is nil. Its errors are
// a *syntaxError, unwrapped, or a value of the wrong type.
func (s *jsonScanner) value(t v1.ColumnType) (any, error) {
	if s.literal("null") {
		return nil, nil
	}
	switch t {
	case v1.TypeString:
		if s.peek() == '"' {
			b, err := s.str()
			if err != nil {
				return nil, err
			}
			return s.vals.Bytes(b), nil
		}
	case v1.TypeLong:
		if n, ok := s.number(); ok {
			i, err := parseInt(n)
			if err != nil {
				return nil, fmt.Errorf("%s is not a long", n)
			}
			return s.vals.Int64(i), nil
		}
	case v1.TypeDouble:
		if n, ok := s.number(); ok {
			f, err := strconv.ParseFloat(string(n), 64)
			if err != nil {
				return nil, fmt.Errorf("%s is not a double", n)
			}
			return s.vals.Float64(f), nil
		}
	case v1.TypeBoolean:
		if s.literal("true") {
			return true, nil
		}
		if s.literal("false") {
			return false, nil
		}
	case v1.TypeTimestamp:
		if s.peek() == '"' {
			b, err := s.str()
			if err != nil {
				return nil, err
			}
			t, err := parseTimestamp(string(b))
			if err != nil {
				return nil, err
			}
			return s.vals.Time(t), nil
		}
		if n, ok := s.number(); ok {
			ms, err := parseInt(n)
			if err != nil {
				return nil, fmt.Errorf("%s is not a timestamp in epoch milliseconds", n)
			}
			return s.vals.Time(time.UnixMilli(ms).UTC()), nil
		}
	}
	// Nothing was read: the value is of another type.
	what := s.what()
	if err := s.skip(0); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("want a %s, got %s", t, what)
}

// parseInt parses a JSON integer (as number reads it) like
// strconv.ParseInt(string(n), 10, 64), faster for the common case of at
// most 19 digits.
func parseInt(n []byte) (int64, error) {
	digits := n
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 19 {
		return strconv.ParseInt(string(n), 10, 64)
	}
	var u uint64 // 19 digits fit
	for _, c := range digits {
		if c < '0' || c > '9' {
			return strconv.ParseInt(string(n), 10, 64) // a fraction or exponent
		}
		u = u*10 + uint64(c-'0')
	}
	switch {
	case len(digits) == len(n) && u <= math.MaxInt64:
		return int64(u), nil
	case len(digits) < len(n) && u <= -math.MinInt64:
		return -int64(u), nil
	}
	return strconv.ParseInt(string(n), 10, 64) // out of range
}

func (s *jsonScanner) literal(lit string) bool {
	if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
		s.i += len(lit)
		return true
	}
	return false
}

// number reads a number as JSON writes it: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *jsonScanner) number() ([]byte, bool) {
	start := s.i
	digits := func() int {
		b, i := s.b, s.i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		n := i - s.i
		s.i = i
		return n
	}
	s.eat('-')
	switch {
	case s.eat('0'):
	case digits() == 0:
		s.i = start
		return nil, false
	}
	if s.eat('.') && digits() == 0 {
		s.i = start
		return nil, false
	}
	if s.eat('e') || s.eat('E') {
		if !s.eat('+') {
			s.eat('-')
		}
		if digits() == 0 {
			s.i = start
			return nil, false
		}
	}
	return s.b[start:s.i], true
}

// str reads a string, unescaped. Invalid UTF-8 becomes U+FFFD, as
// encoding/json does.
func (s *jsonScanner) str() ([]byte, error) {
	b := s.b
	start := s.i + 1 // after the opening quote
	var high byte    // the bits of every byte: ASCII text is valid UTF-8
	for i := start; i < len(b); i++ {
		c := b[i]
		high |= c
		switch {
		case c == '"':
			raw := b[start:i]
			s.i = i + 1
			if high >= utf8.RuneSelf && !utf8.Valid(raw) {
				return []byte(string([]rune(string(raw)))), nil
			}
			return raw, nil
		case c == '\\':
			s.i = i
			return s.escaped(start)
		case c < 0x20:
			s.i = i
			return nil, syntaxf("control character in a string at offset %d", s.i)
		}
	}
	s.i = len(b)
	return nil, syntaxf("unterminated string")
}

// escaped reads the rest of a string that has escapes, from start.
func (s *jsonScanner) escaped(start int) ([]byte, error) {
	out := append([]byte(nil), s.b[start:s.i]...)
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			if !utf8.Valid(out) {
				return []byte(string([]rune(string(out)))), nil
			}
			return out, nil
		case c < 0x20:
			return nil, syntaxf("control character in a string at offset %d", s.i)
		case c != '\\':
			out = append(out, c)
			s.i++
			continue
		}
		if s.i+1 >= len(s.b) {
			break
		}
		e := s.b[s.i+1]
		s.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := s.hex4()
			if !ok {
				return nil, syntaxf("bad \\u escape")
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if s.i+1 < len(s.b) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
					save := s.i
					s.i += 2
					if r2, ok = s.hex4(); !ok {
						return nil, syntaxf("bad \\u escape")
					}
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						r = dec
					} else {
						s.i = save // a lone surrogate, then another escape
						r = utf8.RuneError
					}
				} else {
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			return nil, syntaxf("bad escape \\%c", e)
		}
	}
	return nil, syntaxf("unterminated string")
}

func (s *jsonScanner) hex4() (rune, bool) {
	if len(s.b)-s.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s.b[s.i : s.i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	s.i += 4
	return r, true
}

// skip reads one value of any kind, checking that it is valid JSON.
func (s *jsonScanner) skip(depth int) error {
	if depth > maxDepth {
		return syntaxf("nested too deeply")
	}
	switch c := s.peek(); {
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
		if s.eat(end) {
			return nil
		}
		for {
			s.space()
			if c == '{' {
				if s.peek() != '"' {
					return syntaxf("want a key at offset %d", s.i)
				}
				if _, err := s.str(); err != nil {
					return err
				}
				s.space()
				if !s.eat(':') {
					return syntaxf("want ':' at offset %d", s.i)
				}
				s.space()
			}
			if err := s.skip(depth + 1); err != nil {
				return err
			}
			s.space()
			if s.eat(',') {
				continue
			}
			if s.eat(end) {
				return nil
			}
			return syntaxf("want ',' or %q at offset %d", end, s.i)
		}
	case s.literal("true"), s.literal("false"), s.literal("null"):
		return nil
	default:
		if _, ok := s.number(); ok {
			return nil
		}
		return syntaxf("unexpected %s at offset %d", s.what(), s.i)
	}
}
