package compat_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/compat"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// finding is what the table compares of a compat.Finding; messages and remedies are pinned
// by testdata/findings.golden.
type finding struct {
	Rule     string
	Severity compat.Severity
	Path     string
	Old, New string
}

type ruleCase struct {
	name string
	old  *v1.StreamingQuerySpec
	// oldShape, when set, is the shape judged against instead of old's.
	oldShape *compat.Shape
	new      *v1.StreamingQuerySpec
	// oldServer and newServer are the postgres servers the caller read for old and new
	// (compat.WithPostgresServer); "" when it could not.
	oldServer, newServer string
	want                 []finding
	// passes are rules the case exercises without them finding anything: the other
	// direction of each rule.
	passes []string
	// sparkSources, when set, judges as against a Spark checkpoint with that many unnamed
	// sources (compat.FromSpark).
	sparkSources int
}

func edit(q *qt.Query, fn func(s *v1.StreamingQuerySpec)) *v1.StreamingQuerySpec {
	return q.Edit(fn).Spec()
}

func ruleCases() []ruleCase {
	const (
		revAggPath   = "spec.transform[4].aggregate"
		revDedupPath = "spec.transform[3].dropDuplicates"
		revOut       = "(country string, window_start timestamp, window_end timestamp, orders long, revenue double, top double, units long)"
	)
	revKeys := "(country string, window(ts, 5m))"
	return []ruleCase{
		// The query as a whole.
		{
			name: "invalid-spec/a spec without a sink is rejected",
			old:  revenue().Spec(),
			new:  edit(revenue(), func(s *v1.StreamingQuerySpec) { s.Sink = v1.Sink{} }),
			want: []finding{{Rule: "invalid-spec", Severity: compat.Rejected, Path: "spec"}},
		},
		{
			name:   "invalid-spec/the same valid spec is judged",
			old:    revenue().Spec(),
			new:    revenue().Spec(),
			passes: []string{"invalid-spec", "shape-version"},
		},
		{
			name:     "shape-version/a shape from a newer Lockstep is not judged",
			oldShape: &compat.Shape{Version: compat.ShapeVersion + 1},
			new:      revenue().Spec(),
			want:     []finding{{Rule: "shape-version", Severity: compat.Rejected, Path: "spec", Old: "shape version 5", New: "shape version 4"}},
		},

		// Sources.
		{
			name: "source-added/a new Kafka source starts at its startingOffsets",
			old:  revenue().Spec(),
			new: revenue().KafkaSource("returns", "kafka:9092", "returns", qt.OrderColumns()...).
				EditSource("returns", func(s *v1.Source) { s.Kafka.StartingOffsets = v1.OffsetsEarliest }).Spec(),
			want: []finding{{Rule: "source-added", Severity: compat.Warning, Path: "spec.sources[1]", New: "kafka topics [returns]"}},
		},
		{
			name: "source-added/a new files source reads the files already there",
			old:  clean().Spec(),
			new:  clean().FilesSource("more", "/data/more", "json", qt.OrderColumns()...).Spec(),
			want: []finding{{Rule: "source-added", Severity: compat.Warning, Path: "spec.sources[1]", New: "files (json) in /data/more"}},
		},
		{
			name: "source-removed/a source no longer read",
			old:  revenue().KafkaSource("returns", "kafka:9092", "returns", qt.OrderColumns()...).Spec(),
			new:  revenue().Spec(),
			want: []finding{{Rule: "source-removed", Severity: compat.Warning, Path: "spec.sources", Old: "returns: kafka topics [returns]"}},
		},
		{
			name:   "source-removed/sources in another order are the same sources",
			old:    revenue().KafkaSource("returns", "kafka:9092", "returns", qt.OrderColumns()...).Spec(),
			new:    edit(revenue().KafkaSource("returns", "kafka:9092", "returns", qt.OrderColumns()...), func(s *v1.StreamingQuerySpec) { slices.Reverse(s.Sources) }),
			passes: []string{"source-removed", "source-added", "source-renamed"},
		},
		{
			name: "source-renamed/a stateful query would count re-read rows twice",
			old:  revenue().Spec(),
			new:  edit(revenue(), func(s *v1.StreamingQuerySpec) { s.Sources[0].Name = "order-events" }),
			want: []finding{{Rule: "source-renamed", Severity: compat.Rejected, Path: "spec.sources[0].name", Old: "orders", New: "order-events"}},
		},
		{
			name: "source-renamed/a stateless query's sink receives rows again",
			old:  clean().Spec(),
			new:  edit(clean(), func(s *v1.StreamingQuerySpec) { s.Sources[0].Name = "incoming" }),
			want: []finding{{Rule: "source-renamed", Severity: compat.Warning, Path: "spec.sources[0].name", Old: "orders", New: "incoming"}},
		},
		{
			name: "source-renamed/another identity under another name is a removal and an addition",
			old:  clean().Spec(),
			new: edit(clean(), func(s *v1.StreamingQuerySpec) {
				s.Sources[0].Name, s.Sources[0].Files.Path = "returns", "/data/returns"
			}),
			want: []finding{
				{Rule: "source-added", Severity: compat.Warning, Path: "spec.sources[0]", New: "files (json) in /data/returns"},
				{Rule: "source-removed", Severity: compat.Warning, Path: "spec.sources", Old: "orders: files (json) in /data/orders"},
			},
			passes: []string{"source-renamed"},
		},
		{
			name: "source-kind/kafka to files under the same name",
			old:  revenue().Spec(),
			new: edit(revenue(), func(s *v1.StreamingQuerySpec) {
				s.Sources[0].Kafka = nil
				s.Sources[0].Files = &v1.FilesSource{Path: "s3://landing/orders", Format: v1.FormatJSON}
				s.Transform[revSelect].Select[6].Expr = "ts"
			}),
			want: []finding{{Rule: "source-kind", Severity: compat.Rejected, Path: "spec.sources[0].files", Old: "kafka topics [orders]", New: "files (json) in s3://landing/orders"}},
		},
		{
			name:   "source-kind/other brokers are a connection detail",
			old:    revenue().Spec(),
			new:    edit(revenue(), func(s *v1.StreamingQuerySpec) { s.Sources[0].Kafka.BootstrapServers = []string{"kafka-2:9093"} }),
			passes: []string{"source-kind", "kafka-topics"},
		},
		{
			name: "kafka-topics/a topic added to the set",
			old:  revenue().Spec(),
			new:  edit(revenue(), func(s *v1.StreamingQuerySpec) { s.Sources[0].Kafka.Topics = []string{"orders", "returns"} }),
			want: []finding{{Rule: "kafka-topics", Severity: compat.Rejected, Path: "spec.sources[0].kafka.topics", Old: "topics [orders]", New: "topics [orders, returns]"}},
		},
		{
			name: "kafka-topics/topics replaced by a pattern",
			old:  revenue().Spec(),
			new: edit(revenue(), func(s *v1.StreamingQuerySpec) {
				s.Sources[0].Kafka.Topics, s.Sources[0].Kafka.TopicPattern = nil, "orders-.*"
			}),
			want: []finding{{Rule: "kafka-topics", Severity: compat.Rejected, Path: "spec.sources[0].kafka.topicPattern", Old: "topics [orders]", New: "topicPattern orders-.*"}},
		},
		{
			name:   "kafka-topics/the same set in another order",
			old:    edit(revenue(), func(s *v1.StreamingQuerySpec) { s.Sources[0].Kafka.Topics = []string{"orders", "orders-eu"} }),
			new:    edit(revenue(), func(s *v1.StreamingQuerySpec) { s.Sources[0].Kafka.Topics = []string{"orders-eu", "orders"} }),
			passes: []string{"kafka-topics"},
		},
		{
			name: "files-path/another folder",
			old:  clean().Spec(),
			new:  edit(clean(), func(s *v1.StreamingQuerySpec) { s.Sources[0].Files.Path = "/data/orders-v2" }),
			want: []finding{{Rule: "files-path", Severity: compat.Rejected, Path: "spec.sources[0].files.path", Old: "/data/orders", New: "/data/orders-v2"}},
		},
		{
			name:   "files-path/the same folder written as a file URL",
			old:    clean().Spec(),
			new:    edit(clean(), func(s *v1.StreamingQuerySpec) { s.Sources[0].Files.Path = "file:///data/orders/" }),
			passes: []string{"files-path"},
		},
		{
			name: "files-format/json to csv",
			old:  clean().Spec(),
			new:  edit(clean(), func(s *v1.StreamingQuerySpec) { s.Sources[0].Files.Format = v1.FormatCSV }),
			want: []finding{{Rule: "files-format", Severity: compat.Rejected, Path: "spec.sources[0].files.format", Old: "json", New: "csv"}},
		},
		{
			name:   "files-format/skipping malformed records is not a format change",
			old:    clean().Spec(),
			new:    edit(clean(), func(s *v1.StreamingQuerySpec) { s.Sources[0].OnMalformed = v1.MalformedSkip }),
			passes: []string{"files-format"},
		},
		{
			name: "delta-path/another table",
			old:  tables().Spec(),
			new:  edit(tables(), func(s *v1.StreamingQuerySpec) { s.Sources[0].Delta.Path = "s3://lake/orders_v2" }),
			want: []finding{{Rule: "delta-path", Severity: compat.Rejected, Path: "spec.sources[0].delta.path", Old: "s3://lake/orders", New: "s3://lake/orders_v2"}},
		},
		{
			name:   "delta-path/a trailing slash is the same table",
			old:    tables().Spec(),
			new:    edit(tables(), func(s *v1.StreamingQuerySpec) { s.Sources[0].Delta.Path = "s3://lake/orders/" }),
			passes: []string{"delta-path"},
		},
		{
			name: "kafka-format/json to csv",
			old:  cleanKafka().Spec(),
			new:  edit(cleanKafka(), func(s *v1.StreamingQuerySpec) { s.Sources[0].Kafka.Format = v1.KafkaCSV }),
			want: []finding{{Rule: "kafka-format", Severity: compat.Warning, Path: "spec.sources[0].kafka.format", Old: "json", New: "csv"}},
		},
		{
			name:   "kafka-format/the default written out",
			old:    cleanKafka().Spec(),
			new:    edit(cleanKafka(), func(s *v1.StreamingQuerySpec) { s.Sources[0].Kafka.Format = v1.KafkaJSON }),
			passes: []string{"kafka-format"},
		},
		{
			name: "kafka-key-format/string to avro",
			old:  edit(cleanKafka(), avroSource("")),
			new: edit(cleanKafka(), func(s *v1.StreamingQuerySpec) {
				avroSource("")(s)
				s.Sources[0].Kafka.KeyFormat = v1.KafkaAvro
			}),
			want: []finding{{Rule: "kafka-key-format", Severity: compat.Warning, Path: "spec.sources[0].kafka.keyFormat", Old: "string", New: "avro"}},
		},
		{
			name:   "kafka-key-format/the default written out",
			old:    cleanKafka().Spec(),
			new:    edit(cleanKafka(), func(s *v1.StreamingQuerySpec) { s.Sources[0].Kafka.KeyFormat = v1.KafkaKeyString }),
			passes: []string{"kafka-key-format"},
		},
		{
			name: "kafka-subject/another subject",
			old:  edit(cleanKafka(), avroSource("")),
			new:  edit(cleanKafka(), avroSource("orders-v2")),
			want: []finding{{Rule: "kafka-subject", Severity: compat.Allowed, Path: "spec.sources[0].kafka.schemaRegistry.subject", Old: "orders-value", New: "orders-v2"}},
		},
		{
			name:   "kafka-subject/the default written out",
			old:    edit(cleanKafka(), avroSource("")),
			new:    edit(cleanKafka(), avroSource("orders-value")),
			passes: []string{"kafka-subject"},
		},
		{
			name: "rate-limit/maxOffsetsPerTrigger set",
			old:  revenue().Spec(),
			new:  edit(revenue(), func(s *v1.StreamingQuerySpec) { s.Sources[0].Kafka.MaxOffsetsPerTrigger = ptr[int64](10000) }),
			want: []finding{{Rule: "rate-limit", Severity: compat.Allowed, Path: "spec.sources[0].kafka.maxOffsetsPerTrigger", Old: "no limit", New: "10000"}},
		},
		{
			name: "rate-limit/maxFilesPerTrigger of a files source",
			old:  edit(clean(), func(s *v1.StreamingQuerySpec) { s.Sources[0].Files.MaxFilesPerTrigger = ptr[int32](2) }),
			new:  edit(clean(), func(s *v1.StreamingQuerySpec) { s.Sources[0].Files.MaxFilesPerTrigger = ptr[int32](5) }),
			want: []finding{{Rule: "rate-limit", Severity: compat.Allowed, Path: "spec.sources[0].files.maxFilesPerTrigger", Old: "2", New: "5"}},
		},
		{
			name: "rate-limit/maxFilesPerTrigger of a Delta source removed",
			old:  edit(tables(), func(s *v1.StreamingQuerySpec) { s.Sources[0].Delta.MaxFilesPerTrigger = ptr[int32](100) }),
			new:  tables().Spec(),
			want: []finding{{Rule: "rate-limit", Severity: compat.Allowed, Path: "spec.sources[0].delta.maxFilesPerTrigger", Old: "100", New: "no limit"}},
		},
		{
			name: "rate-limit/rowsPerSecond of a rate source",
			old:  ticks().Spec(),
			new:  edit(ticks(), func(s *v1.StreamingQuerySpec) { s.Sources[0].Rate.RowsPerSecond = 100 }),
			want: []finding{{Rule: "rate-limit", Severity: compat.Allowed, Path: "spec.sources[0].rate.rowsPerSecond", Old: "10", New: "100"}},
		},
		{
			name:   "rate-limit/the default rate written out",
			old:    edit(ticks(), func(s *v1.StreamingQuerySpec) { s.Sources[0].Rate.RowsPerSecond = 0 }),
			new:    edit(ticks(), func(s *v1.StreamingQuerySpec) { s.Sources[0].Rate.RowsPerSecond = 1 }),
			passes: []string{"rate-limit"},
		},
		{
			name: "starting-position/startingOffsets of a source in the checkpoint",
			old:  edit(revenue(), func(s *v1.StreamingQuerySpec) { s.Sources[0].Kafka.StartingOffsets = v1.OffsetsEarliest }),
			new:  revenue().Spec(),
			want: []finding{{Rule: "starting-position", Severity: compat.Warning, Path: "spec.sources[0].kafka.startingOffsets", Old: "earliest", New: "latest"}},
		},
		{
			name: "starting-position/startingVersion of a Delta source in the checkpoint",
			old:  tables().Spec(),
			new:  edit(tables(), func(s *v1.StreamingQuerySpec) { s.Sources[0].Delta.StartingVersion = ptr[int64](5) }),
			want: []finding{{Rule: "starting-position", Severity: compat.Warning, Path: "spec.sources[0].delta.startingVersion", Old: "the current content", New: "5"}},
		},
		{
			name: "starting-position/a new source's startingOffsets is honoured",
			old:  revenue().Spec(),
			new: revenue().KafkaSource("returns", "kafka:9092", "returns", qt.OrderColumns()...).
				EditSource("returns", func(s *v1.Source) { s.Kafka.StartingOffsets = `{"returns":{"0":12}}` }).Spec(),
			want:   []finding{{Rule: "source-added", Severity: compat.Warning, Path: "spec.sources[1]", New: "kafka topics [returns]"}},
			passes: []string{"starting-position"},
		},
		{
			name: "source-columns/a column added",
			old:  clean().Spec(),
			new: edit(clean(), func(s *v1.StreamingQuerySpec) {
				s.Sources[0].Schema.Columns = append(s.Sources[0].Schema.Columns, qt.Col("coupon", v1.TypeString))
			}),
			want: []finding{{Rule: "source-columns", Severity: compat.Allowed, Path: "spec.sources[0].schema.columns[5]", New: "coupon string"}},
		},
		{
			name: "source-columns/an unused column removed",
			old:  clean().Spec(),
			new: edit(clean(), func(s *v1.StreamingQuerySpec) {
				s.Sources[0].Schema.Columns = slices.Delete(s.Sources[0].Schema.Columns, 3, 4)
			}),
			want: []finding{{Rule: "source-columns", Severity: compat.Allowed, Path: "spec.sources[0].schema.columns", Old: "qty long"}},
		},
		{
			name: "source-columns/the same columns in another order",
			old:  clean().Spec(),
			new: edit(clean(), func(s *v1.StreamingQuerySpec) {
				cols := s.Sources[0].Schema.Columns
				cols[0], cols[1] = cols[1], cols[0]
			}),
			passes: []string{"source-columns", "source-column-type"},
		},
		{
			name: "source-column-type/an unused column's type",
			old:  clean().Spec(),
			new:  edit(clean(), func(s *v1.StreamingQuerySpec) { s.Sources[0].Schema.Columns[3].Type = v1.TypeDouble }),
			want: []finding{{Rule: "source-column-type", Severity: compat.Warning, Path: "spec.sources[0].schema.columns[3].type", Old: "long", New: "double"}},
		},
		{
			name: "source-column-type/a renamed column is not a type change",
			old:  clean().Spec(),
			new:  edit(clean(), func(s *v1.StreamingQuerySpec) { s.Sources[0].Schema.Columns[3].Name = "quantity" }),
			want: []finding{
				{Rule: "source-columns", Severity: compat.Allowed, Path: "spec.sources[0].schema.columns[3]", New: "quantity long"},
				{Rule: "source-columns", Severity: compat.Allowed, Path: "spec.sources[0].schema.columns", Old: "qty long"},
			},
			passes: []string{"source-column-type"},
		},

		// Stateful steps.
		{
			name: "operator-added/a dropDuplicates added to a stateless query",
			old:  clean().Spec(),
			new:  clean().DropDuplicates("", "order_id").Spec(),
			want: []finding{{Rule: "operator-added", Severity: compat.Rejected, Path: "spec.transform[2].dropDuplicates", New: "dropDuplicates step #0 by (order_id string)"}},
		},
		{
			name: "operator-added/a second dropDuplicates before the aggregate",
			old:  revenue().Spec(),
			new: edit(revenue(), func(s *v1.StreamingQuerySpec) {
				s.Transform = slices.Insert(s.Transform, revAggregate, v1.Step{DropDuplicates: &v1.DropDuplicates{Name: "by-key", Columns: []string{"country", "ts"}}})
			}),
			want: []finding{{Rule: "operator-added", Severity: compat.Rejected, Path: "spec.transform[4].dropDuplicates", New: `dropDuplicates step "by-key" by (country string, ts timestamp)`}},
		},
		{
			name: "operator-added/an aggregate over the aggregate's windows",
			old:  edit(revenue(), func(s *v1.StreamingQuerySpec) { s.Sink.Delta.PartitionColumns = nil }),
			new:  revenueChained().Spec(),
			want: []finding{
				{Rule: "operator-added", Severity: compat.Rejected, Path: "spec.transform[5].aggregate", New: `aggregate step "hourly" by (window(window_end, 1h))`},
				{Rule: "output-columns", Severity: compat.Warning, Path: "spec.transform[5].aggregate", Old: revOut, New: "(window_start timestamp, window_end timestamp, best double, windows long)"},
			},
		},
		{
			name: "window-size/the chained aggregate's windows, 1h to 2h",
			old:  revenueChained().Spec(),
			new:  edit(revenueChained(), func(s *v1.StreamingQuerySpec) { s.Transform[5].Aggregate.GroupBy[0].Window.Duration = "2h" }),
			want: []finding{{Rule: "window-size", Severity: compat.Rejected, Path: "spec.transform[5].aggregate.groupBy[0].window.duration", Old: "1h", New: "2h"}},
		},
		{
			name: "window-size/the windows a chained aggregate takes, 5m to 10m",
			old:  revenueChained().Spec(),
			new:  edit(revenueChained(), func(s *v1.StreamingQuerySpec) { agg(s).GroupBy[1].Window.Duration = "10m" }),
			want: []finding{{Rule: "window-size", Severity: compat.Rejected, Path: revAggPath + ".groupBy[1].window.duration", Old: "5m", New: "10m"}},
		},
		{
			name: "operator-added/a filter between chained aggregates",
			old:  revenueChained().Spec(),
			new: edit(revenueChained(), func(s *v1.StreamingQuerySpec) {
				s.Transform = slices.Insert(s.Transform, 5, v1.Step{Filter: "orders > 1"})
			}),
			passes: []string{"operator-added", "operator-removed", "operator-reordered", "key-columns", "window-column", "window-size", "state-input-expression"},
		},
		{
			name:   "operator-added/a filter added",
			old:    revenue().Spec(),
			new:    edit(revenue(), func(s *v1.StreamingQuerySpec) { s.Transform[revFilter].Filter = "amount > 0.0 && country != 'XX'" }),
			passes: []string{"operator-added", "operator-removed", "operator-renamed", "operator-reordered", "operator-kind", "key-columns", "key-order"},
		},
		{
			name: "operator-removed/the dropDuplicates removed",
			old:  revenue().Spec(),
			new:  edit(revenue(), func(s *v1.StreamingQuerySpec) { s.Transform = slices.Delete(s.Transform, revDedup, revDedup+1) }),
			want: []finding{{Rule: "operator-removed", Severity: compat.Rejected, Path: "spec.transform", Old: `dropDuplicates step "dedup" by (order_id string)`}},
		},
		{
			name: "operator-removed/the aggregate removed",
			old:  revenue().Spec(),
			new:  edit(revenue(), func(s *v1.StreamingQuerySpec) { s.Transform = s.Transform[:revAggregate] }),
			want: []finding{
				{Rule: "operator-removed", Severity: compat.Rejected, Path: "spec.transform", Old: `aggregate step "revenue" by ` + revKeys},
				{Rule: "output-columns", Severity: compat.Warning, Path: "spec.transform[1].select", Old: revOut, New: "(order_id string, country string, amount double, net double, qty long, ts timestamp, received timestamp)"},
			},
		},
		{
			name: "operator-renamed/an unnamed step given a name",
			old:  edit(revenue(), func(s *v1.StreamingQuerySpec) { step(s, revDedup).DropDuplicates.Name = "" }),
			new:  revenue().Spec(),
			want: []finding{{Rule: "operator-renamed", Severity: compat.Rejected, Path: revDedupPath + ".name", Old: "#0", New: `"dedup"`}},
		},
		{
			name: "operator-renamed/a named step renamed",
			old:  revenue().Spec(),
			new:  edit(revenue(), func(s *v1.StreamingQuerySpec) { agg(s).Name = "revenue-by-country" }),
			want: []finding{{Rule: "operator-renamed", Severity: compat.Rejected, Path: revAggPath + ".name", Old: `"revenue"`, New: `"revenue-by-country"`}},
		},
		{
			name: "operator-renamed/an unnamed step renumbered by an insertion before it",
			old: edit(pageCounts(), func(s *v1.StreamingQuerySpec) {
				s.Transform = []v1.Step{{Aggregate: &v1.Aggregate{GroupBy: []v1.GroupKey{qt.Key("page")}, Aggregates: []v1.Aggregation{qt.Agg("clicks", v1.AggCount, "")}}}}
			}),
			new: edit(pageCounts(), func(s *v1.StreamingQuerySpec) {
				s.Transform = []v1.Step{
					{DropDuplicates: &v1.DropDuplicates{Columns: []string{"click_id"}}},
					{Aggregate: &v1.Aggregate{GroupBy: []v1.GroupKey{qt.Key("page")}, Aggregates: []v1.Aggregation{qt.Agg("clicks", v1.AggCount, "")}}},
				}
			}),
			want: []finding{
				{Rule: "operator-added", Severity: compat.Rejected, Path: "spec.transform[0].dropDuplicates", New: "dropDuplicates step #0 by (click_id string)"},
				{Rule: "operator-renamed", Severity: compat.Rejected, Path: "spec.transform[1].aggregate.name", Old: "#0", New: "#1"},
			},
		},
		{
			name: "operator-renamed/unnamed steps keep their ordinals when a filter is inserted",
			old:  edit(revenue(), func(s *v1.StreamingQuerySpec) { step(s, revDedup).DropDuplicates.Name, agg(s).Name = "", "" }),
			new: edit(revenue(), func(s *v1.StreamingQuerySpec) {
				step(s, revDedup).DropDuplicates.Name, agg(s).Name = "", ""
				s.Transform = slices.Insert(s.Transform, revDedup, v1.Step{Filter: "qty > 0"})
			}),
			passes: []string{"operator-renamed", "operator-added", "operator-removed"},
		},
		{
			name: "operator-reordered/two dropDuplicates swapped",
			old: edit(revenue(), func(s *v1.StreamingQuerySpec) {
				s.Transform = slices.Insert(s.Transform, revAggregate, v1.Step{DropDuplicates: &v1.DropDuplicates{Name: "by-key", Columns: []string{"country", "ts"}}})
			}),
			new: edit(revenue(), func(s *v1.StreamingQuerySpec) {
				s.Transform = slices.Insert(s.Transform, revDedup, v1.Step{DropDuplicates: &v1.DropDuplicates{Name: "by-key", Columns: []string{"country", "ts"}}})
			}),
			want: []finding{{Rule: "operator-reordered", Severity: compat.Rejected, Path: "spec.transform", Old: `("dedup", "by-key", "revenue")`, New: `("by-key", "dedup", "revenue")`}},
		},
		{
			name: "operator-reordered/the same order with a filter between",
			old: edit(revenue(), func(s *v1.StreamingQuerySpec) {
				s.Transform = slices.Insert(s.Transform, revAggregate, v1.Step{DropDuplicates: &v1.DropDuplicates{Name: "by-key", Columns: []string{"country", "ts"}}})
			}),
			new: edit(revenue(), func(s *v1.StreamingQuerySpec) {
				s.Transform = slices.Insert(s.Transform, revAggregate, v1.Step{DropDuplicates: &v1.DropDuplicates{Name: "by-key", Columns: []string{"country", "ts"}}}, v1.Step{Filter: "qty > 0"})
			}),
			passes: []string{"operator-reordered"},
		},
		{
			name: "operator-kind/a dropDuplicates becomes an aggregate under the same name",
			old:  pageCounts().DropDuplicates("s", "page").Spec(),
			new:  pageCounts().Aggregate("s", []v1.GroupKey{qt.Key("page")}, qt.Agg("clicks", v1.AggCount, "")).Spec(),
			want: []finding{
				{Rule: "operator-kind", Severity: compat.Rejected, Path: "spec.transform[0].aggregate", Old: "dropDuplicates", New: "aggregate"},
				{Rule: "output-columns", Severity: compat.Warning, Path: "spec.transform[0].aggregate", Old: "(click_id string, page string, at timestamp)", New: "(page string, clicks long)"},
			},
		},
		{
			name: "key-columns/a grouping key replaced",
			old:  revenueUpdate().Spec(),
			new:  edit(revenueUpdate(), func(s *v1.StreamingQuerySpec) { agg(s).GroupBy[0] = qt.Key("order_id") }),
			want: []finding{
				{Rule: "key-columns", Severity: compat.Rejected, Path: revAggPath + ".groupBy", Old: revKeys, New: "(order_id string, window(ts, 5m))"},
				{Rule: "output-columns", Severity: compat.Warning, Path: revAggPath, Old: revOut, New: "(order_id string, window_start timestamp, window_end timestamp, orders long, revenue double, top double, units long)"},
			},
		},
		{
			name: "key-columns/dedup on another column of the same type",
			old:  revenue().Spec(),
			new:  edit(revenue(), func(s *v1.StreamingQuerySpec) { step(s, revDedup).DropDuplicates.Columns = []string{"country"} }),
			want: []finding{{Rule: "key-columns", Severity: compat.Rejected, Path: revDedupPath + ".columns", Old: "(order_id string)", New: "(country string)"}},
		},
		{
			name: "key-columns/a dedup column added",
			old:  revenue().Spec(),
			new:  edit(revenue(), func(s *v1.StreamingQuerySpec) { step(s, revDedup).DropDuplicates.Columns = []string{"order_id", "ts"} }),
			want: []finding{{Rule: "key-columns", Severity: compat.Rejected, Path: revDedupPath + ".columns", Old: "(order_id string)", New: "(order_id string, ts timestamp)"}},
		},
		{
			name: "key-order/grouping keys swapped",
			old:  revenue().Spec(),
			new: edit(revenue(), func(s *v1.StreamingQuerySpec) {
				agg(s).GroupBy[0], agg(s).GroupBy[1] = agg(s).GroupBy[1], agg(s).GroupBy[0]
			}),
			want: []finding{
				{Rule: "key-order", Severity: compat.Rejected, Path: revAggPath + ".groupBy", Old: revKeys, New: "(window(ts, 5m), country string)"},
				{Rule: "output-columns", Severity: compat.Warning, Path: revAggPath, Old: revOut, New: "(window_start timestamp, window_end timestamp, country string, orders long, revenue double, top double, units long)"},
			},
		},
		{
			name: "key-order/dedup columns swapped",
			old: edit(revenue(), func(s *v1.StreamingQuerySpec) {
				step(s, revDedup).DropDuplicates.Columns = []string{"order_id", "country"}
			}),
			new: edit(revenue(), func(s *v1.StreamingQuerySpec) {
				step(s, revDedup).DropDuplicates.Columns = []string{"country", "order_id"}
			}),
			want: []finding{{Rule: "key-order", Severity: compat.Rejected, Path: revDedupPath + ".columns", Old: "(order_id string, country string)", New: "(country string, order_id string)"}},
		},
		{
			name: "key-type/a grouping key computed as another type",
			old:  revenueUpdate().Spec(),
			new:  edit(revenueUpdate(), func(s *v1.StreamingQuerySpec) { s.Transform[revSelect].Select[1].Expr = "size(country)" }),
			want: []finding{
				{Rule: "key-type", Severity: compat.Rejected, Path: revAggPath + ".groupBy[0].column", Old: "country string", New: "country long"},
				{Rule: "output-columns", Severity: compat.Warning, Path: revAggPath, Old: revOut, New: "(country long, window_start timestamp, window_end timestamp, orders long, revenue double, top double, units long)"},
			},
		},
		{
			name: "key-type/a dedup column's type changed in the source",
			old:  revenue().Spec(),
			new:  edit(revenue(), func(s *v1.StreamingQuerySpec) { s.Sources[0].Schema.Columns[0].Type = v1.TypeLong }),
			want: []finding{
				{Rule: "source-column-type", Severity: compat.Warning, Path: "spec.sources[0].schema.columns[0].type", Old: "string", New: "long"},
				{Rule: "key-type", Severity: compat.Rejected, Path: revDedupPath + ".columns[0]", Old: "order_id string", New: "order_id long"},
			},
		},
		{
			name:   "key-type/an expression reformatted",
			old:    revenue().Spec(),
			new:    edit(revenue(), func(s *v1.StreamingQuerySpec) { s.Transform[revSelect].Select[1].Expr = " country.upperAscii( ) " }),
			passes: []string{"key-type", "state-input-expression"},
		},
		{
			name: "window-column/windows on another time column",
			old:  revenueUpdate().Spec(),
			new:  edit(revenueUpdate(), func(s *v1.StreamingQuerySpec) { agg(s).GroupBy[1].Window.Column = "received" }),
			want: []finding{{Rule: "window-column", Severity: compat.Rejected, Path: revAggPath + ".groupBy[1].window.column", Old: "ts", New: "received"}},
		},
		{
			name: "window-size/5m to 10m",
			old:  revenue().Spec(),
			new:  edit(revenue(), func(s *v1.StreamingQuerySpec) { agg(s).GroupBy[1].Window.Duration = "10m" }),
			want: []finding{{Rule: "window-size", Severity: compat.Rejected, Path: revAggPath + ".groupBy[1].window.duration", Old: "5m", New: "10m"}},
		},
		{
			name:   "window-size/5m written as 300s",
			old:    revenue().Spec(),
			new:    edit(revenue(), func(s *v1.StreamingQuerySpec) { agg(s).GroupBy[1].Window.Duration = "300s" }),
			passes: []string{"window-size", "window-column", "window-slide"},
		},
		{
			name: "window-slide/tumbling to sliding",
			old:  revenue().Spec(),
			new:  edit(revenue(), func(s *v1.StreamingQuerySpec) { agg(s).GroupBy[1].Window.Slide = "1m" }),
			want: []finding{{Rule: "window-slide", Severity: compat.Rejected, Path: revAggPath + ".groupBy[1].window.slide", Old: "every 5m (tumbling)", New: "every 1m"}},
		},
		{
			name:   "window-slide/a slide equal to the duration is tumbling",
			old:    revenue().Spec(),
			new:    edit(revenue(), func(s *v1.StreamingQuerySpec) { agg(s).GroupBy[1].Window.Slide = "5m" }),
			passes: []string{"window-slide"},
		},
		{
			name: "session-gap/5m to 10m",
			old:  revenueSessions().Spec(),
			new:  edit(revenueSessions(), func(s *v1.StreamingQuerySpec) { agg(s).GroupBy[1].Session.Gap = "10m" }),
			want: []finding{{Rule: "session-gap", Severity: compat.Rejected, Path: revAggPath + ".groupBy[1].session.gap", Old: "5m", New: "10m"}},
		},
		{
			name: "session-gap/a fixed gap becomes one per row",
			old:  revenueSessions().Spec(),
			new: edit(revenueSessions(), func(s *v1.StreamingQuerySpec) {
				agg(s).GroupBy[1].Session.Gap, agg(s).GroupBy[1].Session.GapExpr = "", "country == 'DE' ? duration('5m') : duration('10m')"
			}),
			want: []finding{{Rule: "session-gap", Severity: compat.Rejected, Path: revAggPath + ".groupBy[1].session.gapExpr", Old: "5m", New: "country=='DE'?duration('5m'):duration('10m')"}},
		},
		{
			name: "session-gap/a gap expression reformatted",
			old: edit(revenueSessions(), func(s *v1.StreamingQuerySpec) {
				agg(s).GroupBy[1].Session.Gap, agg(s).GroupBy[1].Session.GapExpr = "", "duration('5m')"
			}),
			new: edit(revenueSessions(), func(s *v1.StreamingQuerySpec) {
				agg(s).GroupBy[1].Session.Gap, agg(s).GroupBy[1].Session.GapExpr = "", " duration( '5m' ) "
			}),
			passes: []string{"session-gap"},
		},
		{
			name:   "session-gap/5m written as 300s",
			old:    revenueSessions().Spec(),
			new:    edit(revenueSessions(), func(s *v1.StreamingQuerySpec) { agg(s).GroupBy[1].Session.Gap = "300s" }),
			passes: []string{"session-gap", "session-column", "key-columns"},
		},
		{
			name: "session-column/sessions on another time column",
			old:  revenueSessions().Spec(),
			new: edit(revenueSessions(), func(s *v1.StreamingQuerySpec) {
				s.Transform[revWatermark].Watermark.Column = "received"
				agg(s).GroupBy[1].Session.Column = "received"
			}),
			want: []finding{
				{Rule: "session-column", Severity: compat.Rejected, Path: revAggPath + ".groupBy[1].session.column", Old: "ts", New: "received"},
				{Rule: "watermark-column", Severity: compat.Rejected, Path: "spec.transform[2].watermark.column", Old: "ts", New: "received"},
			},
		},
		{
			name: "key-columns/a window becomes a session",
			old:  revenue().Spec(),
			new:  revenueSessions().Spec(),
			want: []finding{{Rule: "key-columns", Severity: compat.Rejected, Path: revAggPath + ".groupBy", Old: "(country string, window(ts, 5m))", New: "(country string, session(ts, gap 5m))"}},
		},
		{
			name:   "aggregate-function/max to min",
			old:    revenue().Spec(),
			new:    edit(revenue(), func(s *v1.StreamingQuerySpec) { agg(s).Aggregates[2].Function = v1.AggMin }),
			want:   []finding{{Rule: "aggregate-function", Severity: compat.Rejected, Path: revAggPath + ".aggregates[2].function", Old: "top = max(amount double)", New: "top = min(amount double)"}},
			passes: []string{"aggregate-renamed", "aggregate-added", "aggregate-removed"},
		},
		{
			name:   "aggregate-input/sum over another column of the same type",
			old:    revenue().Spec(),
			new:    edit(revenue(), func(s *v1.StreamingQuerySpec) { agg(s).Aggregates[1].Column = "amount" }),
			want:   []finding{{Rule: "aggregate-input", Severity: compat.Rejected, Path: revAggPath + ".aggregates[1].column", Old: "revenue = sum(net double)", New: "revenue = sum(amount double)"}},
			passes: []string{"aggregate-input-type", "aggregate-function"},
		},
		{
			name: "aggregate-input/count of rows to count of a column",
			old:  revenue().Spec(),
			new:  edit(revenue(), func(s *v1.StreamingQuerySpec) { agg(s).Aggregates[0].Column = "order_id" }),
			want: []finding{{Rule: "aggregate-input", Severity: compat.Rejected, Path: revAggPath + ".aggregates[0].column", Old: "orders = count(*)", New: "orders = count(order_id string)"}},
		},
		{
			name: "aggregate-input-type/a summed column's type changed in the source",
			old:  revenue().Spec(),
			new:  edit(revenue(), func(s *v1.StreamingQuerySpec) { s.Sources[0].Schema.Columns[3].Type = v1.TypeDouble }),
			want: []finding{
				{Rule: "source-column-type", Severity: compat.Warning, Path: "spec.sources[0].schema.columns[3].type", Old: "long", New: "double"},
				{Rule: "aggregate-input-type", Severity: compat.Rejected, Path: revAggPath + ".aggregates[3].column", Old: "units = sum(qty long)", New: "units = sum(qty double)"},
				{Rule: "output-columns", Severity: compat.Warning, Path: revAggPath, Old: revOut, New: "(country string, window_start timestamp, window_end timestamp, orders long, revenue double, top double, units double)"},
			},
			passes: []string{"aggregate-input"},
		},
		{
			name: "aggregate-added/an aggregate appended",
			old:  revenue().Spec(),
			new: edit(revenue(), func(s *v1.StreamingQuerySpec) {
				agg(s).Aggregates = append(agg(s).Aggregates, qt.Agg("avg_amount", v1.AggAvg, "amount"))
			}),
			want: []finding{
				{Rule: "aggregate-added", Severity: compat.Rejected, Path: revAggPath + ".aggregates[4]", New: "avg_amount = avg(amount double)"},
				{Rule: "output-columns", Severity: compat.Warning, Path: revAggPath, Old: revOut, New: "(country string, window_start timestamp, window_end timestamp, orders long, revenue double, top double, units long, avg_amount double)"},
			},
			passes: []string{"aggregate-function", "aggregate-input"},
		},
		{
			name: "aggregate-added/an aggregate inserted is not a change of the ones after it",
			old:  revenue().Spec(),
			new: edit(revenue(), func(s *v1.StreamingQuerySpec) {
				agg(s).Aggregates = slices.Insert(agg(s).Aggregates, 1, qt.Agg("low", v1.AggMin, "amount"))
			}),
			want: []finding{
				{Rule: "aggregate-added", Severity: compat.Rejected, Path: revAggPath + ".aggregates[1]", New: "low = min(amount double)"},
				{Rule: "output-columns", Severity: compat.Warning, Path: revAggPath, Old: revOut, New: "(country string, window_start timestamp, window_end timestamp, orders long, low double, revenue double, top double, units long)"},
			},
		},
		{
			name: "aggregate-removed/an aggregate removed",
			old:  revenue().Spec(),
			new:  edit(revenue(), func(s *v1.StreamingQuerySpec) { agg(s).Aggregates = slices.Delete(agg(s).Aggregates, 2, 3) }),
			want: []finding{
				{Rule: "aggregate-removed", Severity: compat.Rejected, Path: revAggPath + ".aggregates", Old: "top = max(amount double)"},
				{Rule: "output-columns", Severity: compat.Warning, Path: revAggPath, Old: revOut, New: "(country string, window_start timestamp, window_end timestamp, orders long, revenue double, units long)"},
			},
		},
		{
			name:   "aggregate-renamed/only an output name changes",
			old:    revenue().Spec(),
			new:    edit(revenue(), func(s *v1.StreamingQuerySpec) { agg(s).Aggregates[0].Name = "order_count" }),
			want:   []finding{{Rule: "aggregate-renamed", Severity: compat.Warning, Path: revAggPath + ".aggregates[0].name", Old: "orders", New: "order_count"}},
			passes: []string{"output-columns", "aggregate-function", "aggregate-input", "operator-kind"},
		},
		{
			name: "state-input-expression/a grouping key computed differently",
			old:  revenue().Spec(),
			new:  edit(revenue(), func(s *v1.StreamingQuerySpec) { s.Transform[revSelect].Select[1].Expr = "country.lowerAscii()" }),
			want: []finding{{Rule: "state-input-expression", Severity: compat.Warning, Path: "spec.transform[1].select[1].expr", Old: "country.upperAscii()", New: "country.lowerAscii()"}},
		},
		{
			name: "state-input-expression/an aggregate input computed differently",
			old:  revenue().Spec(),
			new:  edit(revenue(), func(s *v1.StreamingQuerySpec) { s.Transform[revSelect].Select[3].Expr = "amount * 0.8" }),
			want: []finding{{Rule: "state-input-expression", Severity: compat.Warning, Path: "spec.transform[1].select[3].expr", Old: "amount*0.9", New: "amount*0.8"}},
		},
		{
			name: "state-input-expression/a key copied under its own name by a later select",
			old:  revenue().Spec(),
			new: edit(revenue(), func(s *v1.StreamingQuerySpec) {
				s.Transform = slices.Insert(s.Transform, revWatermark, v1.Step{Select: revenue().Spec().Transform[revSelect].Select})
				for i, p := range s.Transform[revWatermark].Select {
					s.Transform[revWatermark].Select[i].Expr = p.Name
				}
			}),
			passes: []string{"state-input-expression", "operator-renamed"},
		},

		// Watermark.
		{
			name: "watermark-column/another event-time column under state",
			old:  revenueUpdate().Spec(),
			new:  edit(revenueUpdate(), func(s *v1.StreamingQuerySpec) { s.Transform[revWatermark].Watermark.Column = "received" }),
			want: []finding{{Rule: "watermark-column", Severity: compat.Rejected, Path: "spec.transform[2].watermark.column", Old: "ts", New: "received"}},
		},
		{
			name: "watermark-column/another event-time column without state",
			old:  clean().Select(qt.As("ts", "ts"), qt.As("seen", "ts")).Watermark("ts", "1m").Spec(),
			new:  clean().Select(qt.As("ts", "ts"), qt.As("seen", "ts")).Watermark("seen", "1m").Spec(),
			want: []finding{{Rule: "watermark-column", Severity: compat.Allowed, Path: "spec.transform[3].watermark.column", Old: "ts", New: "seen"}},
		},
		{
			name: "watermark-removed/under state",
			old:  revenueUpdate().Spec(),
			new:  edit(revenueUpdate(), func(s *v1.StreamingQuerySpec) { s.Transform = slices.Delete(s.Transform, revWatermark, revWatermark+1) }),
			want: []finding{{Rule: "watermark-removed", Severity: compat.Rejected, Path: "spec.transform", Old: "ts, delay 10m"}},
		},
		{
			name: "watermark-removed/without state",
			old:  clean().Watermark("ts", "1m").Spec(),
			new:  clean().Spec(),
			want: []finding{{Rule: "watermark-removed", Severity: compat.Allowed, Path: "spec.transform", Old: "ts, delay 1m"}},
		},
		{
			name: "state-eviction/a watermark added on the window's column",
			old:  revenueNoWatermark().Spec(),
			new: edit(revenueNoWatermark(), func(s *v1.StreamingQuerySpec) {
				s.Transform = slices.Insert(s.Transform, 1, v1.Step{Watermark: &v1.Watermark{Column: "ts", Delay: "10m"}})
			}),
			want:   []finding{{Rule: "state-eviction", Severity: compat.Rejected, Path: "spec.transform[3].aggregate", Old: "no eviction", New: "evicts by ts"}},
			passes: []string{"watermark-added"},
		},
		{
			name: "state-eviction/the event-time column no longer reaches the window",
			old:  revenueUpdate().Spec(),
			new: edit(revenueUpdate(), func(s *v1.StreamingQuerySpec) {
				copied := slices.Clone(revenueSelect())
				for i := range copied {
					copied[i].Expr = copied[i].Name
				}
				copied[5].Expr = "ts + duration('0s')"
				s.Transform = slices.Insert(s.Transform, revWatermark+1, v1.Step{Select: copied})
			}),
			want: []finding{
				{Rule: "state-input-expression", Severity: compat.Warning, Path: "spec.transform[3].select[5].expr", Old: "ts", New: "ts+duration('0s')"},
				{Rule: "state-eviction", Severity: compat.Rejected, Path: "spec.transform[5].aggregate", Old: "evicts by ts", New: "no eviction"},
			},
		},
		{
			name: "watermark-added/under state, on a column no step evicts by",
			old:  revenueNoWatermark().Spec(),
			new: edit(revenueNoWatermark(), func(s *v1.StreamingQuerySpec) {
				s.Transform = slices.Insert(s.Transform, 1, v1.Step{Watermark: &v1.Watermark{Column: "received", Delay: "10m"}})
			}),
			want:   []finding{{Rule: "watermark-added", Severity: compat.Warning, Path: "spec.transform[1].watermark", New: "received, delay 10m"}},
			passes: []string{"state-eviction"},
		},
		{
			name: "watermark-added/without state",
			old:  clean().Spec(),
			new:  clean().Watermark("ts", "1m").Spec(),
			want: []finding{{Rule: "watermark-added", Severity: compat.Allowed, Path: "spec.transform[2].watermark", New: "ts, delay 1m"}},
		},
		{
			name: "watermark-delay/a longer delay",
			old:  revenue().Spec(),
			new:  edit(revenue(), func(s *v1.StreamingQuerySpec) { s.Transform[revWatermark].Watermark.Delay = "1h" }),
			want: []finding{{Rule: "watermark-delay", Severity: compat.Warning, Path: "spec.transform[2].watermark.delay", Old: "10m", New: "1h"}},
		},
		{
			name: "watermark-delay/a shorter delay",
			old:  revenue().Spec(),
			new:  edit(revenue(), func(s *v1.StreamingQuerySpec) { s.Transform[revWatermark].Watermark.Delay = "1m" }),
			want: []finding{{Rule: "watermark-delay", Severity: compat.Warning, Path: "spec.transform[2].watermark.delay", Old: "10m", New: "1m"}},
		},
		{
			name: "watermark-delay/without state",
			old:  clean().Watermark("ts", "1m").Spec(),
			new:  clean().Watermark("ts", "5m").Spec(),
			want: []finding{{Rule: "watermark-delay", Severity: compat.Allowed, Path: "spec.transform[2].watermark.delay", Old: "1m", New: "5m"}},
		},
		{
			name:   "watermark-delay/10m written as 600s",
			old:    revenue().Spec(),
			new:    edit(revenue(), func(s *v1.StreamingQuerySpec) { s.Transform[revWatermark].Watermark.Delay = "600s" }),
			passes: []string{"watermark-delay", "watermark-column", "watermark-added", "watermark-removed", "state-eviction"},
		},

		{
			name:     "unbounded-state/with no checkpoint yet, a dropDuplicates without a watermark",
			oldShape: &compat.Shape{},
			new:      pageCounts().DropDuplicates("", "click_id").Spec(),
			want:     []finding{{Rule: "unbounded-state", Severity: compat.Warning, Path: "spec.transform[0].dropDuplicates"}},
		},
		{
			name:     "unbounded-state/with no checkpoint yet, a dedup and an aggregate in update mode without a watermark",
			oldShape: &compat.Shape{},
			new:      revenueNoWatermark().Spec(),
			want: []finding{
				{Rule: "unbounded-state", Severity: compat.Warning, Path: "spec.transform[1].dropDuplicates"},
				{Rule: "unbounded-state", Severity: compat.Warning, Path: "spec.transform[2].aggregate"},
			},
		},
		{
			name:     "unbounded-state/with no checkpoint yet, an aggregate grouped off the watermark's column",
			oldShape: &compat.Shape{},
			new: edit(revenueUpdate(), func(s *v1.StreamingQuerySpec) {
				noDedup(s)
				s.Transform[3].Aggregate.GroupBy = s.Transform[3].Aggregate.GroupBy[:1]
			}),
			want: []finding{{Rule: "unbounded-state", Severity: compat.Warning, Path: "spec.transform[3].aggregate"}},
		},
		{
			name:     "unbounded-state/with no checkpoint yet, complete mode keeps every window despite the watermark",
			oldShape: &compat.Shape{},
			new:      edit(revenue().OutputMode(v1.OutputComplete), noDedup),
			want:     []finding{{Rule: "unbounded-state", Severity: compat.Warning, Path: "spec.transform[3].aggregate"}},
		},
		{
			name: "unbounded-state/an unchanged restart still warns about a dedup off the watermark's column",
			old:  revenue().Spec(),
			new:  revenue().Spec(),
			want: []finding{{Rule: "unbounded-state", Severity: compat.Warning, Path: revDedupPath}},
		},
		{
			name:     "unbounded-state/a dedup on the watermark's column and windows in append mode",
			oldShape: &compat.Shape{},
			new:      revenueEvicting().Spec(),
			passes:   []string{"unbounded-state"},
		},
		{
			name:     "unbounded-state/windows in update mode with a watermark",
			oldShape: &compat.Shape{},
			new:      edit(revenueUpdate(), noDedup),
			passes:   []string{"unbounded-state"},
		},
		{
			name:     "unbounded-state/an aggregate without grouping keys keeps one group",
			oldShape: &compat.Shape{},
			new:      pageCounts().Aggregate("", nil, qt.Agg("clicks", v1.AggCount, "")).Spec(),
			passes:   []string{"unbounded-state"},
		},
		{
			name:   "unbounded-state/a restart of a query whose steps all evict",
			old:    revenueEvicting().Spec(),
			new:    revenueEvicting().Spec(),
			passes: []string{"unbounded-state"},
		},

		// Output and sink.
		{
			name: "output-mode/append to update without an aggregate",
			old:  clean().Spec(),
			new:  clean().OutputMode(v1.OutputUpdate).Spec(),
			want: []finding{{Rule: "output-mode", Severity: compat.Allowed, Path: "spec.outputMode", Old: "append", New: "update"}},
		},
		{
			name: "output-mode/update to complete after the watermark evicted groups",
			old:  revenueUpdate().Spec(),
			new:  revenueUpdate().OutputMode(v1.OutputComplete).Spec(),
			want: []finding{{Rule: "output-mode", Severity: compat.Rejected, Path: "spec.outputMode", Old: "update", New: "complete"}},
		},
		{
			name: "output-mode/update to complete without a watermark",
			old:  revenueNoWatermark().Spec(),
			new:  revenueNoWatermark().OutputMode(v1.OutputComplete).Spec(),
			want: []finding{{Rule: "output-mode", Severity: compat.Warning, Path: "spec.outputMode", Old: "update", New: "complete"}},
		},
		{
			name: "output-mode/append to update with an aggregate",
			old:  revenueUpdate().OutputMode(v1.OutputAppend).Spec(),
			new:  revenueUpdate().Spec(),
			want: []finding{{Rule: "output-mode", Severity: compat.Warning, Path: "spec.outputMode", Old: "append", New: "update"}},
		},
		{
			name: "output-mode/complete to update",
			old:  revenueUpdate().OutputMode(v1.OutputComplete).Spec(),
			new:  revenueUpdate().Spec(),
			want: []finding{{Rule: "output-mode", Severity: compat.Warning, Path: "spec.outputMode", Old: "complete", New: "update"}},
		},
		{
			name: "output-mode/update to append with an aggregate",
			old:  revenueUpdate().Spec(),
			new:  revenueUpdate().OutputMode(v1.OutputAppend).Spec(),
			want: []finding{{Rule: "output-mode", Severity: compat.Warning, Path: "spec.outputMode", Old: "update", New: "append"}},
		},
		{
			name:   "output-mode/the default written out",
			old:    edit(clean(), func(s *v1.StreamingQuerySpec) { s.OutputMode = "" }),
			new:    clean().OutputMode(v1.OutputAppend).Spec(),
			passes: []string{"output-mode"},
		},
		{
			name: "output-columns/a column added to the files sink",
			old:  clean().Spec(),
			new: edit(clean(), func(s *v1.StreamingQuerySpec) {
				s.Transform[1].Select = append(s.Transform[1].Select, qt.As("qty", "qty"))
			}),
			want: []finding{{Rule: "output-columns", Severity: compat.Warning, Path: "spec.transform[1].select", Old: "(order_id string, country string, amount double, ts timestamp)", New: "(order_id string, country string, amount double, ts timestamp, qty long)"}},
		},
		{
			name: "output-columns/console takes any columns",
			old:  ticks().Spec(),
			new:  ticks().Select(qt.As("value", "value")).Spec(),
			want: []finding{{Rule: "output-columns", Severity: compat.Allowed, Path: "spec.transform[2].select", Old: "(at timestamp, value long)", New: "(value long)"}},
		},
		{
			name: "sink-kind/files to kafka sees only new data",
			old:  clean().Spec(),
			new:  clean().KafkaSink("kafka:9092", "clean").Spec(),
			want: []finding{
				{Rule: "sink-kind", Severity: compat.Warning, Path: "spec.sink.kafka", Old: "files (parquet) in /data/out", New: "kafka topic clean"},
				{Rule: "sink-guarantee", Severity: compat.Warning, Path: "spec.sink.kafka", Old: "exactly-once", New: "at-least-once"},
			},
		},
		{
			name: "sink-kind/kafka to files would hold a partial history",
			old:  cleanKafka().Spec(),
			new:  cleanKafka().FilesSink("/data/out", "parquet").Spec(),
			want: []finding{
				{Rule: "sink-kind", Severity: compat.Rejected, Path: "spec.sink.files", Old: "kafka topic clean", New: "files (parquet) in /data/out"},
				{Rule: "sink-guarantee", Severity: compat.Allowed, Path: "spec.sink.files", Old: "at-least-once", New: "exactly-once"},
			},
		},
		{
			name: "sink-kind/kafka to webhook",
			old:  cleanKafka().Spec(),
			new:  cleanKafka().WebhookSink("https://hooks.example.com/clean").Spec(),
			want: []finding{{Rule: "sink-kind", Severity: compat.Warning, Path: "spec.sink.webhook", Old: "kafka topic clean", New: "webhook https://hooks.example.com/clean"}},
		},
		{
			name: "sink-kind/files to console",
			old:  clean().Spec(),
			new:  clean().ConsoleSink().Spec(),
			want: []finding{
				{Rule: "sink-kind", Severity: compat.Allowed, Path: "spec.sink.console", Old: "files (parquet) in /data/out", New: "console"},
				{Rule: "sink-guarantee", Severity: compat.Warning, Path: "spec.sink.console", Old: "exactly-once", New: "none"},
			},
		},
		{
			name: "sink-kind/kafka to delta in complete mode",
			old:  revenueUpdate().OutputMode(v1.OutputComplete).Spec(),
			new:  revenue().OutputMode(v1.OutputComplete).Spec(),
			want: []finding{
				{Rule: "sink-kind", Severity: compat.Warning, Path: "spec.sink.delta", Old: "kafka topic revenue", New: "delta table s3://lake/revenue"},
				{Rule: "sink-guarantee", Severity: compat.Allowed, Path: "spec.sink.delta", Old: "at-least-once", New: "exactly-once"},
			},
		},
		{
			name: "sink-kind/kafka to delta in append mode",
			old:  revenueUpdate().OutputMode(v1.OutputAppend).Spec(),
			new:  revenue().Spec(),
			want: []finding{
				{Rule: "sink-kind", Severity: compat.Rejected, Path: "spec.sink.delta", Old: "kafka topic revenue", New: "delta table s3://lake/revenue"},
				{Rule: "sink-guarantee", Severity: compat.Allowed, Path: "spec.sink.delta", Old: "at-least-once", New: "exactly-once"},
			},
		},
		{
			name:   "sink-kind/other brokers for the Kafka sink",
			old:    cleanKafka().Spec(),
			new:    edit(cleanKafka(), func(s *v1.StreamingQuerySpec) { s.Sink.Kafka.BootstrapServers = []string{"kafka-2:9093"} }),
			passes: []string{"sink-kind", "kafka-sink-topic", "sink-guarantee"},
		},
		{
			name: "files-sink-path/another output folder",
			old:  clean().Spec(),
			new:  clean().FilesSink("/data/out-v2", "parquet").Spec(),
			want: []finding{{Rule: "files-sink-path", Severity: compat.Rejected, Path: "spec.sink.files.path", Old: "/data/out", New: "/data/out-v2"}},
		},
		{
			name:   "files-sink-path/the same folder with a trailing slash",
			old:    clean().Spec(),
			new:    clean().FilesSink("/data/out/", "parquet").Spec(),
			passes: []string{"files-sink-path", "files-sink-format"},
		},
		{
			name: "files-sink-format/parquet to json in the same folder",
			old:  clean().Spec(),
			new:  clean().FilesSink("/data/out", "json").Spec(),
			want: []finding{{Rule: "files-sink-format", Severity: compat.Rejected, Path: "spec.sink.files.format", Old: "parquet", New: "json"}},
		},
		{
			name: "delta-sink-path/another table",
			old:  revenue().Spec(),
			new:  revenue().DeltaSink("s3://lake/revenue_v2", "country").Spec(),
			want: []finding{{Rule: "delta-sink-path", Severity: compat.Rejected, Path: "spec.sink.delta.path", Old: "s3://lake/revenue", New: "s3://lake/revenue_v2"}},
		},
		{
			name:   "delta-sink-path/another table in complete mode",
			old:    revenue().OutputMode(v1.OutputComplete).Spec(),
			new:    revenue().OutputMode(v1.OutputComplete).DeltaSink("s3://lake/revenue_v2").Spec(),
			want:   []finding{{Rule: "delta-sink-path", Severity: compat.Warning, Path: "spec.sink.delta.path", Old: "s3://lake/revenue", New: "s3://lake/revenue_v2"}},
			passes: []string{"delta-sink-partitioning"},
		},
		{
			name:   "delta-sink-partitioning/partition columns dropped",
			old:    revenue().Spec(),
			new:    revenue().DeltaSink("s3://lake/revenue").Spec(),
			want:   []finding{{Rule: "delta-sink-partitioning", Severity: compat.Rejected, Path: "spec.sink.delta.partitionColumns", Old: "(country)", New: "()"}},
			passes: []string{"delta-sink-path"},
		},
		{
			name:   "postgres-sink-table/another table",
			old:    pgRevenue("revenue", v1.OutputUpdate).Spec(),
			new:    pgRevenue("revenue_v2", v1.OutputUpdate).Spec(),
			want:   []finding{{Rule: "postgres-sink-table", Severity: compat.Rejected, Path: "spec.sink.postgres.table", Old: "postgres table revenue (connection secret/db)", New: "postgres table revenue_v2 (connection secret/db)"}},
			passes: []string{"sink-update-keys"},
		},
		{
			name: "postgres-sink-table/another table in complete mode",
			old:  pgRevenue("revenue", v1.OutputComplete).Spec(),
			new:  pgRevenue("revenue_v2", v1.OutputComplete).Spec(),
			want: []finding{{Rule: "postgres-sink-table", Severity: compat.Warning, Path: "spec.sink.postgres.table", Old: "postgres table revenue (connection secret/db)", New: "postgres table revenue_v2 (connection secret/db)"}},
		},
		{
			name:      "postgres-sink-table/the Secret names another server",
			old:       pgRevenue("revenue", v1.OutputUpdate).Spec(),
			oldServer: "db1.example.com:5432/shop",
			new:       pgRevenue("revenue", v1.OutputUpdate).Spec(),
			newServer: "db2.example.com:5432/shop",
			want: []finding{{Rule: "postgres-sink-table", Severity: compat.Rejected, Path: "spec.sink.postgres.connection",
				Old: "postgres table revenue on db1.example.com:5432/shop (connection secret/db)", New: "postgres table revenue on db2.example.com:5432/shop (connection secret/db)"}},
			passes: []string{"sink-update-keys"},
		},
		{
			name:      "postgres-sink-table/the same server under a renamed Secret",
			old:       pgRevenue("revenue", v1.OutputUpdate).Spec(),
			oldServer: "db1.example.com:5432/shop",
			new:       edit(pgRevenue("revenue", v1.OutputUpdate), func(s *v1.StreamingQuerySpec) { s.Sink.Postgres.Connection.SecretName = "shop-db" }),
			newServer: "db1.example.com:5432/shop",
			passes:    []string{"postgres-sink-table", "sink-update-keys"},
		},
		{
			name:      "postgres-sink-table/a renamed Secret whose server cannot be read",
			old:       pgRevenue("revenue", v1.OutputUpdate).Spec(),
			oldServer: "db1.example.com:5432/shop",
			new:       edit(pgRevenue("revenue", v1.OutputUpdate), func(s *v1.StreamingQuerySpec) { s.Sink.Postgres.Connection.SecretName = "shop-db" }),
			want: []finding{{Rule: "postgres-sink-table", Severity: compat.Rejected, Path: "spec.sink.postgres.connection",
				Old: "postgres table revenue on db1.example.com:5432/shop (connection secret/db)", New: "postgres table revenue (connection secret/shop-db)"}},
			passes: []string{"sink-update-keys"},
		},
		{
			name:   "postgres-sink-table/createTable is not a table change",
			old:    pgRevenue("revenue", v1.OutputUpdate).Spec(),
			new:    edit(pgRevenue("revenue", v1.OutputUpdate), func(s *v1.StreamingQuerySpec) { s.Sink.Postgres.CreateTable = true }),
			passes: []string{"postgres-sink-table", "sink-update-keys"},
		},
		{
			name:   "sink-update-keys/another merge key",
			old:    cleanMerge("order_id").Spec(),
			new:    cleanMerge("country").Spec(),
			want:   []finding{{Rule: "sink-update-keys", Severity: compat.Rejected, Path: "spec.sink.delta.mergeKeys", Old: "(order_id)", New: "(country)"}},
			passes: []string{"delta-sink-path"},
		},
		{
			name: "kafka-sink-topic/another topic",
			old:  cleanKafka().Spec(),
			new:  cleanKafka().KafkaSink("kafka:9092", "clean-v2").Spec(),
			want: []finding{{Rule: "kafka-sink-topic", Severity: compat.Warning, Path: "spec.sink.kafka.topic", Old: "clean", New: "clean-v2"}},
		},
		{
			name:   "kafka-sink-topic/a key column is not a topic change",
			old:    cleanKafka().Spec(),
			new:    edit(cleanKafka(), func(s *v1.StreamingQuerySpec) { s.Sink.Kafka.KeyColumn = "order_id" }),
			passes: []string{"kafka-sink-topic"},
		},
		{
			name: "kafka-sink-format/json to avro",
			old:  cleanKafka().Spec(),
			new:  edit(cleanKafka(), avroSink("")),
			want: []finding{{Rule: "kafka-sink-format", Severity: compat.Warning, Path: "spec.sink.kafka.format", Old: "json", New: "avro"}},
		},
		{
			name:   "kafka-sink-format/the default written out",
			old:    cleanKafka().Spec(),
			new:    edit(cleanKafka(), func(s *v1.StreamingQuerySpec) { s.Sink.Kafka.Format = v1.KafkaJSON }),
			passes: []string{"kafka-sink-format"},
		},
		{
			name: "kafka-sink-key-format/string to avro",
			old:  edit(cleanKafka(), func(s *v1.StreamingQuerySpec) { s.Sink.Kafka.KeyColumn = "order_id" }),
			new: edit(cleanKafka(), func(s *v1.StreamingQuerySpec) {
				s.Sink.Kafka.KeyColumn, s.Sink.Kafka.KeyFormat = "order_id", v1.KafkaAvro
				s.Sink.Kafka.SchemaRegistry = &v1.SchemaRegistry{URL: "http://registry:8081"}
			}),
			want: []finding{{Rule: "kafka-sink-key-format", Severity: compat.Warning, Path: "spec.sink.kafka.keyFormat", Old: "string", New: "avro"}},
		},
		{
			name: "kafka-sink-key-format/the default written out",
			old:  edit(cleanKafka(), func(s *v1.StreamingQuerySpec) { s.Sink.Kafka.KeyColumn = "order_id" }),
			new: edit(cleanKafka(), func(s *v1.StreamingQuerySpec) {
				s.Sink.Kafka.KeyColumn, s.Sink.Kafka.KeyFormat = "order_id", v1.KafkaKeyString
			}),
			passes: []string{"kafka-sink-key-format"},
		},
		{
			name: "kafka-sink-subject/another subject",
			old:  edit(cleanKafka(), avroSink("")),
			new:  edit(cleanKafka(), avroSink("clean-v2")),
			want: []finding{{Rule: "kafka-sink-subject", Severity: compat.Warning, Path: "spec.sink.kafka.schemaRegistry.subject", Old: "clean-value", New: "clean-v2"}},
		},
		{
			name:   "kafka-sink-subject/the default written out",
			old:    edit(cleanKafka(), avroSink("")),
			new:    edit(cleanKafka(), avroSink("clean-value")),
			passes: []string{"kafka-sink-subject"},
		},
		{
			name: "kafka-sink-schema-version/another version",
			old:  edit(cleanKafka(), pinnedSink(3)),
			new:  edit(cleanKafka(), pinnedSink(4)),
			want: []finding{{Rule: "kafka-sink-schema-version", Severity: compat.Warning, Path: "spec.sink.kafka.schemaRegistry.version", Old: "version 3", New: "version 4"}},
		},
		{
			name:   "kafka-sink-schema-version/the same version",
			old:    edit(cleanKafka(), pinnedSink(3)),
			new:    edit(cleanKafka(), pinnedSink(3)),
			passes: []string{"kafka-sink-schema-version"},
		},
		{
			name: "webhook-url/another receiver",
			old:  cleanKafka().WebhookSink("https://hooks.example.com/a").Spec(),
			new:  cleanKafka().WebhookSink("https://hooks.example.com/b").Spec(),
			want: []finding{{Rule: "webhook-url", Severity: compat.Warning, Path: "spec.sink.webhook.url", Old: "https://hooks.example.com/a", New: "https://hooks.example.com/b"}},
		},
		{
			name:   "webhook-url/a rotated token in the query is not recorded",
			old:    cleanKafka().WebhookSink("https://user:pw@hooks.example.com/a?token=1").Spec(),
			new:    cleanKafka().WebhookSink("https://hooks.example.com/a?token=2#x").Spec(),
			passes: []string{"webhook-url"},
		},
		{
			name: "sink-guarantee/Kafka transactions turned off",
			old:  edit(cleanKafka(), func(s *v1.StreamingQuerySpec) { s.Sink.Kafka.ExactlyOnce = true }),
			new:  cleanKafka().Spec(),
			want: []finding{{Rule: "sink-guarantee", Severity: compat.Warning, Path: "spec.sink.kafka.exactlyOnce", Old: "exactly-once", New: "at-least-once"}},
		},
		{
			name: "sink-guarantee/Kafka transactions turned on",
			old:  cleanKafka().Spec(),
			new:  edit(cleanKafka(), func(s *v1.StreamingQuerySpec) { s.Sink.Kafka.ExactlyOnce = true }),
			want: []finding{{Rule: "sink-guarantee", Severity: compat.Allowed, Path: "spec.sink.kafka.exactlyOnce", Old: "at-least-once", New: "exactly-once"}},
		},

		// Joins.
		{
			name: "join-added/a static join added to a stateless query joins from the next batch on",
			old:  clean().Spec(),
			new:  enriched().Spec(),
			want: []finding{
				{Rule: "output-columns", Severity: compat.Warning, Path: "spec.transform[2].join", Old: "(order_id string, country string, amount double, ts timestamp)", New: "(order_id string, country string, amount double, ts timestamp, c_code string, c_region string)"},
				{Rule: "join-added", Severity: compat.Warning, Path: "spec.transform[2].join", New: "leftOuter static join of delta table s3://lake/countries on (country string = code string)"},
			},
		},
		{
			name: "join-added/a static join added before the stateful steps is judged as a filter",
			old:  revenue().Spec(),
			new:  revenueJoined().Spec(),
			want: []finding{{Rule: "join-added", Severity: compat.Warning, Path: "spec.transform[3].join", New: "leftOuter static join of delta table s3://lake/countries on (country string = code string)"}},
		},
		{
			name: "join-added/a stream join added to a stateless query, with its source",
			old: edit(adClicks(), func(s *v1.StreamingQuerySpec) {
				s.Sources = s.Sources[:1]
				s.Transform = s.Transform[:1]
			}),
			new: adClicks().Spec(),
			want: []finding{
				{Rule: "source-added", Severity: compat.Warning, Path: "spec.sources[1]", New: "kafka topics [clicks]"},
				{Rule: "output-columns", Severity: compat.Warning, Path: "spec.transform[1].join", Old: "(ad_id string, imp_time timestamp, _key string, _topic string, _partition long, _offset long, _timestamp timestamp)", New: "(ad_id string, imp_time timestamp, click_time timestamp)"},
				{Rule: "join-added", Severity: compat.Rejected, Path: "spec.transform[1].join", New: "leftOuter stream join of source clicks on (ad_id string = ad_id string) where click_time BETWEEN imp_time - 0s AND imp_time + 1h, right watermark click_time"},
			},
		},
		{
			name:   "join-added/the same joins are not added",
			old:    adClicks().Spec(),
			new:    adClicks().Spec(),
			passes: []string{"join-added", "join-removed", "join-renamed", "join-kind", "join-type", "join-keys", "join-side", "join-time-bound", "join-watermark", "join-refresh"},
		},
		{
			name: "join-removed/a static join removed from a stateless query",
			old:  enriched().Spec(),
			new:  clean().Spec(),
			want: []finding{
				{Rule: "output-columns", Severity: compat.Warning, Path: "spec.transform[1].select", Old: "(order_id string, country string, amount double, ts timestamp, c_code string, c_region string)", New: "(order_id string, country string, amount double, ts timestamp)"},
				{Rule: "join-removed", Severity: compat.Warning, Path: "spec.transform", Old: "leftOuter static join of delta table s3://lake/countries on (country string = code string)"},
			},
		},
		{
			name: "join-removed/a static join removed before the stateful steps is judged as a filter",
			old:  revenueJoined().Spec(),
			new:  revenue().Spec(),
			want: []finding{{Rule: "join-removed", Severity: compat.Warning, Path: "spec.transform", Old: "leftOuter static join of delta table s3://lake/countries on (country string = code string)"}},
		},
		{
			name: "join-renamed/a stream join's name removed: its state would start empty",
			old:  adClicks().Spec(),
			new:  edit(adClicks(), func(s *v1.StreamingQuerySpec) { adJoin(s).Name = "" }),
			want: []finding{{Rule: "join-renamed", Severity: compat.Rejected, Path: "spec.transform[1].join.name", Old: `"imp-clicks"`, New: `"join-0"`}},
		},
		{
			name: "join-renamed/a static join renamed reads a new snapshot",
			old:  enriched().Spec(),
			new:  edit(enriched(), func(s *v1.StreamingQuerySpec) { s.Transform[enrichedJoin].Join.Name = "regions" }),
			want: []finding{{Rule: "join-renamed", Severity: compat.Warning, Path: "spec.transform[2].join.name", Old: `"countries"`, New: `"regions"`}},
		},
		{
			name: "join-kind/a static join becomes a stream join under the same name",
			old: edit(adClicks(), func(s *v1.StreamingQuerySpec) {
				s.Sources = s.Sources[:1]
				j := adJoin(s)
				j.Stream = nil
				j.Static = qt.StaticDelta("s3://lake/clicks", qt.Col("ad_id", v1.TypeString), qt.Col("click_time", v1.TypeTimestamp))
			}),
			new: adClicks().Spec(),
			want: []finding{
				{Rule: "source-added", Severity: compat.Warning, Path: "spec.sources[1]", New: "kafka topics [clicks]"},
				{Rule: "join-kind", Severity: compat.Rejected, Path: "spec.transform[1].join", Old: "static join of delta table s3://lake/clicks", New: "stream join of source clicks"},
			},
		},
		{
			name: "join-type/left outer becomes inner",
			old:  adClicks().Spec(),
			new:  edit(adClicks(), func(s *v1.StreamingQuerySpec) { adJoin(s).Type = v1.JoinInner }),
			want: []finding{{Rule: "join-type", Severity: compat.Rejected, Path: "spec.transform[1].join.type", Old: "leftOuter", New: "inner"}},
		},
		{
			name: "join-type/left outer becomes full outer",
			old:  adClicks().Spec(),
			new:  edit(adClicks(), func(s *v1.StreamingQuerySpec) { adJoin(s).Type = v1.JoinFullOuter }),
			want: []finding{{Rule: "join-type", Severity: compat.Rejected, Path: "spec.transform[1].join.type", Old: "leftOuter", New: "fullOuter"}},
		},
		{
			name: "join-type/left outer becomes left semi",
			old:  adClicks().Spec(),
			new: edit(adClicks(), func(s *v1.StreamingQuerySpec) {
				adJoin(s).Type = v1.JoinLeftSemi
				adJoin(s).Select = []v1.JoinColumn{{Side: v1.SideLeft, Column: "ad_id"}, {Side: v1.SideLeft, Column: "imp_time"}}
			}),
			want: []finding{
				{Rule: "output-columns", Severity: compat.Warning, Path: "spec.transform[1].join", Old: "(ad_id string, imp_time timestamp, click_time timestamp)", New: "(ad_id string, imp_time timestamp)"},
				{Rule: "join-type", Severity: compat.Rejected, Path: "spec.transform[1].join.type", Old: "leftOuter", New: "leftSemi"},
			},
		},
		{
			name: "join-side-transform/the right side's filter changes",
			old:  edit(adClicks(), func(s *v1.StreamingQuerySpec) { adJoin(s).Stream.Transform = []v1.SideStep{{Filter: "ad_id != ''"}} }),
			new: edit(adClicks(), func(s *v1.StreamingQuerySpec) {
				adJoin(s).Stream.Transform = []v1.SideStep{{Filter: "ad_id != 'test'"}}
			}),
			want: []finding{{Rule: "join-side-transform", Severity: compat.Warning, Path: "spec.transform[1].join.stream.transform", Old: "[filter: ad_id!='']", New: "[filter: ad_id!='test']"}},
		},
		{
			name: "join-side-transform/a select drops the right side's metadata columns",
			old:  adClicks().Spec(),
			new: edit(adClicks(), func(s *v1.StreamingQuerySpec) {
				adJoin(s).Stream.Transform = []v1.SideStep{{Select: []v1.Projection{qt.As("ad_id", "ad_id"), qt.As("click_time", "click_time")}}}
			}),
			want: []finding{{Rule: "join-side-transform", Severity: compat.Rejected, Path: "spec.transform[1].join.stream.transform",
				Old: "(ad_id string, click_time timestamp, _key string, _topic string, _partition long, _offset long, _timestamp timestamp)",
				New: "(ad_id string, click_time timestamp)"}},
		},
		{
			name:   "join-side-transform/a filter reformatted",
			old:    edit(adClicks(), func(s *v1.StreamingQuerySpec) { adJoin(s).Stream.Transform = []v1.SideStep{{Filter: "ad_id != ''"}} }),
			new:    edit(adClicks(), func(s *v1.StreamingQuerySpec) { adJoin(s).Stream.Transform = []v1.SideStep{{Filter: " ad_id!='' "}} }),
			passes: []string{"join-side-transform", "join-keys", "join-watermark"},
		},
		{
			name: "join-type/a static join's type is judged as a filter",
			old:  revenueJoined().Spec(),
			new:  edit(revenueJoined(), func(s *v1.StreamingQuerySpec) { s.Transform[revDedup].Join.Type = v1.JoinInner }),
			want: []finding{{Rule: "join-type", Severity: compat.Warning, Path: "spec.transform[3].join.type", Old: "leftOuter", New: "inner"}},
		},
		{
			name:   "join-type/inner written out is the default",
			old:    edit(enriched(), func(s *v1.StreamingQuerySpec) { s.Transform[enrichedJoin].Join.Type = "" }),
			new:    edit(enriched(), func(s *v1.StreamingQuerySpec) { s.Transform[enrichedJoin].Join.Type = v1.JoinInner }),
			passes: []string{"join-type"},
		},
		{
			name: "join-keys/a key added to a static join",
			old:  enriched().Spec(),
			new: edit(enriched(), func(s *v1.StreamingQuerySpec) {
				j := s.Transform[enrichedJoin].Join
				j.Static.Schema.Columns = append(j.Static.Schema.Columns, qt.Col("id", v1.TypeString))
				j.Keys = append(j.Keys, v1.JoinKey{Left: "order_id", Right: "id"})
			}),
			want: []finding{
				{Rule: "output-columns", Severity: compat.Warning, Path: "spec.transform[2].join", Old: "(order_id string, country string, amount double, ts timestamp, c_code string, c_region string)", New: "(order_id string, country string, amount double, ts timestamp, c_code string, c_region string, c_id string)"},
				{Rule: "join-keys", Severity: compat.Warning, Path: "spec.transform[2].join.keys", Old: "(country string = code string)", New: "(country string = code string, order_id string = id string)"},
			},
		},
		{
			name: "join-keys/keys in another order",
			old: edit(enriched(), func(s *v1.StreamingQuerySpec) {
				j := s.Transform[enrichedJoin].Join
				j.Static.Schema.Columns = append(j.Static.Schema.Columns, qt.Col("id", v1.TypeString))
				j.Keys = append(j.Keys, v1.JoinKey{Left: "order_id", Right: "id"})
			}),
			new: edit(enriched(), func(s *v1.StreamingQuerySpec) {
				j := s.Transform[enrichedJoin].Join
				j.Static.Schema.Columns = append(j.Static.Schema.Columns, qt.Col("id", v1.TypeString))
				j.Keys = append([]v1.JoinKey{{Left: "order_id", Right: "id"}}, j.Keys...)
			}),
			want: []finding{{Rule: "join-keys", Severity: compat.Warning, Path: "spec.transform[2].join.keys", Old: "(country string = code string, order_id string = id string)", New: "(order_id string = id string, country string = code string)"}},
		},
		{
			name: "join-side/the static table changes",
			old:  enriched().Spec(),
			new: edit(enriched(), func(s *v1.StreamingQuerySpec) {
				s.Transform[enrichedJoin].Join.Static.Delta.Path = "s3://lake/countries_v2"
			}),
			want: []finding{{Rule: "join-side", Severity: compat.Warning, Path: "spec.transform[2].join.static", Old: "delta table s3://lake/countries", New: "delta table s3://lake/countries_v2"}},
		},
		{
			name: "join-side/a delta table becomes a postgres table",
			old:  enriched().Spec(),
			new: edit(enriched(), func(s *v1.StreamingQuerySpec) {
				st := s.Transform[enrichedJoin].Join.Static
				st.Delta, st.Postgres = nil, &v1.StaticPostgres{Connection: v1.PostgresConnection{DSNEnv: "REF_DSN"}, Table: "ref.countries"}
			}),
			want: []finding{{Rule: "join-side", Severity: compat.Warning, Path: "spec.transform[2].join.static", Old: "delta table s3://lake/countries", New: "postgres table ref.countries (env/REF_DSN)"}},
		},
		{
			name: "join-side/the same table written another way",
			old:  enriched().Spec(),
			new: edit(enriched(), func(s *v1.StreamingQuerySpec) {
				s.Transform[enrichedJoin].Join.Static.Delta.Path = "s3://lake/countries/"
			}),
			passes: []string{"join-side"},
		},
		{
			name: "join-side/the stream join reads another source",
			old:  adClicks().Spec(),
			new: edit(adClicks(), func(s *v1.StreamingQuerySpec) {
				s.Sources[1].Name = "taps"
				s.Sources[1].Kafka.Topics = []string{"taps"}
				adJoin(s).Stream.Source = "taps"
			}),
			want: []finding{
				{Rule: "source-added", Severity: compat.Warning, Path: "spec.sources[1]", New: "kafka topics [taps]"},
				{Rule: "source-removed", Severity: compat.Warning, Path: "spec.sources", Old: "clicks: kafka topics [clicks]"},
				{Rule: "join-side", Severity: compat.Rejected, Path: "spec.transform[1].join.stream.source", Old: "source clicks", New: "source taps"},
			},
		},
		{
			name: "join-time-bound/the upper bound grows",
			old:  adClicks().Spec(),
			new:  edit(adClicks(), func(s *v1.StreamingQuerySpec) { adJoin(s).Stream.TimeBound.UpperBound = "2h" }),
			want: []finding{{Rule: "join-time-bound", Severity: compat.Rejected, Path: "spec.transform[1].join.stream.timeBound", Old: "click_time BETWEEN imp_time - 0s AND imp_time + 1h", New: "click_time BETWEEN imp_time - 0s AND imp_time + 2h"}},
		},
		{
			name:   "join-time-bound/the same bound in other units",
			old:    adClicks().Spec(),
			new:    edit(adClicks(), func(s *v1.StreamingQuerySpec) { adJoin(s).Stream.TimeBound.UpperBound = "60m" }),
			passes: []string{"join-time-bound"},
		},
		{
			name: "join-watermark/the right watermark's delay shrinks",
			old:  adClicks().Spec(),
			new:  edit(adClicks(), func(s *v1.StreamingQuerySpec) { adJoin(s).Stream.Watermark.Delay = "5m" }),
			want: []finding{{Rule: "join-watermark", Severity: compat.Warning, Path: "spec.transform[1].join.stream.watermark.delay", Old: "20m", New: "5m"}},
		},
		{
			name: "join-watermark/the right watermark's column changes",
			old: edit(adClicks(), func(s *v1.StreamingQuerySpec) {
				s.Sources[1].Schema.Columns = append(s.Sources[1].Schema.Columns, qt.Col("seen_time", v1.TypeTimestamp))
			}),
			new: edit(adClicks(), func(s *v1.StreamingQuerySpec) {
				s.Sources[1].Schema.Columns = append(s.Sources[1].Schema.Columns, qt.Col("seen_time", v1.TypeTimestamp))
				adJoin(s).Stream.Watermark.Column = "seen_time"
				adJoin(s).Stream.TimeBound.RightColumn = "seen_time"
			}),
			want: []finding{
				{Rule: "join-time-bound", Severity: compat.Rejected, Path: "spec.transform[1].join.stream.timeBound", Old: "click_time BETWEEN imp_time - 0s AND imp_time + 1h", New: "seen_time BETWEEN imp_time - 0s AND imp_time + 1h"},
				{Rule: "join-watermark", Severity: compat.Rejected, Path: "spec.transform[1].join.stream.watermark.column", Old: "click_time", New: "seen_time"},
			},
		},
		{
			name: "join-refresh/a static side refreshed on every new version instead of every 10m",
			old: edit(enriched(), func(s *v1.StreamingQuerySpec) {
				s.Transform[enrichedJoin].Join.Static.Refresh = &v1.Refresh{Every: "10m"}
			}),
			new: edit(enriched(), func(s *v1.StreamingQuerySpec) {
				s.Transform[enrichedJoin].Join.Static.Refresh = &v1.Refresh{OnNewVersion: true}
			}),
			want: []finding{{Rule: "join-refresh", Severity: compat.Allowed, Path: "spec.transform[2].join.static.refresh", Old: "every 10m", New: "onNewVersion"}},
		},
		{
			name: "join-refresh/an empty refresh is no refresh",
			old:  enriched().Spec(),
			new: edit(enriched(), func(s *v1.StreamingQuerySpec) {
				s.Transform[enrichedJoin].Join.Static.Refresh = &v1.Refresh{}
			}),
			passes: []string{"join-refresh"},
		},

		{
			name: "source-added/on the spark runtime: Spark refuses another number of sources",
			old:  edit(revenue(), func(s *v1.StreamingQuerySpec) { s.Runtime.Spark = &v1.SparkRuntime{} }),
			new: edit(revenue().KafkaSource("returns", "kafka:9092", "returns", qt.OrderColumns()...), func(s *v1.StreamingQuerySpec) {
				s.Runtime.Spark = &v1.SparkRuntime{}
			}),
			want: []finding{{Rule: "source-added", Severity: compat.Rejected, Path: "spec.sources[1]", New: "kafka topics [returns]"}},
		},
		{
			name: "source-removed/on the spark runtime: Spark refuses another number of sources",
			old: edit(revenue().KafkaSource("returns", "kafka:9092", "returns", qt.OrderColumns()...), func(s *v1.StreamingQuerySpec) {
				s.Runtime.Spark = &v1.SparkRuntime{}
			}),
			new:  edit(revenue(), func(s *v1.StreamingQuerySpec) { s.Runtime.Spark = &v1.SparkRuntime{} }),
			want: []finding{{Rule: "source-removed", Severity: compat.Rejected, Path: "spec.sources", Old: "returns: kafka topics [returns]"}},
		},
		{
			name:         "spark-source-positions/a source added to a Spark checkpoint that names none",
			old:          revenue().Spec(),
			new:          revenue().KafkaSource("returns", "kafka:9092", "returns", qt.OrderColumns()...).Spec(),
			sparkSources: 1,
			want: []finding{
				{Rule: "source-added", Severity: compat.Warning, Path: "spec.sources[1]", New: "kafka topics [returns]"},
				{Rule: "spark-source-positions", Severity: compat.Rejected, Path: "spec.sources", Old: "1 unnamed sources", New: "2 sources"},
			},
		},
		{
			name:         "spark-source-positions/as many sources as the Spark checkpoint",
			old:          revenue().Spec(),
			new:          revenue().Spec(),
			sparkSources: 1,
			passes:       []string{"spark-source-positions"},
		},
		{
			name:         "spark-source-positions/the spark runtime takes over a Spark checkpoint that names no sources",
			old:          edit(revenue(), func(s *v1.StreamingQuerySpec) { s.Runtime.Spark = &v1.SparkRuntime{} }),
			new:          edit(revenue(), func(s *v1.StreamingQuerySpec) { s.Runtime.Spark = &v1.SparkRuntime{} }),
			sparkSources: 1,
			passes:       []string{"spark-source-positions"},
		},
		{
			name:         "spark-unrecorded/what a Spark checkpoint does not record is named",
			old:          revenue().Spec(),
			new:          revenue().Spec(),
			sparkSources: 1,
			want: []finding{
				{Rule: "spark-unrecorded", Severity: compat.Warning, Path: "spec.transform[4].aggregate.groupBy[0]", New: "country = country.upperAscii()"},
				{Rule: "spark-unrecorded", Severity: compat.Warning, Path: "spec.transform[4].aggregate.groupBy[1].window", New: "window(ts, 5m)"},
				{Rule: "spark-unrecorded", Severity: compat.Warning, Path: "spec.transform[4].aggregate.aggregates[1]", New: "sum(net double) where net = amount*0.9"},
				{Rule: "spark-unrecorded", Severity: compat.Warning, Path: "spec.transform[4].aggregate.aggregates[2]", New: "max(amount double)"},
				{Rule: "spark-unrecorded", Severity: compat.Warning, Path: "spec.transform[4].aggregate.aggregates[3]", New: "sum(qty long)"},
			},
		},
		{
			name:   "spark-unrecorded/Lockstep's own checkpoint records it all",
			old:    revenue().Spec(),
			new:    revenue().Spec(),
			passes: []string{"spark-unrecorded"},
		},

		// Settings.
		{
			name: "state-partitions/8 to 16",
			old:  revenue().Spec(),
			new:  revenue().StatePartitions(16).Spec(),
			want: []finding{{Rule: "state-partitions", Severity: compat.Rejected, Path: "spec.stateStore.partitions", Old: "8", New: "16"}},
		},
		{
			name: "state-partitions/pinned for a stateless query too",
			old:  clean().Spec(),
			new:  clean().StatePartitions(2).Spec(),
			want: []finding{{Rule: "state-partitions", Severity: compat.Rejected, Path: "spec.stateStore.partitions", Old: "8", New: "2"}},
		},
		{
			name:   "state-partitions/the default written out",
			old:    revenue().StatePartitions(0).Spec(),
			new:    revenue().StatePartitions(8).Spec(),
			passes: []string{"state-partitions"},
		},
		{
			name: "runtime/built-in engine to spark",
			old:  revenue().Spec(),
			new:  edit(revenue(), func(s *v1.StreamingQuerySpec) { s.Runtime.Spark = &v1.SparkRuntime{} }),
			want: []finding{{Rule: "runtime", Severity: compat.Rejected, Path: "spec.runtime", Old: "lockstep", New: "spark"}},
		},
		{
			name: "runtime/spark to the built-in engine",
			old:  edit(clean(), func(s *v1.StreamingQuerySpec) { s.Runtime.Spark = &v1.SparkRuntime{} }),
			new:  clean().Spec(),
			want: []finding{{Rule: "runtime", Severity: compat.Rejected, Path: "spec.runtime", Old: "spark", New: "lockstep"}},
		},
		{
			name: "state-partitions/a spark query's too (spark.sql.shuffle.partitions)",
			old:  edit(revenue(), func(s *v1.StreamingQuerySpec) { s.Runtime.Spark = &v1.SparkRuntime{Instances: 2} }),
			new:  edit(revenue().StatePartitions(16), func(s *v1.StreamingQuerySpec) { s.Runtime.Spark = &v1.SparkRuntime{Instances: 2} }),
			want: []finding{{Rule: "state-partitions", Severity: compat.Rejected, Path: "spec.stateStore.partitions", Old: "8", New: "16"}},
		},
		{
			name: "runtime/a spark query's executors and sizing change freely (on Kubernetes this rolls the driver)",
			old:  edit(revenue(), func(s *v1.StreamingQuerySpec) { s.Runtime.Spark = &v1.SparkRuntime{Instances: 2} }),
			new: edit(revenue(), func(s *v1.StreamingQuerySpec) {
				mem := resource.MustParse("4Gi")
				s.Runtime.Spark = &v1.SparkRuntime{Instances: 8, Executor: v1.SparkProcess{Cores: 4, Memory: &mem}, Driver: v1.SparkProcess{Cores: 1, Memory: &mem}}
			}),
			passes: []string{"runtime", "state-partitions"},
		},
		{
			name:   "runtime/spark sizing is not part of the shape",
			old:    edit(clean(), func(s *v1.StreamingQuerySpec) { s.Runtime.Spark = &v1.SparkRuntime{} }),
			new:    edit(clean(), func(s *v1.StreamingQuerySpec) { s.Runtime.Spark = &v1.SparkRuntime{Instances: 3} }),
			passes: []string{"runtime"},
		},
		{
			name: "trigger/processingTime to availableNow",
			old:  revenue().Spec(),
			new:  revenue().AvailableNow().Spec(),
			want: []finding{{Rule: "trigger", Severity: compat.Allowed, Path: "spec.trigger", Old: "processingTime 1m", New: "availableNow"}},
		},
		{
			name: "trigger/once to the default",
			old:  clean().Once().Spec(),
			new:  edit(clean(), func(s *v1.StreamingQuerySpec) { s.Trigger = v1.Trigger{} }),
			want: []finding{{Rule: "trigger", Severity: compat.Allowed, Path: "spec.trigger", Old: "once", New: "default (each batch as soon as the last ends)"}},
		},
		{
			name:   "trigger/1m written as 60s",
			old:    revenue().Spec(),
			new:    revenue().ProcessingTime("60s").Spec(),
			passes: []string{"trigger"},
		},
		{
			name:   "checkpoint location and retention are not part of the shape",
			old:    revenue().Spec(),
			new:    revenue().Checkpoint("s3://checkpoints/revenue-v2").Edit(func(s *v1.StreamingQuerySpec) { s.Checkpoint.MinBatchesToRetain = 10 }).Spec(),
			passes: []string{},
		},
	}
}

