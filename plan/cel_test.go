package plan_test

import (
	"testing"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/plan"
)

func TestEnvEvaluates(t *testing.T) {
	cols := v1.Columns{
		qt.Col("country", v1.TypeString), qt.Col("amount", v1.TypeDouble), qt.Col("qty", v1.TypeLong),
		qt.Col("paid", v1.TypeBoolean), qt.Col("ts", v1.TypeTimestamp),
	}
	env, err := plan.Env(cols)
	if err != nil {
		t.Fatalf("Env() error = %v", err)
	}
	row := map[string]any{
		"country": "de", "amount": 12.5, "qty": int64(2), "paid": true,
		"ts": time.Date(2026, 1, 5, 10, 30, 0, 0, time.UTC),
	}
	filters := []struct {
		expr string
		want bool
	}{
		{"amount > 0 && paid", true},
		{"country.upperAscii() == 'DE'", true},
		{"ts > timestamp('2026-01-05T10:00:00Z')", true},
		{"ts.getHours() == 10", true},
		{"qty * 2 == 4 && amount * double(qty) == 25.0", true},
	}
	for _, f := range filters {
		ast, err := plan.CompileFilter(env, f.expr)
		if err != nil {
			t.Errorf("CompileFilter(%q) error = %v", f.expr, err)
			continue
		}
		prg, err := env.Program(ast)
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := prg.Eval(row)
		if err != nil || got.Value() != f.want {
			t.Errorf("Eval(%q) = %v, %v; want %v", f.expr, got, err, f.want)
		}
	}
	projections := []struct {
		expr string
		want v1.ColumnType
	}{
		{"country", v1.TypeString},
		{"qty + 1", v1.TypeLong},
		{"amount / 2.0", v1.TypeDouble},
		{"!paid", v1.TypeBoolean},
		{"ts + duration('1h')", v1.TypeTimestamp},
	}
	for _, p := range projections {
		_, got, err := plan.CompileProjection(env, p.expr)
		if err != nil || got != p.want {
			t.Errorf("CompileProjection(%q) = %v, %v; want %v", p.expr, got, err, p.want)
		}
	}
	for _, bad := range []string{"dyn(qty)", "[qty]", "{'a': 1}", "b'x'", "null", "1u"} {
		if _, _, err := plan.CompileProjection(env, bad); err == nil {
			t.Errorf("CompileProjection(%q): want an error", bad)
		}
	}
	if _, err := plan.CompileFilter(env, "qty"); err == nil {
		t.Error("CompileFilter(qty): want an error for a non-bool filter")
	}
}
