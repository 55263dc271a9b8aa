package spark

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint/sparkckpt"
	lplan "github.com/lockstep-dev/lockstep/plan"
)

// sparkJoinTypes maps the spec's join types to Dataset.join's.
var sparkJoinTypes = map[v1.JoinType]string{
	v1.JoinInner:      JoinInner,
	v1.JoinLeftOuter:  JoinLeftOuter,
	v1.JoinRightOuter: JoinRightOuter,
	v1.JoinFullOuter:  JoinFullOuter,
	v1.JoinLeftSemi:   JoinLeftSemi,
}

// join compiles a join step of the plan: the right side (a static read, or the stream source
// with join.stream.transform and its watermark), the condition (the keys' equality, and a
// stream join's time bound as Spark's range condition on the two watermark columns, which is
// what lets Spark evict state and emit outer rows) and the output columns.
func (c *compiler) join(p *field.Path, st *lplan.Step) []Step {
	j, in, right := st.Spec.Join, st.In, st.Right
	jn := &Join{Type: sparkJoinTypes[st.JoinType]}
	switch {
	case j.Static != nil:
		jn.Static = c.static(p.Child("static"), j.Static, st.StaticKind, st.JoinName)
		jn.Static.Then = staticColumns(st)
	case j.Stream != nil:
		sp := p.Child("stream")
		src, ok := c.streams[j.Stream.Source]
		if !ok {
			c.errs = append(c.errs, field.Invalid(sp.Child("source"), j.Stream.Source, "no such source"))
			return nil
		}
		jn.Stream = &src
		jn.Right = c.sideSteps(st.RightSteps)
		jn.Right = append(jn.Right, Step{Watermark: &Watermark{Column: j.Stream.Watermark.Column, Delay: fmt.Sprintf("%d milliseconds", st.Durations.Delay.Milliseconds())}})
	}
	var cond []string
	for _, k := range j.Keys {
		l, r := "`l`."+quoteIdent(k.Left), "`r`."+quoteIdent(k.Right)
		cond = append(cond, l+" = "+r)
		if c, ok := in.Lookup(k.Left); ok && c.Type == v1.TypeDouble {
			// Spark's join equates NaN with NaN; the built-in engine's NaN key matches nothing.
			cond = append(cond, "NOT isnan("+l+")")
		}
	}
	if tb := st.TimeBound; tb != nil {
		l, r := "`l`."+quoteIdent(tb.LeftColumn), "`r`."+quoteIdent(tb.RightColumn)
		cond = append(cond,
			fmt.Sprintf("%s >= %s - INTERVAL %d MILLISECONDS", r, l, tb.Lower.Milliseconds()),
			fmt.Sprintf("%s <= %s + INTERVAL %d MILLISECONDS", r, l, tb.Upper.Milliseconds()))
		cond = append(cond, matchable(j.Keys, tb)...)
	}
	jn.Condition = strings.Join(cond, " AND ")
	for _, o := range st.JoinOutput {
		side := "`l`."
		if o.Side == v1.SideRight {
			side = "`r`."
		}
		cols := in
		if o.Side == v1.SideRight {
			cols = right
		}
		col := side + quoteIdent(cols[o.Index].Name)
		if o.Side == v1.SideRight && j.Stream != nil && cols[o.Index].Name == j.Stream.TimeBound.RightColumn {
			// The right side's event time is data after the join: the round trip (which no rule
			// simplifies, as it does a cast to the same type) drops its watermark,
			// so that the left side's stays the one event-time column flowing on (Spark allows
			// one per stream, which a second stream join or a window would find two of).
			col = "timestamp_micros(unix_micros(" + col + "))"
		}
		jn.Select = append(jn.Select, col+" AS "+quoteIdent(o.Name))
	}
	return []Step{{Join: jn}}
}

// staticColumns is the projection a static side is cached in: the right side's columns the join
// uses (its keys and its output's), in the side's order, for a Parquet folder or a Delta table;
// nil when it uses them all, or for a side whose reader checks each row's every column (CSV,
// JSON: a malformed value fails the query, used or not) or reads them from a database. The
// runner caches a static side whole (Runner.staticSide): unpruned, every column of every row
// would be decoded and held once a run, where Spark reads only the used ones of a side it does
// not cache.
func staticColumns(st *lplan.Step) []string {
	j := st.Spec.Join
	switch {
	case j.Static.Delta != nil:
	case j.Static.Files != nil && j.Static.Files.Format == v1.FormatParquet:
	default:
		return nil
	}
	used := map[string]bool{}
	for _, k := range j.Keys {
		used[k.Right] = true
	}
	for _, o := range st.JoinOutput {
		if o.Side == v1.SideRight {
			used[st.Right[o.Index].Name] = true
		}
	}
	if len(used) >= len(st.Right) {
		return nil
	}
	var cols []string
	for _, c := range st.Right {
		if used[c.Name] {
			cols = append(cols, quoteIdent(c.Name))
		}
	}
	return cols
}

