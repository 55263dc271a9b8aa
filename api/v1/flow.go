package v1

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Columns returns the columns the source yields: its schema's columns, rate's timestamp and
// value, a nexmark table's columns, or Kafka raw's value, followed for Kafka by the metadata columns. It reports false
// when they cannot be known because the source is invalid (no kind, or no schema).
func (s *Source) Columns() (Columns, bool) {
	switch s.Kind() {
	case SourceRate:
		return RateColumns(), true
	case SourceNexmark:
		return NexmarkColumns(s.Nexmark.Table), true
	case SourceKafka:
		if s.Kafka.Format == KafkaRaw {
			return append(Columns{{Name: ColumnKafkaValue, Type: TypeString}}, KafkaMetadataColumns()...), true
		}
		if s.Schema == nil {
			return nil, false
		}
		return append(slices.Clone(s.Schema.Columns), KafkaMetadataColumns()...), true
	case SourceFiles, SourceDelta:
		if s.Schema == nil {
			return nil, false
		}
		return slices.Clone(s.Schema.Columns), true
	}
	return nil, false
}

// Expressions checks the CEL expressions of filter and select steps against the columns
// flowing into them. The plan package implements it with cel-go; this package only follows
// the columns, so that a client of the API types does not link an expression compiler.
// +kubebuilder:object:generate=false
type Expressions interface {
	// CheckFilter reports why expr is not a filter (a bool expression) over cols. A column of
	// type "" is of unknown type (hidden by an earlier error): an expression using it is not
	// wrong for that. With known false the columns are unknown and expr is only parsed.
	CheckFilter(cols Columns, known bool, expr string) error
	// CheckProjection returns the column type expr yields over cols, "" when it cannot be
	// known (a column of unknown type, or known false), and why expr is not a projection.
	CheckProjection(cols Columns, known bool, expr string) (ColumnType, error)
}

// FlowPoint is what is known of the rows at one point of a valid query.
// +kubebuilder:object:generate=false
type FlowPoint struct {
	// Columns are the rows' columns.
	Columns Columns
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
	Right Columns
}

// Flow follows the rows through the query: element i is what flows into s.Transform[i], and
// the last element (index len(s.Transform)) what the sink receives. It errors, with every
// problem, when the sources or steps are invalid. x checks the expressions (plan.Expressions).
func (s *StreamingQuerySpec) Flow(x Expressions) ([]FlowPoint, error) {
	fl := s.flow(field.NewPath("spec"), x)
	if len(fl.errs) > 0 {
		return nil, fl.errs.ToAggregate()
	}
	out := make([]FlowPoint, len(fl.states))
	for i, st := range fl.states {
		out[i] = FlowPoint{Columns: st.cols, EventTime: st.watermark, WindowTime: st.windowTime, Right: fl.rights[i]}
	}
	return out, nil
}

// unknownType marks a column whose type could not be determined because of an earlier error;
// expressions treat it as dyn so that later steps are still checked.
const unknownType ColumnType = ""

// flowState is what is known of the rows at one point of the query.
type flowState struct {
	// cols are the columns; a column whose type an earlier error hides has type unknownType.
	cols Columns
	// known is false when the columns cannot be determined; checks that need them are skipped.
	known bool
	// watermark is the event-time column in force, "" if none.
	watermark string
	// windowTime: watermark is an earlier aggregate's window_end (FlowPoint.WindowTime).
	windowTime bool
}

// column checks that the column name exists here.
func (st flowState) column(p *field.Path, name string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "a column name")}
	}
	if !st.known {
		return nil
	}
	if _, ok := st.cols.Lookup(name); !ok {
		return field.ErrorList{field.Invalid(p, name, "no such column; the columns here are "+strings.Join(st.cols.Names(), ", "))}
	}
	return nil
}

// typeOf returns the type of the column name, unknownType when it is not known.
func (st flowState) typeOf(name string) ColumnType {
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
	// streamJoin is the index of the first stream join step, -1 if none.
	streamJoin int
	// rights holds the right side's columns of each join step, by step index.
	rights map[int]Columns
}

func (r *flowResult) output() flowState { return r.states[len(r.states)-1] }

