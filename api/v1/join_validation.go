package v1

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// joinContext is what the validation of a join needs to know of the query around it.
type joinContext struct {
	names    []string // every join's name, in order
	ordinal  int      // this join's ordinal among the joins
	stateful []statefulID
	// aggregateAt is the index of the aggregate step before this one, -1 if none.
	aggregateAt int
}

// validateJoin checks a join step without following the columns: its name, one side, the
// side's settings, the type, the keys and output columns named, the time bound's fields and
// the prefixes. The plan checks that the named columns exist, the key types, the left side's
// watermark and the output names that both sides would yield.
func (s *StreamingQuerySpec) validateJoin(p *field.Path, j *Join, jc joinContext) field.ErrorList {
	var errs field.ErrorList
	add := func(e ...*field.Error) { errs = append(errs, e...) }
	add(joinName(p.Child("name"), j, jc)...)
	if jc.aggregateAt >= 0 {
		add(field.Forbidden(p, fmt.Sprintf("a join after an aggregate (transform[%d]) is not supported; join before the aggregate", jc.aggregateAt)))
	}
	switch {
	case j.Static == nil && j.Stream == nil:
		add(field.Required(p, "exactly one of static, stream must be set"))
	case j.Static != nil && j.Stream != nil:
		add(field.Invalid(p, "static, stream", "exactly one of static, stream must be set"))
	case j.Static != nil:
		add(j.Static.validate(p.Child("static"))...)
		if !slices.Contains(StaticJoinTypes(), j.EffectiveType()) && slices.Contains(JoinTypes(), j.EffectiveType()) {
			add(field.NotSupported(p.Child("type"), j.Type, StaticJoinTypes()))
		}
	default:
		add(s.validateStreamSide(p.Child("stream"), j.Stream)...)
	}
	if !slices.Contains(JoinTypes(), j.EffectiveType()) {
		add(field.NotSupported(p.Child("type"), j.Type, JoinTypes()))
	}

	// Keys.
	op := p.Child("keys")
	if len(j.Keys) == 0 {
		add(field.Required(op, "at least one pair of key columns, such as {left: customer_id, right: id}"))
	}
	seen := map[JoinKey]bool{}
	for k, key := range j.Keys {
		kp := op.Index(k)
		add(columnRef(kp.Child("left"), key.Left)...)
		add(columnRef(kp.Child("right"), key.Right)...)
		if seen[key] {
			add(field.Duplicate(kp, key.Left+" = "+key.Right))
		}
		seen[key] = true
	}

	// Time bound of a stream join: its columns are the two watermark columns (the left
	// one is the plan's to check, which follows the left side's watermark).
	if st := j.Stream; st != nil {
		tp := p.Child("stream", "timeBound")
		tb := st.TimeBound
		switch {
		case tb.RightColumn == "":
			add(field.Required(tp.Child("rightColumn"), "the right side's event-time column, its watermark column"))
		case st.Watermark.Column != "" && tb.RightColumn != st.Watermark.Column:
			add(field.Invalid(tp.Child("rightColumn"), tb.RightColumn, fmt.Sprintf("must be the right side's watermark column, %s", st.Watermark.Column)))
		}
		for _, b := range []struct {
			name string
			d    Duration
		}{{"lowerBound", tb.LowerBound}, {"upperBound", tb.UpperBound}} {
			if b.d == "" {
				add(field.Required(tp.Child(b.name), "a Go duration such as 1h or 10m (0s: none)"))
				continue
			}
			add(duration(tp.Child(b.name), b.d, false)...)
		}
	}

	// Output columns.
	switch {
	case len(j.Select) > 0:
		if j.LeftPrefix != "" || j.RightPrefix != "" {
			add(field.Forbidden(p.Child("select"), "select and the prefixes are exclusive: select names every output column"))
		}
		names := map[string]bool{}
		for k, c := range j.Select {
			cp := p.Child("select").Index(k)
			switch c.Side {
			case SideLeft:
				add(columnRef(cp.Child("column"), c.Column)...)
			case SideRight:
				if j.EffectiveType() == JoinLeftSemi {
					add(field.Invalid(cp.Child("side"), c.Side, "a leftSemi join yields the left side's columns only"))
					break
				}
				add(columnRef(cp.Child("column"), c.Column)...)
			case "":
				add(field.Required(cp.Child("side"), "left or right"))
			default:
				add(field.NotSupported(cp.Child("side"), c.Side, []JoinSide{SideLeft, SideRight}))
			}
			at := cp.Child("name")
			if c.Name == "" {
				at = cp.Child("column")
			}
			add(columnName(at, c.OutputName())...)
			if names[c.OutputName()] {
				add(field.Duplicate(at, c.OutputName()))
			}
			names[c.OutputName()] = true
		}
	case j.Select != nil:
		add(field.Required(p.Child("select"), "a select lists at least one column; omit it for every column of both sides"))
	default:
		for _, pf := range []struct {
			name, v string
		}{{"leftPrefix", j.LeftPrefix}, {"rightPrefix", j.RightPrefix}} {
			if pf.v != "" && !identifier.MatchString(pf.v) {
				add(field.Invalid(p.Child(pf.name), pf.v, "a prefix is letters, digits and underscores, not starting with a digit"))
			}
		}
		if j.RightPrefix != "" && j.EffectiveType() == JoinLeftSemi {
			add(field.Invalid(p.Child("rightPrefix"), j.RightPrefix, "a leftSemi join yields the left side's columns only: omit rightPrefix"))
		}
	}
	return errs
}

