package v1

import (
	"slices"
	"strings"
)

// Join joins the rows flowing into the step (the left side) with a right side: a static table
// read as a snapshot (Static), or a second named source (Stream). Exactly one of Static and
// Stream is set. Rows match when every key pair in Keys is equal (a null key never matches) and,
// for a stream join, when the right row's event time lies within TimeBound of the left row's.
//
// The output has the left side's columns, then the right side's, each side's renamed by its
// prefix (LeftPrefix, RightPrefix); or, with Select, exactly the listed columns. A leftSemi
// join yields the left side's columns only. A name that
// both sides would yield is refused at validation. An outer join fills the missing side's
// columns with nulls.
// +kubebuilder:validation:XValidation:rule="has(self.static) != has(self.stream)",message="exactly one of static, stream must be set"
// +kubebuilder:validation:XValidation:rule="!has(self.select) || (!has(self.leftPrefix) && !has(self.rightPrefix))",message="select and the prefixes are exclusive: select names every output column"
type Join struct {
	// Name identifies the join in the checkpoint: a stream join's state, a static join's
	// snapshot version in the offsets log. A DNS label, unique among the stateful steps.
	// Omitted: the step's ordinal among the stateful steps (joins count among them).
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name,omitempty"`
	// Type is inner (default: only matching rows), leftOuter (every left row; unmatched ones with
	// nulls for the right side), rightOuter (every right row; stream joins only), fullOuter
	// (every row of both sides; stream joins only) or leftSemi (each left row that has a match,
	// once, with the left side's columns only; stream joins only).
	// +optional
	// +kubebuilder:default=inner
	Type JoinType `json:"type,omitempty"`
	// Keys lists the equality keys, in order; the order is part of a stream join's state key.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	Keys []JoinKey `json:"keys"`
	// Static: the right side is a Delta table or a files folder, read as a snapshot.
	// +optional
	Static *StaticSide `json:"static,omitempty"`
	// Stream: the right side is a named source of the query, which is then read for the join
	// only and not unioned with the other sources.
	// +optional
	Stream *StreamSide `json:"stream,omitempty"`
	// LeftPrefix is prepended to the names of the left side's columns in the output.
	// +optional
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_]*$`
	LeftPrefix string `json:"leftPrefix,omitempty"`
	// RightPrefix is prepended to the names of the right side's columns in the output.
	// +optional
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_]*$`
	RightPrefix string `json:"rightPrefix,omitempty"`
	// Select lists the output columns, each taken from one side. Omitted: every column of both
	// sides, renamed by the prefixes.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +listType=atomic
	Select []JoinColumn `json:"select,omitempty"`
}

// JoinType is the type of a join.
// +kubebuilder:validation:Enum=inner;leftOuter;rightOuter;fullOuter;leftSemi
type JoinType string

// Join types, with SQL's meaning.
const (
	JoinInner      JoinType = "inner"
	JoinLeftOuter  JoinType = "leftOuter"
	JoinRightOuter JoinType = "rightOuter"
	JoinFullOuter  JoinType = "fullOuter"
	JoinLeftSemi   JoinType = "leftSemi"
)

// JoinTypes lists every join type.
func JoinTypes() []JoinType {
	return []JoinType{JoinInner, JoinLeftOuter, JoinRightOuter, JoinFullOuter, JoinLeftSemi}
}

// OuterLeft reports whether the join type keeps the left rows that match nothing.
func (t JoinType) OuterLeft() bool { return t == JoinLeftOuter || t == JoinFullOuter }

// OuterRight reports whether the join type keeps the right rows that match nothing.
func (t JoinType) OuterRight() bool { return t == JoinRightOuter || t == JoinFullOuter }

// StaticJoinTypes lists the join types of a static join.
func StaticJoinTypes() []JoinType { return []JoinType{JoinInner, JoinLeftOuter} }

// JoinKey is one equality key: a column of each side. Both must have the same type.
type JoinKey struct {
	// Left is a column of the rows flowing into the step.
	Left string `json:"left"`
	// Right is a column of the right side.
	Right string `json:"right"`
}

// JoinSide names a side of a join.
// +kubebuilder:validation:Enum=left;right
type JoinSide string

// Join sides.
const (
	SideLeft  JoinSide = "left"
	SideRight JoinSide = "right"
)