// matchable is a stream join's conditions that a row's key columns and event time are not
// null, each over one side's columns. Such a row can match nothing; the built-in engine writes
// it at once, with nulls, when its side is outer, and drops it otherwise (docs/state.md).
// Spark's stream join applies the conditions on one side's columns to each row before it
// joins or buffers it, and a row that fails them is written at once with nulls when its side
// is outer, else dropped (StreamingSymmetricHashJoinExec's preJoinFilter), as the built-in
// engine does; without them, Spark would buffer a row whose event time is null in the join's
// state, which its watermark never evicts, and never write it, and write a row with a null key
// only when its watermark evicts it. The late rows are dropped first on both.
func matchable(keys []v1.JoinKey, tb *lplan.TimeBound) []string {
	var out []string
	for _, k := range keys {
		out = append(out, "`l`."+quoteIdent(k.Left)+" IS NOT NULL", "`r`."+quoteIdent(k.Right)+" IS NOT NULL")
	}
	return append(out, "`l`."+quoteIdent(tb.LeftColumn)+" IS NOT NULL", "`r`."+quoteIdent(tb.RightColumn)+" IS NOT NULL")
}

// sideSteps compiles a stream side's transform, compiled in the plan.
func (c *compiler) sideSteps(steps []lplan.SideStep) []Step {
	var out []Step
	for _, ss := range steps {
		if ss.Filter != nil {
			out = append(out, c.filter(ss.Path.Child("filter"), ss.Filter)...)
			continue
		}
		// The side's watermark comes after its transform: no column is event time yet.
		out = append(out, Step{Select: c.project(ss.Path.Child("select"), ss.Select, ss.In, "", "")})
	}
	return out
}

// static compiles a stream–static join's right side: a batch read of a files folder, a Delta
// table or a PostgreSQL table, which the runner caches, so that every batch of a run joins
// against the snapshot its first batch read. A files folder or a Delta table is read at the
// snapshot c.statics pins (the files, the version), which a restart keeps; a PostgreSQL table
// is read again at every start (docs/spark.md).
func (c *compiler) static(p *field.Path, st *v1.StaticSide, kind v1.StaticSideKind, joinName string) *Source {
	s := &Source{Options: map[string]string{}}
	pin, pinned := c.statics[joinName]
	if st.Refresh != nil {
		c.refuse(p.Child("refresh"), "", "Spark joins a static side's rows read once per run; a refresh within a run is not compiled: omit refresh, and restart the query to read a new snapshot")
	}
	switch kind {
	case v1.StaticFilesKind:
		f := st.Files
		c.s3Settings(p.Child("files", "s3"), f.S3, joinName, f.Path)
		s.Format, s.Path = string(f.Format), sparkckpt.HadoopLocation(f.Path)
		switch f.Format {
		case v1.FormatCSV:
			s.Options["header"] = "false"
			s.Options["mode"] = "FAILFAST"
		case v1.FormatJSON:
			s.Options["mode"] = "FAILFAST"
		}
		s.Schema, s.Project = readSchema(st.Schema.Columns, f.Format != v1.FormatParquet)
		if pinned {
			s.Paths = make([]string, len(pin.Files))
			for i, f := range pin.Files {
				s.Paths[i] = sparkckpt.HadoopLocation(f)
			}
		}
	case v1.StaticDeltaKind:
		// Read at the pinned version (versionAsOf); without a pin, the runner pins the version
		// it finds at the first read: Spark's Delta reader would otherwise resolve the newest
		// version for every batch.
		d := st.Delta
		c.s3Settings(p.Child("delta", "s3"), d.S3, joinName, d.Path)
		s.Format, s.Path, s.Project = "delta", sparkckpt.HadoopLocation(d.Path), deltaProject(st.Schema.Columns)
		if pinned {
			s.Options["versionAsOf"] = strconv.FormatInt(pin.Version, 10)
		}
	case v1.StaticPostgresKind:
		s = c.postgresStatic(p.Child("postgres"), st, slices.Index(postgresStatics(c.spec), st), c.getenv)
	}
	return s
}
