package spark_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/engine/kafka"
	"github.com/lockstep-dev/lockstep/engine/spark"
	lplan "github.com/lockstep-dev/lockstep/plan"
)

// planned returns the logical plan of q's spec, defaulted and valid.
func planned(q *qt.Query) *lplan.Plan {
	obj := q.Obj()
	obj.Default()
	p, errs := lplan.Compile(obj)
	if len(errs) > 0 {
		panic(errs.ToAggregate())
	}
	return p
}

// TestCheckRefuses: what Spark cannot run with the spec's meaning is refused, naming the field.
func TestCheckRefuses(t *testing.T) {
	cols := []v1.Column{{Name: "id", Type: v1.TypeString}, {Name: "amount", Type: v1.TypeDouble}}
	files := func() *qt.Query {
		return qt.Make("q", "ns").FilesSource("orders", "/in", v1.FormatJSON, cols...).FilesSink("/out", v1.FormatJSON)
	}
	events := func(mode v1.OutputMode, session v1.SessionWindow) *qt.Query {
		return qt.Make("q", "ns").FilesSource("events", "/in", v1.FormatJSON, qt.Col("user", v1.TypeString), qt.Col("ts", v1.TypeTimestamp)).
			Watermark("ts", "10s").Aggregate("", []v1.GroupKey{qt.Key("user"), {Session: &session}}, qt.Agg("n", v1.AggCount, "")).
			OutputMode(mode).FilesSink("/out", v1.FormatJSON)
	}
	cases := []struct {
		name string
		plan *lplan.Plan
		want []string // field: a word of the reason
	}{
		{name: "a plain query runs", plan: planned(files().Filter("amount > 0").Select(v1.Projection{Name: "id", Expr: "id.lowerAscii()"}))},
		{name: "rate", plan: planned(qt.Make("q", "ns").RateSource("ticks", 10).ConsoleSink()), want: []string{"spec.sources[0].rate: ramp-up"}},
		{name: "nexmark", plan: planned(qt.Make("q", "ns").NexmarkSource("bids", v1.NexmarkSource{Table: v1.NexmarkBid}).ConsoleSink()), want: []string{"spec.sources[0].nexmark: no Nexmark"}},
		{name: "regex filter", plan: planned(files().Filter("id.matches('^a')")), want: []string{"spec.transform[0].filter: RE2"}},
		{name: "a double division and timestamp arithmetic run", plan: planned(qt.Make("q", "ns").FilesSource("orders", "/in", v1.FormatJSON, qt.Col("amount", v1.TypeDouble), qt.Col("ts", v1.TypeTimestamp)).
			Select(qt.As("x", "amount / (amount - 1.0)"), qt.As("later", "ts + duration('90m')")).FilesSink("/out", v1.FormatJSON))},
		{name: "duration arithmetic", plan: planned(qt.Make("q", "ns").FilesSource("orders", "/in", v1.FormatJSON, qt.Col("ts", v1.TypeTimestamp)).
			Filter("ts - ts > duration('1s')").FilesSink("/out", v1.FormatJSON)), want: []string{"spec.transform[0].filter: - on google.protobuf.Duration"}},
		{name: "count_distinct", plan: planned(files().Aggregate("", []v1.GroupKey{{Column: "id"}}, v1.Aggregation{Name: "n", Function: v1.AggCountDistinct, Column: "amount"}).OutputMode(v1.OutputUpdate)),
			want: []string{"spec.transform[0].aggregate.aggregates[0].function: adds a stateful operator"}},
		{name: "a key format", plan: planned(qt.Make("q", "ns").KafkaSource("orders", "broker:9092", "orders", cols...).
			EditSource("orders", func(s *v1.Source) { s.Kafka.KeyFormat = v1.KafkaJSON }).ConsoleSink()),
			want: []string{"spec.sources[0].kafka.keyFormat: only keyFormat string"}},
		{name: "an at-least-once kafka sink runs", plan: planned(files().KafkaSink("broker:9092", "out").Edit(func(s *v1.StreamingQuerySpec) { s.Sink.Kafka.KeyColumn = "id" }))},
		{name: "a transactional kafka sink", plan: planned(files().KafkaSink("broker:9092", "out").Edit(func(s *v1.StreamingQuerySpec) {
			s.Sink.Kafka.ExactlyOnce = true
			s.Sink.Kafka.KeyColumn = "amount"
		})), want: []string{"spec.sink.kafka.exactlyOnce: no transactions", "spec.sink.kafka.keyColumn: string or long"}},
		{name: "kafka over SASL and TLS runs", plan: planned(files().KafkaSink("broker:9093", "out").Edit(func(s *v1.StreamingQuerySpec) {
			s.Sink.Kafka.SASL = &v1.KafkaSASL{Mechanism: v1.SASLScramSHA256}
			s.Sink.Kafka.TLS = &v1.KafkaTLS{CAFile: "/ca.pem"}
		}))},
		{name: "kafka TLS the Java client cannot do", plan: planned(qt.Make("q", "ns").KafkaSource("orders", "broker:9093", "orders", cols...).
			EditSource("orders", func(s *v1.Source) { s.Kafka.TLS = &v1.KafkaTLS{ServerName: "kafka.internal"} }).
			KafkaSink("broker:9093", "out").Edit(func(s *v1.StreamingQuerySpec) {
			s.Sink.Kafka.TLS = &v1.KafkaTLS{CertFile: "/tls.crt", KeyFile: "/tls.key"}
		})), want: []string{"spec.sources[0].kafka.tls.serverName: host name", "spec.sink.kafka.tls.certFile: mutual TLS"}},
		{name: "avro from the schema registry", plan: planned(qt.Make("q", "ns").KafkaSource("orders", "broker:9092", "orders", cols...).
			EditSource("orders", func(s *v1.Source) {
				s.Kafka.Format = v1.KafkaAvro
				s.Kafka.SchemaRegistry = &v1.SchemaRegistry{URL: "http://registry:8081"}
			}).ConsoleSink()),
			want: []string{"spec.sources[0].kafka.format: schema id per record"}},
		{name: "a sink's own S3 settings in the checkpoint's bucket", plan: planned(files().Checkpoint("s3://shared/ck").FilesSink("s3://shared/out", v1.FormatJSON).
			Edit(func(s *v1.StreamingQuerySpec) {
				s.Sink.Files.S3 = &v1.S3Connection{Endpoint: "https://other:9000", InsecureSkipVerify: true}
			})),
			want: []string{"spec.sink.files.s3.insecureSkipVerify: certificate"}},
		{name: "own S3 settings on the checkpoint's bucket", plan: planned(files().Checkpoint("s3://shared/ck").FilesSink("s3://shared/out", v1.FormatJSON).
			Edit(func(s *v1.StreamingQuerySpec) { s.Sink.Files.S3 = &v1.S3Connection{Endpoint: "https://other:9000"} })),
			want: []string{"spec.sink.files.s3: holds the checkpoint"}},
		{name: "a webhook sink runs", plan: planned(files().WebhookSink("http://hooks:8080/in"))},
		{name: "a files static side runs", plan: planned(files().Join(v1.Join{Keys: qt.Keys("id", "cid"), Static: qt.StaticFiles("/customers", v1.FormatCSV, qt.Col("cid", v1.TypeString)), RightPrefix: "c_"}))},
		{name: "a delta static side runs", plan: planned(files().Join(v1.Join{Keys: qt.Keys("id", "cid"), Static: qt.StaticDelta("/customers", qt.Col("cid", v1.TypeString)), RightPrefix: "c_"}))},
		{name: "a postgres static side runs", plan: planned(files().Join(v1.Join{Keys: qt.Keys("id", "cid"), Static: qt.StaticPostgres("crm.customers", "CRM_DSN", qt.Col("cid", v1.TypeString)), RightPrefix: "c_"}))},
		{name: "a static side's refresh", plan: planned(files().Join(v1.Join{Keys: qt.Keys("id", "cid"), RightPrefix: "c_", Static: func() *v1.StaticSide {
			s := qt.StaticFiles("/customers", v1.FormatJSON, qt.Col("cid", v1.TypeString))
			s.Refresh = &v1.Refresh{Every: "10m"}
			return s
		}()})), want: []string{"spec.transform[0].join.static.refresh: omit refresh"}},
		{name: "a session window runs in append mode", plan: planned(events(v1.OutputAppend, v1.SessionWindow{Column: "ts", GapExpr: "user == 'bot' ? duration('1s') : duration('5m')"}))},
		{name: "a session window in update mode", plan: planned(events(v1.OutputUpdate, v1.SessionWindow{Column: "ts", Gap: "5m"})),
			want: []string{"spec.outputMode: SPARK-36463"}},
		{name: "a session gap parsed from a column", plan: planned(events(v1.OutputAppend, v1.SessionWindow{Column: "ts", GapExpr: "duration(user)"})),
			want: []string{"spec.transform[1].aggregate.groupBy[1].session.gapExpr: duration() of a computed value"}},
		{name: "a session gap of nanoseconds", plan: planned(events(v1.OutputAppend, v1.SessionWindow{Column: "ts", Gap: "1500ns"})),
			want: []string{"spec.transform[1].aggregate.groupBy[1].session.gap: microseconds"}},
		{name: "a session window without another key", plan: planned(qt.Make("q", "ns").FilesSource("events", "/in", v1.FormatJSON, qt.Col("ts", v1.TypeTimestamp)).
			Watermark("ts", "10s").Aggregate("", []v1.GroupKey{qt.Session("ts", "1m")}, qt.Agg("n", v1.AggCount, "")).OutputMode(v1.OutputAppend).FilesSink("/out", v1.FormatJSON)),
			want: []string{"spec.transform[1].aggregate.groupBy[0].session: global aggregation"}},
		{name: "source names one in Spark", plan: planned(qt.Make("q", "ns").FilesSource("a-b", "/in1", v1.FormatJSON, cols...).FilesSource("a_b", "/in2", v1.FormatJSON, cols...).ConsoleSink()),
			want: []string{"spec.sources[1].name: one name"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := spark.Check(tc.plan)
			var got []string
			for i, e := range errs {
				word := ""
				if i < len(tc.want) {
					_, word, _ = strings.Cut(tc.want[i], ": ")
				}
				if word != "" && strings.Contains(e.Detail, word) {
					got = append(got, e.Field+": "+word)
				} else {
					got = append(got, e.Field+": "+e.Detail)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Check (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCompileWindow: a window key becomes window() and is renamed to window_start and
// window_end in its place; the state partitions become Spark's shuffle partitions.
func TestCompileWindow(t *testing.T) {
	lp := planned(qt.Make("q", "ns").FilesSource("orders", "/in", v1.FormatJSON, v1.Column{Name: "ts", Type: v1.TypeTimestamp}, v1.Column{Name: "qty", Type: v1.TypeLong}).
		Watermark("ts", "10s").Aggregate("", []v1.GroupKey{{Window: &v1.Window{Column: "ts", Duration: "1m", Slide: "30s"}}}, v1.Aggregation{Name: "total", Function: v1.AggSum, Column: "qty"}).
		OutputMode(v1.OutputAppend).StatePartitions(4).DeltaSink("/out"))
	plan, err := spark.Compile(lp, spark.CompileOptions{QueryID: "id", CheckpointLocation: "/ck"})
	if err != nil {
		t.Fatal(err)
	}
	want := []spark.Step{
		{Watermark: &spark.Watermark{Column: "ts", Delay: "10000 milliseconds"}},
		{Aggregate: &spark.Aggregate{GroupBy: []string{"window(`ts`, '60000 milliseconds', '30000 milliseconds') AS `_window0`"}, Aggregates: []string{"try_sum(`qty`) AS `total`"}}},
		{Select: []string{"`_window0`.start AS `window_start`", "`_window0`.end AS `window_end`", "`total`"}},
	}
	if diff := cmp.Diff(want, plan.Steps); diff != "" {
		t.Errorf("Compile steps (-want +got):\n%s", diff)
	}
	if got := plan.Conf["spark.sql.shuffle.partitions"]; got != "4" {
		t.Errorf("spark.sql.shuffle.partitions = %q, want 4", got)
	}
	if plan.Sources[0].Name != "orders" || plan.Sink.Kind != spark.SinkDelta {
		t.Errorf("source %q, sink %q; want orders, delta", plan.Sources[0].Name, plan.Sink.Kind)
	}
}

// TestCompileChainedAggregates: an aggregate whose windows a later one takes keeps its window
// struct (with Spark's event-time metadata) in a column of its own, carried through a select
// that keeps window_end, and the later aggregate windows by window_time of it.
func TestCompileChainedAggregates(t *testing.T) {
	lp := planned(qt.Make("q", "ns").FilesSource("orders", "/in", v1.FormatJSON, v1.Column{Name: "ts", Type: v1.TypeTimestamp}, v1.Column{Name: "qty", Type: v1.TypeLong}).
		Watermark("ts", "10s").Aggregate("", []v1.GroupKey{qt.Window("ts", "1m")}, v1.Aggregation{Name: "total", Function: v1.AggSum, Column: "qty"}).
		Select(qt.As("ended", v1.ColumnWindowEnd), qt.As("total", "total")).
		Aggregate("", []v1.GroupKey{qt.Window("ended", "1h")}, v1.Aggregation{Name: "top", Function: v1.AggMax, Column: "total"}).
		OutputMode(v1.OutputAppend).DeltaSink("/out"))
	plan, err := spark.Compile(lp, spark.CompileOptions{QueryID: "id", CheckpointLocation: "/ck"})
	if err != nil {
		t.Fatal(err)
	}
	want := []spark.Step{
		{Watermark: &spark.Watermark{Column: "ts", Delay: "10000 milliseconds"}},
		{Aggregate: &spark.Aggregate{GroupBy: []string{"window(`ts`, '60000 milliseconds', '60000 milliseconds') AS `_window0`"}, Aggregates: []string{"try_sum(`qty`) AS `total`"}}},
		{Select: []string{"`_window0`.start AS `window_start`", "`_window0`.end AS `window_end`", "`total`", "`_window0` AS `_lockstep_window`"}},
		{Select: []string{"CAST(`window_end` AS TIMESTAMP) AS `ended`", "CAST(`total` AS BIGINT) AS `total`", "`_lockstep_window`"}},
		{Aggregate: &spark.Aggregate{GroupBy: []string{"window(window_time(`_lockstep_window`), '3600000 milliseconds', '3600000 milliseconds') AS `_window0`"}, Aggregates: []string{"max(`total`) AS `top`"}}},
		{Select: []string{"`_window0`.start AS `window_start`", "`_window0`.end AS `window_end`", "`top`"}},
	}
	if diff := cmp.Diff(want, plan.Steps); diff != "" {
		t.Errorf("Compile steps (-want +got):\n%s", diff)
	}
}

// TestCompileSession: a session key becomes session_window() with the fixed gap as an interval
// string, or gapExpr translated and made a calendar interval (session_window takes no
// day-time interval), renamed to window_start and window_end in its place.
func TestCompileSession(t *testing.T) {
	tests := []struct {
		session v1.SessionWindow
		gap     string
	}{
		{v1.SessionWindow{Column: "ts", Gap: "90s"}, "'90000000 microseconds'"},
		{v1.SessionWindow{Column: "ts", GapExpr: "qty > 10 ? duration('1m') : duration('2.5s')"},
			"make_interval(0, 0, 0, 0, 0, 0, CAST((CASE WHEN (`qty` > 10L) THEN INTERVAL '60' SECOND WHEN NOT (`qty` > 10L) THEN INTERVAL '2.5' SECOND END) AS DECIMAL(18,6)))"},
	}
	for _, tt := range tests {
		t.Run(string(tt.session.Gap)+tt.session.GapExpr, func(t *testing.T) {
			lp := planned(qt.Make("q", "ns").FilesSource("orders", "/in", v1.FormatJSON, qt.Col("id", v1.TypeString), qt.Col("ts", v1.TypeTimestamp), qt.Col("qty", v1.TypeLong)).
				Watermark("ts", "10s").Aggregate("", []v1.GroupKey{{Session: &tt.session}, qt.Key("id")}, qt.Agg("total", v1.AggSum, "qty")).
				OutputMode(v1.OutputAppend).FilesSink("/out", v1.FormatJSON))
			plan, err := spark.Compile(lp, spark.CompileOptions{QueryID: "id", CheckpointLocation: "/ck"})
			if err != nil {
				t.Fatal(err)
			}
			want := []spark.Step{
				{Watermark: &spark.Watermark{Column: "ts", Delay: "10000 milliseconds"}},
				{Aggregate: &spark.Aggregate{GroupBy: []string{"session_window(`ts`, " + tt.gap + ") AS `_session0`", "`id`"}, Aggregates: []string{"try_sum(`qty`) AS `total`"}}},
				{Select: []string{"`_session0`.start AS `window_start`", "`_session0`.end AS `window_end`", "`id`", "`total`"}},
			}
			if diff := cmp.Diff(want, plan.Steps); diff != "" {
				t.Errorf("Compile steps (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCompilePostgresStatic: a PostgreSQL static side is Spark's JDBC reader running the
// built-in engine's SELECT; the connection string becomes the URL, the user and the session's
// run-time parameters, and its password stays out of the plan (the runner's environment).
func TestCompilePostgresStatic(t *testing.T) {
	lp := planned(qt.Make("q", "ns").FilesSource("orders", "/in", v1.FormatJSON, qt.Col("id", v1.TypeString)).
		Join(v1.Join{Keys: qt.Keys("id", "cid"), RightPrefix: "c_",
			Static: qt.StaticPostgres("crm.customers", "CRM_DSN", qt.Col("cid", v1.TypeString), qt.Col("tier", v1.TypeLong), qt.Col("since", v1.TypeTimestamp))}).
		FilesSink("/out", v1.FormatJSON))
	env := map[string]string{"CRM_DSN": "postgres://crm:s3cret@db.example:5433/sales?sslmode=require&search_path=crm,%20public&timezone=Europe/Berlin&application_name=it's%20%5Co/"}
	plan, err := spark.Compile(lp, spark.CompileOptions{QueryID: "id", CheckpointLocation: "/ck", Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	want := &spark.Source{
		Format: "jdbc",
		Options: map[string]string{
			"query": `SELECT "cid"::text AS "cid", "tier"::bigint AS "tier", "since"::timestamp with time zone AS "since" FROM "crm"."customers"`,
			"url": "jdbc:postgresql://db.example:5433/sales?sslmode=require&options=" +
				url.QueryEscape(`-c application_name=it's\ \\o/ -c search_path=crm,\ public -c timezone=Europe/Berlin`),
			"user":                 "crm",
			"sessionInitStatement": "SELECT set_config('TimeZone', 'Europe/Berlin', false)",
		},
		Project:     []string{"CAST(`cid` AS STRING) AS `cid`", "CAST(`tier` AS BIGINT) AS `tier`", "CAST(`since` AS TIMESTAMP) AS `since`"},
		PasswordEnv: spark.StaticPasswordEnv(0),
	}
	if diff := cmp.Diff(want, plan.Steps[0].Join.Static); diff != "" {
		t.Errorf("static side (-want +got):\n%s", diff)
	}
	if data, _ := json.Marshal(plan); strings.Contains(string(data), "s3cret") {
		t.Errorf("the plan holds the password: %s", data)
	}
}

// TestCompileStreamJoin: a stream join reads its source for itself (not unioned), runs the
// side's transform and watermark on it, and joins on the keys and the time bound as Spark's
// range condition; a double key excludes NaN, which Spark would match.
func TestCompileStreamJoin(t *testing.T) {
	ts := func(n string) v1.Column { return v1.Column{Name: n, Type: v1.TypeTimestamp} }
	side := qt.StreamSide("clicks", "t", "ct", "20s", "1s", "1m")
	side.Transform = []v1.SideStep{{Filter: "cost > 0.5"}, {Select: []v1.Projection{qt.As("ad", "ad"), qt.As("ct", "ct")}}}
	lp := planned(qt.Make("q", "ns").
		FilesSource("imps", "/imps", v1.FormatJSON, v1.Column{Name: "ad", Type: v1.TypeDouble}, ts("t")).
		FilesSource("clicks", "/clicks", v1.FormatJSON, v1.Column{Name: "ad", Type: v1.TypeDouble}, v1.Column{Name: "cost", Type: v1.TypeDouble}, ts("ct")).
		Watermark("t", "10s").
		Join(v1.Join{Type: v1.JoinFullOuter, Keys: qt.Keys("ad", "ad"), Stream: side, RightPrefix: "c_"}).FilesSink("/out", v1.FormatJSON))
	plan, err := spark.Compile(lp, spark.CompileOptions{QueryID: "id", CheckpointLocation: "/ck"})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Sources) != 1 || plan.Sources[0].Name != "imps" {
		t.Fatalf("sources %+v, want imps alone (clicks is the join's)", plan.Sources)
	}
	j := plan.Steps[1].Join
	if j == nil || j.Stream == nil || j.Stream.Name != "clicks" {
		t.Fatalf("step 1 = %+v, want a join reading clicks", plan.Steps[1])
	}
	want := &spark.Join{
		Type:   spark.JoinFullOuter,
		Stream: j.Stream,
		Right: []spark.Step{
			{Filter: "(CASE WHEN isnan(`cost`) THEN FALSE ELSE (`cost` > CAST('0.5' AS DOUBLE)) END)"},
			{Select: []string{"CAST(`ad` AS DOUBLE) AS `ad`", "CAST(`ct` AS TIMESTAMP) AS `ct`"}},
			{Watermark: &spark.Watermark{Column: "ct", Delay: "20000 milliseconds"}},
		},
		Condition: "`l`.`ad` = `r`.`ad` AND NOT isnan(`l`.`ad`) AND `r`.`ct` >= `l`.`t` - INTERVAL 1000 MILLISECONDS AND `r`.`ct` <= `l`.`t` + INTERVAL 60000 MILLISECONDS" +
			" AND `l`.`ad` IS NOT NULL AND `r`.`ad` IS NOT NULL AND `l`.`t` IS NOT NULL AND `r`.`ct` IS NOT NULL",
		Select: []string{"`l`.`ad` AS `ad`", "`l`.`t` AS `t`", "`r`.`ad` AS `c_ad`", "timestamp_micros(unix_micros(`r`.`ct`)) AS `c_ct`"},
	}
	if diff := cmp.Diff(want, j); diff != "" {
		t.Errorf("Compile join (-want +got):\n%s", diff)
	}
}

// TestCompileStaticPins: a static side pinned by CompileOptions.Statics is read at the pin — a
// Delta table at its version, a folder as exactly its files (none for a folder that was
// empty) — and without a pin, a folder by its path and a Delta table at the version the
// runner finds.
func TestCompileStaticPins(t *testing.T) {
	query := func(static *v1.StaticSide) *lplan.Plan {
		return planned(qt.Make("q", "ns").FilesSource("orders", "/orders", v1.FormatJSON, qt.Col("id", v1.TypeString)).
			Join(v1.Join{Name: "customers", Keys: qt.Keys("id", "cid"), Static: static, RightPrefix: "c_"}).FilesSink("/out", v1.FormatJSON))
	}
	folder, table := qt.StaticFiles("/customers", v1.FormatJSON, qt.Col("cid", v1.TypeString)), qt.StaticDelta("s3://lake/customers", qt.Col("cid", v1.TypeString))
	for _, tc := range []struct {
		name    string
		static  *v1.StaticSide
		pin     *spark.StaticPin
		path    string
		paths   []string
		version string
	}{
		{name: "a folder pinned", static: folder, pin: &spark.StaticPin{Files: []string{"/customers/a.json", "/customers/b.json"}}, path: "/customers", paths: []string{"/customers/a.json", "/customers/b.json"}},
		{name: "a folder pinned empty", static: folder, pin: &spark.StaticPin{Files: []string{}}, path: "/customers", paths: []string{}},
		{name: "a folder not pinned", static: folder, path: "/customers"},
		{name: "a delta table pinned", static: table, pin: &spark.StaticPin{Version: 7}, path: "s3a://lake/customers", version: "7"},
		{name: "a delta table not pinned", static: table, path: "s3a://lake/customers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := spark.CompileOptions{QueryID: "id", CheckpointLocation: "/ck"}
			if tc.pin != nil {
				opts.Statics = map[string]spark.StaticPin{"customers": *tc.pin}
			}
			plan, err := spark.Compile(query(tc.static), opts)
			if err != nil {
				t.Fatal(err)
			}
			s := plan.Steps[0].Join.Static
			if s.Path != tc.path || !cmp.Equal(s.Paths, tc.paths) || s.Options["versionAsOf"] != tc.version {
				t.Errorf("static side read from %q, files %#v, versionAsOf %q; want %q, %#v, %q", s.Path, s.Paths, s.Options["versionAsOf"], tc.path, tc.paths, tc.version)
			}
		})
	}
}

// TestCompileSelectKeepsEventTime: a select after the watermark copies the event-time column
// it renames by a bare alias, which keeps Spark's event-time mark (issue 38.5); a second copy
// of the event-time column, data on the built-in runtime, drops the mark.
func TestCompileSelectKeepsEventTime(t *testing.T) {
	lp := planned(qt.Make("q", "ns").FilesSource("orders", "/in", v1.FormatJSON, qt.Col("id", v1.TypeString), qt.Col("qty", v1.TypeLong), qt.Col("ts", v1.TypeTimestamp)).
		Watermark("ts", "5s").
		Select(qt.As("id", "id"), qt.As("q2", "qty * 2"), qt.As("event_time", "ts"), qt.As("seen", "ts")).
		Aggregate("", []v1.GroupKey{qt.Window("event_time", "10s")}, qt.Agg("n", v1.AggCount, ""), qt.Agg("last", v1.AggMax, "seen")).
		OutputMode(v1.OutputAppend).FilesSink("/out", v1.FormatJSON))
	plan, err := spark.Compile(lp, spark.CompileOptions{QueryID: "id", CheckpointLocation: "/ck"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"CAST(`id` AS STRING) AS `id`", "CAST(try_multiply(`qty`, 2L) AS BIGINT) AS `q2`", "`ts` AS `event_time`", "timestamp_micros(unix_micros(`ts`)) AS `seen`"}
	if diff := cmp.Diff(want, plan.Steps[1].Select); diff != "" {
		t.Errorf("the select (-want +got):\n%s", diff)
	}
}

// TestCompileWatermarkBarrier: a watermark with a filter after it is followed by a projection
// that is not deterministic, which Spark's optimizer pushes no filter through, so that the
// rows the filter drops still count for the watermark (issue 38.6c); without a filter after
// it, the watermark is alone.
func TestCompileWatermarkBarrier(t *testing.T) {
	q := func() *qt.Query {
		return qt.Make("q", "ns").FilesSource("orders", "/in", v1.FormatJSON, qt.Col("id", v1.TypeString), qt.Col("ts", v1.TypeTimestamp)).Watermark("ts", "5s")
	}
	filtered, err := spark.Compile(planned(q().Filter("id != 'x'").FilesSink("/out", v1.FormatJSON)), spark.CompileOptions{QueryID: "id", CheckpointLocation: "/ck"})
	if err != nil {
		t.Fatal(err)
	}
	want := []spark.Step{
		{Watermark: &spark.Watermark{Column: "ts", Delay: "5000 milliseconds"}},
		{Select: []string{"*", "rand(0) AS `_lockstep_barrier`"}},
		{Filter: "`_lockstep_barrier` >= 0.0D"},
		{Select: []string{"`id`", "`ts`"}},
		{Filter: "(`id` <> 'x')"},
	}
	if diff := cmp.Diff(want, filtered.Steps); diff != "" {
		t.Errorf("steps with a filter (-want +got):\n%s", diff)
	}
	plain, err := spark.Compile(planned(q().FilesSink("/out", v1.FormatJSON)), spark.CompileOptions{QueryID: "id", CheckpointLocation: "/ck"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want[:1], plain.Steps); diff != "" {
		t.Errorf("steps without a filter (-want +got):\n%s", diff)
	}
}

// TestCompileKafkaSink: the last step makes Spark's Kafka writer's value (the row as JSON, nulls
// kept, timestamps as the built-in encoder writes them) and key; the sink names the topic and
// the batch header.
func TestCompileKafkaSink(t *testing.T) {
	lp := planned(qt.Make("q", "ns").FilesSource("orders", "/in", v1.FormatJSON, qt.Col("id", v1.TypeString), qt.Col("ts", v1.TypeTimestamp)).
		KafkaSink("b1:9092", "out").Edit(func(s *v1.StreamingQuerySpec) {
		s.Sink.Kafka.BootstrapServers = []string{"b1:9092", "b2:9092"}
		s.Sink.Kafka.KeyColumn = "id"
	}))
	p, err := spark.Compile(lp, spark.CompileOptions{QueryID: "q1", CheckpointLocation: "/ck"})
	if err != nil {
		t.Fatal(err)
	}
	want := spark.Sink{Kind: spark.SinkKafka, Options: map[string]string{"kafka.bootstrap.servers": "b1:9092,b2:9092", "topic": "out"}, BatchHeader: kafka.BatchHeader}
	if diff := cmp.Diff(want, p.Sink); diff != "" {
		t.Errorf("sink (-want +got):\n%s", diff)
	}
	last := []string{"to_json(struct(`id`, `ts`), map('ignoreNullFields', 'false', 'timestampFormat', 'yyyy-MM-dd\\'T\\'HH:mm:ss.SSSSSSXXX')) AS value", "CAST(`id` AS STRING) AS key"}
	if diff := cmp.Diff(last, p.Steps[len(p.Steps)-1].Select); diff != "" {
		t.Errorf("the last step (-want +got):\n%s", diff)
	}
}

// TestCompileKafkaSecurity: SASL and TLS become Spark's kafka.* options, the credentials as
// ${env:...} references that Kafka's EnvVarConfigProvider resolves: no secret in the plan.
func TestCompileKafkaSecurity(t *testing.T) {
	lp := planned(qt.Make("q", "ns").KafkaSource("orders", "b1:9093", "in", qt.Col("id", v1.TypeString)).
		EditSource("orders", func(s *v1.Source) {
			s.Kafka.SASL = &v1.KafkaSASL{Mechanism: v1.SASLPlain, UsernameEnv: "KUSER", PasswordEnv: "KPASS"}
			s.Kafka.TLS = &v1.KafkaTLS{CAFile: "/etc/kafka/ca.pem"}
		}).
		KafkaSink("b1:9094", "out").Edit(func(s *v1.StreamingQuerySpec) {
		s.Sink.Kafka.TLS = &v1.KafkaTLS{CAFile: "/etc/kafka/ca.pem"}
	}))
	p, err := spark.Compile(lp, spark.CompileOptions{QueryID: "q1", CheckpointLocation: "/ck"})
	if err != nil {
		t.Fatal(err)
	}
	src := p.Sources[0].Options
	for k, want := range map[string]string{
		"kafka.security.protocol":          "SASL_SSL",
		"kafka.sasl.mechanism":             "PLAIN",
		"kafka.sasl.jaas.config":           `org.apache.kafka.common.security.plain.PlainLoginModule required username="${env:KUSER}" password="${env:KPASS}";`,
		"kafka.config.providers":           "env",
		"kafka.config.providers.env.class": "org.apache.kafka.common.config.provider.EnvVarConfigProvider",
		"kafka.ssl.truststore.type":        "PEM",
		"kafka.ssl.truststore.location":    "/etc/kafka/ca.pem",
	} {
		if src[k] != want {
			t.Errorf("source option %s = %q, want %q", k, src[k], want)
		}
	}
	if got := p.Sink.Options["kafka.security.protocol"]; got != "SSL" {
		t.Errorf("sink kafka.security.protocol = %q, want SSL", got)
	}
	if _, ok := p.Sink.Options["kafka.sasl.jaas.config"]; ok {
		t.Error("a sink without SASL got a JAAS config")
	}
}

// TestCompileS3OwnSettings: a location's own s3: settings become S3A's settings of its bucket,
// its keys read from the environment by the runner's EnvCredentials, never in the plan.
func TestCompileS3OwnSettings(t *testing.T) {
	lp := planned(qt.Make("q", "ns").FilesSource("orders", "s3://raw/in", v1.FormatJSON, qt.Col("id", v1.TypeString)).
		EditSource("orders", func(s *v1.Source) { s.Files.S3 = &v1.S3Connection{Endpoint: "https://minio:9000", Region: "eu-west-1"} }).
		FilesSink("/out", v1.FormatJSON))
	p, err := spark.Compile(lp, spark.CompileOptions{QueryID: "q1", CheckpointLocation: "s3a://ck/q"})
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"spark.hadoop.fs.s3a.bucket.raw.endpoint":                        "https://minio:9000",
		"spark.hadoop.fs.s3a.bucket.raw.endpoint.region":                 "eu-west-1",
		"spark.hadoop.fs.s3a.bucket.raw.path.style.access":               "true",
		"spark.hadoop.fs.s3a.bucket.raw.connection.ssl.enabled":          "true",
		"spark.hadoop.fs.s3a.bucket.raw.aws.credentials.provider":        spark.EnvCredentialsClass,
		"spark.hadoop.fs.s3a.bucket.raw.lockstep.credentials.env.prefix": "LOCKSTEP_ORDERS_",
	} {
		if got := p.Conf[k]; got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
}

// TestCompileStaticPrunesColumns: a Parquet folder's or a Delta table's static side is cached in
// the columns the join uses (its keys, then its output's, in the side's order); all of them, a
// CSV or JSON folder (whose reader checks every column of a row) and a database read whole.
func TestCompileStaticPrunesColumns(t *testing.T) {
	cols := []v1.Column{qt.Col("cid", v1.TypeString), qt.Col("name", v1.TypeString), qt.Col("tier", v1.TypeLong), qt.Col("note", v1.TypeString)}
	some := []v1.JoinColumn{{Side: v1.SideLeft, Column: "id"}, {Side: v1.SideRight, Column: "tier", Name: "level"}}
	for _, tc := range []struct {
		name   string
		static *v1.StaticSide
		sel    []v1.JoinColumn
		want   []string
	}{
		{name: "parquet, some columns", static: qt.StaticFiles("/customers", v1.FormatParquet, cols...), sel: some, want: []string{"`cid`", "`tier`"}},
		{name: "delta, some columns", static: qt.StaticDelta("/customers", cols...), sel: some, want: []string{"`cid`", "`tier`"}},
		{name: "parquet, every column", static: qt.StaticFiles("/customers", v1.FormatParquet, cols...)},
		{name: "json, some columns", static: qt.StaticFiles("/customers", v1.FormatJSON, cols...), sel: some},
		{name: "csv, some columns", static: qt.StaticFiles("/customers", v1.FormatCSV, cols...), sel: some},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := "c_" // every column of both sides
			if tc.sel != nil {
				prefix = ""
			}
			q := qt.Make("q", "ns").FilesSource("orders", "/orders", v1.FormatJSON, qt.Col("id", v1.TypeString)).
				Join(v1.Join{Name: "customers", Keys: qt.Keys("id", "cid"), Static: tc.static, RightPrefix: prefix, Select: tc.sel}).FilesSink("/out", v1.FormatJSON)
			plan, err := spark.Compile(planned(q), spark.CompileOptions{QueryID: "id", CheckpointLocation: "/ck"})
			if err != nil {
				t.Fatal(err)
			}
			if got := plan.Steps[0].Join.Static.Then; !cmp.Equal(got, tc.want) {
				t.Errorf("the static side is cached in %#v, want %#v", got, tc.want)
			}
		})
	}
}
