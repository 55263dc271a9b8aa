// Package box puts row values into interfaces (any) without an allocation
// per value.
//
// Converting a string, an int64, a float64 or a time.Time to any makes the
// runtime allocate a copy of it, one allocation per value: for rows of a few
// such columns, most of what decoding a record allocates. A Slab instead
// copies each value into an array of values of its type and makes the
// interface point at the copy: one allocation per slabSize values. As makes an
// interface of another type, of the same memory layout, share a value's
// storage (CEL's types.Double from a row's float64), with no allocation.
//
// Both rely on what the runtime guarantees of interfaces holding a
// non-pointer value: the interface is a type word and a pointer to storage
// that is never written again. A Slab hands out each element once and never
// writes it again, so its interfaces are indistinguishable from the
// runtime's own, to the garbage collector (an interior pointer keeps the
// whole array alive), to reflection and to ==. Bytes does the same for the
// bytes of strings: it copies them into an array of textSize bytes that it
// hands out once, piece by piece, and never writes again, which is what a
// string needs of its bytes. The price is memory: a value that outlives its
// row keeps its slab's array (at most slabSize values, or textSize bytes, a
// few KB) alive; rows live for a batch, so do the arrays.
package box

import (
	"fmt"
	"reflect"
	"time"
	"unsafe"
)

// slabSize is how many values of a type one allocation holds.
const slabSize = 512

// textSize is how many bytes of strings one allocation holds; a string of
// more than maxSharedText bytes gets an allocation of its own.
const (
	textSize      = 8192
	maxSharedText = 256
)

// eface is the runtime's layout of an empty interface.
type eface struct {
	typ  unsafe.Pointer
	data unsafe.Pointer
}

func typeWord(v any) unsafe.Pointer { return (*eface)(unsafe.Pointer(&v)).typ }

var (
	stringType  = typeWord("")
	int64Type   = typeWord(int64(0))
	float64Type = typeWord(float64(0))
	timeType    = typeWord(time.Time{})
)

func iface(typ, data unsafe.Pointer) (v any) {
	e := (*eface)(unsafe.Pointer(&v))
	e.typ, e.data = typ, data
	return v
}

// Slab boxes values from arrays it allocates slabSize values at a time. The
// zero Slab is ready to use; a nil *Slab boxes as the runtime does. A Slab is
// used by one goroutine at a time.
type Slab struct {
	strings []string
	int64s  []int64
	floats  []float64
	times   []time.Time
	text    []byte
	cells   []any
}

// rowsPerArray is how many rows' cells one allocation of Row holds.
const rowsPerArray = 512

// Row returns a row of width nil cells (its capacity width, so that an append
// copies it), cut from an array of rowsPerArray rows: one allocation for many
// rows instead of one a row. It needs a non-nil Slab.
func (s *Slab) Row(width int) []any {
	if len(s.cells) < width {
		s.cells = make([]any, rowsPerArray*max(width, 1))
	}
	row := s.cells[:width:width]
	s.cells = s.cells[width:]
	return row
}

// String returns v as an interface.
func (s *Slab) String(v string) any {
	if s == nil || v == "" {
		return v // the runtime boxes "" without allocating
	}
	return put(&s.strings, stringType, v)
}

// Bytes returns a string of b's bytes as an interface: string(b), with the
// bytes copied into the slab's text rather than an allocation of their own.
func (s *Slab) Bytes(b []byte) any {
	if s == nil || len(b) == 0 {
		return string(b)
	}
	if len(b) > maxSharedText {
		return put(&s.strings, stringType, string(b))
	}
	if len(s.text) < len(b) {
		s.text = make([]byte, textSize)
	}
	n := copy(s.text, b)
	v := unsafe.String(&s.text[0], n)
	s.text = s.text[n:]
	return put(&s.strings, stringType, v)
}

// Int64 returns v as an interface.
func (s *Slab) Int64(v int64) any {
	if s == nil || uint64(v) < 256 {
		return v // the runtime boxes small values without allocating
	}
	return put(&s.int64s, int64Type, v)
}

// Float64 returns v as an interface.
func (s *Slab) Float64(v float64) any {
	if s == nil {
		return v
	}
	return put(&s.floats, float64Type, v)
}

// Time returns v as an interface.
func (s *Slab) Time(v time.Time) any {
	if s == nil {
		return v
	}
	return put(&s.times, timeType, v)
}

// put copies v into the next free element of *free, a new array when it
// is used up, and returns an interface of type typ (v's) pointing at it.
func put[T any](free *[]T, typ unsafe.Pointer, v T) any {
	if len(*free) == 0 {
		*free = make([]T, slabSize)
	}
	p := &(*free)[0]
	*p = v
	*free = (*free)[1:]
	return iface(typ, unsafe.Pointer(p))
}

// Type is the dynamic type of interface values, for As.
type Type struct{ typ unsafe.Pointer }

// TypeOf returns the dynamic type of v. It panics when v is nil or of a
// pointer-shaped type (a pointer, map, channel, function, unsafe.Pointer, or
// a struct or array holding just one of them), whose interfaces hold the
// value itself rather than a pointer to it.
func TypeOf(v any) Type {
	t := reflect.TypeOf(v)
	if t == nil || pointerShaped(t) {
		panic(fmt.Sprintf("box.TypeOf(%T): not a type whose interfaces point at their value", v))
	}
	return Type{typeWord(v)}
}

func pointerShaped(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return true
	case reflect.Struct:
		return t.NumField() == 1 && pointerShaped(t.Field(0).Type)
	case reflect.Array:
		return t.Len() == 1 && pointerShaped(t.Elem())
	}
	return false
}

// As returns the value v holds as a value of type t, sharing its storage:
// no copy, no allocation. v's dynamic type must have t's memory layout: t's
// underlying type is v's (float64 and a type Double float64), or a struct
// of just a field of v's type; v must not be nil. Neither value may be
// changed through the other; none can be, as interfaces are read-only.
func As(v any, t Type) any {
	return iface(t.typ, (*eface)(unsafe.Pointer(&v)).data)
}
