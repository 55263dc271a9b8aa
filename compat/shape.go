package compat

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/plan"
)

// ShapeVersion is the version of the Shape JSON that this package writes. ParseShape reads
// this version and refuses newer ones. Any change to the JSON, additive ones included, bumps
// it, so that an older Lockstep never judges a checkpoint by a record it only partly reads.
const ShapeVersion = 4

// ErrNewerShape means a shape was recorded by a newer Lockstep than this one.
var ErrNewerShape = errors.New("shape recorded by a newer Lockstep")

// Shape is what a checkpoint depends on: the normalized record of a query that the restart
// rules compare. It holds identities, not connection details (no brokers, credentials or
// headers). Its JSON form is stable and versioned (Version); it is stored in the checkpoint's
// shape/<N> log. The zero Shape stands for "no checkpoint yet".
type Shape struct {
	// Version is ShapeVersion for a shape made by this package; 0 for the zero Shape.
	Version int `json:"version"`
	// Sources are the named sources, in spec order.
	Sources []SourceShape `json:"sources"`
	// Watermark is the query's watermark, nil if none.
	Watermark *WatermarkShape `json:"watermark,omitempty"`
	// Operators are the stateful steps, in spec order.
	Operators []OperatorShape `json:"operators,omitempty"`
	// Joins are the join steps, in spec order (since version 2).
	Joins []JoinShape `json:"joins,omitempty"`
	// OutputMode is the output mode, defaulted.
	OutputMode v1.OutputMode `json:"outputMode"`
	// Output are the columns the sink receives, in order.
	Output v1.Columns `json:"outputColumns,omitempty"`
	// Sink is the sink's kind and identity.
	Sink SinkShape `json:"sink"`
	// Trigger is the trigger; the zero Trigger runs the next batch as soon as the last ends.
	Trigger v1.Trigger `json:"trigger,omitzero"`
	// Pinned are the settings the checkpoint pins at its first batch.
	Pinned Pinned `json:"pinned"`
}

// SourceShape is one named source: its kind, its identity (what its offsets refer to), its
// starting position and rate limit, and its schema.
type SourceShape struct {
	Name string        `json:"name"`
	Kind v1.SourceKind `json:"kind"`
	// Topics (sorted) or TopicPattern identify a Kafka source.
	Topics       []string `json:"topics,omitempty"`
	TopicPattern string   `json:"topicPattern,omitempty"`
	// Path identifies a files or delta source; normalized (no file:// prefix, no trailing slash).
	Path string `json:"path,omitempty"`
	// Format is a files source's file format, a Kafka source's value format or a nexmark
	// source's table.
	Format string `json:"format,omitempty"`
	// Subject is the Schema Registry subject a Kafka source in format avro checks its
	// columns against at start (schemaRegistry.subject, default <first topic>-value).
	Subject string `json:"subject,omitempty"`
	// KeyFormat is a Kafka source's key format when not the default string.
	KeyFormat string `json:"keyFormat,omitempty"`
	// StartingOffsets (Kafka) and StartingVersion (delta) say where a source new to the
	// checkpoint starts.
	StartingOffsets string `json:"startingOffsets,omitempty"`
	StartingVersion *int64 `json:"startingVersion,omitempty"`
	// Rate limits: MaxOffsetsPerTrigger (Kafka), MaxFilesPerTrigger (files, delta),
	// RowsPerSecond (rate).
	MaxOffsetsPerTrigger *int64 `json:"maxOffsetsPerTrigger,omitempty"`
	MaxFilesPerTrigger   *int32 `json:"maxFilesPerTrigger,omitempty"`
	RowsPerSecond        int64  `json:"rowsPerSecond,omitempty"`
	// Columns is the declared schema (Kafka raw: value; nexmark: its table's); nil for rate,
	// whose columns are fixed.
	Columns v1.Columns `json:"columns,omitempty"`
}