// joinName checks a join's explicit name: a DNS label, not the id of another join or stateful
// step.
func joinName(p *field.Path, j *Join, jc joinContext) field.ErrorList {
	if j.Name == "" {
		for _, id := range jc.stateful {
			if id.name == jc.names[jc.ordinal] {
				return field.ErrorList{field.Invalid(p, "", fmt.Sprintf("the unnamed join is stored as %s, which a stateful step is named too: name the join", id.name))}
			}
		}
		return nil
	}
	if errs := dnsLabel(p, j.Name); len(errs) > 0 {
		return errs
	}
	for k, other := range jc.names {
		if k != jc.ordinal && other == j.Name {
			return field.ErrorList{field.Duplicate(p, j.Name)}
		}
	}
	for _, id := range jc.stateful {
		if id.name == j.Name {
			return field.ErrorList{field.Invalid(p, j.Name, "is the name of a stateful step too: a join's name must differ from every stateful step's")}
		}
	}
	return nil
}

func (st *StaticSide) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	var set []string
	for _, k := range []struct {
		name string
		ok   bool
	}{{"delta", st.Delta != nil}, {"files", st.Files != nil}, {"postgres", st.Postgres != nil}} {
		if k.ok {
			set = append(set, k.name)
		}
	}
	errs = append(errs, exactlyOne(p, set, "delta, files, postgres")...)
	if pg := st.Postgres; pg != nil {
		pp := p.Child("postgres")
		c := pg.Connection
		switch {
		case c.SecretName != "":
			errs = append(errs, field.Forbidden(pp.Child("connection", "secretName"), "a static side's Secret is not passed to the engine yet: set dsnEnv, an environment variable of the engine holding the connection string"))
		case c.DSNEnv == "":
			errs = append(errs, field.Required(pp.Child("connection", "dsnEnv"), "the engine's environment variable holding the connection string"))
		case !envName.MatchString(c.DSNEnv):
			errs = append(errs, field.Invalid(pp.Child("connection", "dsnEnv"), c.DSNEnv, "must be an environment variable name"))
		}
		if pg.Table == "" {
			errs = append(errs, field.Required(pp.Child("table"), "the table read: name or schema.name"))
		} else if !pgTable.MatchString(pg.Table) {
			errs = append(errs, field.Invalid(pp.Child("table"), pg.Table, "must be name or schema.name of lowercase letters, digits and _, starting with a letter or _"))
		}
	}
	if d := st.Delta; d != nil {
		errs = append(errs, location(p.Child("delta", "path"), d.Path, true)...)
		errs = append(errs, d.S3.validate(p.Child("delta", "s3"), d.Path)...)
	}
	if f := st.Files; f != nil {
		errs = append(errs, location(p.Child("files", "path"), f.Path, true)...)
		errs = append(errs, f.S3.validate(p.Child("files", "s3"), f.Path)...)
		errs = append(errs, requiredOneOf(p.Child("files", "format"), f.Format, "json, csv or parquet", FormatJSON, FormatCSV, FormatParquet)...)
	}
	if st.Schema == nil {
		errs = append(errs, field.Required(p.Child("schema"), "the columns of the static side must be declared"))
	} else {
		errs = append(errs, validateColumns(p.Child("schema", "columns"), st.Schema.Columns)...)
	}
	if r := st.Refresh; r != nil {
		rp := p.Child("refresh")
		if r.Every != "" && r.OnNewVersion {
			errs = append(errs, field.Invalid(rp, "every, onNewVersion", "at most one of every, onNewVersion may be set"))
		}
		if r.Every != "" {
			errs = append(errs, duration(rp.Child("every"), r.Every, true)...)
		}
		if r.OnNewVersion && st.Delta == nil {
			errs = append(errs, field.Invalid(rp.Child("onNewVersion"), true, "needs a delta table: a files folder or a PostgreSQL table has no versions; refresh it with every"))
		}
	}
	return errs
}