func (rc ruleCase) shapeOfOld(t *testing.T) compat.Shape {
	t.Helper()
	if rc.oldShape != nil {
		return *rc.oldShape
	}
	sh, err := compat.ShapeOf(rc.old, compat.WithPostgresServer(rc.oldServer))
	if err != nil {
		t.Fatalf("ShapeOf(old) = %v", err)
	}
	return sh
}

// opts are the options the new spec is judged with.
func (rc ruleCase) opts() []compat.Option {
	opts := []compat.Option{compat.WithPostgresServer(rc.newServer)}
	if rc.sparkSources > 0 {
		opts = append(opts, compat.FromSpark(compat.Inference{Positional: true, Unnamed: true}, rc.sparkSources))
	}
	return opts
}

func brief(fs []compat.Finding) []finding {
	var out []finding
	for _, f := range fs {
		out = append(out, finding{Rule: f.Rule, Severity: f.Severity, Path: f.Path, Old: f.Old, New: f.New})
	}
	return out
}

func TestCheck(t *testing.T) {
	for _, rc := range ruleCases() {
		t.Run(rc.name, func(t *testing.T) {
			old := rc.shapeOfOld(t)
			got := compat.Check(old, rc.new, rc.opts()...)
			if diff := cmp.Diff(rc.want, brief(rc.compared(got.Findings))); diff != "" {
				t.Errorf("Check() findings mismatch (-want +got):\n%s", diff)
			}
			want := compat.Allowed
			for _, f := range got.Findings {
				if f.Severity == compat.Rejected || f.Severity == compat.Warning && want == compat.Allowed {
					want = f.Severity
				}
			}
			if got.Severity != want {
				t.Errorf("Check().Severity = %s, want %s, the most severe of its findings", got.Severity, want)
			}
			if got.Fresh != old.IsZero() {
				t.Errorf("Check().Fresh = %v, want %v", got.Fresh, old.IsZero())
			}
			for _, f := range got.Findings {
				if f.Message == "" || (f.Severity != compat.Allowed && f.Remedy == "") {
					t.Errorf("finding %s has no message or remedy: %+v", f.Rule, f)
				}
			}
		})
	}
}

