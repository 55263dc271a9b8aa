package plan

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
)

// join follows the columns through a join step and returns those flowing out of it and
// those of its right side (after a stream side's transform). It checks what needs them: the
// key and output columns exist, the keys' types agree, the left side has a watermark that is
// the time bound's left column, no name is yielded by both sides. api/v1 checks the step's
// fields by themselves.
func join(s *v1.StreamingQuerySpec, p *field.Path, j *v1.Join, cur flowState, c *compiler, errs *field.ErrorList) (flowState, flowState) {
	add := func(e ...*field.Error) { *errs = append(*errs, e...) }
	var right v1.Columns
	rightKnown := false
	switch {
	case j.Static != nil && j.Stream == nil:
		right, rightKnown = j.RightColumns(s)
	case j.Stream != nil && j.Static == nil:
		right, rightKnown = streamSide(s, p.Child("stream"), j.Stream, c, errs)
	}
	rs := flowState{cols: right, known: rightKnown}

	for k, key := range j.Keys {
		kp := p.Child("keys").Index(k)
		le := cur.column(kp.Child("left"), key.Left)
		re := rs.column(kp.Child("right"), key.Right)
		add(le...)
		add(re...)
		if key.Left != "" && key.Right != "" && len(le) == 0 && len(re) == 0 && cur.known && rs.known {
			lt, rt := cur.typeOf(key.Left), rs.typeOf(key.Right)
			if lt != rt && lt != unknownType && rt != unknownType {
				add(field.Invalid(kp.Child("right"), key.Right, fmt.Sprintf("is %s while the left key %s is %s: join keys must have the same type", rt, key.Left, lt)))
			}
		}
	}

	// Time bound of a stream join: its left column is the left side's watermark column.
	if st := j.Stream; st != nil {
		tp := p.Child("stream", "timeBound")
		tb := st.TimeBound
		switch {
		case cur.watermark == "":
			add(field.Required(p.Child("stream"), "a stream join needs a watermark on the left side: add a watermark step before the join"))
		case tb.LeftColumn == "":
			add(field.Required(tp.Child("leftColumn"), "the left side's event-time column, "+cur.watermark))
		case tb.LeftColumn != cur.watermark:
			add(field.Invalid(tp.Child("leftColumn"), tb.LeftColumn, fmt.Sprintf("must be the left side's watermark column, %s", cur.watermark)))
		}
	}

	// Output columns.
	next := flowState{known: cur.known && rightKnown}
	switch {
	case len(j.Select) > 0:
		for k, col := range j.Select {
			cp := p.Child("select").Index(k)
			switch {
			case col.Side == v1.SideLeft:
				add(cur.column(cp.Child("column"), col.Column)...)
			case col.Side == v1.SideRight && j.EffectiveType() != v1.JoinLeftSemi:
				add(rs.column(cp.Child("column"), col.Column)...)
			}
		}
	case j.Select == nil && next.known && j.EffectiveType() != v1.JoinLeftSemi:
		at := p.Child("rightPrefix")
		leftNames := map[string]bool{}
		for _, c := range cur.cols {
			leftNames[j.LeftPrefix+c.Name] = true
		}
		for _, c := range right {
			if n := j.RightPrefix + c.Name; leftNames[n] {
				add(field.Invalid(at, j.RightPrefix, fmt.Sprintf("both sides would yield a column %s: set leftPrefix or rightPrefix (such as %s_), or list the output columns in select", n, strings.ToLower(j.RightPrefixHint()))))
			}
		}
	}
	if next.known {
		for _, c := range joinOutput(j, cur.cols, right) {
			next.cols = append(next.cols, c.Column)
			if c.Side == v1.SideLeft && cur.watermark != "" && cur.cols[c.Index].Name == cur.watermark && next.watermark == "" {
				next.watermark = c.Name
			}
		}
	}
	return next, rs
}

// streamSide follows the columns of a stream join's right side through its transform and
// returns them, checking its expressions and its watermark column.
func streamSide(s *v1.StreamingQuerySpec, p *field.Path, st *v1.StreamSide, c *compiler, errs *field.ErrorList) (v1.Columns, bool) {
	var rs flowState
	for i := range s.Sources {
		if s.Sources[i].Name == st.Source {
			rs.cols, rs.known = s.Sources[i].Columns()
		}
	}
	for i, step := range st.Transform {
		sp := p.Child("transform").Index(i)
		switch {
		case step.Filter == "" && step.Select == nil:
		case step.Filter != "" && step.Select != nil:
			rs.known = false
		case step.Filter != "":
			*errs = append(*errs, rs.filter(sp.Child("filter"), step.Filter, c)...)
		default:
			rs = rs.project(sp.Child("select"), step.Select, c, errs)
		}
	}
	*errs = append(*errs, rs.timestampColumn(p.Child("watermark", "column"), st.Watermark.Column)...)
	return rs.cols, rs.known
}

// OutputColumn is one column of a join's output: its name, type, and where it comes from.
type OutputColumn struct {
	v1.Column
	// Side and Index say which side's column it is, by index in that side's columns.
	Side  v1.JoinSide
	Index int
}

// joinOutput returns the output columns of the join j given the columns of both sides:
// Select's, or every left column then every right column renamed by the prefixes. A leftSemi
// join yields no right column. A column a side does not have is left out; name clashes are not
// checked (validation does).
func joinOutput(j *v1.Join, left, right v1.Columns) []OutputColumn {
	var out []OutputColumn
	if j.EffectiveType() == v1.JoinLeftSemi {
		right = nil
	}
	if len(j.Select) > 0 {
		for _, c := range j.Select {
			cols := left
			if c.Side == v1.SideRight {
				cols = right
			}
			if k := slices.IndexFunc(cols, func(x v1.Column) bool { return x.Name == c.Column }); k >= 0 {
				out = append(out, OutputColumn{Column: v1.Column{Name: c.OutputName(), Type: cols[k].Type}, Side: c.Side, Index: k})
			}
		}
		return out
	}
	for k, c := range left {
		out = append(out, OutputColumn{Column: v1.Column{Name: j.LeftPrefix + c.Name, Type: c.Type}, Side: v1.SideLeft, Index: k})
	}
	for k, c := range right {
		out = append(out, OutputColumn{Column: v1.Column{Name: j.RightPrefix + c.Name, Type: c.Type}, Side: v1.SideRight, Index: k})
	}
	return out
}