// flow validates the sources and transform steps and follows the columns through them.
func (s *StreamingQuerySpec) flow(spec *field.Path, x Expressions) *flowResult {
	r := &flowResult{aggregate: -1, streamJoin: -1, rights: map[int]Columns{}}
	cur := s.sourceFlow(spec.Child("sources"), r)

	steps := spec.Child("transform")
	if len(s.Transform) > MaxSteps {
		r.errs = append(r.errs, field.TooMany(steps, len(s.Transform), MaxSteps))
	}
	statefulNames := s.statefulNames()
	joinNames, _ := s.JoinNames()
	ordinal, joinOrdinal := 0, 0
	watermarkSeen, statefulSeen := false, false
	for i := range s.Transform {
		st := &s.Transform[i]
		p := steps.Index(i)
		r.states = append(r.states, cur)
		kinds := st.Kinds()
		switch len(kinds) {
		case 0:
			r.errs = append(r.errs, field.Required(p, "exactly one of filter, select, watermark, aggregate, dropDuplicates, join must be set"))
		case 1:
		default:
			r.errs = append(r.errs, field.Invalid(p, kindList(kinds), "exactly one of filter, select, watermark, aggregate, dropDuplicates, join must be set"))
		}
		next := cur
		if st.Filter != "" {
			r.errs = append(r.errs, cur.filter(p.Child("filter"), st.Filter, x)...)
		}
		if st.Select != nil {
			next = cur.project(p.Child("select"), st.Select, x, &r.errs)
		}
		if w := st.Watermark; w != nil {
			wp := p.Child("watermark")
			switch {
			case statefulSeen:
				r.errs = append(r.errs, field.Forbidden(wp, "a watermark must come before the stateful steps (aggregate, dropDuplicates, a stream join)"))
			case watermarkSeen:
				r.errs = append(r.errs, field.Forbidden(wp, "a query may have only one watermark"))
			}
			watermarkSeen = true
			r.errs = append(r.errs, cur.timestampColumn(wp.Child("column"), w.Column)...)
			if w.Delay == "" {
				r.errs = append(r.errs, field.Required(wp.Child("delay"), "how late rows may arrive, such as 10m (0s: not at all)"))
			}
			r.errs = append(r.errs, duration(wp.Child("delay"), w.Delay, false)...)
			next.watermark = w.Column
		}
		if a := st.Aggregate; a != nil {
			ap := p.Child("aggregate")
			if r.aggregate < 0 {
				r.aggregate = i
			} else if cur.windowTime {
				r.chained = true
			} else {
				last := r.aggregates[len(r.aggregates)-1]
				r.errs = append(r.errs, field.Forbidden(ap, fmt.Sprintf("an aggregate may follow an aggregate (transform[%d]) only over its windows: "+
					"the earlier one must group by a window or session on the watermark column, so that its rows have an event time (their window_end) "+
					"and each is written once, when the watermark closes it", last)))
			}
			r.errs = append(r.errs, statefulName(ap.Child("name"), a.Name, statefulNames, ordinal)...)
			var onWatermark bool
			next, onWatermark = cur.aggregate(ap, a, x, &r.errs)
			r.aggregateOnWatermark = onWatermark && (len(r.aggregates) == 0 || r.aggregateOnWatermark)
			r.aggregates = append(r.aggregates, i)
		}
		if j := st.Join; j != nil {
			jc := joinContext{names: joinNames, ordinal: joinOrdinal, stateful: statefulNames, aggregateAt: r.aggregate, x: x}
			var right flowState
			next, right = s.join(p.Child("join"), j, cur, jc, &r.errs)
			r.rights[i] = right.cols
			if j.Stream != nil {
				statefulSeen = true
				if r.streamJoin < 0 {
					r.streamJoin = i
				}
			}
			joinOrdinal++
		}
		if d := st.DropDuplicates; d != nil {
			dp := p.Child("dropDuplicates")
			if r.aggregate >= 0 && r.aggregate < i {
				r.errs = append(r.errs, field.Forbidden(dp, "a stateful step after an aggregate is not supported; a dropDuplicates may precede the aggregate"))
			}
			r.errs = append(r.errs, statefulName(dp.Child("name"), d.Name, statefulNames, ordinal)...)
			if len(d.Columns) == 0 {
				r.errs = append(r.errs, field.Required(dp.Child("columns"), "the columns that identify a duplicate"))
			}
			seen := map[string]bool{}
			for j, c := range d.Columns {
				r.errs = append(r.errs, cur.column(dp.Child("columns").Index(j), c)...)
				if seen[c] {
					r.errs = append(r.errs, field.Duplicate(dp.Child("columns").Index(j), c))
				}
				seen[c] = true
			}
		}
		if st.Aggregate != nil || st.DropDuplicates != nil {
			statefulSeen = true
			ordinal++
		}
		if len(kinds) > 1 {
			next.known = false
		}
		cur = next
	}
	r.states = append(r.states, cur)
	return r
}

