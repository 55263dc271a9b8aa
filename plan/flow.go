package plan

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
)

// FlowPoint is what is known of the rows at one point of a valid query.
type FlowPoint struct {
	// Columns are the rows' columns.
	Columns v1.Columns
	// EventTime is the watermark's column here, followed through the selects and joins that
	// copy it under another name; after an aggregate that windows on it, the aggregate's
	// window_end (see WindowTime); "" before the watermark step, after an aggregate that
	// does not window on it, or when the query has none.
	EventTime string
	// WindowTime reports that EventTime is an earlier aggregate's window_end: a row's event
	// time is the window's last instant, 1 µs before window_end (Spark's window_time), so
	// that a later aggregate puts a window ending at 10:01 in the minute that starts at 10:00.
	WindowTime bool
	// Right are the columns of the right side of the join step flowing from here: a static
	// side's schema, or a stream side's source columns after its transform; nil for other
	// steps and for the sink.
	Right v1.Columns
}

// validate returns every problem of spec: api/v1's structural validation, then what
// following the rows through the query shows (columns, types, expressions, event time),
// and the flow, which is complete only when there is no problem.
func validate(spec *v1.StreamingQuerySpec, c *compiler) (*flowResult, field.ErrorList) {
	fl := follow(spec, field.NewPath("spec"), c)
	return fl, append(spec.Validate(), fl.errs...)
}

// points returns the flow as a runtime reads it: element i flows into spec.Transform[i], the
// last one to the sink.
func (r *flowResult) points() []FlowPoint {
	out := make([]FlowPoint, len(r.states))
	for i, st := range r.states {
		out[i] = FlowPoint{Columns: st.cols, EventTime: st.watermark, WindowTime: st.windowTime, Right: r.rights[i]}
	}
	return out
}

// unknownType marks a column whose type could not be determined because of an earlier error;
// expressions treat it as dyn so that later steps are still checked.
const unknownType v1.ColumnType = ""

// flowState is what is known of the rows at one point of the query.
type flowState struct {
	// cols are the columns; a column whose type an earlier error hides has type unknownType.
	cols v1.Columns
	// known is false when the columns cannot be determined; checks that need them are skipped.
	known bool
	// watermark is the event-time column in force, "" if none.
	watermark string
	// windowTime: watermark is an earlier aggregate's window_end (FlowPoint.WindowTime).
	windowTime bool
}

// column checks that the column name exists here. An empty name is api/v1's to report.
func (st flowState) column(p *field.Path, name string) field.ErrorList {
	if name == "" || !st.known {
		return nil
	}
	if _, ok := st.cols.Lookup(name); !ok {
		return field.ErrorList{field.Invalid(p, name, "no such column; the columns here are "+strings.Join(st.cols.Names(), ", "))}
	}
	return nil
}

// columns checks that each of names exists here.
func (st flowState) columns(p *field.Path, names []string) field.ErrorList {
	var errs field.ErrorList
	for i, name := range names {
		errs = append(errs, st.column(p.Index(i), name)...)
	}
	return errs
}

// typeOf returns the type of the column name, unknownType when it is not known.
func (st flowState) typeOf(name string) v1.ColumnType {
	c, _ := st.cols.Lookup(name)
	return c.Type
}

// flowResult is the outcome of following the rows through the sources and steps.
type flowResult struct {
	errs field.ErrorList
	// states[i] flows into step i; the last flows to the sink.
	states []flowState
	// aggregate is the index of the first aggregate step, -1 if none; aggregates holds the
	// index of each, in order (more than one when aggregates are chained over windows).
	aggregate  int
	aggregates []int
	// chained: an aggregate follows an earlier aggregate over its windows, as it may.
	chained bool
	// aggregateOnWatermark: every aggregate groups by the watermark column or a window on it.
	aggregateOnWatermark bool
	// rights holds the right side's columns of each join step, by step index.
	rights map[int]v1.Columns
}

func (r *flowResult) output() flowState { return r.states[len(r.states)-1] }