// freshRules are the ids of the rules that judge the new spec alone (Rule.Fresh).
func freshRules() map[string]bool {
	ids := map[string]bool{}
	for _, r := range compat.Rules() {
		if r.Fresh {
			ids[r.ID] = true
		}
	}
	return ids
}

// compared returns the findings a case compares with its want: all but those of rules that
// judge the new spec alone, unless the case names the rule (in want or passes). Those rules
// find the same in every case with the same new spec, whatever it is about (the fixture
// revenue's dropDuplicates keeps its state forever); TestFreshRulesJudgeTheNewSpecAlone
// checks them in every case.
func (rc ruleCase) compared(fs []compat.Finding) []compat.Finding {
	named := map[string]bool{}
	for _, f := range rc.want {
		named[f.Rule] = true
	}
	for _, r := range rc.passes {
		named[r] = true
	}
	fresh := freshRules()
	// spark-unrecorded finds the same of every spec judged against a Spark checkpoint; the
	// cases that name it check it.
	fresh["spark-unrecorded"] = true
	var out []compat.Finding
	for _, f := range fs {
		if !fresh[f.Rule] || named[f.Rule] {
			out = append(out, f)
		}
	}
	return out
}

// TestFreshRulesJudgeTheNewSpecAlone checks, in every case, that the rules Check also runs
// with no checkpoint yet find the same with the case's checkpoint as without one: only the
// remedy may differ, since with a checkpoint it must say how to get past it.
func TestFreshRulesJudgeTheNewSpecAlone(t *testing.T) {
	fresh := freshRules()
	if len(fresh) == 0 {
		t.Fatal("no rule runs with no checkpoint yet")
	}
	only := func(fs []compat.Finding) []compat.Finding {
		var out []compat.Finding
		for _, f := range fs {
			if fresh[f.Rule] {
				f.Remedy = ""
				out = append(out, f)
			}
		}
		return out
	}
	for _, rc := range ruleCases() {
		t.Run(rc.name, func(t *testing.T) {
			got := compat.Check(rc.shapeOfOld(t), rc.new, rc.opts()...)
			if slices.ContainsFunc(got.Findings, func(f compat.Finding) bool { return f.Rule == "invalid-spec" || f.Rule == "shape-version" }) {
				t.Skip("nothing is judged after invalid-spec or shape-version")
			}
			without := compat.Check(compat.Shape{}, rc.new, rc.opts()...)
			if !without.Fresh {
				t.Fatalf("Check(zero shape).Fresh = false")
			}
			if diff := cmp.Diff(only(without.Findings), only(got.Findings)); diff != "" {
				t.Errorf("findings of fresh rules depend on the checkpoint (-without +with):\n%s", diff)
			}
			for _, f := range without.Findings {
				if !fresh[f.Rule] {
					t.Errorf("Check(zero shape) ran rule %s, which needs a checkpoint", f.Rule)
				}
			}
		})
	}
}