// sourceFlow validates the sources and returns the columns of their union.
func (s *StreamingQuerySpec) sourceFlow(p *field.Path, r *flowResult) flowState {
	if len(s.Sources) == 0 {
		r.errs = append(r.errs, field.Required(p, "a query reads at least one source"))
	}
	if len(s.Sources) > MaxSources {
		r.errs = append(r.errs, field.TooMany(p, len(s.Sources), MaxSources))
	}
	var cur flowState
	first := ""
	names := map[string]bool{}
	joined := s.JoinedSources()
	unioned := 0
	for i := range s.Sources {
		src := &s.Sources[i]
		sp := p.Index(i)
		r.errs = append(r.errs, src.validate(sp)...)
		if src.Name != "" && names[src.Name] {
			r.errs = append(r.errs, field.Duplicate(sp.Child("name"), src.Name))
		}
		names[src.Name] = true
		if joined[src.Name] {
			continue // a stream join's right side: not unioned
		}
		unioned++
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
			at := sp
			if src.Schema != nil {
				at = sp.Child("schema")
			}
			r.errs = append(r.errs, field.Invalid(at, describeColumns(cols),
				fmt.Sprintf("sources are unioned and must yield the same columns in the same order; source %q yields %s (a source a stream join reads is not unioned)", first, describeColumns(cur.cols))))
		}
	}
	if len(s.Sources) > 0 && unioned == 0 {
		r.errs = append(r.errs, field.Invalid(p, len(s.Sources), "every source is the right side of a stream join: at least one source must feed the transform as its left side"))
	}
	return cur
}

// statefulID is the name of a stateful step, and whether the spec gives it (else it is the
// step's ordinal).
type statefulID struct {
	name     string
	explicit bool
}

// statefulNames returns the name of each stateful step, in order.
func (s *StreamingQuerySpec) statefulNames() []statefulID {
	var ids []statefulID
	for i := range s.Transform {
		st := &s.Transform[i]
		if st.Aggregate != nil || st.DropDuplicates != nil {
			name := st.StatefulName(len(ids))
			ids = append(ids, statefulID{name: name, explicit: name != strconv.Itoa(len(ids))})
		}
	}
	return ids
}

// statefulName checks the explicit name of the stateful step with the given ordinal: it must
// not be the name of an earlier step, nor the ordinal of a later unnamed one.
func statefulName(p *field.Path, name string, ids []statefulID, ordinal int) field.ErrorList {
	if name == "" {
		return nil
	}
	if errs := segmentName(p, name); len(errs) > 0 {
		return errs
	}
	for j, other := range ids {
		if other.name == name && (j < ordinal || j > ordinal && !other.explicit) {
			return field.ErrorList{field.Duplicate(p, name)}
		}
	}
	return nil
}

func (st flowState) timestampColumn(p *field.Path, name string) field.ErrorList {
	if errs := st.column(p, name); len(errs) > 0 || !st.known {
		return errs
	}
	if t := st.typeOf(name); t != TypeTimestamp && t != unknownType {
		return field.ErrorList{field.Invalid(p, name, fmt.Sprintf("must be a timestamp column, not %s", t))}
	}
	return nil
}

func (st flowState) filter(p *field.Path, expr string, x Expressions) field.ErrorList {
	if err := x.CheckFilter(st.exprColumns(), st.known, expr); err != nil {
		return field.ErrorList{field.Invalid(p, expr, err.Error())}
	}
	return nil
}

