package compat_test

import (
	"slices"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
)

// The fixtures of the rule tests: each returns a new builder, so a case can edit it freely.

// revenueSelect is the select of the stateful fixtures.
func revenueSelect() []v1.Projection {
	return []v1.Projection{
		qt.As("order_id", "order_id"), qt.As("country", "country.upperAscii()"),
		qt.As("amount", "amount"), qt.As("net", "amount * 0.9"), qt.As("qty", "qty"),
		qt.As("ts", "ts"), qt.As("received", "_timestamp"),
	}
}

func revenueAggregates() []v1.Aggregation {
	return []v1.Aggregation{
		qt.Agg("orders", v1.AggCount, ""), qt.Agg("revenue", v1.AggSum, "net"),
		qt.Agg("top", v1.AggMax, "amount"), qt.Agg("units", v1.AggSum, "qty"),
	}
}

// revenue is DESIGN §2's query: Kafka → filter → select → watermark → dropDuplicates →
// windowed aggregate → Delta, in append mode.
func revenue() *qt.Query {
	return qt.Make("revenue", "payments").
		KafkaSource("orders", "kafka:9092", "orders", qt.OrderColumns()...).
		Filter("amount > 0.0").
		Select(revenueSelect()...).
		Watermark("ts", "10m").
		DropDuplicates("dedup", "order_id").
		Aggregate("revenue", []v1.GroupKey{qt.Key("country"), qt.Window("ts", "5m")}, revenueAggregates()...).
		DeltaSink("s3://lake/revenue", "country").
		OutputMode(v1.OutputAppend).
		ProcessingTime("1m").
		Checkpoint("s3://checkpoints/revenue").
		StatePartitions(8)
}

// revenueUpdate is revenue in update mode into Kafka, where any window or watermark column
// is valid.
func revenueUpdate() *qt.Query {
	return revenue().KafkaSink("kafka:9092", "revenue").OutputMode(v1.OutputUpdate)
}

// revenueSessions is revenue with sessions (a 5m gap) instead of 5m windows.
func revenueSessions() *qt.Query {
	return revenue().Edit(func(s *v1.StreamingQuerySpec) {
		s.Transform[revAggregate].Aggregate.GroupBy[1] = qt.Session("ts", "5m")
	})
}

// revenueChained is revenue with a second aggregate over its windows: each hour's best
// country-window revenue.
func revenueChained() *qt.Query {
	return revenue().Aggregate("hourly", []v1.GroupKey{qt.Window("window_end", "1h")},
		qt.Agg("best", v1.AggMax, "revenue"), qt.Agg("windows", v1.AggCount, "")).
		Edit(func(s *v1.StreamingQuerySpec) { s.Sink.Delta.PartitionColumns = nil })
}

// revenueNoWatermark is revenueUpdate without its watermark.
func revenueNoWatermark() *qt.Query {
	return qt.Make("revenue", "payments").
		KafkaSource("orders", "kafka:9092", "orders", qt.OrderColumns()...).
		Select(revenueSelect()...).
		DropDuplicates("dedup", "order_id").
		Aggregate("revenue", []v1.GroupKey{qt.Key("country"), qt.Window("ts", "5m")}, revenueAggregates()...).
		KafkaSink("kafka:9092", "revenue").
		OutputMode(v1.OutputUpdate)
}

// revenueEvicting is revenue with its dropDuplicates on the watermark's column too, as in
// examples/queries/revenue-by-country.yaml: the watermark evicts the state of both steps.
func revenueEvicting() *qt.Query {
	return revenue().Edit(func(s *v1.StreamingQuerySpec) {
		s.Transform[revDedup].DropDuplicates.Columns = []string{"order_id", "ts"}
	})
}

// noDedup removes revenue's dropDuplicates step, leaving the aggregate at
// spec.transform[3].
func noDedup(s *v1.StreamingQuerySpec) {
	s.Transform = slices.Delete(s.Transform, revDedup, revDedup+1)
}

// clean is a stateless files → files query.
func clean() *qt.Query {
	return qt.Make("clean", "default").
		FilesSource("orders", "/data/orders", "json", qt.OrderColumns()...).
		Filter("amount > 0.0").
		SelectColumns("order_id", "country", "amount", "ts").
		FilesSink("/data/out", "parquet").
		AvailableNow()
}

// cleanKafka is a stateless Kafka → Kafka query.
func cleanKafka() *qt.Query {
	return qt.Make("clean", "default").
		KafkaSource("orders", "kafka:9092", "orders", qt.OrderColumns()...).
		SelectColumns("order_id", "country", "amount", "ts").
		KafkaSink("kafka:9092", "clean")
}

// ticks is the quickstart: rate → console.
func ticks() *qt.Query {
	return qt.Make("ticks", "default").
		RateSource("ticks", 10).
		Filter("value % 2 == 0").
		Select(qt.As("at", "timestamp"), qt.As("value", "value")).
		ConsoleSink()
}

// tables is a stateless Delta → files query.
func tables() *qt.Query {
	return qt.Make("tables", "default").
		DeltaSource("orders", "s3://lake/orders", qt.OrderColumns()...).
		SelectColumns("order_id", "amount").
		FilesSink("s3://out/orders", "json")
}