// JoinColumn is one output column of a join's Select.
type JoinColumn struct {
	// Side is left or right.
	Side JoinSide `json:"side"`
	// Column is a column of that side.
	Column string `json:"column"`
	// Name is the output column's name. Omitted: Column.
	// +optional
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_]*$`
	Name string `json:"name,omitempty"`
}

// OutputName returns the column's name in the join's output.
func (c JoinColumn) OutputName() string {
	if c.Name != "" {
		return c.Name
	}
	return c.Column
}

// StaticSide is the right side of a stream–static join: a Delta table or a files folder read
// whole as a snapshot. The snapshot a batch joins against (the Delta version, or the files'
// listing fingerprint) is recorded in the batch's offsets-log entry, so a replayed batch joins
// against exactly the same snapshot.
// +kubebuilder:validation:XValidation:rule="[has(self.delta), has(self.files), has(self.postgres)].filter(x, x).size() == 1",message="exactly one of delta, files, postgres must be set"
// +kubebuilder:validation:XValidation:rule="!has(self.refresh) || !has(self.refresh.onNewVersion) || !self.refresh.onNewVersion || has(self.delta)",message="refresh.onNewVersion needs a delta table; refresh a files folder with every"
type StaticSide struct {
	// Delta reads the table's latest version.
	// +optional
	Delta *StaticDelta `json:"delta,omitempty"`
	// Files reads every file under the folder.
	// +optional
	Files *StaticFiles `json:"files,omitempty"`
	// Postgres reads every row of a PostgreSQL table.
	// +optional
	Postgres *StaticPostgres `json:"postgres,omitempty"`
	// Schema lists the columns read from the table or files.
	Schema *Schema `json:"schema"`
	// Refresh says when a new snapshot is read, checked once per batch before it is planned.
	// Omitted: the snapshot read by the query's first batch is kept.
	// +optional
	Refresh *Refresh `json:"refresh,omitempty"`
}

// StaticSideKind names the kind of a static side.
type StaticSideKind string

// Static side kinds.
const (
	StaticDeltaKind    StaticSideKind = "delta"
	StaticFilesKind    StaticSideKind = "files"
	StaticPostgresKind StaticSideKind = "postgres"
)

// Kind returns the static side's kind, or "" unless exactly one is set.
func (s *StaticSide) Kind() StaticSideKind {
	n := 0
	for _, set := range []bool{s.Delta != nil, s.Files != nil, s.Postgres != nil} {
		if set {
			n++
		}
	}
	switch {
	case n != 1:
		return ""
	case s.Delta != nil:
		return StaticDeltaKind
	case s.Files != nil:
		return StaticFilesKind
	}
	return StaticPostgresKind
}

// Path returns the static side's table or folder path; for a PostgreSQL table its name.
func (s *StaticSide) Path() string {
	switch {
	case s.Delta != nil:
		return s.Delta.Path
	case s.Files != nil:
		return s.Files.Path
	case s.Postgres != nil:
		return s.Postgres.Table
	}
	return ""
}

// ID names what the static side reads, its kind and location ("delta:s3://lake/regions"): a
// recorded snapshot is of that side only.
func (s *StaticSide) ID() string { return string(s.Kind()) + ":" + s.Path() }

// S3Connection returns the static side's own S3 settings, nil when it has none.
func (s *StaticSide) S3Connection() *S3Connection {
	switch {
	case s.Delta != nil:
		return s.Delta.S3
	case s.Files != nil:
		return s.Files.S3
	}
	return nil
}

// StaticDelta is a Delta table read as a snapshot.
type StaticDelta struct {
	// Path is the table's folder: a local path, a file:// URL or an s3://bucket/prefix.
	// +kubebuilder:validation:MinLength=1
	Path string `json:"path"`
	// S3 reaches an s3:// path on another server or account than the checkpoint's.
	// +optional
	S3 *S3Connection `json:"s3,omitempty"`
}

// StaticFiles is a folder whose files are read whole as a snapshot.
type StaticFiles struct {
	// Path is the folder: a local path, a file:// URL or an s3://bucket/prefix.
	// +kubebuilder:validation:MinLength=1
	Path string `json:"path"`
	// S3 reaches an s3:// path on another server or account than the checkpoint's.
	// +optional
	S3 *S3Connection `json:"s3,omitempty"`
	// Format of the files: json (one object per line), csv (columns in schema order, no
	// header) or parquet.
	// +kubebuilder:validation:Enum=json;csv;parquet
	Format FileFormat `json:"format"`
}

// StaticPostgres is a PostgreSQL table read whole as a snapshot. PostgreSQL keeps no versions
// a later batch could read again, so a snapshot is named by a digest of its rows: a batch
// records the digest it joined against, and a replayed batch reads the table again and stops,
// naming the table, when its rows changed since (as a static files side does when a file
// changed).
type StaticPostgres struct {
	// Connection reaches the database. Only dsnEnv is supported for now: the controller does
	// not yet pass a static side's Secret to the engine.
	Connection PostgresConnection `json:"connection"`
	// Table is name or schema.name, of lowercase unquoted identifiers.
	// +kubebuilder:validation:MinLength=1
	Table string `json:"table"`
}

// Refresh says when a static side is read again. At most one field is set.
// +kubebuilder:validation:XValidation:rule="!(has(self.every) && has(self.onNewVersion) && self.onNewVersion)",message="at most one of every, onNewVersion may be set"
type Refresh struct {
	// Every reads a new snapshot when this long has passed since the last one was read (a Go
	// duration such as 10m).
	// +optional
	Every Duration `json:"every,omitempty"`
	// OnNewVersion reads a new snapshot when the Delta table has a newer version.
	// +optional
	OnNewVersion bool `json:"onNewVersion,omitempty"`
}

// StreamSide is the right side of a stream–stream join: a named source of the query. Both
// sides are watermarked: the left by the query's watermark step before the join, the right by
// Watermark. Rows of both sides are buffered in the state store until the watermark passes
// the time bound; outer rows are emitted then.
type StreamSide struct {
	// Source names one of spec.sources. That source is read for this join only: it is not
	// unioned with the other sources, and its columns (after Transform) are the right side's.
	// +kubebuilder:validation:MinLength=1
	Source string `json:"source"`
	// Transform lists filter and select steps applied to the source's rows, in order, before
	// they reach the watermark and the join: the right side's columns are its last step's.
	// Omitted: the source's rows as read.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	Transform []SideStep `json:"transform,omitempty"`
	// Watermark declares event time on a timestamp column of the right side.
	Watermark Watermark `json:"watermark"`
	// TimeBound bounds how far apart in event time matching rows may be.
	TimeBound TimeBound `json:"timeBound"`
}

// SideStep is a stateless step on a join's right side: a filter or a select, as in
// spec.transform. Exactly one field is set.
// +kubebuilder:validation:XValidation:rule="has(self.filter) != has(self.select)",message="exactly one of filter, select must be set"
type SideStep struct {
	// Filter keeps the rows for which this CEL expression is true.
	// +optional
	Filter string `json:"filter,omitempty"`
	// Select replaces the columns with the listed ones, each computed by a CEL expression.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +listType=atomic
	Select []Projection `json:"select,omitempty"`
}

// TimeBound matches a right row with a left row when
// right.RightColumn BETWEEN left.LeftColumn - LowerBound AND left.LeftColumn + UpperBound.
// LeftColumn is the left watermark column, RightColumn the right one.
type TimeBound struct {
	// LeftColumn is the left side's event-time column (its watermark column).
	LeftColumn string `json:"leftColumn"`
	// RightColumn is the right side's event-time column (its watermark column).
	RightColumn string `json:"rightColumn"`
	// LowerBound is how long before the left row's time a right row may be (a Go duration;
	// 0s: not before).
	LowerBound Duration `json:"lowerBound"`
	// UpperBound is how long after the left row's time a right row may be (0s: not after).
	UpperBound Duration `json:"upperBound"`
}

// RightColumns returns the columns of the join's right side as read: the static side's schema,
// or the columns of the source a stream join reads, before join.stream.transform (whose output
// columns need an expression compiler: see plan.FlowPoint.Right). It reports false when they cannot
// be known.
func (j *Join) RightColumns(spec *StreamingQuerySpec) (Columns, bool) {
	switch {
	case j.Static != nil:
		if j.Static.Schema == nil {
			return nil, false
		}
		return slices.Clone(j.Static.Schema.Columns), true
	case j.Stream != nil:
		for i := range spec.Sources {
			if spec.Sources[i].Name == j.Stream.Source {
				return spec.Sources[i].Columns()
			}
		}
	}
	return nil, false
}

// EffectiveType returns the join's type, inner when it is not set.
func (j *Join) EffectiveType() JoinType {
	if j.Type == "" {
		return JoinInner
	}
	return j.Type
}

// RightPrefixHint suggests a rightPrefix in an error that asks for one: the static table's
// or the stream side's source's last path element or name, else "right".
func (j *Join) RightPrefixHint() string {
	switch {
	case j.Stream != nil && j.Stream.Source != "":
		return strings.ReplaceAll(j.Stream.Source, "-", "_")
	case j.Static != nil:
		p := strings.TrimRight(j.Static.Path(), "/")
		if i := strings.LastIndexAny(p, "/"); i >= 0 {
			p = p[i+1:]
		}
		if identifier.MatchString(p) {
			return p
		}
	}
	return "right"
}