// follow follows the columns and the event time through the sources, the transform steps
// and to the sink, and checks what needs them: the columns each field names exist and have
// the type it needs, every expression compiles and type-checks, the event time is where a
// step needs it. It tolerates a spec that api/v1 finds invalid: what an earlier problem
// hides is not checked.
func follow(s *v1.StreamingQuerySpec, spec *field.Path, c *compiler) *flowResult {
	r := &flowResult{aggregate: -1, rights: map[int]v1.Columns{}}
	cur := sourceFlow(s, spec.Child("sources"), r)
	steps := spec.Child("transform")
	for i := range s.Transform {
		st := &s.Transform[i]
		p := steps.Index(i)
		r.states = append(r.states, cur)
		next := cur
		if st.Filter != "" {
			r.errs = append(r.errs, cur.filter(p.Child("filter"), st.Filter, c)...)
		}
		if st.Select != nil {
			next = cur.project(p.Child("select"), st.Select, c, &r.errs)
		}
		if w := st.Watermark; w != nil {
			r.errs = append(r.errs, cur.timestampColumn(p.Child("watermark", "column"), w.Column)...)
			next.watermark = w.Column
		}
		if a := st.Aggregate; a != nil {
			if r.aggregate < 0 {
				r.aggregate = i
			} else if cur.windowTime {
				r.chained = true
			} else {
				last := r.aggregates[len(r.aggregates)-1]
				r.errs = append(r.errs, field.Forbidden(p.Child("aggregate"), fmt.Sprintf("an aggregate may follow an aggregate (transform[%d]) only over its windows: "+
					"the earlier one must group by a window or session on the watermark column, so that its rows have an event time (their window_end) "+
					"and each is written once, when the watermark closes it", last)))
			}
			var onWatermark bool
			next, onWatermark = cur.aggregate(p.Child("aggregate"), a, c, &r.errs)
			r.aggregateOnWatermark = onWatermark && (len(r.aggregates) == 0 || r.aggregateOnWatermark)
			r.aggregates = append(r.aggregates, i)
		}
		if j := st.Join; j != nil {
			var right flowState
			next, right = join(s, p.Child("join"), j, cur, c, &r.errs)
			r.rights[i] = right.cols
		}
		if d := st.DropDuplicates; d != nil {
			r.errs = append(r.errs, cur.columns(p.Child("dropDuplicates", "columns"), d.Columns)...)
		}
		if len(st.Kinds()) > 1 {
			next.known = false
		}
		cur = next
	}
	r.states = append(r.states, cur)
	r.errs = append(r.errs, sinkColumns(s, spec.Child("sink"), cur)...)
	r.errs = append(r.errs, outputMode(s, spec.Child("outputMode"), r)...)
	return r
}

// sourceFlow returns the columns of the union of the sources (those a stream join reads are
// not unioned), which must agree.
func sourceFlow(s *v1.StreamingQuerySpec, p *field.Path, r *flowResult) flowState {
	var cur flowState
	first := ""
	joined := s.JoinedSources()
	for i := range s.Sources {
		src := &s.Sources[i]
		if joined[src.Name] {
			continue
		}
		cols, ok := src.Columns()
		if !ok {
			continue
		}
		if !cur.known {
			cur = flowState{cols: cols, known: true}
			first = src.Name
			continue
		}
		if !slices.Equal(cols, cur.cols) {
			at := p.Index(i)
			if src.Schema != nil {
				at = at.Child("schema")
			}
			r.errs = append(r.errs, field.Invalid(at, describeColumns(cols),
				fmt.Sprintf("sources are unioned and must yield the same columns in the same order; source %q yields %s (a source a stream join reads is not unioned)", first, describeColumns(cur.cols))))
		}
	}
	return cur
}

// sinkColumns checks that the columns the sink names reach it.
func sinkColumns(s *v1.StreamingQuerySpec, p *field.Path, out flowState) field.ErrorList {
	var errs field.ErrorList
	if d := s.Sink.Delta; d != nil {
		errs = append(errs, out.columns(p.Child("delta", "partitionColumns"), d.PartitionColumns)...)
		errs = append(errs, out.columns(p.Child("delta", "mergeKeys"), d.MergeKeys)...)
	}
	if pg := s.Sink.Postgres; pg != nil {
		errs = append(errs, out.columns(p.Child("postgres", "keyColumns"), pg.KeyColumns)...)
	}
	if k := s.Sink.Kafka; k != nil {
		errs = append(errs, out.column(p.Child("kafka", "keyColumn"), k.KeyColumn)...)
	}
	return errs
}

