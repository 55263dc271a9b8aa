// Package plan builds the typed logical plan of a StreamingQuery once: the columns flowing
// into every step, each filter and select expression compiled and type-checked, the event-time
// column at every step, the stateful operators with their checkpoint names, each join's
// right-side columns, compiled right-side transform and output columns, and every duration of
// the spec parsed (a watermark's delay, a window's size and slide, a session's gap, a static
// join's refresh period, the trigger's interval). The planner's shape
// (compat), the built-in engine and the Spark compiler (engine/spark, which translates the
// compiled expressions and takes the flow from here) read this plan instead of re-deriving it
// from the spec.
//
// It is also where a spec is validated ([Validate], [ValidateSpec], [Compile], [Build]):
// api/v1 keeps the types, the defaults and the validation of the fields by themselves
// (v1.StreamingQuerySpec.Validate); this package adds what following the rows through the
// query shows (flow.go, join_flow.go: columns, types, event time, expressions). It owns CEL
// ([Env]): a client of the API types does not link cel-go.
package plan

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
)

// Validate returns every problem of q, each with its field path: api/v1's validation of its
// fields (its name included), then the problems that following the columns through the
// query shows (see [ValidateSpec]).
func Validate(q *v1.StreamingQuery) field.ErrorList {
	_, errs := validateQuery(q, newCompiler())
	return errs
}

// ValidateSpec returns every problem of spec, each with its field path under "spec": api/v1's
// validation of its fields ([v1.StreamingQuerySpec.Validate]), then what following the rows
// through the query shows: that the sources agree on their columns, that every column a step
// or the sink names exists there with the type it needs, that every CEL expression compiles
// and type-checks against the columns flowing into its step, and where the event time
// flows (a watermark before each window, session and stream join; append mode after an
// aggregate).
func ValidateSpec(spec *v1.StreamingQuerySpec) field.ErrorList {
	_, errs := validate(spec, newCompiler())
	return errs
}

// validateQuery is validate with q's name.
func validateQuery(q *v1.StreamingQuery, c *compiler) (*flowResult, field.ErrorList) {
	fl := follow(&q.Spec, field.NewPath("spec"), c)
	return fl, append(q.Validate(), fl.errs...)
}

// Plan is the typed logical plan of a valid spec.
type Plan struct {
	// Spec is the defaulted copy of the spec the plan was built from.
	Spec *v1.StreamingQuerySpec
	// Flow[i] is what flows into Spec.Transform[i]; the last element what the sink receives.
	Flow []FlowPoint
	// Steps[i] is Spec.Transform[i], compiled.
	Steps []Step
	// Interval is a processingTime trigger's interval, parsed; 0 for any other trigger.
	Interval time.Duration
}

// Output returns the columns the sink receives.
func (p *Plan) Output() v1.Columns { return p.Flow[len(p.Flow)-1].Columns }

// Step is one transform step, compiled.
type Step struct {
	// Index is the step's index in spec.transform; Path its field path.
	Index int
	Path  *field.Path
	Kind  v1.StepKind
	// Spec is the step as written.
	Spec *v1.Step
	// In are the columns flowing into the step; Env their CEL environment.
	In  v1.Columns
	Env *cel.Env
	// EventTime is the watermark's column flowing into the step, "" if none; WindowTime
	// reports that it is an earlier aggregate's window_end (FlowPoint.WindowTime).
	EventTime  string
	WindowTime bool
	// Filter is a filter step's expression.
	Filter *Expr
	// Select are a select step's projections, in order.
	Select []Projection
	// Operator names a stateful step (aggregate, dropDuplicates) in the checkpoint.
	Operator *Operator
	// SessionGap is an aggregate's session gapExpr, which yields a duration.
	SessionGap *Expr
	// Right are a join's right-side columns as the join sees them (a stream side's after its
	// transform); RightSteps that transform, compiled.
	Right      v1.Columns
	RightSteps []SideStep
	// JoinOutput are a join's output columns, each with the side (In or Right) and the index
	// there of the column it takes.
	JoinOutput []OutputColumn
	// JoinName names a join (v1.StreamingQuerySpec.JoinNames): its state folder, its static
	// snapshot's key in the offsets, its S3 credentials' variables.
	JoinName string
	// JoinType is a join's type, defaulted (v1.Join.EffectiveType); StaticKind a static join's
	// side's kind.
	JoinType   v1.JoinType
	StaticKind v1.StaticSideKind
	// Durations are the step's durations, parsed.
	Durations Durations
	// TimeBound is a stream join's time bound, parsed: a right row joins a left row whose
	// event time is within [left - Lower, left + Upper].
	TimeBound *TimeBound
}