// WatermarkShape is the query's watermark: the timestamp column at the watermark step and
// the delay.
type WatermarkShape struct {
	Column string      `json:"column"`
	Delay  v1.Duration `json:"delay"`
	// From is how Column is computed (see KeyShape.From).
	From string `json:"from"`
}

// OperatorShape is one stateful step and what its state is encoded by.
type OperatorShape struct {
	// ID is the step's name, else its ordinal among the stateful steps; state lives under it.
	ID string `json:"id"`
	// Kind is aggregate or dropDuplicates.
	Kind v1.StepKind `json:"kind"`
	// Keys are the state key, in order: an aggregate's group keys, or the dedup columns.
	Keys []KeyShape `json:"keys"`
	// Aggregates are an aggregate's values, in order.
	Aggregates []AggregateShape `json:"aggregates,omitempty"`
	// Eviction is the event-time column by which the watermark evicts the step's state
	// (a key or window column that the watermark tracks), "" when its state is never evicted.
	Eviction string `json:"eviction,omitempty"`
}

// KeyShape is one part of a state key: a column with its type, an event-time window or a
// session window.
type KeyShape struct {
	Column string        `json:"column,omitempty"`
	Type   v1.ColumnType `json:"type,omitempty"`
	Window *WindowShape  `json:"window,omitempty"`
	// Session is a session window key (since version 3).
	Session *SessionShape `json:"session,omitempty"`
	// From is how the column (a window's time column) is computed: the CEL expression of
	// the select that made it, followed back through selects that only copy or rename a
	// column, with blanks outside string literals removed; a source column's own name when
	// no select computed it.
	From string `json:"from"`
}

// WindowShape is an event-time window key.
type WindowShape struct {
	Column   string      `json:"column"`
	Duration v1.Duration `json:"duration"`
	// Slide is the distance between window starts; "" for a tumbling window.
	Slide v1.Duration `json:"slide,omitempty"`
}

// SessionShape is a session window key: its time column and its gap, fixed or computed per
// row (GapExpr, normalized as KeyShape.From).
type SessionShape struct {
	Column  string      `json:"column"`
	Gap     v1.Duration `json:"gap,omitempty"`
	GapExpr string      `json:"gapExpr,omitempty"`
}

// AggregateShape is one aggregate value: its output name, function and input.
type AggregateShape struct {
	Name     string               `json:"name"`
	Function v1.AggregateFunction `json:"function"`
	// Column is the input column, "" for count of rows; Type is its type.
	Column string        `json:"column,omitempty"`
	Type   v1.ColumnType `json:"type,omitempty"`
	// From is how the input column is computed (see KeyShape.From).
	From string `json:"from,omitempty"`
}

// SinkShape is the sink's kind and identity.
type SinkShape struct {
	Kind v1.SinkKind `json:"kind"`
	// Path (files, delta) is normalized like SourceShape.Path.
	Path string `json:"path,omitempty"`
	// Format is a files sink's format.
	Format v1.FileFormat `json:"format,omitempty"`
	// PartitionColumns are a Delta sink's partition columns.
	PartitionColumns []string `json:"partitionColumns,omitempty"`
	// Topic and ExactlyOnce describe a Kafka sink.
	Topic       string `json:"topic,omitempty"`
	ExactlyOnce bool   `json:"exactlyOnce,omitempty"`
	// ValueFormat is a Kafka sink's value format, and Subject the Schema Registry subject its
	// value schema is registered under (format avro: schemaRegistry.subject, default
	// <topic>-value).
	ValueFormat v1.KafkaFormat `json:"valueFormat,omitempty"`
	Subject     string         `json:"subject,omitempty"`
	// KeyFormat is a Kafka sink's key format when it has a key column and the format is not
	// the default string (avro and protobuf keys: subject <topic>-key).
	KeyFormat v1.KafkaFormat `json:"keyFormat,omitempty"`
	// SchemaVersion is the subject version a Kafka sink's value schema is pinned to, 0 when
	// it registers a schema derived from its columns.
	SchemaVersion int32 `json:"schemaVersion,omitempty"`
	// URL is a webhook's URL without user information, query or fragment, which may hold
	// credentials.
	URL string `json:"url,omitempty"`
	// Server, Connection and Table identify a Postgres sink's table. Server is the server and
	// database the connection string names, "host:port/database", when the caller could read
	// it (WithPostgresServer); Connection is where the string comes from ("secret/<name>" or
	// "env/<variable>"), which stands in for Server when either shape lacks it; Table is the
	// table as written.
	Server     string `json:"server,omitempty"`
	Connection string `json:"connection,omitempty"`
	Table      string `json:"table,omitempty"`
	// Keys are the columns a delta or postgres sink in update mode replaces rows by (the
	// spec's UpsertKeys); nil in other modes.
	Keys []string `json:"keys,omitempty"`
}

