package plan_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/plan"
)

// Details are messages for people; the tests compare type, path and value.
var ignoreDetail = cmpopts.IgnoreFields(field.Error{}, "Detail")

var (
	spec      = field.NewPath("spec")
	sources   = spec.Child("sources")
	transform = spec.Child("transform")
	sink      = spec.Child("sink")
	mode      = spec.Child("outputMode")
)

func TestValidate(t *testing.T) {
	cases := []validateCase{
		{
			name:  "files to files with filter and select is valid",
			query: qt.Orders().Filter("amount > 0.0").Select(qt.As("id", "order_id"), qt.As("country", "country.upperAscii()"), qt.As("total", "amount * double(qty)")).Filter("total > 10.0 && country != 'XX'"),
		},
		{
			name:  "rate to console is valid",
			query: qt.Make("q", "ns").RateSource("r", 10).Filter("value % 2 == 0").Select(qt.As("at", "timestamp"), qt.As("n", "value")).ConsoleSink(),
		},
		{
			name: "nexmark bids to console is valid",
			query: qt.Make("q", "ns").NexmarkSource("bids", v1.NexmarkSource{}).Filter("auction % 123 == 0").
				Select(qt.As("auction", "auction"), qt.As("price", "double(price) * 0.908"), qt.As("at", "dateTime")).ConsoleSink(),
		},
		{
			name: "nexmark source fields",
			query: qt.Make("q", "ns").Source(v1.Source{
				Name:    "n",
				Nexmark: &v1.NexmarkSource{Table: "bids", EventsPerSecond: -1, MaxEventsPerTrigger: -2, NumEvents: ptr(int64(0)), StartTime: "yesterday", AsFastAsPossible: true},
				Schema:  &v1.Schema{Columns: v1.Columns{qt.Col("x", v1.TypeLong)}},
			}).ConsoleSink().AvailableNow(),
			want: field.ErrorList{
				field.NotSupported(sources.Index(0).Child("nexmark", "table"), v1.NexmarkTable("bids"), []v1.NexmarkTable(nil)),
				field.Invalid(sources.Index(0).Child("nexmark", "eventsPerSecond"), int64(-1), ""),
				field.Invalid(sources.Index(0).Child("nexmark", "maxEventsPerTrigger"), int64(-2), ""),
				field.Invalid(sources.Index(0).Child("nexmark", "numEvents"), int64(0), ""),
				field.Invalid(sources.Index(0).Child("nexmark", "startTime"), "yesterday", ""),
				field.Forbidden(sources.Index(0).Child("schema"), ""),
			},
		},
		{
			name:  "an availableNow run needs a bounded nexmark source",
			query: qt.Make("q", "ns").NexmarkSource("n", v1.NexmarkSource{AsFastAsPossible: true}).ConsoleSink().AvailableNow(),
			want:  field.ErrorList{field.Required(sources.Index(0).Child("nexmark", "numEvents"), "")},
		},
		{
			name:  "defaulted spec is valid",
			query: qt.Orders().Defaulted(),
		},
		{
			name:  "no sources",
			query: qt.Make("q", "ns").ConsoleSink(),
			want:  field.ErrorList{field.Required(sources, "")},
		},
		{
			name: "source names must be path segments and unique",
			query: qt.Make("q", "ns").RateSource("Rate_1", 1).RateSource("r", 1).RateSource("r", 1).
				Source(v1.Source{Rate: &v1.RateSource{}}).RateSource("a/b", 1).RateSource("_r", 1).RateSource("r_", 1).
				RateSource("..", 1).RateSource(strings.Repeat("r", 64), 1).ConsoleSink(),
			want: field.ErrorList{
				field.Invalid(sources.Index(0).Child("name"), "Rate_1", ""),
				field.Duplicate(sources.Index(2).Child("name"), "r"),
				field.Required(sources.Index(3).Child("name"), ""),
				field.Invalid(sources.Index(4).Child("name"), "a/b", ""),
				field.Invalid(sources.Index(5).Child("name"), "_r", ""),
				field.Invalid(sources.Index(6).Child("name"), "r_", ""),
				field.Invalid(sources.Index(7).Child("name"), "..", ""),
				field.Invalid(sources.Index(8).Child("name"), strings.Repeat("r", 64), ""),
			},
		},
		{
			name: "source and stateful-step names may hold underscores",
			query: qt.Make("q", "ns").RateSource("orders_eu", 1).RateSource("orders-us_2", 1).
				DropDuplicates("first_seen", "value").
				Aggregate("per_country", []v1.GroupKey{qt.Key("value")}, qt.Agg("n", v1.AggCount, "")).OutputMode(v1.OutputComplete).ConsoleSink(),
		},
		{
			name: "a delta source takes only onMalformed fail",
			query: qt.Make("q", "ns").DeltaSource("d", "s3://lake/t", qt.Col("id", v1.TypeString)).
				EditSource("d", func(s *v1.Source) { s.OnMalformed = v1.MalformedSkip }).
				DeltaSource("e", "s3://lake/u", qt.Col("id", v1.TypeString)).
				EditSource("e", func(s *v1.Source) { s.OnMalformed = v1.MalformedFail }).ConsoleSink(),
			want: field.ErrorList{field.Forbidden(sources.Index(0).Child("onMalformed"), "")},
		},
		{
			name:  "a source needs exactly one kind",
			query: qt.Make("q", "ns").Source(v1.Source{Name: "none"}).Source(v1.Source{Name: "two", Rate: &v1.RateSource{}, Files: &v1.FilesSource{Path: "/in", Format: "json"}}).ConsoleSink(),
			want: field.ErrorList{
				field.Required(sources.Index(0), ""),
				field.Invalid(sources.Index(1), "files, rate", ""),
			},
		},
		{
			name:  "kafka source is valid",
			query: qt.Make("q", "ns").KafkaSource("k", "kafka:9092", "orders", qt.Col("id", v1.TypeString)).Filter("_partition == 0 && _key != '' && id != ''").ConsoleSink(),
		},
		{
			name: "kafka source fields",
			query: qt.Make("q", "ns").Source(v1.Source{
				Name: "k",
				Kafka: &v1.KafkaSource{
					BootstrapServers: []string{"kafka"}, Topics: []string{"a", "a", "b c"}, TopicPattern: "(",
					StartingOffsets: `{"x":{"0":1}}`, MaxOffsetsPerTrigger: ptr(int64(0)), Format: "thrift",
					SASL: &v1.KafkaSASL{Mechanism: "GSSAPI"},
				},
				Schema: &v1.Schema{Columns: v1.Columns{qt.Col("_offset", v1.TypeLong)}},
			}).ConsoleSink(),
			want: field.ErrorList{
				field.Invalid(sources.Index(0).Child("kafka", "bootstrapServers").Index(0), "kafka", ""),
				field.Forbidden(sources.Index(0).Child("kafka", "topicPattern"), ""),
				field.Duplicate(sources.Index(0).Child("kafka", "topics").Index(1), "a"),
				field.Invalid(sources.Index(0).Child("kafka", "topics").Index(2), "b c", ""),
				field.Invalid(sources.Index(0).Child("kafka", "topicPattern"), "(", ""),
				field.Invalid(sources.Index(0).Child("kafka", "startingOffsets"), `{"x":{"0":1}}`, ""),
				field.Invalid(sources.Index(0).Child("kafka", "maxOffsetsPerTrigger"), int64(0), ""),
				field.NotSupported(sources.Index(0).Child("kafka", "format"), v1.KafkaFormat("thrift"), []v1.KafkaFormat{}),
				field.NotSupported(sources.Index(0).Child("kafka", "sasl", "mechanism"), v1.SASLMechanism("GSSAPI"), []v1.SASLMechanism{}),
				field.Invalid(sources.Index(0).Child("schema", "columns").Index(0).Child("name"), "_offset", ""),
			},
		},
		{
			name: "kafka startingOffsets must parse",
			query: qt.Make("q", "ns").KafkaSource("k", "kafka:9092", "orders", qt.Col("id", v1.TypeString)).
				EditSource("k", func(s *v1.Source) { s.Kafka.StartingOffsets = `{"orders":{"zero":1}}` }).ConsoleSink(),
			want: field.ErrorList{field.Invalid(sources.Index(0).Child("kafka", "startingOffsets"), `{"orders":{"zero":1}}`, "")},
		},
		{
			name:  "kafka raw takes no schema and yields value",
			query: qt.Make("q", "ns").KafkaSource("k", "kafka:9092", "t", qt.Col("id", v1.TypeString)).EditSource("k", func(s *v1.Source) { s.Kafka.Format = v1.KafkaRaw }).Filter("value != ''").ConsoleSink(),
			want:  field.ErrorList{field.Forbidden(sources.Index(0).Child("schema"), "")},
		},
		{
			name:  "rate takes no schema",
			query: qt.Make("q", "ns").RateSource("r", 1).EditSource("r", func(s *v1.Source) { s.Schema = &v1.Schema{Columns: v1.Columns{qt.Col("x", v1.TypeLong)}} }).ConsoleSink(),
			want:  field.ErrorList{field.Forbidden(sources.Index(0).Child("schema"), "")},
		},
		{
			name:  "files source needs a path, a format and a schema",
			query: qt.Make("q", "ns").Source(v1.Source{Name: "in", Files: &v1.FilesSource{MaxFilesPerTrigger: ptr(int32(0))}}).ConsoleSink(),
			want: field.ErrorList{
				field.Required(sources.Index(0).Child("files", "path"), ""),
				field.Required(sources.Index(0).Child("files", "format"), ""),
				field.Invalid(sources.Index(0).Child("files", "maxFilesPerTrigger"), int32(0), ""),
				field.Required(sources.Index(0).Child("schema"), ""),
			},
		},
		{
			name:  "locations are local paths, file:// or s3://",
			query: qt.Orders().EditSource("orders", func(s *v1.Source) { s.Files.Path = "hdfs://nn/in" }).FilesSink("s3://B/out", "json").Checkpoint("file://relative"),
			want: field.ErrorList{
				field.Invalid(sources.Index(0).Child("files", "path"), "hdfs://nn/in", ""),
				field.Invalid(sink.Child("files", "path"), "s3://B/out", ""),
				field.Invalid(spec.Child("checkpoint", "location"), "file://relative", ""),
			},
		},
		{
			name: "schema columns: names, types, duplicates",
			query: qt.Make("q", "ns").FilesSource("in", "/in", "csv",
				qt.Col("1st", v1.TypeString), qt.Col("in", v1.TypeString), qt.Col("a", "int"), qt.Col("a", v1.TypeLong), qt.Col("", v1.TypeLong)).ConsoleSink(),
			want: field.ErrorList{
				field.Invalid(sources.Index(0).Child("schema", "columns").Index(0).Child("name"), "1st", ""),
				field.Invalid(sources.Index(0).Child("schema", "columns").Index(1).Child("name"), "in", ""),
				field.NotSupported(sources.Index(0).Child("schema", "columns").Index(2).Child("type"), v1.ColumnType("int"), v1.ColumnTypes()),
				field.Duplicate(sources.Index(0).Child("schema", "columns").Index(3).Child("name"), "a"),
				field.Required(sources.Index(0).Child("schema", "columns").Index(4).Child("name"), ""),
			},
		},
		{
			name:  "unioned sources must agree on their columns",
			query: qt.Make("q", "ns").RateSource("r", 1).FilesSource("in", "/in", "json", qt.Col("timestamp", v1.TypeTimestamp), qt.Col("value", v1.TypeDouble)).FilesSource("ok", "/ok", "json", qt.Col("timestamp", v1.TypeTimestamp), qt.Col("value", v1.TypeLong)).ConsoleSink(),
			want:  field.ErrorList{field.Invalid(sources.Index(1).Child("schema"), "(timestamp timestamp, value double)", "")},
		},
		{
			name: "malformed records: deadLetter needs a path, others take none",
			query: qt.Orders().
				EditSource("orders", func(s *v1.Source) { s.OnMalformed = v1.MalformedDeadLetter }).
				FilesSource("more", "/more", "json", qt.Col("order_id", v1.TypeString), qt.Col("country", v1.TypeString), qt.Col("amount", v1.TypeDouble), qt.Col("qty", v1.TypeLong), qt.Col("ts", v1.TypeTimestamp)).
				EditSource("more", func(s *v1.Source) { s.OnMalformed = v1.MalformedSkip; s.DeadLetterPath = "/dl" }),
			want: field.ErrorList{
				field.Required(sources.Index(0).Child("deadLetterPath"), ""),
				field.Forbidden(sources.Index(1).Child("deadLetterPath"), ""),
			},
		},
		{
			name:  "filter must compile",
			query: qt.Orders().Filter("amount >"),
			want:  field.ErrorList{field.Invalid(transform.Index(0).Child("filter"), "amount >", "")},
		},
		{
			name:  "filter must type-check against the columns",
			query: qt.Orders().Filter("amount + 1 > 0.0").Filter("price > 0.0").Filter("country.upperAscii()"),
			want: field.ErrorList{
				field.Invalid(transform.Index(0).Child("filter"), "amount + 1 > 0.0", ""),
				field.Invalid(transform.Index(1).Child("filter"), "price > 0.0", ""),
				field.Invalid(transform.Index(2).Child("filter"), "country.upperAscii()", ""),
			},
		},
		{
			name: "select replaces the columns",
			query: qt.Orders().Select(qt.As("id", "order_id"), qt.As("id", "country"), qt.As("bad", "[1, 2]"), qt.As("x", ""), qt.As("n", "nope")).
				Filter("amount > 0.0").Filter("id != ''"),
			want: field.ErrorList{
				field.Duplicate(transform.Index(0).Child("select").Index(1).Child("name"), "id"),
				field.Required(transform.Index(0).Child("select").Index(3).Child("expr"), ""),
				field.Invalid(transform.Index(0).Child("select").Index(2).Child("expr"), "[1, 2]", ""),
				field.Invalid(transform.Index(0).Child("select").Index(4).Child("expr"), "nope", ""),
				field.Invalid(transform.Index(1).Child("filter"), "amount > 0.0", ""),
			},
		},
		{
			name:  "an empty select",
			query: qt.Orders().Select(),
			want:  field.ErrorList{field.Required(transform.Index(0).Child("select"), "")},
		},
		{
			name:  "a step needs exactly one kind",
			query: qt.Orders().Step(v1.Step{}).Step(v1.Step{Filter: "true", Watermark: &v1.Watermark{Column: "ts", Delay: "1m"}}),
			want: field.ErrorList{
				field.Required(transform.Index(0), ""),
				field.Invalid(transform.Index(1), "filter, watermark", ""),
			},
		},
		{
			name:  "watermark needs a timestamp column and a delay",
			query: qt.Orders().Watermark("amount", "ten minutes").Step(v1.Step{Watermark: &v1.Watermark{Column: "nope"}}),
			want: field.ErrorList{
				field.Invalid(transform.Index(0).Child("watermark", "delay"), "ten minutes", ""),
				field.Forbidden(transform.Index(1).Child("watermark"), ""),
				field.Required(transform.Index(1).Child("watermark", "delay"), ""),
				field.Invalid(transform.Index(0).Child("watermark", "column"), "amount", ""),
				field.Invalid(transform.Index(1).Child("watermark", "column"), "nope", ""),
			},
		},
		{
			name:  "a watermark must precede the stateful steps",
			query: qt.Orders().DropDuplicates("", "order_id").Watermark("ts", "1m"),
			want:  field.ErrorList{field.Forbidden(transform.Index(1).Child("watermark"), "")},
		},
		{
			name: "windowed aggregate in append mode with a watermark is valid",
			query: qt.Orders().Watermark("ts", "10m").DropDuplicates("dedup", "order_id", "ts").
				Aggregate("revenue", []v1.GroupKey{qt.Key("country"), qt.Window("ts", "5m")}, qt.Agg("orders", v1.AggCount, ""), qt.Agg("revenue", v1.AggSum, "amount")).
				Filter("revenue > 0.0 && window_end > window_start"),
		},
		{
			name: "the watermark follows its column through a select",
			query: qt.Orders().Watermark("ts", "10m").Select(qt.As("event_time", "ts"), qt.As("country", "country")).
				Aggregate("", []v1.GroupKey{qt.SlidingWindow("event_time", "10m", "5m")}, qt.Agg("n", v1.AggCount, "")),
		},
		{
			name:  "append mode with an aggregate needs a watermark and a window on it",
			query: qt.Orders().Aggregate("", []v1.GroupKey{qt.Key("country")}, qt.Agg("n", v1.AggCount, "")),
			want:  field.ErrorList{field.Invalid(mode, v1.OutputAppend, "")},
		},
		{
			name:  "append mode with an aggregate on another column than the watermark's",
			query: qt.Orders().Watermark("ts", "10m").Select(qt.As("t2", "ts + duration('1h')"), qt.As("country", "country")).Aggregate("", []v1.GroupKey{qt.Window("t2", "5m")}, qt.Agg("n", v1.AggCount, "")),
			want:  field.ErrorList{field.Invalid(mode, v1.OutputAppend, "")},
		},
		{
			name: "session windows in append and update mode are valid",
			query: qt.Orders().Watermark("ts", "10m").
				Aggregate("sessions", []v1.GroupKey{qt.Key("country"), qt.Session("ts", "5m")}, qt.Agg("n", v1.AggCount, ""), qt.Agg("total", v1.AggSum, "amount")).
				Filter("window_end > window_start && n > 0"),
		},
		{
			name: "a session in update mode with a files sink is valid",
			query: qt.Orders().Watermark("ts", "10m").
				Aggregate("", []v1.GroupKey{qt.Session("ts", "5m")}, qt.Agg("n", v1.AggCount, "")).OutputMode(v1.OutputUpdate),
		},
		{
			name: "a session with an upserting sink in update mode, or in complete mode, is refused",
			query: qt.Orders().Watermark("ts", "10m").
				Aggregate("", []v1.GroupKey{qt.Key("country"), qt.Session("ts", "5m")}, qt.Agg("n", v1.AggCount, "")).
				DeltaSink("/lake/t").OutputMode(v1.OutputUpdate),
			want: field.ErrorList{field.Invalid(mode, v1.OutputUpdate, "")},
		},
		{
			name: "a session gap per row by a duration expression is valid",
			query: qt.Orders().Watermark("ts", "10m").
				Aggregate("", []v1.GroupKey{qt.Key("country"), {Session: &v1.SessionWindow{Column: "ts", GapExpr: "country == 'DE' ? duration('5m') : duration('10m')"}}}, qt.Agg("n", v1.AggCount, "")),
		},
		{
			name: "a session gap expression must yield a duration",
			query: qt.Orders().Watermark("ts", "10m").
				Aggregate("", []v1.GroupKey{{Session: &v1.SessionWindow{Column: "ts", GapExpr: "qty * 60"}}}, qt.Agg("n", v1.AggCount, "")),
			want: field.ErrorList{field.Invalid(transform.Index(1).Child("aggregate", "groupBy").Index(0).Child("session", "gapExpr"), "qty * 60", "")},
		},
		{
			name: "a session has a gap or a gapExpr, not both",
			query: qt.Orders().Watermark("ts", "10m").
				Aggregate("", []v1.GroupKey{{Session: &v1.SessionWindow{Column: "ts", Gap: "1m", GapExpr: "duration('1m')"}}}, qt.Agg("n", v1.AggCount, "")),
			want: field.ErrorList{field.Invalid(transform.Index(1).Child("aggregate", "groupBy").Index(0).Child("session"), "gap, gapExpr", "")},
		},
		{
			name: "a session in complete mode is refused",
			query: qt.Orders().Watermark("ts", "10m").
				Aggregate("", []v1.GroupKey{qt.Session("ts", "5m")}, qt.Agg("n", v1.AggCount, "")).ConsoleSink().OutputMode(v1.OutputComplete),
			want: field.ErrorList{field.Invalid(mode, v1.OutputComplete, "")},
		},
		{
			name: "session fields",
			query: qt.Orders().Watermark("ts", "10m").Select(qt.As("t2", "ts + duration('1h')"), qt.As("ts", "ts"), qt.As("amount", "amount")).
				Aggregate("", []v1.GroupKey{qt.Window("ts", "5m"), qt.Session("ts", "0s"), qt.Session("t2", ""), qt.Session("amount", "1m"),
					{Column: "ts", Session: &v1.SessionWindow{Column: "ts", Gap: "1m"}}}, qt.Agg("n", v1.AggCount, "")).
				OutputMode(v1.OutputUpdate),
			want: field.ErrorList{
				field.Forbidden(transform.Index(2).Child("aggregate", "groupBy").Index(1).Child("session"), ""),
				field.Invalid(transform.Index(2).Child("aggregate", "groupBy").Index(1).Child("session", "gap"), "0s", ""),
				field.Forbidden(transform.Index(2).Child("aggregate", "groupBy").Index(2).Child("session"), ""),
				field.Required(transform.Index(2).Child("aggregate", "groupBy").Index(2).Child("session", "gap"), ""),
				field.Forbidden(transform.Index(2).Child("aggregate", "groupBy").Index(3).Child("session"), ""),
				field.Invalid(transform.Index(2).Child("aggregate", "groupBy").Index(4), "column, session", ""),
				field.Forbidden(transform.Index(2).Child("aggregate", "groupBy").Index(4).Child("session"), ""),
				field.Duplicate(transform.Index(2).Child("aggregate", "groupBy").Index(1).Child("session"), "window_start"),
				field.Duplicate(transform.Index(2).Child("aggregate", "groupBy").Index(1).Child("session"), "window_end"),
				field.Invalid(transform.Index(2).Child("aggregate", "groupBy").Index(2).Child("session", "column"), "t2", ""),
				field.Duplicate(transform.Index(2).Child("aggregate", "groupBy").Index(2).Child("session"), "window_start"),
				field.Duplicate(transform.Index(2).Child("aggregate", "groupBy").Index(2).Child("session"), "window_end"),
				field.Invalid(transform.Index(2).Child("aggregate", "groupBy").Index(3).Child("session", "column"), "amount", ""),
				field.Duplicate(transform.Index(2).Child("aggregate", "groupBy").Index(3).Child("session"), "window_start"),
				field.Duplicate(transform.Index(2).Child("aggregate", "groupBy").Index(3).Child("session"), "window_end"),
				field.Duplicate(transform.Index(2).Child("aggregate", "groupBy").Index(4).Child("session"), "window_start"),
				field.Duplicate(transform.Index(2).Child("aggregate", "groupBy").Index(4).Child("session"), "window_end"),
			},
		},
		{
			name:  "update mode with a plain aggregate is valid",
			query: qt.Orders().Aggregate("", []v1.GroupKey{qt.Key("country")}, qt.Agg("n", v1.AggCount, "")).OutputMode(v1.OutputUpdate),
		},
		{
			name: "aggregate fields",
			query: qt.Orders().Aggregate("Bad_Name", []v1.GroupKey{qt.Key("country"), qt.Key("country"), qt.Window("country", "5m"), qt.SlidingWindow("ts", "5m", "10m"), {}},
				qt.Agg("s", v1.AggSum, "country"), qt.Agg("m", v1.AggMax, ""), qt.Agg("m", v1.AggMin, "amount"), qt.Agg("x", "median", "amount"), qt.Agg("d", v1.AggCountDistinct, "")).
				OutputMode(v1.OutputUpdate),
			want: field.ErrorList{
				field.Invalid(transform.Index(0).Child("aggregate", "name"), "Bad_Name", ""),
				field.Forbidden(transform.Index(0).Child("aggregate", "groupBy").Index(3).Child("window"), ""),
				field.Invalid(transform.Index(0).Child("aggregate", "groupBy").Index(3).Child("window", "slide"), "10m", ""),
				field.Required(transform.Index(0).Child("aggregate", "groupBy").Index(4), ""),
				field.Required(transform.Index(0).Child("aggregate", "aggregates").Index(1).Child("column"), ""),
				field.NotSupported(transform.Index(0).Child("aggregate", "aggregates").Index(3).Child("function"), v1.AggregateFunction("median"), v1.AggregateFunctions()),
				field.Required(transform.Index(0).Child("aggregate", "aggregates").Index(4).Child("column"), ""),
				field.Duplicate(transform.Index(0).Child("aggregate", "groupBy").Index(1).Child("column"), "country"),
				field.Invalid(transform.Index(0).Child("aggregate", "groupBy").Index(2).Child("window", "column"), "country", ""),
				field.Duplicate(transform.Index(0).Child("aggregate", "groupBy").Index(3).Child("window"), "window_start"),
				field.Duplicate(transform.Index(0).Child("aggregate", "groupBy").Index(3).Child("window"), "window_end"),
				field.Invalid(transform.Index(0).Child("aggregate", "aggregates").Index(0).Child("column"), "country", ""),
				field.Duplicate(transform.Index(0).Child("aggregate", "aggregates").Index(2).Child("name"), "m"),
			},
		},
		{
			name: "two aggregations and a stateful step after an aggregate",
			query: qt.Orders().Aggregate("a", []v1.GroupKey{qt.Key("country")}, qt.Agg("n", v1.AggCount, "")).
				Aggregate("b", nil, qt.Agg("total", v1.AggSum, "n")).
				DropDuplicates("c", "total").OutputMode(v1.OutputUpdate),
			want: field.ErrorList{
				field.Forbidden(transform.Index(2).Child("dropDuplicates"), ""),
				field.Forbidden(transform.Index(1).Child("aggregate"), ""),
			},
		},
		{
			name: "an aggregate over an aggregate's windows, with a filter and a renaming select between",
			query: qt.Orders().Watermark("ts", "1m").
				Aggregate("per-country", []v1.GroupKey{qt.Window("ts", "10s"), qt.Key("country")}, qt.Agg("total", v1.AggSum, "amount")).
				Filter("total > 0.0").
				Select(qt.As("country", "country"), qt.As("total", "total"), qt.As("ended", "window_end")).
				Aggregate("best", []v1.GroupKey{qt.Window("ended", "1m")}, qt.Agg("top", v1.AggMax, "total")),
		},
		{
			name: "chained aggregates: on the earlier window's end, in append mode, over a windowed aggregate",
			query: qt.Orders().Watermark("ts", "1m").
				Aggregate("per-country", []v1.GroupKey{qt.Window("ts", "10s"), qt.Key("country")}, qt.Agg("total", v1.AggSum, "amount")).
				Aggregate("by-start", []v1.GroupKey{qt.Window("window_start", "1m")}, qt.Agg("top", v1.AggMax, "total")).
				OutputMode(v1.OutputUpdate).Sink(v1.Sink{Console: &v1.ConsoleSink{}}),
			want: field.ErrorList{
				field.Invalid(transform.Index(2).Child("aggregate", "groupBy"), "window(window_start)", ""),
				field.Invalid(mode, v1.OutputUpdate, ""),
			},
		},
		{
			name: "an aggregate after one without a window on the watermark",
			query: qt.Orders().Watermark("ts", "1m").
				Aggregate("per-country", []v1.GroupKey{qt.Key("country")}, qt.Agg("total", v1.AggSum, "amount")).
				Aggregate("best", []v1.GroupKey{qt.Key("country")}, qt.Agg("top", v1.AggMax, "total")).
				OutputMode(v1.OutputUpdate).Sink(v1.Sink{Console: &v1.ConsoleSink{}}),
			want: field.ErrorList{
				field.Forbidden(transform.Index(2).Child("aggregate"), ""),
			},
		},
		{
			name: "stateful step names are unique, also against ordinals",
			query: qt.Orders().DropDuplicates("1", "order_id").DropDuplicates("", "order_id", "").DropDuplicates("x", "nope").DropDuplicates("x").
				Aggregate("", nil, qt.Agg("n", v1.AggCount, "")).OutputMode(v1.OutputComplete).Sink(v1.Sink{Console: &v1.ConsoleSink{}}),
			want: field.ErrorList{
				field.Duplicate(transform.Index(0).Child("dropDuplicates", "name"), "1"),
				field.Required(transform.Index(1).Child("dropDuplicates", "columns").Index(1), ""),
				field.Duplicate(transform.Index(3).Child("dropDuplicates", "name"), "x"),
				field.Required(transform.Index(3).Child("dropDuplicates", "columns"), ""),
				field.Invalid(transform.Index(2).Child("dropDuplicates", "columns").Index(0), "nope", ""),
			},
		},
		{
			name:  "complete mode needs an aggregate, and the files sink refuses it",
			query: qt.Orders().OutputMode(v1.OutputComplete),
			want: field.ErrorList{
				field.NotSupported(mode, v1.OutputComplete, []v1.OutputMode{v1.OutputAppend, v1.OutputUpdate}),
				field.Invalid(mode, v1.OutputComplete, ""),
			},
		},
		{
			name:  "the delta sink in update mode needs merge keys without an aggregation",
			query: qt.Orders().DeltaSink("s3://lake/t").OutputMode(v1.OutputUpdate),
			want: field.ErrorList{field.Required(field.NewPath("spec", "sink", "delta", "mergeKeys"),
				"update mode replaces rows by key: a query without an aggregation must name the output columns that identify a row")},
		},
		{
			name:  "unknown output mode",
			query: qt.Orders().OutputMode("upsert"),
			want:  field.ErrorList{field.NotSupported(mode, v1.OutputMode("upsert"), v1.OutputModes())},
		},
		{
			name:  "a sink needs exactly one kind",
			query: qt.Orders().Sink(v1.Sink{}),
			want:  field.ErrorList{field.Required(sink, "")},
		},
		{
			name:  "two sinks",
			query: qt.Orders().Sink(v1.Sink{Console: &v1.ConsoleSink{}, Webhook: &v1.WebhookSink{URL: "https://example.com/hook"}}),
			want: field.ErrorList{
				field.Invalid(sink, "webhook, console", ""),
			},
		},
		{
			name:  "sink columns must exist in the output",
			query: qt.Orders().SelectColumns("order_id", "country").DeltaSink("/lake/t", "country", "amount", "country"),
			want: field.ErrorList{
				field.Duplicate(sink.Child("delta", "partitionColumns").Index(2), "country"),
				field.Invalid(sink.Child("delta", "partitionColumns").Index(1), "amount", ""),
			},
		},
		{
			name: "kafka sink fields",
			query: qt.Orders().Sink(v1.Sink{Kafka: &v1.KafkaSink{BootstrapServers: []string{"k:9092"}, KeyColumn: "key", Format: "csv",
				TLS: &v1.KafkaTLS{CertFile: "/tls.crt"}}}),
			want: field.ErrorList{
				field.Required(sink.Child("kafka", "topic"), ""),
				field.NotSupported(sink.Child("kafka", "format"), v1.KafkaCSV, []v1.KafkaFormat{}),
				field.Invalid(sink.Child("kafka", "tls"), "/tls.crt,", ""),
				field.Invalid(sink.Child("kafka", "keyColumn"), "key", ""),
			},
		},
		{
			name:  "kafka sink avro without a schema registry",
			query: qt.Orders().Sink(v1.Sink{Kafka: &v1.KafkaSink{BootstrapServers: []string{"k:9092"}, Topic: "t", Format: v1.KafkaAvro}}),
			want:  field.ErrorList{field.Required(sink.Child("kafka", "schemaRegistry"), "")},
		},
		{
			name: "kafka sink json with a schema registry",
			query: qt.Orders().Sink(v1.Sink{Kafka: &v1.KafkaSink{BootstrapServers: []string{"k:9092"}, Topic: "t", Format: v1.KafkaJSON,
				SchemaRegistry: &v1.SchemaRegistry{URL: "http://r:8081"}}}),
			want: field.ErrorList{field.Forbidden(sink.Child("kafka", "schemaRegistry"), "")},
		},
		{
			name:  "kafka sink avro key without a key column or a schema registry",
			query: qt.Orders().Sink(v1.Sink{Kafka: &v1.KafkaSink{BootstrapServers: []string{"k:9092"}, Topic: "t", KeyFormat: v1.KafkaAvro}}),
			want: field.ErrorList{
				field.Required(sink.Child("kafka", "keyColumn"), ""),
				field.Required(sink.Child("kafka", "schemaRegistry"), ""),
			},
		},
		{
			name: "kafka sink json values, an avro key and a schema registry",
			query: qt.Orders().Sink(v1.Sink{Kafka: &v1.KafkaSink{BootstrapServers: []string{"k:9092"}, Topic: "t", KeyColumn: "order_id", KeyFormat: v1.KafkaAvro,
				SchemaRegistry: &v1.SchemaRegistry{URL: "http://r:8081"}}}),
		},
		{
			name:  "kafka sink jsonSchema without a schema registry",
			query: qt.Orders().Sink(v1.Sink{Kafka: &v1.KafkaSink{BootstrapServers: []string{"k:9092"}, Topic: "t", Format: v1.KafkaJSONSchema}}),
			want:  field.ErrorList{field.Required(sink.Child("kafka", "schemaRegistry"), "")},
		},
		{
			name:  "kafka sink key format csv",
			query: qt.Orders().Sink(v1.Sink{Kafka: &v1.KafkaSink{BootstrapServers: []string{"k:9092"}, Topic: "t", KeyColumn: "order_id", KeyFormat: v1.KafkaCSV}}),
			want:  field.ErrorList{field.NotSupported(sink.Child("kafka", "keyFormat"), v1.KafkaCSV, []v1.KafkaFormat{})},
		},
		{
			name: "kafka sink protobuf with a bad registry URL",
			query: qt.Orders().Sink(v1.Sink{Kafka: &v1.KafkaSink{BootstrapServers: []string{"k:9092"}, Topic: "t", Format: v1.KafkaProtobuf,
				SchemaRegistry: &v1.SchemaRegistry{URL: "registry:8081"}}}),
			want: field.ErrorList{field.Invalid(sink.Child("kafka", "schemaRegistry", "url"), "registry:8081", "")},
		},
		{
			name: "webhook sink fields",
			query: qt.Orders().Sink(v1.Sink{Webhook: &v1.WebhookSink{URL: "ftp://example.com", Headers: map[string]string{"X Bad": "1", "Authorization": "x"},
				MaxRowsPerRequest: -1, Timeout: "5"}}),
			want: field.ErrorList{
				field.Invalid(sink.Child("webhook", "url"), "ftp://example.com", ""),
				field.Invalid(sink.Child("webhook", "headers").Key("X Bad"), "X Bad", ""),
				field.Invalid(sink.Child("webhook", "maxRowsPerRequest"), int32(-1), ""),
				field.Invalid(sink.Child("webhook", "timeout"), "5", ""),
			},
		},
		{
			name:  "files sink format",
			query: qt.Orders().FilesSink("/out", "csv"),
			want:  field.ErrorList{field.NotSupported(sink.Child("files", "format"), v1.FormatCSV, []v1.FileFormat{v1.FormatParquet, v1.FormatJSON})},
		},
		{
			name:  "at most one trigger, and its duration parses",
			query: qt.Orders().Edit(func(s *v1.StreamingQuerySpec) { s.Trigger = v1.Trigger{ProcessingTime: "1 minute", Once: true} }),
			want: field.ErrorList{
				field.Invalid(spec.Child("trigger"), "processingTime, once", ""),
				field.Invalid(spec.Child("trigger", "processingTime"), "1 minute", ""),
			},
		},
		{
			name: "checkpoint, state store and resources",
			query: qt.Orders().CheckpointStore("Team Store").StatePartitions(2000).Edit(func(s *v1.StreamingQuerySpec) {
				s.Checkpoint.MinBatchesToRetain = -1
				s.Checkpoint.Retention = "Keep"
				s.Resources = v1.ResourceRequirements{
					Requests: map[string]resource.Quantity{"cpu": resource.MustParse("2"), "memory": resource.MustParse("-1Gi")},
					Limits:   map[string]resource.Quantity{"cpu": resource.MustParse("1")},
				}
			}),
			want: field.ErrorList{
				field.Invalid(spec.Child("checkpoint", "store"), "Team Store", ""),
				field.Invalid(spec.Child("checkpoint", "minBatchesToRetain"), int32(-1), ""),
				field.NotSupported(spec.Child("checkpoint", "retention"), v1.RetentionPolicy("Keep"), []v1.RetentionPolicy{v1.RetentionRetain, v1.RetentionDelete}),
				field.Invalid(spec.Child("stateStore", "partitions"), int32(2000), ""),
				field.Invalid(spec.Child("resources", "requests").Key("cpu"), "2", ""),
				field.Invalid(spec.Child("resources", "requests").Key("memory"), "-1Gi", ""),
			},
		},
	}
	checkValidateSpec(t, cases)
}