// Durations are a step's durations, parsed from the spec, so that a runtime parses none.
type Durations struct {
	// Delay is a watermark's delay, or a stream join's right side's watermark's.
	Delay time.Duration
	// Size and Slide are an aggregate's window (Slide is Size for a tumbling window); Gap its
	// session window's fixed gap.
	Size, Slide, Gap time.Duration
	// Refresh is a static join's refresh period (refresh.every), 0 when it has none.
	Refresh time.Duration
}

// DurationsOf parses the durations of step st, at p in the spec.
func DurationsOf(st *v1.Step, p *field.Path) (Durations, *field.Error) {
	var (
		d     Durations
		first *field.Error // the first duration that does not parse
	)
	parse := func(v v1.Duration, path *field.Path) time.Duration {
		t, err := v.Parse()
		if err != nil && first == nil {
			first = field.Invalid(path, v, err.Error())
		}
		return t
	}
	switch {
	case st.Watermark != nil:
		d.Delay = parse(st.Watermark.Delay, p.Child("watermark", "delay"))
	case st.Aggregate != nil:
		for i, g := range st.Aggregate.GroupBy {
			gp := p.Child("aggregate", "groupBy").Index(i)
			if w := g.Window; w != nil {
				d.Size = parse(w.Duration, gp.Child("window", "duration"))
				if d.Slide = parse(w.Slide, gp.Child("window", "slide")); d.Slide == 0 {
					d.Slide = d.Size
				}
			}
			if sw := g.Session; sw != nil {
				d.Gap = parse(sw.Gap, gp.Child("session", "gap"))
			}
		}
	case st.Join != nil && st.Join.Stream != nil:
		d.Delay = parse(st.Join.Stream.Watermark.Delay, p.Child("join", "stream", "watermark", "delay"))
	case st.Join != nil && st.Join.Static != nil && st.Join.Static.Refresh != nil:
		d.Refresh = parse(st.Join.Static.Refresh.Every, p.Child("join", "static", "refresh", "every"))
	}
	return d, first
}

// TimeBound is a stream join's time bound (v1.TimeBound), parsed.
type TimeBound struct {
	// LeftColumn and RightColumn are the two sides' event-time columns.
	LeftColumn, RightColumn string
	Lower, Upper            time.Duration
}

// SideStep is one step of a stream join's right-side transform, compiled: a filter or a
// select over the columns In.
type SideStep struct {
	Path   *field.Path
	In     v1.Columns
	Env    *cel.Env
	Filter *Expr
	Select []Projection
}

// Expr is a type-checked CEL expression.
type Expr struct {
	// Text is the expression as written.
	Text string
	AST  *cel.Ast
	// Type is the column type it yields (boolean for a filter).
	Type v1.ColumnType
}

// Projection is one column of a select.
type Projection struct {
	Name string
	Expr Expr
	// From is the index of the input column the projection copies when its expression is a
	// bare column name, else -1.
	From int
}

// Operator is a stateful step as the checkpoint knows it.
type Operator struct {
	// Name is the step's name, else its ordinal among the stateful steps: its folder under
	// state/ and its identity in the shape.
	Name string
	// Ordinal is its position among the stateful steps.
	Ordinal int
}

