package stateful

import (
	"cmp"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"time"
	"unsafe"

	"github.com/lockstep-dev/lockstep/engine/internal/box"
)

// Row is one row: a value per column, in column order (see the package doc).
type Row = []any

// Tags of the value encoding used in state keys and values: a tag byte,
// then the payload. The encoding is deterministic, so equal values have
// equal bytes: -0.0 is written as 0.0 and every NaN as one NaN.
const (
	tagNull   = 0
	tagString = 1 // uvarint length, bytes
	tagLong   = 2 // zigzag varint
	tagDouble = 3 // 8 bytes, IEEE 754 big-endian
	tagFalse  = 4
	tagTrue   = 5
	tagTime   = 6 // varint seconds, uvarint nanoseconds (UTC)
	tagOther  = 7 // uvarint length, the value's text; not produced by valid rows
)

var errCorrupt = errors.New("corrupt state value")

// appendValue appends the encoding of v.
func appendValue(b []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, tagNull)
	case string:
		b = append(b, tagString)
		b = binary.AppendUvarint(b, uint64(len(v)))
		return append(b, v...)
	case int64:
		return binary.AppendVarint(append(b, tagLong), v)
	case float64:
		return binary.BigEndian.AppendUint64(append(b, tagDouble), normFloat(v))
	case bool:
		if v {
			return append(b, tagTrue)
		}
		return append(b, tagFalse)
	case time.Time:
		b = binary.AppendVarint(append(b, tagTime), v.Unix())
		return binary.AppendUvarint(b, uint64(v.Nanosecond()))
	case int:
		return binary.AppendVarint(append(b, tagLong), int64(v))
	}
	return b // unreachable for rows of the documented types
}

func normFloat(f float64) uint64 {
	switch {
	case f == 0:
		return 0
	case math.IsNaN(f):
		return 0x7ff8000000000001
	}
	return math.Float64bits(f)
}

// readValue decodes one value and returns the rest of b.
func readValue(b []byte) (any, []byte, error) { return readValueIn(b, nil) }

// readValueIn is readValue boxing the value in slab (nil: as the runtime
// does).
func readValueIn(b []byte, slab *box.Slab) (any, []byte, error) {
	if len(b) == 0 {
		return nil, nil, errCorrupt
	}
	tag, b := b[0], b[1:]
	switch tag {
	case tagNull:
		return nil, b, nil
	case tagString:
		n, w := binary.Uvarint(b)
		if w <= 0 || uint64(len(b)-w) < n {
			return nil, nil, errCorrupt
		}
		return slab.Bytes(b[w : w+int(n)]), b[w+int(n):], nil
	case tagLong:
		v, w := binary.Varint(b)
		if w <= 0 {
			return nil, nil, errCorrupt
		}
		return slab.Int64(v), b[w:], nil
	case tagDouble:
		if len(b) < 8 {
			return nil, nil, errCorrupt
		}
		return slab.Float64(math.Float64frombits(binary.BigEndian.Uint64(b))), b[8:], nil
	case tagFalse:
		return false, b, nil
	case tagTrue:
		return true, b, nil
	case tagTime:
		s, w := binary.Varint(b)
		if w <= 0 {
			return nil, nil, errCorrupt
		}
		ns, w2 := binary.Uvarint(b[w:])
		if w2 <= 0 {
			return nil, nil, errCorrupt
		}
		return slab.Time(time.Unix(s, int64(ns)).UTC()), b[w+w2:], nil
	}
	return nil, nil, errCorrupt
}

// keyBytes is a read-only view of a state key's bytes, for readValue, which
// does not keep or change them.
func keyBytes(key string) []byte { return unsafe.Slice(unsafe.StringData(key), len(key)) }

// compareValues orders two non-null values of one column type. NaN sorts
// above every other double, as in Spark.
func compareValues(a, b any) int {
	switch a := a.(type) {
	case string:
		return strings.Compare(a, b.(string))
	case int64:
		return cmp.Compare(a, b.(int64))
	case float64:
		return cmp.Compare(a, b.(float64)) // NaN first; less puts it last
	case bool:
		switch bb := b.(bool); {
		case a == bb:
			return 0
		case !a:
			return -1
		}
		return 1
	case time.Time:
		return a.Compare(b.(time.Time))
	}
	return 0
}

// less reports whether a sorts before b (compareValues, with NaN largest).
func less(a, b any) bool {
	if fa, ok := a.(float64); ok {
		fb := b.(float64)
		switch {
		case math.IsNaN(fa):
			return false
		case math.IsNaN(fb):
			return true
		}
		return fa < fb
	}
	return compareValues(a, b) < 0
}

// toFloat converts a numeric value to float64.
func toFloat(v any) float64 {
	switch v := v.(type) {
	case float64:
		return v
	case int64:
		return float64(v)
	case int:
		return float64(v)
	}
	return 0
}

// toInt converts a numeric value to int64.
func toInt(v any) int64 {
	switch v := v.(type) {
	case int64:
		return v
	case float64:
		return int64(v)
	case int:
		return int64(v)
	}
	return 0
}

// nanos returns a timestamp as nanoseconds since the epoch, and false for
// null or a value of another type.
func nanos(v any) (int64, bool) {
	t, ok := v.(time.Time)
	if !ok {
		return 0, false
	}
	return t.UnixNano(), true
}