func TestValidateQueryName(t *testing.T) {
	got := plan.Validate(qt.Make("Bad.Name", "ns").RateSource("r", 1).ConsoleSink().Obj())
	want := field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), "Bad.Name", "")}
	if diff := cmp.Diff(want, got, ignoreDetail); diff != "" {
		t.Errorf("Validate() mismatch (-want +got):\n%s", diff)
	}
	got = plan.Validate(qt.Make("", "ns").RateSource("r", 1).ConsoleSink().Obj())
	want = field.ErrorList{field.Required(field.NewPath("metadata", "name"), "")}
	if diff := cmp.Diff(want, got, ignoreDetail); diff != "" {
		t.Errorf("Validate() mismatch (-want +got):\n%s", diff)
	}
}

// TestValidateDetails checks the messages that tell a user what to do.
func TestValidateDetails(t *testing.T) {
	cases := []struct {
		name  string
		query *qt.Query
		want  []string
	}{
		{"unknown column lists the columns", qt.Orders().Filter("price > 0.0"), []string{"undeclared reference to 'price'"}},
		{"sink's modes", qt.Orders().OutputMode(v1.OutputComplete), []string{`the files sink supports supported values: "append", "update"`, "needs an aggregate step"}},
		{"delta onMalformed", qt.Make("q", "ns").DeltaSource("d", "s3://lake/t", qt.Col("id", v1.TypeString)).EditSource("d", func(s *v1.Source) { s.OnMalformed = v1.MalformedSkip }).ConsoleSink(), []string{"spec.sources[0].onMalformed: Forbidden: a delta source has no malformed records to skip", "Leave onMalformed unset (fail)"}},
		{"sources disagree", qt.Make("q", "ns").RateSource("r", 1).FilesSource("f", "/f", "json", qt.Col("x", v1.TypeLong)).ConsoleSink(), []string{`source "r" yields (timestamp timestamp, value long)`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := plan.ValidateSpec(tc.query.Spec())
			msg := got.ToAggregate().Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("Validate() = %q, want it to contain %q", msg, w)
				}
			}
		})
	}
}

