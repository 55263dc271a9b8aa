package compat

import (
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
	// Path is normalized like SourceShape.Path; Format is a files side's format.
	Path   string        `json:"path"`
	Format v1.FileFormat `json:"format,omitempty"`
	// Refresh is the refresh policy; nil keeps the first snapshot.
	Refresh *v1.Refresh `json:"refresh,omitempty"`
}

// StreamSideShape is a stream join's right side: the source, its watermark and the time bound.
type StreamSideShape struct {
	Source string `json:"source"`
	// Watermark is the right side's watermark (its From is the source column).
	Watermark WatermarkShape `json:"watermark"`
	TimeBound v1.TimeBound   `json:"timeBound"`
}

func joinShape(spec *v1.StreamingQuerySpec, id string, j *v1.Join, in v1.Columns, from map[string]string, _ string) JoinShape {
	js := JoinShape{ID: id, Type: j.EffectiveType(), Keys: []JoinKeyShape{}}
	right, _ := j.RightColumns(spec)
	for _, k := range j.Keys {
		rk := columnKey(k.Right, right, map[string]string{k.Right: k.Right})
		js.Keys = append(js.Keys, JoinKeyShape{Left: columnKey(k.Left, in, from), Right: rk})
	}
	switch {
	case j.Static != nil:
		st := &StaticSideShape{Kind: j.Static.Kind(), Path: checkpoint.CanonicalLocation(j.Static.Path())}
		if j.Static.Files != nil {
			st.Format = j.Static.Files.Format
		}
		if r := j.Static.Refresh; r != nil && (r.Every != "" || r.OnNewVersion) {
			st.Refresh = r.DeepCopy()
		}
		js.Static = st
	case j.Stream != nil:
		js.Stream = &StreamSideShape{
			Source:    j.Stream.Source,
			Watermark: WatermarkShape{Column: j.Stream.Watermark.Column, Delay: j.Stream.Watermark.Delay, From: j.Stream.Watermark.Column},
			TimeBound: j.Stream.TimeBound,
		}
	}
	return js
}