// outputMode checks what the output mode needs of the flow: an upsert's grouping keys reach
// the sink, chained aggregates run in append mode, and append mode after an aggregate needs
// its groups closed by the watermark. api/v1 checks the rest.
func outputMode(s *v1.StreamingQuerySpec, p *field.Path, fl *flowResult) field.ErrorList {
	mode := s.OutputMode
	if mode == "" {
		mode = v1.OutputAppend
	}
	if !slices.Contains(v1.OutputModes(), mode) {
		return nil
	}
	var errs field.ErrorList
	if out := fl.output(); mode == v1.OutputUpdate && s.Sink.Kind().Upserts() && len(s.Sink.DeclaredKeys()) == 0 && out.known {
		if group, agg := s.UpsertKeys(); agg {
			for _, k := range group {
				if !slices.Contains(out.cols.Names(), k) {
					errs = append(errs, field.Invalid(s.UpsertKeysPath(), k, "update mode replaces rows by the aggregation's grouping keys: keep the grouping key column in the output, or name the keys here"))
				}
			}
		}
	}
	if n := len(fl.aggregates); fl.chained && mode != v1.OutputAppend {
		errs = append(errs, field.Invalid(p, mode, fmt.Sprintf("transform[%d] aggregates the windows of transform[%d]: it must take each window once, when the watermark closes it, so chained aggregates run in append mode only (as Spark's do)", fl.aggregates[n-1], fl.aggregates[n-2])))
	}
	if mode == v1.OutputAppend && fl.aggregate >= 0 && !fl.aggregateOnWatermark {
		errs = append(errs, field.Invalid(p, mode, "append mode with an aggregate needs a watermark before it and a window (or group key) on the watermark column, so that a group is written once, when the watermark closes it; use update or complete"))
	}
	return errs
}

func (st flowState) timestampColumn(p *field.Path, name string) field.ErrorList {
	if errs := st.column(p, name); len(errs) > 0 || !st.known || name == "" {
		return errs
	}
	if t := st.typeOf(name); t != v1.TypeTimestamp && t != unknownType {
		return field.ErrorList{field.Invalid(p, name, fmt.Sprintf("must be a timestamp column, not %s", t))}
	}
	return nil
}

func (st flowState) filter(p *field.Path, expr string, c *compiler) field.ErrorList {
	if err := c.checkFilter(st.exprColumns(), st.known, expr); err != nil {
		return field.ErrorList{field.Invalid(p, expr, err.Error())}
	}
	return nil
}

// exprColumns returns the columns an expression here may name: each valid name once.
func (st flowState) exprColumns() v1.Columns {
	var cols v1.Columns
	for _, c := range st.cols {
		if !v1.ValidColumnName(c.Name) {
			continue
		}
		if _, dup := cols.Lookup(c.Name); dup {
			continue
		}
		if !c.Type.Valid() {
			c.Type = unknownType
		}
		cols = append(cols, c)
	}
	return cols
}

// project follows the columns through a select and checks its expressions; api/v1 checks
// its names.
func (st flowState) project(p *field.Path, projs []v1.Projection, c *compiler, errs *field.ErrorList) flowState {
	next := flowState{known: true}
	cols := st.exprColumns()
	for j, pr := range projs {
		t := unknownType
		if pr.Expr != "" {
			typ, err := c.checkProjection(cols, st.known, pr.Expr)
			if err != nil {
				*errs = append(*errs, field.Invalid(p.Index(j).Child("expr"), pr.Expr, err.Error()))
			}
			t = typ
		}
		next.cols = append(next.cols, v1.Column{Name: pr.Name, Type: t})
		// A column copied as is keeps being the event-time column, under its new name.
		if st.watermark != "" && next.watermark == "" && strings.TrimSpace(pr.Expr) == st.watermark {
			next.watermark, next.windowTime = pr.Name, st.windowTime
		}
	}
	return next
}

