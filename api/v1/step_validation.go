package v1

import (
	"fmt"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateSources checks the sources one by one and as a list: present, unique names, at
// least one feeding the transform. That the unioned sources yield the same columns is the
// plan's to check (it follows the columns).
func (s *StreamingQuerySpec) validateSources(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(s.Sources) == 0 {
		errs = append(errs, field.Required(p, "a query reads at least one source"))
	}
	if len(s.Sources) > MaxSources {
		errs = append(errs, field.TooMany(p, len(s.Sources), MaxSources))
	}
	names := map[string]bool{}
	joined := s.JoinedSources()
	unioned := 0
	for i := range s.Sources {
		src := &s.Sources[i]
		sp := p.Index(i)
		errs = append(errs, src.validate(sp)...)
		errs = append(errs, duplicate(sp.Child("name"), src.Name, names)...)
		if !joined[src.Name] { // a stream join's right side is not unioned
			unioned++
		}
	}
	if len(s.Sources) > 0 && unioned == 0 {
		errs = append(errs, field.Invalid(p, len(s.Sources), "every source is the right side of a stream join: at least one source must feed the transform as its left side"))
	}
	return errs
}

// validateTransform checks the transform steps without following the columns: one kind per
// step, names, required fields, durations, and the order of the steps (one watermark, before
// the stateful steps; nothing stateful after an aggregate). The plan checks the columns,
// types and expressions.
func (s *StreamingQuerySpec) validateTransform(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(s.Transform) > MaxSteps {
		errs = append(errs, field.TooMany(p, len(s.Transform), MaxSteps))
	}
	statefulNames := s.statefulNames()
	joinNames, _ := s.JoinNames()
	ordinal, joinOrdinal, aggregateAt := 0, 0, -1
	watermarkSeen, statefulSeen := false, false
	for i := range s.Transform {
		st := &s.Transform[i]
		sp := p.Index(i)
		errs = append(errs, exactlyOne(sp, st.Kinds(), "filter, select, watermark, aggregate, dropDuplicates, join")...)
		if st.Select != nil {
			errs = append(errs, validateSelect(sp.Child("select"), st.Select)...)
		}
		if w := st.Watermark; w != nil {
			wp := sp.Child("watermark")
			switch {
			case statefulSeen:
				errs = append(errs, field.Forbidden(wp, "a watermark must come before the stateful steps (aggregate, dropDuplicates, a stream join)"))
			case watermarkSeen:
				errs = append(errs, field.Forbidden(wp, "a query may have only one watermark"))
			}
			watermarkSeen = true
			errs = append(errs, columnRef(wp.Child("column"), w.Column)...)
			if w.Delay == "" {
				errs = append(errs, field.Required(wp.Child("delay"), "how late rows may arrive, such as 10m (0s: not at all)"))
			}
			errs = append(errs, duration(wp.Child("delay"), w.Delay, false)...)
		}
		if a := st.Aggregate; a != nil {
			ap := sp.Child("aggregate")
			if aggregateAt < 0 {
				aggregateAt = i
			}
			errs = append(errs, statefulName(ap.Child("name"), a.Name, statefulNames, ordinal)...)
			errs = append(errs, a.validate(ap)...)
		}
		if j := st.Join; j != nil {
			jc := joinContext{names: joinNames, ordinal: joinOrdinal, stateful: statefulNames, aggregateAt: aggregateAt}
			errs = append(errs, s.validateJoin(sp.Child("join"), j, jc)...)
			if j.Stream != nil {
				statefulSeen = true
			}
			joinOrdinal++
		}
		if d := st.DropDuplicates; d != nil {
			dp := sp.Child("dropDuplicates")
			if aggregateAt >= 0 && aggregateAt < i {
				errs = append(errs, field.Forbidden(dp, "a stateful step after an aggregate is not supported; a dropDuplicates may precede the aggregate"))
			}
			errs = append(errs, statefulName(dp.Child("name"), d.Name, statefulNames, ordinal)...)
			if len(d.Columns) == 0 {
				errs = append(errs, field.Required(dp.Child("columns"), "the columns that identify a duplicate"))
			}
			errs = append(errs, columnRefs(dp.Child("columns"), d.Columns)...)
		}
		if st.Aggregate != nil || st.DropDuplicates != nil {
			statefulSeen = true
			ordinal++
		}
	}
	return errs
}

// columnRef checks that a field naming a column is set; whether the column exists where the
// field names it is the plan's to check.
func columnRef(p *field.Path, name string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "a column name")}
	}
	return nil
}

// duplicate reports name, at p, when seen holds it already, and adds it to seen. An empty
// name is no duplicate: the check that it is set reports it.
func duplicate(p *field.Path, name string, seen map[string]bool) field.ErrorList {
	if name == "" {
		return nil
	}
	if seen[name] {
		return field.ErrorList{field.Duplicate(p, name)}
	}
	seen[name] = true
	return nil
}

// columnRefs checks a list of column references: each set, each once.
func columnRefs(p *field.Path, names []string) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, c := range names {
		errs = append(errs, columnRef(p.Index(i), c)...)
		if seen[c] {
			errs = append(errs, field.Duplicate(p.Index(i), c))
		}
		seen[c] = true
	}
	return errs
}