// Build validates a copy of spec with its defaults applied and builds its plan; every problem
// is returned with its field path. Each expression is compiled once.
func Build(spec *v1.StreamingQuerySpec) (*Plan, field.ErrorList) {
	s := spec.DeepCopy()
	s.Default()
	c := newCompiler()
	fl, errs := validate(s, c)
	if len(errs) > 0 {
		return nil, errs
	}
	return build(s, fl.points(), c)
}

// Compile validates q, which the caller has defaulted, and builds the plan of its spec, as a
// runtime does before it runs q: every problem of q (its name included) with its field path,
// or the plan. Each expression is compiled once; q.Spec is kept, not copied.
func Compile(q *v1.StreamingQuery) (*Plan, field.ErrorList) {
	c := newCompiler()
	fl, errs := validateQuery(q, c)
	if len(errs) > 0 {
		return nil, errs
	}
	return build(&q.Spec, fl.points(), c)
}

// build builds the plan of the valid spec s, whose flow validation followed, with the
// compiler that validation compiled its expressions with.
func build(s *v1.StreamingQuerySpec, flow []FlowPoint, c *compiler) (*Plan, field.ErrorList) {
	p := &Plan{Spec: s, Flow: flow}
	var errs field.ErrorList
	tp := field.NewPath("spec", "transform")
	ordinal := 0
	joinNames, joinSteps := s.JoinNames()
	for i := range s.Transform {
		st := &s.Transform[i]
		step := Step{Index: i, Path: tp.Index(i), Kind: st.Kind(), Spec: st, In: flow[i].Columns, EventTime: flow[i].EventTime, WindowTime: flow[i].WindowTime}
		env, err := c.env(step.In)
		if err != nil {
			errs = append(errs, field.InternalError(step.Path, err))
			continue
		}
		step.Env = env
		d, ferr := DurationsOf(st, step.Path)
		if ferr != nil {
			errs = append(errs, ferr)
			continue
		}
		step.Durations = d
		switch {
		case st.Filter != "":
			r := c.compile("filter", step.In, st.Filter)
			if r.err != nil {
				errs = append(errs, field.Invalid(step.Path.Child("filter"), st.Filter, r.err.Error()))
				continue
			}
			step.Filter = &Expr{Text: st.Filter, AST: r.ast, Type: v1.TypeBoolean}
		case st.Select != nil:
			for j, pr := range st.Select {
				r := c.compile("projection", step.In, pr.Expr)
				ast, t, err := r.ast, r.typ, r.err
				if err != nil {
					errs = append(errs, field.Invalid(step.Path.Child("select").Index(j).Child("expr"), pr.Expr, err.Error()))
					continue
				}
				from := -1
				for k, c := range step.In {
					if c.Name == strings.TrimSpace(pr.Expr) {
						from = k
					}
				}
				step.Select = append(step.Select, Projection{Name: pr.Name, Expr: Expr{Text: pr.Expr, AST: ast, Type: t}, From: from})
			}
		case st.Aggregate != nil || st.DropDuplicates != nil:
			step.Operator = &Operator{Name: st.StatefulName(ordinal), Ordinal: ordinal}
			ordinal++
			if sw := sessionOf(st); sw != nil && sw.GapExpr != "" {
				ast, err := CompileDuration(env, sw.GapExpr)
				if err != nil {
					errs = append(errs, field.Invalid(step.Path.Child("aggregate", "groupBy"), sw.GapExpr, err.Error()))
					continue
				}
				step.SessionGap = &Expr{Text: sw.GapExpr, AST: ast}
			}
		case st.Join != nil:
			step.Right = flow[i].Right
			if k := slices.Index(joinSteps, i); k >= 0 {
				step.JoinName = joinNames[k]
			}
			if err := joinStep(c, s, &step); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		p.Steps = append(p.Steps, step)
	}
	if pt := s.Trigger.ProcessingTime; pt != "" {
		var err error
		if p.Interval, err = pt.Parse(); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("spec", "trigger", "processingTime"), pt, err.Error()))
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return p, nil
}