// exprColumns returns the columns an expression here may name: each valid name once.
func (st flowState) exprColumns() Columns {
	var cols Columns
	for _, c := range st.cols {
		if columnName(nil, c.Name) != nil {
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

func (st flowState) project(p *field.Path, projs []Projection, x Expressions, errs *field.ErrorList) flowState {
	next := flowState{known: true}
	if len(projs) == 0 {
		*errs = append(*errs, field.Required(p, "a select lists at least one column"))
	}
	cols := st.exprColumns()
	for j, pr := range projs {
		pp := p.Index(j)
		*errs = append(*errs, columnName(pp.Child("name"), pr.Name)...)
		if _, dup := next.cols.Lookup(pr.Name); dup && pr.Name != "" {
			*errs = append(*errs, field.Duplicate(pp.Child("name"), pr.Name))
		}
		t := unknownType
		switch {
		case pr.Expr == "":
			*errs = append(*errs, field.Required(pp.Child("expr"), "a CEL expression over the columns, such as a column's name"))
		default:
			typ, err := x.CheckProjection(cols, st.known, pr.Expr)
			if err != nil {
				*errs = append(*errs, field.Invalid(pp.Child("expr"), pr.Expr, err.Error()))
			}
			t = typ
		}
		next.cols = append(next.cols, Column{Name: pr.Name, Type: t})
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
// window_end, as Spark's window(window_time(window), …) does.
func (st flowState) aggregate(p *field.Path, a *Aggregate, x Expressions, errs *field.ErrorList) (next flowState, onWatermark bool) {
	next = flowState{known: true}
	add := func(p *field.Path, c Column) {
		if _, dup := next.cols.Lookup(c.Name); dup {
			*errs = append(*errs, field.Duplicate(p, c.Name))
			return
		}
		next.cols = append(next.cols, c)
	}
	windowAt, sessionAt := -1, -1
	for k, g := range a.GroupBy {
		gp := p.Child("groupBy").Index(k)
		var set []string
		for name, ok := range map[string]bool{"column": g.Column != "", "window": g.Window != nil, "session": g.Session != nil} {
			if ok {
				set = append(set, name)
			}
		}
		slices.Sort(set)
		switch {
		case len(set) == 0:
			*errs = append(*errs, field.Required(gp, "exactly one of column, window, session must be set"))
		case len(set) > 1:
			*errs = append(*errs, field.Invalid(gp, strings.Join(set, ", "), "exactly one of column, window, session must be set"))
		}
		if sw := g.Session; sw != nil {
			sp := gp.Child("session")
			switch {
			case sessionAt >= 0:
				*errs = append(*errs, field.Forbidden(sp, fmt.Sprintf("an aggregate may have only one session window (groupBy[%d] is one)", sessionAt)))
			case windowAt >= 0:
				*errs = append(*errs, field.Forbidden(sp, fmt.Sprintf("an aggregate groups by a window or by a session, not both (groupBy[%d] is a window): a row would belong to a window and a session at once", windowAt)))
			}
			if sessionAt < 0 {
				sessionAt = k
			}
			colErrs := st.timestampColumn(sp.Child("column"), sw.Column)
			*errs = append(*errs, colErrs...)
			if len(colErrs) == 0 && st.known && st.watermark != sw.Column {
				msg := "a session closes when the watermark reaches its end: the session column must be the watermark's column, and the query has no watermark before this step"
				if st.watermark != "" {
					msg = fmt.Sprintf("a session closes when the watermark reaches its end: the session column must be the watermark's column %q", st.watermark)
				}
				*errs = append(*errs, field.Invalid(sp.Child("column"), sw.Column, msg))
			}
			onWatermark = onWatermark || (st.watermark != "" && sw.Column == st.watermark)
			switch {
			case sw.Gap == "" && sw.GapExpr == "":
				*errs = append(*errs, field.Required(sp.Child("gap"), "how long a session stays open after its newest row, such as 5m, or gapExpr to compute it per row"))
			case sw.Gap != "" && sw.GapExpr != "":
				*errs = append(*errs, field.Invalid(sp, "gap, gapExpr", "exactly one of gap, gapExpr must be set"))
			case sw.Gap != "":
				*errs = append(*errs, duration(sp.Child("gap"), sw.Gap, true)...)
			default:
				// A duration compares with a duration: the check proves the type without a
				// method of its own on Expressions.
				if err := x.CheckFilter(st.exprColumns(), st.known, "("+sw.GapExpr+") > duration('0s')"); err != nil {
					*errs = append(*errs, field.Invalid(sp.Child("gapExpr"), sw.GapExpr, "must be a CEL expression yielding a duration, such as duration('5m'): "+err.Error()))
				}
			}
			add(sp, Column{Name: ColumnWindowStart, Type: TypeTimestamp})
			add(sp, Column{Name: ColumnWindowEnd, Type: TypeTimestamp})
		}
		if g.Column != "" {
			*errs = append(*errs, st.column(gp.Child("column"), g.Column)...)
			onWatermark = onWatermark || (st.watermark != "" && g.Column == st.watermark)
			add(gp.Child("column"), Column{Name: g.Column, Type: st.typeOf(g.Column)})
		}
		if w := g.Window; w != nil {
			wp := gp.Child("window")
			switch {
			case windowAt >= 0:
				*errs = append(*errs, field.Forbidden(wp, fmt.Sprintf("an aggregate may have only one window (groupBy[%d] is one)", windowAt)))
			case sessionAt >= 0:
				*errs = append(*errs, field.Forbidden(wp, fmt.Sprintf("an aggregate groups by a window or by a session, not both (groupBy[%d] is a session): a row would belong to a window and a session at once", sessionAt)))
			}
			if windowAt < 0 {
				windowAt = k
			}
			*errs = append(*errs, st.timestampColumn(wp.Child("column"), w.Column)...)
			onWatermark = onWatermark || (st.watermark != "" && w.Column == st.watermark)
			if w.Duration == "" {
				*errs = append(*errs, field.Required(wp.Child("duration"), "the window length, such as 5m"))
			} else if e := duration(wp.Child("duration"), w.Duration, true); len(e) > 0 {
				*errs = append(*errs, e...)
			} else if w.Slide != "" {
				if e := duration(wp.Child("slide"), w.Slide, true); len(e) > 0 {
					*errs = append(*errs, e...)
				} else if size, slide := parsed(w.Duration), parsed(w.Slide); slide > size {
					*errs = append(*errs, field.Invalid(wp.Child("slide"), string(w.Slide), fmt.Sprintf("must not exceed the window duration %s", w.Duration)))
				}
			}
			add(wp, Column{Name: ColumnWindowStart, Type: TypeTimestamp})
			add(wp, Column{Name: ColumnWindowEnd, Type: TypeTimestamp})
		}
	}
	windowed := windowAt >= 0 && st.watermark != "" && a.GroupBy[windowAt].Window.Column == st.watermark ||
		sessionAt >= 0 && st.watermark != "" && a.GroupBy[sessionAt].Session.Column == st.watermark
	if windowed {
		next.watermark, next.windowTime = ColumnWindowEnd, true
	}
	if st.windowTime && st.known && !windowed {
		*errs = append(*errs, field.Invalid(p.Child("groupBy"), describeKeys(a.GroupBy),
			fmt.Sprintf("over an earlier aggregate's windows an aggregate groups them by a window (or session) on their end, %q, such as {window: {column: %s, duration: 1m}}: "+
				"a window takes each earlier window at its last instant, as Spark's window(window_time(window), …) does", st.watermark, st.watermark)))
	}
	ap := p.Child("aggregates")
	if len(a.Aggregates) == 0 {
		*errs = append(*errs, field.Required(ap, "at least one aggregate, such as {name: n, function: count}"))
	}
	for j, ag := range a.Aggregates {
		jp := ap.Index(j)
		*errs = append(*errs, columnName(jp.Child("name"), ag.Name)...)
		in := unknownType
		if ag.Column != "" {
			*errs = append(*errs, st.column(jp.Child("column"), ag.Column)...)
			in = st.typeOf(ag.Column)
		}
		out := unknownType
		switch ag.Function {
		case AggCount, AggCountDistinct:
			out = TypeLong
			if ag.Function == AggCountDistinct && ag.Column == "" {
				*errs = append(*errs, field.Required(jp.Child("column"), "count_distinct needs an input column"))
			}
		case AggSum, AggAvg, AggMin, AggMax:
			if ag.Column == "" {
				*errs = append(*errs, field.Required(jp.Child("column"), fmt.Sprintf("%s needs an input column", ag.Function)))
				break
			}
			numeric := ag.Function == AggSum || ag.Function == AggAvg
			if numeric && in != unknownType && !in.Numeric() {
				*errs = append(*errs, field.Invalid(jp.Child("column"), ag.Column, fmt.Sprintf("%s needs a long or double column, not %s", ag.Function, in)))
				break
			}
			out = in
			if ag.Function == AggAvg {
				out = TypeDouble
			}
		case "":
			*errs = append(*errs, field.Required(jp.Child("function"), "one of count, sum, min, max, avg, count_distinct"))
		default:
			*errs = append(*errs, field.NotSupported(jp.Child("function"), ag.Function, AggregateFunctions()))
		}
		if ag.Name != "" {
			add(jp.Child("name"), Column{Name: ag.Name, Type: out})
		}
	}
	return next, onWatermark
}

// describeKeys describes an aggregate's group keys in an error: "bidder, window(window_end)".
func describeKeys(keys []GroupKey) string {
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

func describeColumns(cols Columns) string {
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

// parsed returns the value of a duration already checked to parse.
func parsed(d Duration) time.Duration {
	v, _ := d.Parse()
	return v
}
