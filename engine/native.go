package engine

import (
	"math"
	"strings"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/overloads"
	"cel.dev/cel-go/common/types"

	"github.com/lockstep-dev/lockstep/engine/internal/box"
)

// This file compiles the common shapes of a checked CEL expression — columns, literals,
// arithmetic, comparisons, the logical operators, the conditional and double(long) — into Go
// closures over a row, which filters and selects call instead of CEL's interpreter (Nexmark
// q1's `0.908 * double(price)` and q2's `auction % 123 == 0` spent most of their time there:
// resolving names, boxing each intermediate value). An expression with anything else is left to
// the interpreter, whole.
//
// Each closure returns its value and whether there is one. There is none where CEL's value is
// an error — an overflow, a division by zero, a null operand (the engine's SQL
// rule for == and !=, sqlEquality) — which a select turns into null and a filter into "drop the
// row", as it does with the interpreter's errors. TestNativeAgreesWithCEL holds the two to the
// same value over every shape and the edge values of each type.
type (
	longFn   func(Row) (int64, bool)
	doubleFn func(Row) (float64, bool)
	boolFn   func(Row) (bool, bool)
	stringFn func(Row) (string, bool)
)

// compileNative returns the closure of a checked expression: a longFn, doubleFn, boolFn or
// stringFn by the expression's type; nil when some part of it has no closure.
func compileNative(checked *cel.Ast, index map[string]int) any {
	if !checked.IsChecked() {
		return nil
	}
	n := nativeCompiler{ast: checked.NativeRep(), index: index}
	return n.expr(n.ast.Expr())
}

// nativeValue adapts a closure of compileNative to a select's projection, which boxes its
// value (a long or a double from vals, when not nil); nil when fn is nil.
func nativeValue(fn any, vals *box.Slab) func(Row) (any, bool) {
	switch f := fn.(type) {
	case longFn:
		return func(r Row) (any, bool) { v, ok := f(r); return vals.Int64(v), ok }
	case doubleFn:
		return func(r Row) (any, bool) { v, ok := f(r); return vals.Float64(v), ok }
	case boolFn:
		return func(r Row) (any, bool) { v, ok := f(r); return v, ok }
	case stringFn:
		return func(r Row) (any, bool) { v, ok := f(r); return v, ok }
	}
	return nil
}

type nativeCompiler struct {
	ast   *celast.AST
	index map[string]int
}

func (n *nativeCompiler) kind(e celast.Expr) types.Kind {
	if t := n.ast.GetType(e.ID()); t != nil {
		return t.Kind()
	}
	return types.UnspecifiedKind
}

func (n *nativeCompiler) expr(e celast.Expr) any {
	switch e.Kind() {
	case celast.IdentKind:
		return n.column(e)
	case celast.LiteralKind:
		return constant(e.AsLiteral())
	case celast.CallKind:
		return n.call(e.AsCall())
	}
	return nil
}

// column reads a column of the row; a null, or a value not of the column's type, has no value
// (CEL finds no overload for it).
func (n *nativeCompiler) column(e celast.Expr) any {
	i, ok := n.index[e.AsIdent()]
	if !ok {
		return nil
	}
	switch n.kind(e) {
	case types.IntKind:
		return longFn(func(r Row) (int64, bool) { v, ok := r[i].(int64); return v, ok })
	case types.DoubleKind:
		return doubleFn(func(r Row) (float64, bool) { v, ok := r[i].(float64); return v, ok })
	case types.BoolKind:
		return boolFn(func(r Row) (bool, bool) { v, ok := r[i].(bool); return v, ok })
	case types.StringKind:
		return stringFn(func(r Row) (string, bool) { v, ok := r[i].(string); return v, ok })
	}
	return nil
}

func constant(v any) any {
	switch c := v.(type) {
	case types.Int:
		return longFn(func(Row) (int64, bool) { return int64(c), true })
	case types.Double:
		return doubleFn(func(Row) (float64, bool) { return float64(c), true })
	case types.Bool:
		return boolFn(func(Row) (bool, bool) { return bool(c), true })
	case types.String:
		return stringFn(func(Row) (string, bool) { return string(c), true })
	}
	return nil
}