// validateCase is a query and the errors ValidateSpec finds in its spec (their details
// aside).
type validateCase struct {
	name  string
	query *qt.Query
	want  field.ErrorList
}

// checkValidateSpec validates each case's spec and compares the errors with its want.
func checkValidateSpec(t *testing.T, cases []validateCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := plan.ValidateSpec(tc.query.Spec())
			if diff := cmp.Diff(tc.want, got, ignoreDetail, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Validate() mismatch (-want +got):\n%s\ngot:\n%s", diff, describe(got))
			}
		})
	}
}

func describe(errs field.ErrorList) string {
	var b strings.Builder
	for _, e := range errs {
		b.WriteString("  " + e.Error() + "\n")
	}
	return b.String()
}

func ptr[T any](v T) *T { return &v }

// TestValidationSplit: api/v1 checks the fields by themselves and follows no column, so a
// spec whose only problems need the flow passes it; plan.ValidateSpec reports api/v1's
// problems first, then the flow's.
func TestValidationSplit(t *testing.T) {
	cases := []struct {
		name  string
		query *qt.Query
		want  []string // the flow's problems, by field
	}{
		{"unknown column in a filter", qt.Orders().Filter("price > 0.0"), []string{"spec.transform[0].filter"}},
		{"sources disagree", qt.Make("q", "ns").RateSource("r", 1).FilesSource("f", "/f", "json", qt.Col("x", v1.TypeLong)).ConsoleSink(), []string{"spec.sources[1].schema"}},
		{"watermark on a string column", qt.Orders().Watermark("country", "1m"), []string{"spec.transform[0].watermark.column"}},
		{"sink key not in the output", qt.Orders().SelectColumns("order_id").Edit(func(s *v1.StreamingQuerySpec) {
			s.Sink = v1.Sink{Kafka: &v1.KafkaSink{BootstrapServers: []string{"k:9092"}, Topic: "t", KeyColumn: "country"}}
		}), []string{"spec.sink.kafka.keyColumn"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.query.Spec()
			if errs := spec.Validate(); len(errs) > 0 {
				t.Errorf("api/v1 Validate() = %v, want nothing: these problems need the flow", errs)
			}
			var got []string
			for _, e := range plan.ValidateSpec(spec) {
				got = append(got, e.Field)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("plan.ValidateSpec() fields (-want +got):\n%s", diff)
			}
		})
	}
	// Both kinds: api/v1's first.
	spec := qt.Orders().Filter("price > 0.0").Edit(func(s *v1.StreamingQuerySpec) { s.Trigger.ProcessingTime = "soon" }).Spec()
	var got []string
	for _, e := range plan.ValidateSpec(spec) {
		got = append(got, e.Field)
	}
	if want := []string{"spec.trigger.processingTime", "spec.transform[0].filter"}; !cmp.Equal(got, want) {
		t.Errorf("plan.ValidateSpec() fields = %q, want %q", got, want)
	}
}
