package engine

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine/internal/box"
	"github.com/lockstep-dev/lockstep/engine/state"
	"github.com/lockstep-dev/lockstep/plan"
)

// step is one compiled transform step. The run calls process for every
// batch, step after step, from one goroutine.
type step interface {
	// process returns the step's rows of batch b; it may reuse the backing
	// array of rows.
	process(b *stepBatch, rows []Row) ([]Row, error)
}

// stepBatch is what the steps see of the batch they process.
type stepBatch struct {
	id int64
	// watermarkMs is the batch's watermark, as its offsets entry records it,
	// and lateWatermarkMs the batch before's (stateful.Batch); a stream join
	// lowers both for the steps after it, by how late the rows it emits may
	// be.
	watermarkMs, lateWatermarkMs int64
	// queryWatermarkMs is the batch's watermark, which no join lowers: the
	// floor of the next batch's.
	queryWatermarkMs int64
	// right holds the rows of each stream join's right source (not unioned), by
	// source name.
	right map[string][]Row
}

// A stateKeeper is a step whose state lives in the checkpoint, under
// state/<operator>/. Its lifecycle: open loads the state of the last
// committed batch before the run's first batch; process runs each batch
// against it; commit writes the batch's version (batch id + 1) after the
// batch's rows are computed and before its commit log entry; adopt, once
// that commit is durable, makes the batch the step's past; close releases
// it when the run ends.
type stateKeeper interface {
	step
	open(ctx context.Context, open openStore) error
	commit(ctx context.Context, b *stepBatch, write writeStore) ([]StateOperatorProgress, error)
	adopt()
	close(log *slog.Logger)
}

// openStore opens an operator's state store and loads it as of the run's
// last committed batch; writeStore writes a store's batch version and
// reports it (kind is the operator's step kind, dropped the input rows it
// dropped as late).
type (
	openStore  func(ctx context.Context, meta state.Metadata) (*state.Store, error)
	writeStore func(ctx context.Context, b *stepBatch, st *state.Store, kind v1.StepKind, dropped int64) (StateOperatorProgress, error)
)