func (n *nativeCompiler) call(c celast.CallExpr) any {
	if c.IsMemberFunction() {
		return nil
	}
	args := c.Args()
	switch fn := c.FunctionName(); {
	case len(args) == 1:
		return n.unary(fn, n.expr(args[0]))
	case len(args) == 2:
		l, r := n.expr(args[0]), n.expr(args[1])
		switch fn {
		case operators.LogicalAnd, operators.LogicalOr:
			lb, lok := l.(boolFn)
			rb, rok := r.(boolFn)
			if !lok || !rok {
				return nil
			}
			return logical(fn == operators.LogicalAnd, lb, rb)
		}
		literal := args[0].Kind() == celast.LiteralKind || args[1].Kind() == celast.LiteralKind
		return binary(fn, numericLiteral(l, r, args[0]), numericLiteral(r, l, args[1]), literal)
	case len(args) == 3 && fn == operators.Conditional:
		cond, ok := n.expr(args[0]).(boolFn)
		if !ok {
			return nil
		}
		switch t := n.expr(args[1]).(type) {
		case longFn:
			return choose(cond, t, n.expr(args[2]))
		case doubleFn:
			return choose(cond, t, n.expr(args[2]))
		case boolFn:
			return choose(cond, t, n.expr(args[2]))
		case stringFn:
			return choose(cond, t, n.expr(args[2]))
		}
	}
	return nil
}

// numericLiteral returns the closure of an operand to use beside other: a long literal beside
// a double becomes a double, when it is one exactly — CEL compares a double with a long by
// value (cross-type comparisons), so `amount > 0` is `amount > 0.0`. Any other mix is left as
// it is, and finds no closure.
func numericLiteral(self, other any, e celast.Expr) any {
	if _, ok := other.(doubleFn); !ok || e.Kind() != celast.LiteralKind {
		return self
	}
	if i, ok := e.AsLiteral().(types.Int); ok && int64(float64(i)) == int64(i) && math.Abs(float64(i)) < 1<<53 {
		return constant(types.Double(float64(i)))
	}
	return self
}

func (n *nativeCompiler) unary(fn string, a any) any {
	switch fn {
	case operators.LogicalNot:
		if b, ok := a.(boolFn); ok {
			return boolFn(func(r Row) (bool, bool) { v, ok := b(r); return !v, ok })
		}
	case operators.Negate:
		switch x := a.(type) {
		case longFn:
			return longFn(func(r Row) (int64, bool) {
				v, ok := x(r)
				return -v, ok && v != math.MinInt64
			})
		case doubleFn:
			return doubleFn(func(r Row) (float64, bool) { v, ok := x(r); return -v, ok })
		}
	case overloads.TypeConvertDouble:
		switch x := a.(type) {
		case longFn:
			return doubleFn(func(r Row) (float64, bool) { v, ok := x(r); return float64(v), ok })
		case doubleFn:
			return x
		}
	}
	return nil
}

// binary is the operator fn over l and r; literal says one of them is a literal.
func binary(fn string, l, r any, literal bool) any {
	switch a := l.(type) {
	case longFn:
		if b, ok := r.(longFn); ok {
			return longOp(fn, a, b)
		}
	case doubleFn:
		if b, ok := r.(doubleFn); ok {
			return doubleOp(fn, a, b, literal)
		}
	case stringFn:
		if b, ok := r.(stringFn); ok {
			return stringOp(fn, a, b)
		}
	case boolFn:
		if b, ok := r.(boolFn); ok {
			switch fn {
			case operators.Equals:
				return boolFn(apply(a, b, func(x, y bool) (bool, bool) { return x == y, true }))
			case operators.NotEquals:
				return boolFn(apply(a, b, func(x, y bool) (bool, bool) { return x != y, true }))
			}
		}
	}
	return nil
}

// longOp is CEL's arithmetic on int64, which errs on overflow and on a zero divisor.
func longOp(fn string, a, b longFn) any {
	switch fn {
	case operators.Add:
		return longFn(apply(a, b, func(x, y int64) (int64, bool) {
			s := x + y
			return s, !(y > 0 && s < x) && !(y < 0 && s > x)
		}))
	case operators.Subtract:
		return longFn(apply(a, b, func(x, y int64) (int64, bool) {
			d := x - y
			return d, !(y > 0 && d > x) && !(y < 0 && d < x)
		}))
	case operators.Multiply:
		return longFn(apply(a, b, func(x, y int64) (int64, bool) {
			if x == 0 || y == 0 {
				return 0, true
			}
			p := x * y
			return p, p/y == x && !(x == -1 && y == math.MinInt64) && !(y == -1 && x == math.MinInt64)
		}))
	case operators.Divide:
		return longFn(apply(a, b, func(x, y int64) (int64, bool) {
			if y == 0 || (x == math.MinInt64 && y == -1) {
				return 0, false
			}
			return x / y, true
		}))
	case operators.Modulo:
		return longFn(apply(a, b, func(x, y int64) (int64, bool) {
			if y == 0 || (x == math.MinInt64 && y == -1) {
				return 0, false
			}
			return x % y, true
		}))
	}
	return compare(fn, a, b, func(x, y int64) (int, bool) { return cmpOrdered(x, y), true })
}

