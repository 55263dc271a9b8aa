package engine

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"cel.dev/cel-go/interpreter"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine/internal/box"
	"github.com/lockstep-dev/lockstep/plan"
)

// TestNativeAgreesWithCEL holds the closures of compileNative to the interpreter's value, row
// by row, over every shape they compile and the edge values of each type (nulls, zero, -1, the
// extremes of a long, NaN and the infinities), and checks that the shapes they do not compile
// are left to the interpreter.
func TestNativeAgreesWithCEL(t *testing.T) {
	cols := v1.Columns{
		{Name: "l", Type: v1.TypeLong}, {Name: "m", Type: v1.TypeLong},
		{Name: "d", Type: v1.TypeDouble}, {Name: "e", Type: v1.TypeDouble},
		{Name: "s", Type: v1.TypeString}, {Name: "u", Type: v1.TypeString},
		{Name: "b", Type: v1.TypeBoolean}, {Name: "c", Type: v1.TypeBoolean},
		{Name: "ts", Type: v1.TypeTimestamp},
	}
	compiled := []string{
		"l", "d", "s", "b", "7", "-7", "2.5", "'x'", "true",
		"l + m", "l - m", "l * m", "l / m", "l % m", "-l", "l + 1", "l * 2", "l - 9223372036854775807",
		"d + e", "d - e", "d * e", "d / e", "-d", "0.908 * double(l)", "double(l) / 3.0", "double(d)",
		"s + u", "s + 'x'",
		"l == m", "l != m", "l < m", "l <= m", "l > m", "l >= m", "l % 123 == 0",
		"d == e", "d != e", "d > 2.5", "d <= -1.0", "d < 1e308", "3.0 >= d",
		"d > 0", "0 < d", "d >= -3",
		"s == u", "s != u", "s < u", "s >= 'b'", "b == c", "b != c",
		"b && c", "b || c", "!b", "b && l > 0", "l > 0 || d < 0.0", "!(l == m) && (s < u || c)",
		"b ? l : m", "l > 0 ? d : e", "c ? s : 'none'", "b ? c : !c",
	}
	interpreted := []string{
		"ts", "ts > timestamp('2026-01-01T00:00:00Z')", "size(s) > 1", "s.startsWith('a')",
		"l > 1.5", "d < e", "d >= e", "double(l) > d", "int(d) > 0", "string(l)", "s in ['a', 'b']", "l == 4611686018427387904 && d > 4611686018427387904",
	}
	env, err := plan.Env(cols)
	if err != nil {
		t.Fatal(err)
	}
	index := columnIndex(cols)
	rows := edgeRows(cols, 3000)
	for _, text := range append(compiled, interpreted...) {
		ast, _, err := plan.CompileProjection(env, text)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		fn := nativeValue(compileNative(ast, index), &box.Slab{})
		if wantNative := slices.Contains(compiled, text); (fn != nil) != wantNative {
			t.Errorf("%s: compiled natively %v, want %v", text, fn != nil, wantNative)
			continue
		}
		if fn == nil {
			continue
		}
		prg, err := program(env, ast)
		if err != nil {
			t.Fatal(err)
		}
		act := &rowActivation{index: index}
		frame, err := interpreter.NewExecutionFrame(act)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			act.row = r
			var want any
			v, _, err := prg.Eval(frame)
			if err == nil {
				want = native(v)
			}
			got, ok := fn(r)
			if !ok {
				got = nil
			}
			if !sameValue(got, want) {
				t.Errorf("%s over %v: native %#v, CEL %#v", text, r, got, want)
				break
			}
		}
	}
}

// edgeRows makes n rows whose values are drawn from each type's edge values, null among them.
func edgeRows(cols v1.Columns, n int) []Row {
	edges := map[v1.ColumnType][]any{
		v1.TypeLong: {nil, int64(0), int64(1), int64(-1), int64(2), int64(-3), int64(123), int64(246),
			int64(math.MaxInt64), int64(math.MinInt64), int64(1 << 32), int64(-(1 << 32)), int64(4611686018427387904)},
		v1.TypeDouble: {nil, 0.0, math.Copysign(0, -1), 1.0, -1.0, 0.5, 3.0, 1e308, -1e308,
			math.NaN(), math.Inf(1), math.Inf(-1), 4611686018427387904.0},
		v1.TypeString:    {nil, "", "a", "b", "ab", "x", "é"},
		v1.TypeBoolean:   {nil, true, false},
		v1.TypeTimestamp: {nil, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)},
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	rows := make([]Row, n)
	for i := range rows {
		r := make(Row, len(cols))
		for j, c := range cols {
			vals := edges[c.Type]
			r[j] = vals[rnd.IntN(len(vals))]
		}
		rows[i] = r
	}
	return rows
}

func sameValue(a, b any) bool {
	if x, ok := a.(float64); ok {
		if y, ok := b.(float64); ok && math.IsNaN(x) && math.IsNaN(y) {
			return true
		}
		if y, ok := b.(float64); ok {
			return x == y && math.Signbit(x) == math.Signbit(y)
		}
	}
	return a == b
}