// Pinned are the settings that the checkpoint pins at its first batch.
type Pinned struct {
	StatePartitions int32 `json:"statePartitions"`
	// Runtime is the runtime that writes the checkpoint; omitted for the built-in engine, so
	// the shapes of its queries read as before. (No version bump: a Lockstep that does not
	// know the field refuses a spark shape as unreadable, which is the safe outcome.)
	Runtime v1.RuntimeName `json:"runtime,omitempty"`
}

// runtimeOf is the runtime a shape records: "" for the built-in engine.
func runtimeOf(spec *v1.StreamingQuerySpec) v1.RuntimeName {
	if n := spec.Runtime.Name(); n != v1.RuntimeLockstep {
		return n
	}
	return ""
}

// Option gives ShapeOf, Check and Guard what the caller read outside the spec.
type Option func(*outside)

// outside is what the options gave.
type outside struct {
	postgresServer string
	// positionalSources is the number of sources of a Spark checkpoint that names none
	// (offsets v1), which Spark matches by position; 0 otherwise.
	positionalSources int
	// fromSpark is true when the old shape was inferred from a Spark checkpoint (FromSpark).
	fromSpark bool
	// sparkWindowsRead holds the ids of the operators whose windows were read from a Spark
	// checkpoint's state rows.
	sparkWindowsRead map[string]bool
}

// WithPostgresServer gives the server and database that a postgres sink's connection string
// names, as "host:port/database" (package internal/pgserver derives it), which the caller read
// from the connection's Secret or variable: it is then the sink's identity with the table, so
// that a Secret renamed but naming the same database is no change, and one naming another
// server is. "" (the caller could not read it) leaves the Secret's or variable's name as the
// identity.
func WithPostgresServer(server string) Option {
	return func(o *outside) { o.postgresServer = server }
}

