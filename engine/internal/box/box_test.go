package box

import (
	"reflect"
	"runtime"
	"testing"
	"time"
)

type double float64

type stamp struct{ time.Time }

func TestSlabValuesAreTheRuntimes(t *testing.T) {
	var s Slab
	now := time.Date(2026, 12, 1, 14, 0, 0, 123, time.UTC)
	var got []any
	for i := range 3 * slabSize {
		got = append(got, s.String("id-"+string(rune('a'+i%26))), s.Int64(int64(i)*1000), s.Float64(float64(i)/4), s.Time(now.Add(time.Duration(i))))
	}
	runtime.GC() // the values survive a collection: the arrays are reachable
	for i := range 3 * slabSize {
		want := []any{"id-" + string(rune('a'+i%26)), int64(i) * 1000, float64(i) / 4, now.Add(time.Duration(i))}
		for j, w := range want {
			g := got[4*i+j]
			if g != w || !reflect.DeepEqual(g, w) || reflect.TypeOf(g) != reflect.TypeOf(w) {
				t.Fatalf("value %d.%d = %#v (%T), want %#v", i, j, g, g, w)
			}
		}
		if s, ok := got[4*i].(string); !ok || s != want[0] {
			t.Fatalf("type switch: %#v", got[4*i])
		}
	}
	var none *Slab
	if v := none.Float64(2.5); v != any(2.5) {
		t.Errorf("nil slab: %v", v)
	}
	if v := s.Int64(-1); v != any(int64(-1)) {
		t.Errorf("negative: %v", v)
	}
}

func TestSlabAllocatesPerArray(t *testing.T) {
	var s Slab
	var sink []any = make([]any, 0, 4*slabSize)
	allocs := testing.AllocsPerRun(10, func() {
		sink = sink[:0]
		for i := range slabSize {
			sink = append(sink, s.String("x"), s.Int64(int64(i)+1000), s.Float64(1.5), s.Time(time.Time{}))
		}
	})
	if allocs > 4 {
		t.Errorf("%v allocations for %d values of each type, want at most 4 (one array each)", allocs, slabSize)
	}
}

func TestSlabBytes(t *testing.T) {
	var s Slab
	buf := make([]byte, maxSharedText+1)
	var got []any
	var want []string
	for i := range 3 * textSize / 10 { // several arrays of text
		n := i % 12
		if i%100 == 0 {
			n = len(buf) // too long to share
		}
		for j := range buf[:n] {
			buf[j] = byte('a' + (i+j)%26)
		}
		got = append(got, s.Bytes(buf[:n]))
		want = append(want, string(buf[:n]))
		clear(buf) // the caller's buffer serves again: the values are copies
	}
	runtime.GC()
	for i, g := range got {
		if g != any(want[i]) || reflect.TypeOf(g) != reflect.TypeOf("") {
			t.Fatalf("value %d = %#v, want %q", i, g, want[i])
		}
	}
	var none *Slab
	if v := none.Bytes([]byte("x")); v != any("x") {
		t.Errorf("nil slab: %#v", v)
	}
	if v := s.Bytes(nil); v != any("") {
		t.Errorf("nil bytes: %#v", v)
	}
	allocs := testing.AllocsPerRun(10, func() {
		for range slabSize {
			_ = s.Bytes([]byte("o-000000042"))
		}
	})
	// One array of headers, and of text one for every 8192/11 strings.
	if allocs > 2 {
		t.Errorf("%v allocations for %d strings, want at most 2", allocs, slabSize)
	}
}

func TestAs(t *testing.T) {
	d, st := TypeOf(double(0)), TypeOf(stamp{})
	if v := As(any(2.5), d); v != any(double(2.5)) {
		t.Errorf("As(2.5) = %#v", v)
	}
	now := time.Now()
	if v, ok := As(any(now), st).(stamp); !ok || !v.Equal(now) {
		t.Errorf("As(now) = %#v", v)
	}
	var s Slab
	f := s.Float64(-7.25)
	if allocs := testing.AllocsPerRun(100, func() { _ = As(f, d) }); allocs != 0 {
		t.Errorf("As allocates %v", allocs)
	}
	for _, v := range []any{nil, new(int), map[string]int{}, struct{ p *int }{}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("TypeOf(%T) did not panic", v)
				}
			}()
			TypeOf(v)
		}()
	}
}

func TestSlabRowsAreApart(t *testing.T) {
	var s Slab
	var rows [][]any
	for i := range 2*rowsPerArray + 3 { // across three arrays
		r := s.Row(3)
		if len(r) != 3 || cap(r) != 3 {
			t.Fatalf("row %d: len %d cap %d, want 3 and 3", i, len(r), cap(r))
		}
		r[0], r[2] = i, -i
		rows = append(rows, r)
	}
	for i, r := range rows {
		if r[0] != i || r[1] != nil || r[2] != -i {
			t.Fatalf("row %d = %v: another row's cells overlap it", i, r)
		}
	}
	if got := append(rows[0], "x"); &got[0] == &rows[0][0] {
		t.Fatal("append to a row wrote into the next row's cells")
	}
}