// doubleOp is IEEE arithmetic and comparison, as CEL's: a NaN is neither less than, equal to
// nor greater than anything. CEL orders a NaN before it looks at the other operand, so NaN < a
// null column is false where NaN < an error has no value, which closures do not tell apart: an
// ordering is compiled only beside a literal, which is neither.
func doubleOp(fn string, a, b doubleFn, literal bool) any {
	switch fn {
	case operators.Add:
		return doubleFn(apply(a, b, func(x, y float64) (float64, bool) { return x + y, true }))
	case operators.Subtract:
		return doubleFn(apply(a, b, func(x, y float64) (float64, bool) { return x - y, true }))
	case operators.Multiply:
		return doubleFn(apply(a, b, func(x, y float64) (float64, bool) { return x * y, true }))
	case operators.Divide:
		return doubleFn(apply(a, b, func(x, y float64) (float64, bool) { return x / y, true }))
	case operators.Equals:
		return boolFn(apply(a, b, func(x, y float64) (bool, bool) { return x == y, true }))
	case operators.NotEquals:
		return boolFn(apply(a, b, func(x, y float64) (bool, bool) { return x != y, true }))
	}
	if !literal {
		return nil
	}
	return compare(fn, a, b, func(x, y float64) (int, bool) { return cmpOrdered(x, y), true })
}

func stringOp(fn string, a, b stringFn) any {
	if fn == operators.Add {
		return stringFn(apply(a, b, func(x, y string) (string, bool) { return x + y, true }))
	}
	return compare(fn, a, b, func(x, y string) (int, bool) { return strings.Compare(x, y), true })
}

// compare is the comparison fn of a and b, ordered by cmp; nil when fn is not one.
func compare[T any, F ~func(Row) (T, bool)](fn string, a, b F, cmp func(x, y T) (int, bool)) any {
	var keep func(int) bool
	switch fn {
	case operators.Equals:
		keep = func(c int) bool { return c == 0 }
	case operators.NotEquals:
		keep = func(c int) bool { return c != 0 }
	case operators.Less:
		keep = func(c int) bool { return c == -1 }
	case operators.LessEquals:
		keep = func(c int) bool { return c == -1 || c == 0 }
	case operators.Greater:
		keep = func(c int) bool { return c == 1 }
	case operators.GreaterEquals:
		keep = func(c int) bool { return c == 1 || c == 0 }
	default:
		return nil
	}
	return boolFn(apply(a, b, func(x, y T) (bool, bool) {
		c, ok := cmp(x, y)
		return keep(c), ok
	}))
}

// cmpOrdered orders x and y; a NaN is unordered, 2, which no comparison keeps but !=.
func cmpOrdered[T int64 | float64](x, y T) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	case x == y:
		return 0
	}
	return 2
}

// apply evaluates both operands and op over their values; no value if either has none.
func apply[T, R any, F ~func(Row) (T, bool)](a, b F, op func(x, y T) (R, bool)) func(Row) (R, bool) {
	return func(r Row) (R, bool) {
		x, ok := a(r)
		if !ok {
			var zero R
			return zero, false
		}
		y, ok := b(r)
		if !ok {
			var zero R
			return zero, false
		}
		return op(x, y)
	}
}

// logical is CEL's && (and) or ||: commutative, so a false operand of && (a true one of ||)
// decides even when the other has no value.
func logical(and bool, a, b boolFn) boolFn {
	return func(r Row) (bool, bool) {
		x, xok := a(r)
		if xok && x != and {
			return x, true
		}
		y, yok := b(r)
		if yok && y != and {
			return y, true
		}
		return and, xok && yok
	}
}

// choose is CEL's conditional: no value when the condition has none.
func choose[T any, F ~func(Row) (T, bool)](cond boolFn, then F, other any) any {
	els, ok := other.(F)
	if !ok {
		return nil
	}
	return F(func(r Row) (T, bool) {
		c, ok := cond(r)
		if !ok {
			var zero T
			return zero, false
		}
		if c {
			return then(r)
		}
		return els(r)
	})
}