// aggregate follows the columns through an aggregate step; onWatermark reports that it
// groups by the watermark column or a window or session on it. After a window or session on
// the watermark column, the event time is the aggregate's window_end (FlowPoint.WindowTime);
// over an earlier aggregate's windows (st.windowTime), the step must window on that
// window_end, as Spark's window(window_time(window), …) does. api/v1 checks the step's
// fields by themselves.
func (st flowState) aggregate(p *field.Path, a *v1.Aggregate, c *compiler, errs *field.ErrorList) (next flowState, onWatermark bool) {
	next = flowState{known: true}
	add := func(p *field.Path, c v1.Column) {
		if _, dup := next.cols.Lookup(c.Name); dup {
			*errs = append(*errs, field.Duplicate(p, c.Name))
			return
		}
		next.cols = append(next.cols, c)
	}
	onColumn := func(name string) bool { return st.watermark != "" && name == st.watermark }
	var window *v1.Window
	var session *v1.SessionWindow
	for k, g := range a.GroupBy {
		gp := p.Child("groupBy").Index(k)
		if sw := g.Session; sw != nil {
			sp := gp.Child("session")
			if session == nil {
				session = sw
			}
			colErrs := st.timestampColumn(sp.Child("column"), sw.Column)
			*errs = append(*errs, colErrs...)
			if sw.Column != "" && len(colErrs) == 0 && st.known && st.watermark != sw.Column {
				msg := "a session closes when the watermark reaches its end: the session column must be the watermark's column, and the query has no watermark before this step"
				if st.watermark != "" {
					msg = fmt.Sprintf("a session closes when the watermark reaches its end: the session column must be the watermark's column %q", st.watermark)
				}
				*errs = append(*errs, field.Invalid(sp.Child("column"), sw.Column, msg))
			}
			onWatermark = onWatermark || onColumn(sw.Column)
			if sw.Gap == "" && sw.GapExpr != "" {
				// A duration compares with a duration: the check proves the type without a
				// check of its own.
				if err := c.checkFilter(st.exprColumns(), st.known, "("+sw.GapExpr+") > duration('0s')"); err != nil {
					*errs = append(*errs, field.Invalid(sp.Child("gapExpr"), sw.GapExpr, "must be a CEL expression yielding a duration, such as duration('5m'): "+err.Error()))
				}
			}
			add(sp, v1.Column{Name: v1.ColumnWindowStart, Type: v1.TypeTimestamp})
			add(sp, v1.Column{Name: v1.ColumnWindowEnd, Type: v1.TypeTimestamp})
		}
		if g.Column != "" {
			*errs = append(*errs, st.column(gp.Child("column"), g.Column)...)
			onWatermark = onWatermark || onColumn(g.Column)
			add(gp.Child("column"), v1.Column{Name: g.Column, Type: st.typeOf(g.Column)})
		}
		if w := g.Window; w != nil {
			wp := gp.Child("window")
			if window == nil {
				window = w
			}
			*errs = append(*errs, st.timestampColumn(wp.Child("column"), w.Column)...)
			onWatermark = onWatermark || onColumn(w.Column)
			add(wp, v1.Column{Name: v1.ColumnWindowStart, Type: v1.TypeTimestamp})
			add(wp, v1.Column{Name: v1.ColumnWindowEnd, Type: v1.TypeTimestamp})
		}
	}
	windowed := window != nil && onColumn(window.Column) || session != nil && onColumn(session.Column)
	if windowed {
		next.watermark, next.windowTime = v1.ColumnWindowEnd, true
	}
	if st.windowTime && st.known && !windowed {
		*errs = append(*errs, field.Invalid(p.Child("groupBy"), describeKeys(a.GroupBy),
			fmt.Sprintf("over an earlier aggregate's windows an aggregate groups them by a window (or session) on their end, %q, such as {window: {column: %s, duration: 1m}}: "+
				"a window takes each earlier window at its last instant, as Spark's window(window_time(window), …) does", st.watermark, st.watermark)))
	}
	ap := p.Child("aggregates")
	for j, ag := range a.Aggregates {
		jp := ap.Index(j)
		in := unknownType
		if ag.Column != "" {
			*errs = append(*errs, st.column(jp.Child("column"), ag.Column)...)
			in = st.typeOf(ag.Column)
		}
		out := unknownType
		switch ag.Function {
		case v1.AggCount, v1.AggCountDistinct:
			out = v1.TypeLong
		case v1.AggSum, v1.AggAvg, v1.AggMin, v1.AggMax:
			if ag.Column == "" {
				break // api/v1 says the function needs a column
			}
			numeric := ag.Function == v1.AggSum || ag.Function == v1.AggAvg
			if numeric && in != unknownType && !in.Numeric() {
				*errs = append(*errs, field.Invalid(jp.Child("column"), ag.Column, fmt.Sprintf("%s needs a long or double column, not %s", ag.Function, in)))
				break
			}
			out = in
			if ag.Function == v1.AggAvg {
				out = v1.TypeDouble
			}
		}
		if ag.Name != "" {
			add(jp.Child("name"), v1.Column{Name: ag.Name, Type: out})
		}
	}
	return next, onWatermark
}

// describeKeys describes an aggregate's group keys in an error: "bidder, window(window_end)".
func describeKeys(keys []v1.GroupKey) string {
	s := make([]string, len(keys))
	for i, g := range keys {
		switch {
		case g.Window != nil:
			s[i] = "window(" + g.Window.Column + ")"
		case g.Session != nil:
			s[i] = "session(" + g.Session.Column + ")"
		default:
			s[i] = g.Column
		}
	}
	return strings.Join(s, ", ")
}

func describeColumns(cols v1.Columns) string {
	s := make([]string, len(cols))
	for i, c := range cols {
		t := string(c.Type)
		if t == "" {
			t = "?"
		}
		s[i] = c.Name + " " + t
	}
	return "(" + strings.Join(s, ", ") + ")"
}