// pageCounts is a dedup-only query in update mode into Kafka, to which an aggregate can be
// added or whose dedup can become an aggregate.
func pageCounts() *qt.Query {
	return qt.Make("pages", "web").
		FilesSource("clicks", "/data/clicks", "json", qt.Col("click_id", v1.TypeString), qt.Col("page", v1.TypeString), qt.Col("at", v1.TypeTimestamp)).
		KafkaSink("kafka:9092", "pages").
		OutputMode(v1.OutputUpdate)
}

// step returns the transform step at i of s.
func step(s *v1.StreamingQuerySpec, i int) *v1.Step { return &s.Transform[i] }

// The indexes of revenue's steps.
const (
	revFilter    = 0
	revSelect    = 1
	revWatermark = 2
	revDedup     = 3
	revAggregate = 4
)

func agg(s *v1.StreamingQuerySpec) *v1.Aggregate { return s.Transform[revAggregate].Aggregate }

func ptr[T any](v T) *T { return &v }

// pgRevenue is the revenue aggregation into a PostgreSQL table, without the append mode's
// watermark needs.
func pgRevenue(table string, mode v1.OutputMode) *qt.Query {
	return revenue().
		Sink(v1.Sink{Postgres: &v1.PostgresSink{Connection: v1.PostgresConnection{SecretName: "db"}, Table: table}}).
		OutputMode(mode)
}

// cleanMerge is clean merged into a Delta table by keys.
func cleanMerge(keys ...string) *qt.Query {
	return clean().
		Sink(v1.Sink{Delta: &v1.DeltaSink{Path: "s3://lake/clean", MergeKeys: keys}}).
		OutputMode(v1.OutputUpdate)
}

// countriesJoin is a stream–static join of clean's or revenue's orders with a countries table.
func countriesJoin() v1.Join {
	return v1.Join{
		Name: "countries", Type: v1.JoinLeftOuter, Keys: qt.Keys("country", "code"),
		Static:      qt.StaticDelta("s3://lake/countries", qt.Col("code", v1.TypeString), qt.Col("region", v1.TypeString)),
		RightPrefix: "c_",
	}
}

// enriched is clean with its orders joined with countries, at spec.transform[2]: a
// stateless query with a static join.
func enriched() *qt.Query { return clean().Join(countriesJoin()) }

// The index of enriched's join.
const enrichedJoin = 2

// revenueJoined is revenue with the countries join before its dropDuplicates, at
// spec.transform[3]: a stateful query with a static join.
func revenueJoined() *qt.Query {
	return revenue().Edit(func(s *v1.StreamingQuerySpec) {
		j := countriesJoin()
		s.Transform = slices.Insert(s.Transform, revDedup, v1.Step{Join: &j})
	})
}

// adClicks joins ad impressions with the clicks that follow within an hour, left outer, at
// spec.transform[1]: a stream–stream join.
func adClicks() *qt.Query {
	return qt.Make("ads", "web").
		KafkaSource("impressions", "kafka:9092", "impressions", qt.Col("ad_id", v1.TypeString), qt.Col("imp_time", v1.TypeTimestamp)).
		KafkaSource("clicks", "kafka:9092", "clicks", qt.Col("ad_id", v1.TypeString), qt.Col("click_time", v1.TypeTimestamp)).
		Watermark("imp_time", "10m").
		Join(v1.Join{
			Name: "imp-clicks", Type: v1.JoinLeftOuter, Keys: qt.Keys("ad_id", "ad_id"),
			Stream: qt.StreamSide("clicks", "imp_time", "click_time", "20m", "0s", "1h"),
			Select: []v1.JoinColumn{{Side: v1.SideLeft, Column: "ad_id"}, {Side: v1.SideLeft, Column: "imp_time"}, {Side: v1.SideRight, Column: "click_time"}},
		}).
		FilesSink("/data/ads", "json")
}

// adJoin returns adClicks' join in s.
func adJoin(s *v1.StreamingQuerySpec) *v1.Join { return s.Transform[1].Join }

// avroSource turns the first source into format avro with a Schema Registry, subject as given
// ("" for the default).
func avroSource(subject string) func(*v1.StreamingQuerySpec) {
	return func(s *v1.StreamingQuerySpec) {
		s.Sources[0].Kafka.Format = v1.KafkaAvro
		s.Sources[0].Kafka.SchemaRegistry = &v1.SchemaRegistry{URL: "http://registry:8081", Subject: subject}
	}
}

// pinnedSink is avroSink("") pinned to version v.
func pinnedSink(v int32) func(*v1.StreamingQuerySpec) {
	return func(s *v1.StreamingQuerySpec) {
		avroSink("")(s)
		s.Sink.Kafka.SchemaRegistry.Version = &v
	}
}

// avroSink turns the Kafka sink into format avro with a Schema Registry, subject as given
// ("" for the default).
func avroSink(subject string) func(*v1.StreamingQuerySpec) {
	return func(s *v1.StreamingQuerySpec) {
		s.Sink.Kafka.Format = v1.KafkaAvro
		s.Sink.Kafka.SchemaRegistry = &v1.SchemaRegistry{URL: "http://registry:8081", Subject: subject}
	}
}
