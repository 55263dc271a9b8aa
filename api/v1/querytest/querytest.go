// Package querytest builds StreamingQuery fixtures for tests, fluently:
//
//	q := querytest.Make("q", "ns").
//		FilesSource("in", dir, "json", querytest.Col("id", v1.TypeString), querytest.Col("amount", v1.TypeDouble)).
//		Filter("amount > 0.0").
//		Select(querytest.As("id", "id")).
//		FilesSink(out, "json").
//		Obj()
//
// Every method changes the query in place and returns the same *Query, so a chain reads in
// spec order. Obj returns the built object. Nothing is defaulted or validated unless asked
// (Defaulted).
package querytest

import (
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
)

// Query wraps a StreamingQuery under construction.
type Query struct {
	q v1.StreamingQuery
}

// Load reads and parses the manifest of a query at path (an example's, say), failing t when
// it cannot.
func Load(t testing.TB, path string) *v1.StreamingQuery {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	q, err := v1.ParseQuery(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return q
}

// Make starts a query with a name and namespace and nothing else.
func Make(name, namespace string) *Query {
	w := &Query{}
	w.q.APIVersion = v1.GroupVersion.String()
	w.q.Kind = v1.KindStreamingQuery
	w.q.Name = name
	w.q.Namespace = namespace
	return w
}

// Obj returns a deep copy of the query built so far.
func (w *Query) Obj() *v1.StreamingQuery { return w.q.DeepCopy() }

// Spec returns a deep copy of the spec built so far.
func (w *Query) Spec() *v1.StreamingQuerySpec { return w.q.Spec.DeepCopy() }

// Defaulted applies the spec's defaults.
func (w *Query) Defaulted() *Query {
	w.q.Default()
	return w
}

// Col returns a column.
func Col(name string, t v1.ColumnType) v1.Column { return v1.Column{Name: name, Type: t} }

// As returns a select projection: the column name computed by the CEL expression expr.
func As(name, expr string) v1.Projection { return v1.Projection{Name: name, Expr: expr} }

// Key returns a group key on a column.
func Key(column string) v1.GroupKey { return v1.GroupKey{Column: column} }

// Window returns a group key on a tumbling event-time window.
func Window(column string, duration v1.Duration) v1.GroupKey {
	return v1.GroupKey{Window: &v1.Window{Column: column, Duration: duration}}
}

// SlidingWindow returns a group key on a sliding event-time window.
func SlidingWindow(column string, duration, slide v1.Duration) v1.GroupKey {
	return v1.GroupKey{Window: &v1.Window{Column: column, Duration: duration, Slide: slide}}
}

// Session returns a group key on a session window.
func Session(column string, gap v1.Duration) v1.GroupKey {
	return v1.GroupKey{Session: &v1.SessionWindow{Column: column, Gap: gap}}
}

// Agg returns an aggregation; column may be "" for count.
func Agg(name string, fn v1.AggregateFunction, column string) v1.Aggregation {
	return v1.Aggregation{Name: name, Function: fn, Column: column}
}

// OrderColumns is a typical event schema, the orders of the fixtures: order_id and country
// (strings), amount (double), qty (long) and ts (timestamp).
func OrderColumns() []v1.Column {
	return []v1.Column{
		Col("order_id", v1.TypeString), Col("country", v1.TypeString),
		Col("amount", v1.TypeDouble), Col("qty", v1.TypeLong), Col("ts", v1.TypeTimestamp),
	}
}

// Orders is a valid files → files query, q in namespace ns: source orders reads
// OrderColumns from /data/orders as JSON, and the sink writes JSON to /data/out.
func Orders() *Query {
	return Make("q", "ns").FilesSource("orders", "/data/orders", "json", OrderColumns()...).FilesSink("/data/out", "json")
}

// Source adds a source as given.
func (w *Query) Source(s v1.Source) *Query {
	w.q.Spec.Sources = append(w.q.Spec.Sources, s)
	return w
}

// RateSource adds a rate source.
func (w *Query) RateSource(name string, rowsPerSecond int64) *Query {
	return w.Source(v1.Source{Name: name, Rate: &v1.RateSource{RowsPerSecond: rowsPerSecond}})
}

// NexmarkSource adds a nexmark source with the given settings.
func (w *Query) NexmarkSource(name string, n v1.NexmarkSource) *Query {
	return w.Source(v1.Source{Name: name, Nexmark: &n})
}

// FilesSource adds a files source reading path in format (json, csv or parquet) with the
// given schema columns.
func (w *Query) FilesSource(name, path string, format v1.FileFormat, cols ...v1.Column) *Query {
	return w.Source(v1.Source{
		Name:   name,
		Files:  &v1.FilesSource{Path: path, Format: format},
		Schema: schema(cols),
	})
}

// KafkaSource adds a Kafka source reading topic as JSON from bootstrap with the given schema
// columns.
func (w *Query) KafkaSource(name, bootstrap, topic string, cols ...v1.Column) *Query {
	return w.Source(v1.Source{
		Name:   name,
		Kafka:  &v1.KafkaSource{BootstrapServers: []string{bootstrap}, Topics: []string{topic}},
		Schema: schema(cols),
	})
}

// DeltaSource adds a Delta source reading the table at path with the given schema columns.
func (w *Query) DeltaSource(name, path string, cols ...v1.Column) *Query {
	return w.Source(v1.Source{Name: name, Delta: &v1.DeltaSource{Path: path}, Schema: schema(cols)})
}

// EditSource calls edit on the source named name, which must exist; it panics otherwise.
func (w *Query) EditSource(name string, edit func(*v1.Source)) *Query {
	for i := range w.q.Spec.Sources {
		if w.q.Spec.Sources[i].Name == name {
			edit(&w.q.Spec.Sources[i])
			return w
		}
	}
	panic("querytest: no source named " + name)
}

// Step adds a transform step as given.
func (w *Query) Step(s v1.Step) *Query {
	w.q.Spec.Transform = append(w.q.Spec.Transform, s)
	return w
}

// Filter adds a filter step.
func (w *Query) Filter(expr string) *Query { return w.Step(v1.Step{Filter: expr}) }

// Select adds a select step. Without projections it adds an empty (invalid) select.
func (w *Query) Select(projs ...v1.Projection) *Query {
	if projs == nil {
		projs = []v1.Projection{}
	}
	return w.Step(v1.Step{Select: projs})
}

// SelectColumns adds a select step that keeps the named columns as they are.
func (w *Query) SelectColumns(names ...string) *Query {
	projs := make([]v1.Projection, len(names))
	for i, n := range names {
		projs[i] = As(n, n)
	}
	return w.Select(projs...)
}

// Watermark adds a watermark step.
func (w *Query) Watermark(column string, delay v1.Duration) *Query {
	return w.Step(v1.Step{Watermark: &v1.Watermark{Column: column, Delay: delay}})
}

// Aggregate adds an aggregate step; name may be "".
func (w *Query) Aggregate(name string, groupBy []v1.GroupKey, aggs ...v1.Aggregation) *Query {
	return w.Step(v1.Step{Aggregate: &v1.Aggregate{Name: name, GroupBy: groupBy, Aggregates: aggs}})
}

// DropDuplicates adds a dropDuplicates step; name may be "".
func (w *Query) DropDuplicates(name string, columns ...string) *Query {
	return w.Step(v1.Step{DropDuplicates: &v1.DropDuplicates{Name: name, Columns: columns}})
}

// Sink replaces the sink.
func (w *Query) Sink(s v1.Sink) *Query {
	w.q.Spec.Sink = s
	return w
}

// FilesSink sets a files sink writing format (parquet or json) into path.
func (w *Query) FilesSink(path string, format v1.FileFormat) *Query {
	return w.Sink(v1.Sink{Files: &v1.FilesSink{Path: path, Format: format}})
}

// DeltaSink sets a Delta sink writing the table at path.
func (w *Query) DeltaSink(path string, partitionColumns ...string) *Query {
	return w.Sink(v1.Sink{Delta: &v1.DeltaSink{Path: path, PartitionColumns: partitionColumns}})
}

// KafkaSink sets a Kafka sink producing to topic on bootstrap.
func (w *Query) KafkaSink(bootstrap, topic string) *Query {
	return w.Sink(v1.Sink{Kafka: &v1.KafkaSink{BootstrapServers: []string{bootstrap}, Topic: topic}})
}

// WebhookSink sets a webhook sink posting to url.
func (w *Query) WebhookSink(url string) *Query {
	return w.Sink(v1.Sink{Webhook: &v1.WebhookSink{URL: url}})
}

// ConsoleSink sets a console sink.
func (w *Query) ConsoleSink() *Query { return w.Sink(v1.Sink{Console: &v1.ConsoleSink{}}) }

// OutputMode sets the output mode.
func (w *Query) OutputMode(m v1.OutputMode) *Query {
	w.q.Spec.OutputMode = m
	return w
}

// ProcessingTime sets a processing-time trigger.
func (w *Query) ProcessingTime(d v1.Duration) *Query {
	w.q.Spec.Trigger = v1.Trigger{ProcessingTime: d}
	return w
}

// AvailableNow sets the availableNow trigger.
func (w *Query) AvailableNow() *Query {
	w.q.Spec.Trigger = v1.Trigger{AvailableNow: true}
	return w
}

// Once sets the once trigger.
func (w *Query) Once() *Query {
	w.q.Spec.Trigger = v1.Trigger{Once: true}
	return w
}

// Checkpoint sets the checkpoint location.
func (w *Query) Checkpoint(location string) *Query {
	w.q.Spec.Checkpoint.Location = location
	return w
}

// CheckpointStore sets the CheckpointStore the checkpoint lives in.
func (w *Query) CheckpointStore(store string) *Query {
	w.q.Spec.Checkpoint.Store = store
	return w
}

// StatePartitions sets the number of state store partitions.
func (w *Query) StatePartitions(n int32) *Query {
	w.q.Spec.StateStore.Partitions = n
	return w
}

// Suspend sets spec.suspend.
func (w *Query) Suspend(suspend bool) *Query {
	w.q.Spec.Suspend = suspend
	return w
}

// Generation sets metadata.generation.
func (w *Query) Generation(g int64) *Query {
	w.q.Generation = g
	return w
}

// UID sets metadata.uid.
func (w *Query) UID(uid string) *Query {
	w.q.UID = types.UID(uid)
	return w
}

// Label sets a label.
func (w *Query) Label(key, value string) *Query {
	if w.q.Labels == nil {
		w.q.Labels = map[string]string{}
	}
	w.q.Labels[key] = value
	return w
}

// Edit calls edit on the spec, for what the other methods do not cover.
func (w *Query) Edit(edit func(*v1.StreamingQuerySpec)) *Query {
	edit(&w.q.Spec)
	return w
}

func schema(cols []v1.Column) *v1.Schema {
	if len(cols) == 0 {
		return nil
	}
	return &v1.Schema{Columns: cols}
}

// Join adds a join step.
func (w *Query) Join(j v1.Join) *Query { return w.Step(v1.Step{Join: &j}) }

// Keys returns join keys: pairs of left and right column names, as left, right, left, right….
func Keys(pairs ...string) []v1.JoinKey {
	var keys []v1.JoinKey
	for i := 0; i+1 < len(pairs); i += 2 {
		keys = append(keys, v1.JoinKey{Left: pairs[i], Right: pairs[i+1]})
	}
	return keys
}

// StaticDelta returns the static side of a join on the Delta table at path with the given
// schema columns.
func StaticDelta(path string, cols ...v1.Column) *v1.StaticSide {
	return &v1.StaticSide{Delta: &v1.StaticDelta{Path: path}, Schema: schema(cols)}
}

// StaticFiles returns the static side of a join on the files at path.
func StaticFiles(path string, format v1.FileFormat, cols ...v1.Column) *v1.StaticSide {
	return &v1.StaticSide{Files: &v1.StaticFiles{Path: path, Format: format}, Schema: schema(cols)}
}

// StaticPostgres returns the static side of a join reading a PostgreSQL table, whose
// connection string is in the environment variable dsnEnv.
func StaticPostgres(table, dsnEnv string, cols ...v1.Column) *v1.StaticSide {
	return &v1.StaticSide{Postgres: &v1.StaticPostgres{Table: table, Connection: v1.PostgresConnection{DSNEnv: dsnEnv}}, Schema: schema(cols)}
}

// StreamSide returns the right side of a stream join on source, watermarked on column with
// delay, and matching right rows in [left-lower, left+upper].
func StreamSide(source, leftColumn, column string, delay, lower, upper v1.Duration) *v1.StreamSide {
	return &v1.StreamSide{
		Source:    source,
		Watermark: v1.Watermark{Column: column, Delay: delay},
		TimeBound: v1.TimeBound{LeftColumn: leftColumn, RightColumn: column, LowerBound: lower, UpperBound: upper},
	}
}