// TestRuleCoverage checks that every rule is tested in both directions: a case where it
// finds something and a case that exercises it without a finding; and that its findings
// have the severities its documentation lists.
func TestRuleCoverage(t *testing.T) {
	fired, passed := map[string]bool{}, map[string]bool{}
	severities := map[string]map[compat.Severity]bool{}
	for _, rc := range ruleCases() {
		for _, f := range rc.want {
			fired[f.Rule] = true
			if severities[f.Rule] == nil {
				severities[f.Rule] = map[compat.Severity]bool{}
			}
			severities[f.Rule][f.Severity] = true
		}
		for _, r := range rc.passes {
			passed[r] = true
		}
	}
	ids := map[string]bool{}
	for _, r := range compat.Rules() {
		if ids[r.ID] {
			t.Errorf("rule %s is listed twice", r.ID)
		}
		ids[r.ID] = true
		if !fired[r.ID] {
			t.Errorf("rule %s: no case where it finds something", r.ID)
		}
		if !passed[r.ID] {
			t.Errorf("rule %s: no case that exercises it without a finding", r.ID)
		}
		for sev := range severities[r.ID] {
			if !slices.Contains(r.Severities, sev) {
				t.Errorf("rule %s finds %s, but its Severities are %v", r.ID, sev, r.Severities)
			}
		}
		if r.Title == "" || r.Description == "" || r.Example.Old == "" || r.Example.New == "" || r.Area == "" {
			t.Errorf("rule %s lacks documentation: %+v", r.ID, r)
		}
	}
	for id := range passed {
		if !ids[id] {
			t.Errorf("a case passes unknown rule %s", id)
		}
	}
	if n := len(ruleCases()); n < 60 {
		t.Errorf("%d cases, want at least 60", n)
	}
}

// TestFindingsText pins every case's verdict as people read it, messages and remedies
// included, in testdata/findings.golden.
func TestFindingsText(t *testing.T) {
	var b bytes.Buffer
	for _, rc := range ruleCases() {
		if len(rc.want) == 0 {
			continue
		}
		fmt.Fprintf(&b, "=== %s\n", rc.name)
		if err := compat.Check(rc.shapeOfOld(t), rc.new, rc.opts()...).WriteText(&b); err != nil {
			t.Fatal(err)
		}
		b.WriteString("\n")
	}
	golden(t, "findings.golden", b.Bytes())
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./compat -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s is stale (-want +got); run go test ./compat -update and review the diff:\n%s", path, diff)
	}
}