// validateStreamSide checks a stream join's right side without following its columns: the
// source it reads, its transform's steps (one kind each; a select's names) and its watermark.
func (s *StreamingQuerySpec) validateStreamSide(p *field.Path, st *StreamSide) field.ErrorList {
	var errs field.ErrorList
	add := func(e ...*field.Error) { errs = append(errs, e...) }
	found := false
	for i := range s.Sources {
		found = found || s.Sources[i].Name == st.Source
	}
	if st.Source == "" {
		add(field.Required(p.Child("source"), "the name of one of spec.sources"))
	} else if !found {
		names := make([]string, len(s.Sources))
		for i := range s.Sources {
			names[i] = s.Sources[i].Name
		}
		add(field.Invalid(p.Child("source"), st.Source, "no such source; the sources are "+strings.Join(names, ", ")))
	}
	for i, step := range st.Transform {
		sp := p.Child("transform").Index(i)
		switch {
		case step.Filter == "" && step.Select == nil:
			add(field.Required(sp, "exactly one of filter, select must be set"))
		case step.Filter != "" && step.Select != nil:
			add(field.Invalid(sp, "filter, select", "exactly one of filter, select must be set"))
		case step.Select != nil:
			add(validateSelect(sp.Child("select"), step.Select)...)
		}
	}
	wp := p.Child("watermark")
	add(columnRef(wp.Child("column"), st.Watermark.Column)...)
	if st.Watermark.Delay == "" {
		add(field.Required(wp.Child("delay"), "how late right rows may arrive, such as 10m (0s: not at all)"))
	}
	add(duration(wp.Child("delay"), st.Watermark.Delay, false)...)
	return errs
}

// validateColumns checks a declared list of columns: names, uniqueness, types.
func validateColumns(p *field.Path, cols Columns) field.ErrorList {
	var errs field.ErrorList
	if len(cols) == 0 {
		errs = append(errs, field.Required(p, "a schema needs at least one column"))
	}
	seen := map[string]bool{}
	for i, c := range cols {
		cp := p.Index(i)
		errs = append(errs, columnName(cp.Child("name"), c.Name)...)
		errs = append(errs, duplicate(cp.Child("name"), c.Name, seen)...)
		if !c.Type.Valid() {
			errs = append(errs, field.NotSupported(cp.Child("type"), c.Type, ColumnTypes()))
		}
	}
	return errs
}