// compileSteps compiles the steps of a valid query's plan: its CEL
// expressions are already parsed and type-checked; here each is planned once,
// so that the per-row path only evaluates.
func compileSteps(pl *plan.Plan) ([]step, field.ErrorList) {
	var (
		steps []step
		errs  field.ErrorList
		// wm is the watermark step, which a stream join after it reads.
		wm *watermarkStep
	)
	for i := range pl.Steps {
		ps := &pl.Steps[i]
		p := ps.Path
		index := columnIndex(ps.In)
		switch ps.Kind {
		case v1.StepFilter:
			f, err := compileFilter(p, ps.Env, ps.Filter, index)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			steps = append(steps, f)
		case v1.StepSelect:
			s, err := compileSelect(p, ps.Env, ps.Select, index)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			s.inPlace = ownsRows(steps)
			steps = append(steps, s)
		case v1.StepJoin:
			var (
				s   step
				err *field.Error
			)
			if ps.Spec.Join.Stream != nil {
				s, err = compileStreamJoin(ps, wm)
			} else {
				s, err = compileJoin(ps)
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
			steps = append(steps, s)
		default:
			s, err := compileStatefulStep(pl.Spec, ps)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if w, ok := s.(*watermarkStep); ok {
				wm = w
			}
			steps = append(steps, s)
		}
	}
	return steps, errs
}

// ownsRows reports whether the rows after steps are the ones the sources read or a select
// made, which nothing else holds: a source's Read returns rows the engine owns (Source), and a
// filter, a select or a watermark keeps no row. A join's output may share its side's rows, and a
// stateful step may keep the rows it is given.
func ownsRows(steps []step) bool {
	for _, st := range steps {
		switch st.(type) {
		case *filterStep, *selectStep, *watermarkStep:
		default:
			return false
		}
	}
	return true
}

// compileFilter compiles the filter expression e of the step at p over the
// columns index names.
func compileFilter(p *field.Path, env *cel.Env, e *plan.Expr, index map[string]int) (*filterStep, *field.Error) {
	prg, err := program(env, e.AST)
	if err != nil {
		return nil, field.Invalid(p.Child("filter"), e.Text, err.Error())
	}
	f := &filterStep{prg: prg, act: rowActivation{index: index}}
	f.native, _ = compileNative(e.AST, index).(boolFn)
	if f.frame, err = interpreter.NewExecutionFrame(&f.act); err != nil {
		return nil, field.InternalError(p.Child("filter"), err)
	}
	return f, nil
}

// compileSelect compiles the projections of the select step at p over the
// columns index names.
func compileSelect(p *field.Path, env *cel.Env, projs []plan.Projection, index map[string]int) (*selectStep, *field.Error) {
	s := &selectStep{act: rowActivation{index: index}}
	var err error
	if s.frame, err = interpreter.NewExecutionFrame(&s.act); err != nil {
		return nil, field.InternalError(p.Child("select"), err)
	}
	for j, pr := range projs {
		prg, err := program(env, pr.Expr.AST)
		if err != nil {
			return nil, field.Invalid(p.Child("select").Index(j).Child("expr"), pr.Expr.Text, err.Error())
		}
		s.prgs = append(s.prgs, prg)
		s.from = append(s.from, pr.From)
		s.natives = append(s.natives, nativeValue(compileNative(pr.Expr.AST, index), &s.vals))
	}
	return s, nil
}

func program(env *cel.Env, ast *cel.Ast) (cel.Program, error) {
	prg, err := env.Program(ast, cel.EvalOptions(cel.OptOptimize), cel.CustomDecoratorV2(sqlEquality))
	if err != nil {
		return nil, fmt.Errorf("plan expression: %w", err)
	}
	return prg, nil
}

// sqlEquality gives == and != SQL's rule for nulls, as the other operators have it already
// (no overload takes a null, so they yield no value): with a null operand they yield no value
// either, where CEL's equality says null == 3 is false and null != 3 true. So `qty != 3` drops
// a row whose qty is null, and a select of `qty == 3` is null there, as in SQL and on Spark.
// CEL's && and || already follow SQL's three-valued logic around a missing value.
func sqlEquality(i interpreter.InterpretableV2) (interpreter.InterpretableV2, error) {
	call, ok := i.(interpreter.InterpretableCall)
	if !ok || (call.Function() != operators.Equals && call.Function() != operators.NotEquals) {
		return i, nil
	}
	args := call.Args()
	return &nullableEquality{InterpretableCall: call, lhs: args[0], rhs: args[1], not: call.Function() == operators.NotEquals}, nil
}

// errNullOperand is the value of == and != with a null operand.
var errNullOperand = types.NewErr("== or != with a null operand has no value (SQL's rule)")

type nullableEquality struct {
	interpreter.InterpretableCall
	lhs, rhs interpreter.InterpretableV2
	not      bool
}

func (e *nullableEquality) Exec(frame *interpreter.ExecutionFrame) ref.Val {
	l := e.lhs.Exec(frame)
	if l == types.NullValue || types.IsUnknownOrError(l) {
		return nullOr(l)
	}
	r := e.rhs.Exec(frame)
	if r == types.NullValue || types.IsUnknownOrError(r) {
		return nullOr(r)
	}
	eq := types.Equal(l, r)
	if b, ok := eq.(types.Bool); ok && e.not {
		return !b
	}
	return eq
}

func (e *nullableEquality) Eval(act interpreter.Activation) ref.Val {
	return interpreter.EvalActivation(act, e.Exec)
}

// nullOr returns errNullOperand for a null operand, else the operand (an error or unknown).
func nullOr(v ref.Val) ref.Val {
	if v == types.NullValue {
		return errNullOperand
	}
	return v
}

func columnIndex(cols v1.Columns) map[string]int {
	m := make(map[string]int, len(cols))
	for i, c := range cols {
		m[c.Name] = i
	}
	return m
}

// filterStep keeps the rows for which its expression is true. As in SQL, a
// row for which it is not true, including one where it cannot be evaluated
// (a null column), is dropped.
type filterStep struct {
	prg cel.Program
	act rowActivation
	// frame evaluates prg over act, the same for every row: making one per
	// evaluation is a good part of a simple filter's cost.
	frame *interpreter.ExecutionFrame
	// native, when the expression has one (compileNative), evaluates it
	// instead of prg.
	native boolFn
}

func (s *filterStep) process(_ *stepBatch, rows []Row) ([]Row, error) {
	out := rows[:0]
	if s.native != nil {
		for _, r := range rows {
			if v, ok := s.native(r); ok && v {
				out = append(out, r)
			}
		}
		clear(rows[len(out):])
		return out, nil
	}
	for _, r := range rows {
		s.act.row = r
		v, _, err := s.prg.Eval(s.frame)
		if err == nil && v == types.True {
			out = append(out, r)
		}
	}
	clear(rows[len(out):])
	return out, nil
}

// selectStep computes new rows from its expressions. An expression that
// cannot be evaluated for a row (a null input, a division by zero) yields
// null, as in SQL.
type selectStep struct {
	prgs []cel.Program
	// from is, per projection, the input column it copies when its
	// expression is a bare column name, else -1. Evaluating a bare name
	// boxes its value twice (to CEL and back), which is most of a
	// pass-through column's cost.
	from []int
	// natives holds, per projection, its closure (compileNative), or nil
	// where the interpreter evaluates it.
	natives []func(Row) (any, bool)
	// inPlace says that the step may write its output into the input rows,
	// which no one else holds (ownsRows): it then allocates no rows, and a
	// batch's garbage is the source's alone.
	inPlace bool
	// vals boxes the longs and doubles its closures compute.
	vals  box.Slab
	act   rowActivation
	frame *interpreter.ExecutionFrame // as filterStep's, for every program
}

func (s *selectStep) process(_ *stepBatch, rows []Row) ([]Row, error) {
	n := len(s.prgs)
	var (
		vals []any // the output rows' values, when they are not written in place
		buf  [maxInPlace]any
	)
	for i, r := range rows {
		s.act.row = r
		if s.inPlace && len(r) >= n && n <= maxInPlace {
			// The values are computed on the stack, then written over the row's first n:
			// an expression may read a column an earlier output replaces. A column that
			// stays where it is is not written at all (pointer writes into the heap cost
			// a write barrier while the collector runs).
			clear(buf[:n])
			s.project(r, buf[:n], true)
			for j, v := range buf[:n] {
				if s.from[j] != j {
					r[j] = v
				}
			}
			rows[i] = r[:n:n]
			continue
		}
		if vals == nil {
			vals = make([]any, (len(rows)-i)*n) // one allocation for the rest of the rows
		}
		out := Row(vals[:n:n])
		vals = vals[n:]
		s.project(r, out, false)
		rows[i] = out
	}
	return rows, nil
}

// maxInPlace is the widest select written in place.
const maxInPlace = 32

// project evaluates the select's expressions over row r into out; with inPlace, not those
// that copy a column to where it already is.
func (s *selectStep) project(r, out Row, inPlace bool) {
	for j, prg := range s.prgs {
		if c := s.from[j]; c >= 0 {
			if !inPlace || c != j {
				out[j] = r[c]
			}
			continue
		}
		if f := s.natives[j]; f != nil {
			if v, ok := f(r); ok {
				out[j] = v
			}
			continue
		}
		v, _, err := prg.Eval(s.frame)
		if err != nil {
			continue
		}
		out[j] = native(v)
	}
}

// rowActivation exposes one row's columns to CEL as variables.
type rowActivation struct {
	index map[string]int
	row   Row
	// last is the column the last name resolved to: an expression tends to
	// resolve the same few names row after row, and comparing a name is
	// cheaper than hashing it.
	last     int
	lastName string
}

func (a *rowActivation) ResolveName(name string) (any, bool) {
	i := a.last
	if name != a.lastName || a.lastName == "" {
		var ok bool
		if i, ok = a.index[name]; !ok {
			return nil, false
		}
		a.last, a.lastName = i, name
	}
	// The CEL value shares the row value's storage: converting it, as
	// types.Double(v), would allocate a copy for every row.
	v := a.row[i]
	switch x := v.(type) {
	case nil:
		return types.NullValue, true
	case string:
		return box.As(v, celString), true
	case int64:
		return box.As(v, celInt), true
	case float64:
		return box.As(v, celDouble), true
	case bool:
		return types.Bool(x), true
	case time.Time:
		return box.As(v, celTimestamp), true
	default:
		return v, true
	}
}

// The CEL types of row values, each of the memory layout of the Go type it
// wraps (types.Timestamp is a struct of one time.Time).
var (
	celString    = box.TypeOf(types.String(""))
	celInt       = box.TypeOf(types.Int(0))
	celDouble    = box.TypeOf(types.Double(0))
	celTimestamp = box.TypeOf(types.Timestamp{})

	goString = box.TypeOf("")
	goInt    = box.TypeOf(int64(0))
	goDouble = box.TypeOf(float64(0))
)

func (a *rowActivation) Parent() interpreter.Activation { return nil }

// native converts a CEL result to a row value. A string, long or double
// shares the CEL value's storage (which for a column passed through is the
// input row's): converting it, as string(v), would allocate a copy.
func native(v ref.Val) any {
	switch t := v.(type) {
	case types.String:
		return box.As(v, goString) // v, not t: boxing t would copy it
	case types.Int:
		return box.As(v, goInt)
	case types.Double:
		return box.As(v, goDouble)
	case types.Bool:
		return bool(t)
	case types.Timestamp:
		return t.Time.UTC()
	case types.Null:
		return nil
	}
	return v.Value()
}