func options(opts []Option) outside {
	var o outside
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// ShapeOf returns the shape of spec, with the spec's defaults applied (spec itself is not
// changed). A spec that does not validate (with every feature allowed) has no shape: the
// error lists its problems.
func ShapeOf(spec *v1.StreamingQuerySpec, opts ...Option) (Shape, error) {
	pl, errs := plan.Build(spec)
	if len(errs) > 0 {
		return Shape{}, fmt.Errorf("the spec does not validate: %w", errs.ToAggregate())
	}
	s := pl.Spec
	sh := Shape{
		Version:    ShapeVersion,
		OutputMode: s.OutputMode,
		Output:     pl.Output(),
		Sink:       querySinkShape(s, options(opts)),
		Trigger:    s.Trigger,
		Pinned:     Pinned{StatePartitions: s.StateStore.Partitions, Runtime: runtimeOf(s)},
	}
	for i := range s.Sources {
		sh.Sources = append(sh.Sources, sourceShape(&s.Sources[i]))
	}
	// from maps each column flowing into the current step to how it is computed.
	from := map[string]string{}
	for _, c := range pl.Flow[0].Columns {
		from[c.Name] = c.Name
	}
	// The event-time column flowing into each step is the plan's (followed through selects
	// and joins that copy it, as the engine does).
	for _, ps := range pl.Steps {
		st, in, eventTime := ps.Spec, ps.In, ps.EventTime
		switch {
		case st.Select != nil:
			from = throughSelect(from, st.Select)
		case st.Watermark != nil:
			sh.Watermark = &WatermarkShape{Column: st.Watermark.Column, Delay: st.Watermark.Delay, From: from[st.Watermark.Column]}
		case st.Aggregate != nil:
			sh.Operators = append(sh.Operators, aggregateShape(ps.Operator.Name, st.Aggregate, in, from, eventTime))
			// Only an aggregate over its windows may follow: its columns come from this one.
			next := map[string]string{}
			for _, c := range pl.Flow[ps.Index+1].Columns {
				next[c.Name] = ps.Operator.Name + "." + c.Name
			}
			from = next
		case st.Join != nil:
			sh.Joins = append(sh.Joins, joinShape(st.JoinName(len(sh.Joins)), st.Join, in, ps.Right, from))
			next := map[string]string{}
			right := ps.Right
			for _, oc := range ps.JoinOutput {
				if oc.Side == v1.SideLeft {
					next[oc.Name] = from[in[oc.Index].Name]
				} else {
					next[oc.Name] = "right." + right[oc.Index].Name
				}
			}
			from = next
		case st.DropDuplicates != nil:
			op := OperatorShape{ID: ps.Operator.Name, Kind: v1.StepDropDuplicates}
			for _, c := range st.DropDuplicates.Columns {
				op.Keys = append(op.Keys, columnKey(c, in, from))
				if eventTime != "" && c == eventTime {
					op.Eviction = eventTime
				}
			}
			sh.Operators = append(sh.Operators, op)
		}
	}
	return sh, nil
}

// ParseShape reads a shape from its JSON form, strictly: unknown fields are an error, and so
// is a version other than ShapeVersion (a newer one wraps ErrNewerShape).
func ParseShape(data []byte) (Shape, error) {
	var probe struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return Shape{}, fmt.Errorf("read shape: %w", err)
	}
	switch {
	case probe.Version > ShapeVersion:
		return Shape{}, fmt.Errorf("read shape version %d; this Lockstep reads version %d: %w", probe.Version, ShapeVersion, ErrNewerShape)
	case probe.Version < 1:
		return Shape{}, fmt.Errorf("read shape: version %d is not a shape version", probe.Version)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s Shape
	if err := dec.Decode(&s); err != nil {
		return Shape{}, fmt.Errorf("read shape: %w", err)
	}
	return s, nil
}

// Equal reports whether s and o record the same query: the engine records a new shape/<N>
// entry when the shape of the spec it starts with is not Equal to the newest one.
func (s Shape) Equal(o Shape) bool {
	a, errA := json.Marshal(s)
	b, errB := json.Marshal(o)
	return errA == nil && errB == nil && bytes.Equal(a, b)
}

// IsZero reports whether s stands for "no checkpoint yet": whether its Version is 0, as in
// the zero Shape.
func (s Shape) IsZero() bool { return s.Version == 0 }

// Stateful reports whether the query keeps state: whether it has a stateful step or a stream
// join. A static join's snapshot record is not state: a query with only static joins is
// stateless.
func (s Shape) Stateful() bool {
	return len(s.Operators) > 0 || slices.ContainsFunc(s.Joins, func(j JoinShape) bool { return j.Stream != nil })
}

func (s Shape) source(name string) (SourceShape, bool) {
	for _, src := range s.Sources {
		if src.Name == name {
			return src, true
		}
	}
	return SourceShape{}, false
}

func (s Shape) hasAggregate() bool {
	return slices.ContainsFunc(s.Operators, func(o OperatorShape) bool { return o.Kind == v1.StepAggregate })
}

func sourceShape(src *v1.Source) SourceShape {
	s := SourceShape{Name: src.Name, Kind: src.Kind()}
	if src.Schema != nil {
		s.Columns = slices.Clone(src.Schema.Columns)
	}
	switch {
	case src.Kafka != nil:
		k := src.Kafka
		s.Topics = slices.Sorted(slices.Values(k.Topics))
		s.Topics = slices.Compact(s.Topics)
		s.TopicPattern = k.TopicPattern
		s.Format = string(k.Format)
		s.StartingOffsets = k.StartingOffsets
		s.MaxOffsetsPerTrigger = k.MaxOffsetsPerTrigger
		if k.Format == v1.KafkaRaw {
			s.Columns = v1.Columns{{Name: v1.ColumnKafkaValue, Type: v1.TypeString}}
		}
		if k.KeyFormat != v1.KafkaKeyString {
			s.KeyFormat = string(k.KeyFormat)
		}
		if r := k.SchemaRegistry; r != nil && k.Format.UsesSchemaRegistry() {
			s.Subject = r.Subject
			if s.Subject == "" && len(k.Topics) > 0 {
				s.Subject = k.Topics[0] + "-value"
			}
		}
	case src.Files != nil:
		s.Path = checkpoint.CanonicalLocation(src.Files.Path)
		s.Format = string(src.Files.Format)
		s.MaxFilesPerTrigger = src.Files.MaxFilesPerTrigger
	case src.Delta != nil:
		s.Path = checkpoint.CanonicalLocation(src.Delta.Path)
		s.StartingVersion = src.Delta.StartingVersion
		s.MaxFilesPerTrigger = src.Delta.MaxFilesPerTrigger
	case src.Rate != nil:
		s.RowsPerSecond = src.Rate.RowsPerSecond
	case src.Nexmark != nil:
		// The table fixes the columns, which the schema rules compare like a declared
		// schema's; the rest only shapes future events.
		s.Format = string(cmp.Or(src.Nexmark.Table, v1.DefaultNexmarkTable))
		s.Columns = v1.NexmarkColumns(src.Nexmark.Table)
	}
	return s
}

func aggregateShape(id string, a *v1.Aggregate, in v1.Columns, from map[string]string, eventTime string) OperatorShape {
	op := OperatorShape{ID: id, Kind: v1.StepAggregate, Keys: []KeyShape{}}
	for _, g := range a.GroupBy {
		if eventTime != "" && (g.Column == eventTime || g.Window != nil && g.Window.Column == eventTime || g.Session != nil && g.Session.Column == eventTime) {
			op.Eviction = eventTime
		}
		if sw := g.Session; sw != nil {
			ss := &SessionShape{Column: sw.Column, Gap: sw.Gap}
			if sw.GapExpr != "" {
				ss.GapExpr = normExpr(sw.GapExpr)
			}
			op.Keys = append(op.Keys, KeyShape{Session: ss, From: from[sw.Column]})
			continue
		}
		if w := g.Window; w != nil {
			k := KeyShape{Window: &WindowShape{Column: w.Column, Duration: w.Duration}, From: from[w.Column]}
			if w.Slide != "" && !sameDuration(w.Slide, w.Duration) {
				k.Window.Slide = w.Slide
			}
			op.Keys = append(op.Keys, k)
			continue
		}
		op.Keys = append(op.Keys, columnKey(g.Column, in, from))
	}
	for _, ag := range a.Aggregates {
		as := AggregateShape{Name: ag.Name, Function: ag.Function, Column: ag.Column}
		if ag.Column != "" {
			c, _ := in.Lookup(ag.Column)
			as.Type, as.From = c.Type, from[ag.Column]
		}
		op.Aggregates = append(op.Aggregates, as)
	}
	return op
}

func columnKey(name string, in v1.Columns, from map[string]string) KeyShape {
	c, _ := in.Lookup(name)
	return KeyShape{Column: name, Type: c.Type, From: from[name]}
}

func sinkShape(s *v1.Sink) SinkShape {
	k := SinkShape{Kind: s.Kind()}
	switch {
	case s.Delta != nil:
		k.Path = checkpoint.CanonicalLocation(s.Delta.Path)
		k.PartitionColumns = slices.Clone(s.Delta.PartitionColumns)
	case s.Files != nil:
		k.Path = checkpoint.CanonicalLocation(s.Files.Path)
		k.Format = s.Files.Format
	case s.Kafka != nil:
		k.Topic = s.Kafka.Topic
		k.ExactlyOnce = s.Kafka.ExactlyOnce
		k.ValueFormat = cmp.Or(s.Kafka.Format, v1.DefaultKafkaFormat)
		if s.Kafka.KeyColumn != "" && s.Kafka.KeyFormat != v1.KafkaKeyString {
			k.KeyFormat = s.Kafka.KeyFormat
		}
		if r := s.Kafka.SchemaRegistry; r != nil && s.Kafka.Format.UsesSchemaRegistry() {
			k.Subject = cmp.Or(r.Subject, s.Kafka.Topic+"-value")
			if r.Version != nil {
				k.SchemaVersion = *r.Version
			}
		}
	case s.Webhook != nil:
		k.URL = redactURL(s.Webhook.URL)
	case s.Postgres != nil:
		k.Table = s.Postgres.Table
		if c := s.Postgres.Connection; c.SecretName != "" {
			k.Connection = "secret/" + c.SecretName
		} else {
			k.Connection = "env/" + c.DSNEnvName()
		}
	}
	return k
}

// querySinkShape is the sink's shape with the keys it upserts by in update mode and what the
// caller read outside the spec.
func querySinkShape(s *v1.StreamingQuerySpec, out outside) SinkShape {
	k := sinkShape(&s.Sink)
	if k.Kind == v1.SinkPostgres {
		k.Server = out.postgresServer
	}
	if s.OutputMode == v1.OutputUpdate && (k.Kind == v1.SinkDelta || k.Kind == v1.SinkPostgres) {
		if keys, ok := s.UpsertKeys(); ok {
			k.Keys = append([]string{}, keys...)
		}
	}
	return k
}

// identifier matches a bare column name in a CEL expression.
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// throughSelect returns how each column of a select's output is computed (see KeyShape.From),
// given from, how each of its input columns is: a projection that copies or renames a column
// keeps that column's origin, any other is its own normalized expression.
func throughSelect(from map[string]string, sel []v1.Projection) map[string]string {
	next := make(map[string]string, len(sel))
	for _, p := range sel {
		e := normExpr(p.Expr)
		if f, ok := from[e]; ok && identifier.MatchString(e) {
			e = f
		}
		next[p.Name] = e
	}
	return next
}

// normExpr removes blanks outside string literals, so that reformatting an expression does
// not read as a change.
func normExpr(e string) string {
	var b strings.Builder
	var quote rune
	escaped := false
	for _, r := range e {
		switch {
		case quote != 0:
			b.WriteRune(r)
			switch {
			case escaped:
				escaped = false
			case r == '\\':
				escaped = true
			case r == quote:
				quote = 0
			}
		case r == '"' || r == '\'':
			quote = r
			b.WriteRune(r)
		case r == ' ' || r == '\t' || r == '\n' || r == '\r':
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// redactURL keeps a URL's scheme, host and path.
func redactURL(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		rest = rest[:i]
	}
	host, p, _ := strings.Cut(rest, "/")
	if i := strings.LastIndex(host, "@"); i >= 0 {
		host = host[i+1:]
	}
	if p != "" {
		return scheme + "://" + host + "/" + p
	}
	return scheme + "://" + host
}
