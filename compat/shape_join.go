package compat

import (
	"strings"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
)

// JoinShape is one join step: what its output and, for a stream join, its state depend on.
type JoinShape struct {
	// ID is the join's name, else join-<ordinal among the joins>; a stream join's state and a
	// static join's snapshot record live under it.
	ID   string      `json:"id"`
	Type v1.JoinType `json:"type"`
	// Keys are the equality keys, in order.
	Keys []JoinKeyShape `json:"keys"`
	// Exactly one of Static and Stream is set.
	Static *StaticSideShape `json:"static,omitempty"`
	Stream *StreamSideShape `json:"stream,omitempty"`
}

// JoinKeyShape is one pair of equality keys.
type JoinKeyShape struct {
	Left  KeyShape `json:"left"`
	Right KeyShape `json:"right"`
}

// StaticSideShape is a static join's table: its identity and its refresh policy.
type StaticSideShape struct {
	// Kind is delta or files.
	Kind v1.StaticSideKind `json:"kind"`
	// Path is normalized like SourceShape.Path (a PostgreSQL table's name); Format is a files
	// side's format.
	Path   string        `json:"path"`
	Format v1.FileFormat `json:"format,omitempty"`
	// Connection names where a PostgreSQL table's connection string comes from, as
	// SinkShape.Connection (since version 3).
	Connection string `json:"connection,omitempty"`
	// Refresh is the refresh policy; nil keeps the first snapshot.
	Refresh *v1.Refresh `json:"refresh,omitempty"`
}

// StreamSideShape is a stream join's right side: the source, its transform, its watermark and
// the time bound.
type StreamSideShape struct {
	Source string `json:"source"`
	// Transform describes join.stream.transform, a step a line ("filter: <expr>", "select:
	// name = <expr>, …", expressions without blanks outside string literals); Columns are the
	// right side's columns after it, which the buffered right rows hold (both since version 3;
	// a shape of version 2 has no Columns).
	Transform []string   `json:"transform,omitempty"`
	Columns   v1.Columns `json:"columns,omitempty"`
	// Watermark is the right side's watermark (its From is the source column).
	Watermark WatermarkShape `json:"watermark"`
	TimeBound v1.TimeBound   `json:"timeBound"`
}

// joinShape is the shape of join j, whose left side has the columns in (computed as from
// says) and right side the columns right (a stream side's after its transform).
func joinShape(id string, j *v1.Join, in, right v1.Columns, from map[string]string) JoinShape {
	js := JoinShape{ID: id, Type: j.EffectiveType(), Keys: []JoinKeyShape{}}
	rightFrom := map[string]string{}
	for _, c := range right {
		rightFrom[c.Name] = c.Name
	}
	if j.Stream != nil {
		for _, st := range j.Stream.Transform {
			if st.Select == nil {
				continue
			}
			rightFrom = throughSelect(rightFrom, st.Select)
		}
	}
	for _, k := range j.Keys {
		rk := columnKey(k.Right, right, rightFrom)
		js.Keys = append(js.Keys, JoinKeyShape{Left: columnKey(k.Left, in, from), Right: rk})
	}
	switch {
	case j.Static != nil:
		st := &StaticSideShape{Kind: j.Static.Kind(), Path: checkpoint.CanonicalLocation(j.Static.Path())}
		if j.Static.Files != nil {
			st.Format = j.Static.Files.Format
		}
		if pg := j.Static.Postgres; pg != nil {
			st.Connection = "env/" + pg.Connection.DSNEnvName()
		}
		if r := j.Static.Refresh; r != nil && (r.Every != "" || r.OnNewVersion) {
			st.Refresh = r.DeepCopy()
		}
		js.Static = st
	case j.Stream != nil:
		js.Stream = &StreamSideShape{
			Source:    j.Stream.Source,
			Watermark: WatermarkShape{Column: j.Stream.Watermark.Column, Delay: j.Stream.Watermark.Delay, From: rightFrom[j.Stream.Watermark.Column]},
			TimeBound: j.Stream.TimeBound,
		}
		for _, st := range j.Stream.Transform {
			js.Stream.Transform = append(js.Stream.Transform, describeSideStep(st))
		}
		js.Stream.Columns = right
	}
	return js
}

// describeSideStep renders a step of a stream side's transform, expressions normalized.
func describeSideStep(st v1.SideStep) string {
	if st.Select == nil {
		return "filter: " + normExpr(st.Filter)
	}
	parts := make([]string, len(st.Select))
	for i, p := range st.Select {
		parts[i] = p.Name + " = " + normExpr(p.Expr)
	}
	return "select: " + strings.Join(parts, ", ")
}