// joinStep fills in what a runtime needs of the join step st over the spec s: its output
// columns and, for a stream join, its time bound parsed and its right side's transform
// compiled.
func joinStep(c *compiler, s *v1.StreamingQuerySpec, st *Step) *field.Error {
	j := st.Spec.Join
	st.JoinOutput = joinOutput(j, st.In, st.Right)
	st.JoinType = j.EffectiveType()
	if j.Static != nil {
		st.StaticKind = j.Static.Kind()
	}
	if j.Stream == nil {
		return nil
	}
	tb := j.Stream.TimeBound
	p := st.Path.Child("join", "stream")
	lower, err := tb.LowerBound.Parse()
	if err != nil {
		return field.Invalid(p.Child("timeBound", "lowerBound"), tb.LowerBound, err.Error())
	}
	upper, err := tb.UpperBound.Parse()
	if err != nil {
		return field.Invalid(p.Child("timeBound", "upperBound"), tb.UpperBound, err.Error())
	}
	st.TimeBound = &TimeBound{LeftColumn: tb.LeftColumn, RightColumn: tb.RightColumn, Lower: lower, Upper: upper}
	in, _ := j.RightColumns(s)
	var ferr *field.Error
	st.RightSteps, ferr = sideSteps(c, p.Child("transform"), j.Stream.Transform, in)
	return ferr
}

// sessionOf returns the session window of an aggregate step, nil for any other step.
func sessionOf(st *v1.Step) *v1.SessionWindow {
	if st.Aggregate == nil {
		return nil
	}
	return st.Aggregate.Session()
}

// sideSteps compiles a stream side's transform over the source's columns in.
func sideSteps(c *compiler, p *field.Path, steps []v1.SideStep, in v1.Columns) ([]SideStep, *field.Error) {
	var out []SideStep
	for i, st := range steps {
		sp := p.Index(i)
		env, err := c.env(in)
		if err != nil {
			return nil, field.InternalError(sp, err)
		}
		ss := SideStep{Path: sp, In: in, Env: env}
		if st.Filter != "" {
			r := c.compile("filter", in, st.Filter)
			if r.err != nil {
				return nil, field.Invalid(sp.Child("filter"), st.Filter, r.err.Error())
			}
			ss.Filter = &Expr{Text: st.Filter, AST: r.ast, Type: v1.TypeBoolean}
			out = append(out, ss)
			continue
		}
		var next v1.Columns
		for j, pr := range st.Select {
			r := c.compile("projection", in, pr.Expr)
			ast, t, err := r.ast, r.typ, r.err
			if err != nil {
				return nil, field.Invalid(sp.Child("select").Index(j).Child("expr"), pr.Expr, err.Error())
			}
			from := -1
			for k, c := range in {
				if c.Name == strings.TrimSpace(pr.Expr) {
					from = k
				}
			}
			ss.Select = append(ss.Select, Projection{Name: pr.Name, Expr: Expr{Text: pr.Expr, AST: ast, Type: t}, From: from})
			next = append(next, v1.Column{Name: pr.Name, Type: t})
		}
		out = append(out, ss)
		in = next
	}
	return out, nil
}

// Columns returns the columns flowing into every step of a valid spec and, last, those the
// sink receives (see [Plan.Flow]). It errors, with every problem, when the sources or steps
// are invalid.
func Columns(spec *v1.StreamingQuerySpec) ([]v1.Columns, error) {
	fl := follow(spec, field.NewPath("spec"), newCompiler())
	if len(fl.errs) > 0 {
		return nil, fl.errs.ToAggregate()
	}
	cols := make([]v1.Columns, len(fl.states))
	for i, st := range fl.states {
		cols[i] = st.cols
	}
	return cols, nil
}

// OutputColumns returns the columns the sink of a valid spec receives.
func OutputColumns(spec *v1.StreamingQuerySpec) (v1.Columns, error) {
	cols, err := Columns(spec)
	if err != nil {
		return nil, fmt.Errorf("follow the columns: %w", err)
	}
	return cols[len(cols)-1], nil
}