// validateSelect checks a select's projections without their expressions: at least one,
// named, each name once, each with an expression.
func validateSelect(p *field.Path, projs []Projection) field.ErrorList {
	var errs field.ErrorList
	if len(projs) == 0 {
		errs = append(errs, field.Required(p, "a select lists at least one column"))
	}
	names := map[string]bool{}
	for j, pr := range projs {
		pp := p.Index(j)
		errs = append(errs, columnName(pp.Child("name"), pr.Name)...)
		errs = append(errs, duplicate(pp.Child("name"), pr.Name, names)...)
		if pr.Expr == "" {
			errs = append(errs, field.Required(pp.Child("expr"), "a CEL expression over the columns, such as a column's name"))
		}
	}
	return errs
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

// timeKey checks group key k, at p, a window or a session (kind), against the keys before
// it: an aggregate has at most one of kind and not one of each. at is the index of the
// first key of kind, otherAt of the first of the other kind (-1: none yet); a first key of
// kind sets at.
func timeKey(p *field.Path, k int, kind string, at *int, other string, otherAt int) field.ErrorList {
	var errs field.ErrorList
	switch {
	case *at >= 0:
		errs = append(errs, field.Forbidden(p, fmt.Sprintf("an aggregate may have only one %s (groupBy[%d] is one)", kind, *at)))
	case otherAt >= 0:
		errs = append(errs, field.Forbidden(p, fmt.Sprintf("an aggregate groups by a window or by a session, not both (groupBy[%d] is a %s): a row would belong to a window and a session at once", otherAt, other)))
	}
	if *at < 0 {
		*at = k
	}
	return errs
}

// validate checks an aggregate step without following the columns: its group keys (one kind
// each, at most one window or session, their durations) and its aggregations (named, a
// known function with the input column it needs).
func (a *Aggregate) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	windowAt, sessionAt := -1, -1
	for k, g := range a.GroupBy {
		gp := p.Child("groupBy").Index(k)
		var set []string
		for _, kind := range []struct {
			name string
			ok   bool
		}{{"column", g.Column != ""}, {"session", g.Session != nil}, {"window", g.Window != nil}} {
			if kind.ok {
				set = append(set, kind.name)
			}
		}
		errs = append(errs, exactlyOne(gp, set, "column, window, session")...)
		if sw := g.Session; sw != nil {
			sp := gp.Child("session")
			errs = append(errs, timeKey(sp, k, "session window", &sessionAt, "window", windowAt)...)
			errs = append(errs, columnRef(sp.Child("column"), sw.Column)...)
			switch {
			case sw.Gap == "" && sw.GapExpr == "":
				errs = append(errs, field.Required(sp.Child("gap"), "how long a session stays open after its newest row, such as 5m, or gapExpr to compute it per row"))
			case sw.Gap != "" && sw.GapExpr != "":
				errs = append(errs, field.Invalid(sp, "gap, gapExpr", "exactly one of gap, gapExpr must be set"))
			case sw.Gap != "":
				errs = append(errs, duration(sp.Child("gap"), sw.Gap, true)...)
			}
		}
		if w := g.Window; w != nil {
			wp := gp.Child("window")
			errs = append(errs, timeKey(wp, k, "window", &windowAt, "session", sessionAt)...)
			errs = append(errs, columnRef(wp.Child("column"), w.Column)...)
			if w.Duration == "" {
				errs = append(errs, field.Required(wp.Child("duration"), "the window length, such as 5m"))
			} else if e := duration(wp.Child("duration"), w.Duration, true); len(e) > 0 {
				errs = append(errs, e...)
			} else if w.Slide != "" {
				if e := duration(wp.Child("slide"), w.Slide, true); len(e) > 0 {
					errs = append(errs, e...)
				} else if size, slide := parsed(w.Duration), parsed(w.Slide); slide > size {
					errs = append(errs, field.Invalid(wp.Child("slide"), string(w.Slide), fmt.Sprintf("must not exceed the window duration %s", w.Duration)))
				}
			}
		}
	}
	ap := p.Child("aggregates")
	if len(a.Aggregates) == 0 {
		errs = append(errs, field.Required(ap, "at least one aggregate, such as {name: n, function: count}"))
	}
	for j, ag := range a.Aggregates {
		jp := ap.Index(j)
		errs = append(errs, columnName(jp.Child("name"), ag.Name)...)
		switch ag.Function {
		case AggCount:
		case AggCountDistinct:
			if ag.Column == "" {
				errs = append(errs, field.Required(jp.Child("column"), "count_distinct needs an input column"))
			}
		case AggSum, AggAvg, AggMin, AggMax:
			if ag.Column == "" {
				errs = append(errs, field.Required(jp.Child("column"), fmt.Sprintf("%s needs an input column", ag.Function)))
			}
		case "":
			errs = append(errs, field.Required(jp.Child("function"), "one of count, sum, min, max, avg, count_distinct"))
		default:
			errs = append(errs, field.NotSupported(jp.Child("function"), ag.Function, AggregateFunctions()))
		}
	}
	return errs
}

// parsed returns the value of a duration already checked to parse.
func parsed(d Duration) time.Duration {
	v, _ := d.Parse()
	return v
}
