package plan

import (
	"testing"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
)

// TestEachExpressionCompiledOnce: validation (which follows the flow) and the plan ask one compiler for the
// same expressions, and it compiles each once (a spec's trip through a runtime's constructor
// used to compile each three times). The plan's ASTs are the ones validation compiled.
func TestEachExpressionCompiledOnce(t *testing.T) {
	cols := []v1.Column{{Name: "k", Type: v1.TypeString}, {Name: "qty", Type: v1.TypeLong}}
	q := qt.Make("q", "ns").FilesSource("orders", "/in", v1.FormatJSON, cols...).
		Filter("qty > 0").
		Select(v1.Projection{Name: "k", Expr: "k"}, v1.Projection{Name: "twice", Expr: "qty * 2"}).
		Filter("twice > 4").
		FilesSink("/out", v1.FormatJSON).Obj()
	q.Default()
	c := newCompiler()
	fl, errs := validateQuery(q, c)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	compiled := len(c.asts)
	if compiled != 4 {
		t.Fatalf("validation compiled %d expressions, want the 4 of the spec", compiled)
	}
	p, errs := build(&q.Spec, fl.points(), c)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if len(c.asts) != compiled {
		t.Errorf("the plan compiled %d more expressions, want none", len(c.asts)-compiled)
	}
	if got, want := p.Steps[0].Filter.AST, c.compile("filter", p.Steps[0].In, "qty > 0").ast; got != want {
		t.Error("the plan's filter is not the AST validation compiled")
	}
	if len(c.envs) != 2 {
		t.Errorf("%d CEL environments built, want 2 (one per set of columns)", len(c.envs))
	}
}
