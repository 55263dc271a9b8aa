package spark_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/delta"
	"github.com/lockstep-dev/lockstep/engine/kafka"
	"github.com/lockstep-dev/lockstep/engine/postgres"
	"github.com/lockstep-dev/lockstep/engine/sink"
	"github.com/lockstep-dev/lockstep/engine/source"
	"github.com/lockstep-dev/lockstep/engine/spark"
	"github.com/lockstep-dev/lockstep/engine/spark/sparktest"
	"github.com/lockstep-dev/lockstep/engine/webhook"
)

// The differential corpus: each query runs over the same input on the built-in engine and
// on Spark, and the outputs must be equal as multisets. Input arrives as files (two; three for
// the late rows and the sessions) taken one per batch (maxFilesPerTrigger 1), so both runtimes
// see the same batches. Differences found are in docs/spark.md.

var diffColumns = []v1.Column{
	{Name: "id", Type: v1.TypeString},
	{Name: "qty", Type: v1.TypeLong},
	{Name: "amount", Type: v1.TypeDouble},
	{Name: "ts", Type: v1.TypeTimestamp},
}

// diffInput is two files of orders: the second holds a row 17s late, older than the
// watermark (newest event time minus 5s) after the first batch, but not than the first
// batch's own: both runtimes judge it by the latter (the late-event watermark) and keep it.
var diffInput = []string{
	`{"id":"a1","qty":1,"amount":1.5,"ts":"2024-01-01T00:00:01Z"}
{"id":"b1","qty":2,"amount":2.25,"ts":"2024-01-01T00:00:04Z"}
{"id":"a2","qty":null,"amount":3.0,"ts":"2024-01-01T00:00:07Z"}
{"id":"a1","qty":4,"amount":0.5,"ts":"2024-01-01T00:00:12Z"}
{"id":"c1","qty":5,"amount":10.0,"ts":"2024-01-01T00:00:14Z"}
`,
	`{"id":"a3","qty":6,"amount":1.0,"ts":"2024-01-01T00:00:21Z"}
{"id":"late","qty":7,"amount":7.0,"ts":"2024-01-01T00:00:03Z"}
{"id":"b1","qty":8,"amount":8.5,"ts":"2024-01-01T00:00:26Z"}
{"id":"a4","qty":9,"amount":9.5,"ts":1704067233000}
`,
}

// diffLateInput is three files of orders for the late-row cases. The watermark (newest event
// time minus 5s) is none in the first batch, 00:09 in the second and 00:28 in the third; a batch
// judges rows late by the watermark of the batch before (Spark's late-event watermark) and
// evicts by its own. "between" (00:03, second batch) is behind its batch's watermark but not the
// one before: kept. In the third batch, "late" (00:02) is behind 00:09, but its window
// [00:00, 00:10) ends after it: kept there, dropped by a dedup; "later" (23:59:58) is dropped
// everywhere, its every window ended by 00:09.
var diffLateInput = []string{
	`{"id":"a1","qty":1,"amount":1.5,"ts":"2024-01-01T00:00:01Z"}
{"id":"b1","qty":2,"amount":2.25,"ts":"2024-01-01T00:00:04Z"}
{"id":"c1","qty":5,"amount":10.0,"ts":"2024-01-01T00:00:14Z"}
`,
	`{"id":"a3","qty":6,"amount":1.0,"ts":"2024-01-01T00:00:21Z"}
{"id":"between","qty":7,"amount":7.0,"ts":"2024-01-01T00:00:03Z"}
{"id":"a4","qty":9,"amount":9.5,"ts":"2024-01-01T00:00:33Z"}
`,
	`{"id":"b2","qty":3,"amount":4.0,"ts":"2024-01-01T00:00:40Z"}
{"id":"late","qty":11,"amount":11.0,"ts":"2024-01-01T00:00:02Z"}
{"id":"later","qty":13,"amount":13.0,"ts":"2023-12-31T23:59:58Z"}
`,
}

// diffPayments is the right side of the stream joins: a second source read one file per
// batch beside the orders, in event time near theirs. It holds a payment with a null key, one
// matching no order, one matching an order of the other batch, and one outside its order's
// time bound.
var diffPayments = []string{
	`{"pid":"a1","paid":1.5,"pts":"2024-01-01T00:00:02Z"}
{"pid":"b1","paid":2.0,"pts":"2024-01-01T00:00:30Z"}
{"pid":"zz","paid":9.0,"pts":"2024-01-01T00:00:05Z"}
{"pid":null,"paid":1.0,"pts":"2024-01-01T00:00:06Z"}
{"pid":"c1","paid":0.25,"pts":"2024-01-01T00:00:15Z"}
`,
	`{"pid":"c1","paid":10.0,"pts":"2024-01-01T00:00:16Z"}
{"pid":"a3","paid":1.0,"pts":"2024-01-01T00:00:22Z"}
{"pid":"a4","paid":9.5,"pts":"2024-01-01T00:00:40Z"}
`,
}

var diffPaymentColumns = []v1.Column{
	{Name: "pid", Type: v1.TypeString},
	{Name: "paid", Type: v1.TypeDouble},
	{Name: "pts", Type: v1.TypeTimestamp},
}

// diffCustomers is the static side of the stream–static joins: a key with two rows, a null
// key, a null and an epoch-milliseconds value.
var diffCustomers = `{"cid":"a1","name":"Ann","tier":1,"since":"2023-05-01T00:00:00Z"}
{"cid":"b1","name":"Bob","tier":null,"since":1690000000000}
{"cid":"a1","name":"Ann B","tier":2,"since":"2023-06-01T00:00:00Z"}
{"cid":null,"name":"nobody","tier":3,"since":"2023-01-01T00:00:00Z"}
{"cid":"c1","name":"Cy","tier":2,"since":null}
`

var diffCustomerColumns = []v1.Column{
	{Name: "cid", Type: v1.TypeString},
	{Name: "name", Type: v1.TypeString},
	{Name: "tier", Type: v1.TypeLong},
	{Name: "since", Type: v1.TypeTimestamp},
}

// diffSessions is the orders of the session cases, three files of users' events: sessions of
// one user 5s apart, sessions that touch, and sessions that merge across batches — extended by a
// later batch's row, and bridged by one. No row is behind the watermark of its batch (00:15 in
// the second, 00:35 in the third).
var diffSessions = []string{
	`{"id":"u1","qty":1,"amount":1.0,"ts":"2024-01-01T00:00:00Z"}
{"id":"u1","qty":2,"amount":2.0,"ts":"2024-01-01T00:00:03Z"}
{"id":"u1","qty":3,"amount":0.5,"ts":"2024-01-01T00:00:10Z"}
{"id":"u2","qty":4,"amount":4.0,"ts":"2024-01-01T00:00:01Z"}
{"id":"u2","qty":null,"amount":2.5,"ts":"2024-01-01T00:00:20Z"}
`,
	`{"id":"u2","qty":6,"amount":1.5,"ts":"2024-01-01T00:00:23Z"}
{"id":"u1","qty":7,"amount":7.0,"ts":"2024-01-01T00:00:18Z"}
{"id":"u1","qty":8,"amount":3.0,"ts":"2024-01-01T00:00:22Z"}
{"id":"u3","qty":9,"amount":9.0,"ts":"2024-01-01T00:00:30Z"}
{"id":"u4","qty":10,"amount":1.0,"ts":"2024-01-01T00:00:40Z"}
`,
	`{"id":"u4","qty":11,"amount":2.0,"ts":"2024-01-01T00:00:48Z"}
{"id":"u4","qty":12,"amount":3.0,"ts":"2024-01-01T00:00:44Z"}
{"id":"u5","qty":13,"amount":4.0,"ts":"2024-01-01T00:01:00Z"}
`,
}

// diffSessionsLate and diffSessionsTouch add a row to the third file of diffSessions, behind
// its watermark (00:35). Late: u1 at 00:26, whose own session [00:26, 00:31) ended before the
// watermark but not before the previous batch's (00:15): both runtimes merge it into u1's
// session [00:18, 00:27) before the watermark closes that. Touch: u3 at 00:31, whose own
// session [00:31, 00:36) is not behind the watermark, but touches u3's session [00:30, 00:35),
// which is: both merge the two (a session takes the batch's rows before the watermark closes it).
var (
	diffSessionsLate  = []string{diffSessions[0], diffSessions[1], diffSessions[2] + `{"id":"u1","qty":20,"amount":1.0,"ts":"2024-01-01T00:00:26Z"}` + "\n"}
	diffSessionsTouch = []string{diffSessions[0], diffSessions[1], diffSessions[2] + `{"id":"u3","qty":21,"amount":1.0,"ts":"2024-01-01T00:00:31Z"}` + "\n"}
)

type diffCase struct {
	name  string
	query func(in, out string) *qt.Query
	// delta: the sink is delta (compare the table), run by the runner as `lockstep run` runs it;
	// else files json (compare the manifest's rows), run in the one JVM the package's tests share
	// (the oracle's, which writes a files sink as the runner does), so that a case costs no JVM start.
	delta bool
	// input, when set, writes the case's own input into in instead of the shared orders.
	input func(t *testing.T, in string)
}

func diffCases() []diffCase {
	// Two state partitions (Spark's shuffle partitions), not the default 8: the keys still
	// spread over more than one, and a stateful batch on Spark runs a quarter of the tasks and
	// state stores (a stream join opens four a partition).
	base := func(name, in string) *qt.Query {
		return qt.Make(name, "diff").FilesSource("orders", in, v1.FormatJSON, diffColumns...).
			EditSource("orders", func(s *v1.Source) { s.Files.MaxFilesPerTrigger = ptr[int32](1) }).StatePartitions(2).AvailableNow()
	}
	window := []v1.GroupKey{{Window: &v1.Window{Column: "ts", Duration: "10s"}}}
	aggs := []v1.Aggregation{{Name: "n", Function: v1.AggCount}, {Name: "total", Function: v1.AggSum, Column: "qty"}, {Name: "top", Function: v1.AggMax, Column: "amount"}}
	sliding := []v1.GroupKey{qt.SlidingWindow("ts", "10s", "5s")}
	slidingAggs := []v1.Aggregation{qt.Agg("n", v1.AggCount, ""), qt.Agg("total", v1.AggSum, "qty"), qt.Agg("mean", v1.AggAvg, "amount"), qt.Agg("least", v1.AggMin, "amount")}
	// The join cases read the payments and customers folders beside in.
	payments := func(q *qt.Query, in string) *qt.Query {
		return q.FilesSource("payments", filepath.Join(filepath.Dir(in), "payments"), v1.FormatJSON, diffPaymentColumns...).
			EditSource("payments", func(s *v1.Source) { s.Files.MaxFilesPerTrigger = ptr[int32](1) })
	}
	customers := func(in string) *v1.StaticSide {
		return qt.StaticFiles(filepath.Join(filepath.Dir(in), "customers"), v1.FormatJSON, diffCustomerColumns...)
	}
	streamJoin := func(name string, typ v1.JoinType) diffCase {
		return diffCase{name: name, query: func(in, out string) *qt.Query {
			side := qt.StreamSide("payments", "ts", "pts", "5s", "0s", "5s")
			side.Transform = []v1.SideStep{{Filter: "paid > 0.5"}, {Select: []v1.Projection{qt.As("pid", "pid"), qt.As("paid2", "paid * 2.0"), qt.As("pts", "pts")}}}
			j := v1.Join{Type: typ, Keys: qt.Keys("id", "pid"), Stream: side, RightPrefix: "p_"}
			if typ == v1.JoinLeftSemi {
				j.RightPrefix = ""
			}
			return payments(base(name, in), in).Watermark("ts", "5s").Join(j).FilesSink(out, v1.FormatJSON)
		}}
	}
	return []diffCase{
		{name: "join-static-inner", query: func(in, out string) *qt.Query {
			return base("join-static-inner", in).Filter("amount > 1.0").Join(v1.Join{Keys: qt.Keys("id", "cid"), Static: customers(in),
				Select: []v1.JoinColumn{{Side: v1.SideLeft, Column: "id"}, {Side: v1.SideLeft, Column: "qty"}, {Side: v1.SideRight, Column: "name", Name: "customer"},
					{Side: v1.SideRight, Column: "tier"}, {Side: v1.SideRight, Column: "since"}, {Side: v1.SideLeft, Column: "ts"}}}).FilesSink(out, v1.FormatJSON)
		}},
		{name: "join-static-left-outer", query: func(in, out string) *qt.Query {
			return base("join-static-left-outer", in).Join(v1.Join{Type: v1.JoinLeftOuter, Keys: qt.Keys("id", "cid"), Static: customers(in), RightPrefix: "c_"}).FilesSink(out, v1.FormatJSON)
		}},
		streamJoin("join-stream-inner", v1.JoinInner),
		streamJoin("join-stream-left-outer", v1.JoinLeftOuter),
		streamJoin("join-stream-right-outer", v1.JoinRightOuter),
		streamJoin("join-stream-full-outer", v1.JoinFullOuter),
		streamJoin("join-stream-left-semi", v1.JoinLeftSemi),
		withInput(streamJoin("join-stream-left-outer-null-time", v1.JoinLeftOuter), writeNullTimeInput),
		withInput(streamJoin("join-stream-full-outer-null-time", v1.JoinFullOuter), writeNullTimeInput),
		{name: "join-stream-then-aggregate", query: func(in, out string) *qt.Query {
			return payments(base("join-stream-then-aggregate", in), in).Watermark("ts", "5s").
				Join(v1.Join{Keys: qt.Keys("id", "pid"), Stream: qt.StreamSide("payments", "ts", "pts", "5s", "0s", "5s"), RightPrefix: "p_"}).
				Aggregate("", window, v1.Aggregation{Name: "n", Function: v1.AggCount}, v1.Aggregation{Name: "paid", Function: v1.AggSum, Column: "p_paid"}).
				OutputMode(v1.OutputAppend).FilesSink(out, v1.FormatJSON)
		}},
		{name: "join-stream-twice", query: func(in, out string) *qt.Query {
			// Two stream joins in a row: the orders with their payments (inner), then with a
			// second source reading the same payments (left outer, a narrower time bound). The
			// a3 order's outer row is evicted in the last batch, whose watermark is exactly its
			// bound: neither runtime evicts it there (Spark's state watermark for an inclusive
			// bound is 1ms below it).
			q := payments(base("join-stream-twice", in), in).
				FilesSource("refunds", filepath.Join(filepath.Dir(in), "payments"), v1.FormatJSON, diffPaymentColumns...).
				EditSource("refunds", func(s *v1.Source) { s.Files.MaxFilesPerTrigger = ptr[int32](1) }).
				Watermark("ts", "5s").
				Join(v1.Join{Name: "paid", Keys: qt.Keys("id", "pid"), Stream: qt.StreamSide("payments", "ts", "pts", "5s", "0s", "5s"), RightPrefix: "p_"})
			refunds := qt.StreamSide("refunds", "ts", "pts", "5s", "0s", "2s")
			refunds.Transform = []v1.SideStep{{Filter: "paid > 1.0"}}
			return q.Join(v1.Join{Name: "refunded", Type: v1.JoinLeftOuter, Keys: qt.Keys("id", "pid"), Stream: refunds, RightPrefix: "r_"}).
				FilesSink(out, v1.FormatJSON)
		}},
		{name: "filter-select", query: func(in, out string) *qt.Query {
			return base("filter-select", in).Filter("qty > 1 && id.startsWith('a') || amount >= 8.0").
				Select(v1.Projection{Name: "id", Expr: "id.upperAscii()"}, v1.Projection{Name: "qty2", Expr: "qty * 2 + 1"},
					v1.Projection{Name: "half", Expr: "amount * 0.5"}, v1.Projection{Name: "hour", Expr: "ts.getSeconds()"}, v1.Projection{Name: "ts", Expr: "ts"}).
				FilesSink(out, v1.FormatJSON)
		}},
		{name: "double-division-and-intervals", query: func(in, out string) *qt.Query {
			// Issue 38.6b: a double division (a zero divisor in the filter: 1.5 / 0.0 is +Infinity,
			// kept), and a timestamp plus and minus a duration.
			return base("double-division-and-intervals", in).Filter("amount / (amount - 1.5) >= 0.0 || amount / (amount - 3.0) < -1.0").
				Select(qt.As("id", "id"), qt.As("per", "amount / double(qty)"), qt.As("due", "ts + duration('90m')"), qt.As("sent", "ts - duration('1.5s')")).
				FilesSink(out, v1.FormatJSON)
		}},
		{name: "window-append", query: func(in, out string) *qt.Query {
			return base("window-append", in).Watermark("ts", "5s").Aggregate("", window, aggs...).OutputMode(v1.OutputAppend).FilesSink(out, v1.FormatJSON)
		}},
		{name: "window-update", query: func(in, out string) *qt.Query {
			return base("window-update", in).Watermark("ts", "5s").Aggregate("", window, aggs...).OutputMode(v1.OutputUpdate).FilesSink(out, v1.FormatJSON)
		}},
		{name: "window-update-delta", delta: true, query: func(in, out string) *qt.Query {
			return base("window-update-delta", in).Watermark("ts", "5s").Aggregate("", window, aggs...).OutputMode(v1.OutputUpdate).DeltaSink(out, v1.ColumnWindowStart)
		}},
		{name: "dedup", query: func(in, out string) *qt.Query {
			return base("dedup", in).DropDuplicates("", "id").SelectColumns("id").FilesSink(out, v1.FormatJSON)
		}},
		{name: "window-sliding-append", query: func(in, out string) *qt.Query {
			return base("window-sliding-append", in).Watermark("ts", "5s").Aggregate("", sliding, slidingAggs...).OutputMode(v1.OutputAppend).FilesSink(out, v1.FormatJSON)
		}},
		{name: "window-sliding-update", query: func(in, out string) *qt.Query {
			return base("window-sliding-update", in).Watermark("ts", "5s").Aggregate("", sliding, slidingAggs...).OutputMode(v1.OutputUpdate).FilesSink(out, v1.FormatJSON)
		}},
		{name: "keyed-update", query: func(in, out string) *qt.Query {
			return base("keyed-update", in).Aggregate("", []v1.GroupKey{qt.Key("id")}, slidingAggs...).OutputMode(v1.OutputUpdate).FilesSink(out, v1.FormatJSON)
		}},
		{name: "global-update", query: func(in, out string) *qt.Query {
			return base("global-update", in).Aggregate("", nil, aggs...).OutputMode(v1.OutputUpdate).FilesSink(out, v1.FormatJSON)
		}},
		{name: "dedup-watermark", query: func(in, out string) *qt.Query {
			return base("dedup-watermark", in).Watermark("ts", "5s").DropDuplicates("", "id", "ts").SelectColumns("id", "ts").FilesSink(out, v1.FormatJSON)
		}},
		{name: "late-window-append", input: filesInput(diffLateInput), query: func(in, out string) *qt.Query {
			return base("late-window-append", in).Watermark("ts", "5s").Aggregate("", window, aggs...).OutputMode(v1.OutputAppend).FilesSink(out, v1.FormatJSON)
		}},
		{name: "late-window-sliding-update", input: filesInput(diffLateInput), query: func(in, out string) *qt.Query {
			return base("late-window-sliding-update", in).Watermark("ts", "5s").Aggregate("", sliding, slidingAggs...).OutputMode(v1.OutputUpdate).FilesSink(out, v1.FormatJSON)
		}},
		{name: "late-dedup-watermark", input: filesInput(diffLateInput), query: func(in, out string) *qt.Query {
			return base("late-dedup-watermark", in).Watermark("ts", "5s").DropDuplicates("", "id", "ts").SelectColumns("id", "ts").FilesSink(out, v1.FormatJSON)
		}},
		{name: "union-then-filter", query: func(in, out string) *qt.Query {
			return base("union-then-filter", in).FilesSource("again", in, v1.FormatJSON, diffColumns...).
				EditSource("again", func(s *v1.Source) { s.Files.MaxFilesPerTrigger = ptr[int32](1) }).
				Filter("qty >= 2").SelectColumns("id", "qty").FilesSink(out, v1.FormatJSON)
		}},
		{name: "select-then-window", query: func(in, out string) *qt.Query {
			return base("select-then-window", in).Select(qt.As("id", "id"), qt.As("q2", "qty * 2"), qt.As("ts", "ts")).
				Watermark("ts", "5s").Aggregate("", window, qt.Agg("n", v1.AggCount, ""), qt.Agg("q2", v1.AggSum, "q2")).
				OutputMode(v1.OutputAppend).FilesSink(out, v1.FormatJSON)
		}},
		{name: "watermark-select-then-window", query: func(in, out string) *qt.Query {
			// A select between the watermark and an append-mode window (issue 38.5): plain copies,
			// and the event-time column renamed, which stays the event time.
			return base("watermark-select-then-window", in).Watermark("ts", "5s").
				Select(qt.As("id", "id"), qt.As("qty", "qty"), qt.As("event_time", "ts")).
				Aggregate("", []v1.GroupKey{qt.Window("event_time", "10s")}, qt.Agg("n", v1.AggCount, ""), qt.Agg("total", v1.AggSum, "qty")).
				OutputMode(v1.OutputAppend).FilesSink(out, v1.FormatJSON)
		}},
		{name: "watermark-filter-then-window", query: func(in, out string) *qt.Query {
			// A filter right after the watermark (issue 38.6c) drops the newest row (a4, 00:33):
			// it still counts for the watermark (00:28 after the second batch), which closes the
			// window [00:20, 00:25) at the end of the input; pushed below the watermark, as
			// Spark's optimizer would, it would not (00:21).
			return base("watermark-filter-then-window", in).Watermark("ts", "5s").Filter("qty != 9").
				Aggregate("", []v1.GroupKey{qt.Window("ts", "5s")}, qt.Agg("n", v1.AggCount, ""), qt.Agg("total", v1.AggSum, "qty")).
				OutputMode(v1.OutputAppend).FilesSink(out, v1.FormatJSON)
		}},
		{name: "late-watermark-select-then-dedup", input: filesInput(diffLateInput), query: func(in, out string) *qt.Query {
			// The same renamed event time under a dedup: the late rows are dropped by it, and a second
			// copy of the event-time column is data, not a second event time.
			return base("late-watermark-select-then-dedup", in).Watermark("ts", "5s").
				Select(qt.As("id", "id"), qt.As("event_time", "ts"), qt.As("seen", "ts")).
				DropDuplicates("", "id", "event_time").SelectColumns("id", "seen").FilesSink(out, v1.FormatJSON)
		}},
		{name: "window-then-window", input: filesInput(diffLateInput), query: func(in, out string) *qt.Query {
			// Per id per 5s, then the largest total and the count of those windows per 20s:
			// a window ending at 00:20 falls in [00:00, 00:20), at its last instant.
			return base("window-then-window", in).Watermark("ts", "5s").
				Aggregate("per-id", []v1.GroupKey{qt.Key("id"), qt.Window("ts", "5s")}, qt.Agg("n", v1.AggCount, ""), qt.Agg("total", v1.AggSum, "qty")).
				Filter("n > 0").
				Aggregate("best", []v1.GroupKey{qt.Window(v1.ColumnWindowEnd, "20s")}, qt.Agg("top", v1.AggMax, "total"), qt.Agg("windows", v1.AggCount, "")).
				OutputMode(v1.OutputAppend).FilesSink(out, v1.FormatJSON)
		}},
		{name: "sliding-select-then-window", query: func(in, out string) *qt.Query {
			// Sliding windows, a select that renames their end, then tumbling windows of them.
			return base("sliding-select-then-window", in).Watermark("ts", "5s").Aggregate("", sliding, slidingAggs...).
				Select(qt.As("ended", v1.ColumnWindowEnd), qt.As("mean", "mean"), qt.As("n", "n")).
				Aggregate("", []v1.GroupKey{qt.Window("ended", "10s")}, qt.Agg("windows", v1.AggCount, ""), qt.Agg("rows", v1.AggSum, "n"), qt.Agg("avg_mean", v1.AggAvg, "mean")).
				OutputMode(v1.OutputAppend).FilesSink(out, v1.FormatJSON)
		}},
		{name: "session-then-window", input: filesInput(diffSessions), query: func(in, out string) *qt.Query {
			// Each id's sessions, then how many sessions ended in each 10s.
			return base("session-then-window", in).Watermark("ts", "5s").Aggregate("", []v1.GroupKey{qt.Key("id"), qt.Session("ts", "5s")}, slidingAggs...).
				Aggregate("", []v1.GroupKey{qt.Window(v1.ColumnWindowEnd, "10s")}, qt.Agg("sessions", v1.AggCount, ""), qt.Agg("rows", v1.AggSum, "n")).
				OutputMode(v1.OutputAppend).FilesSink(out, v1.FormatJSON)
		}},
		{name: "session-append", input: filesInput(diffSessions), query: func(in, out string) *qt.Query {
			return base("session-append", in).Watermark("ts", "5s").Aggregate("", []v1.GroupKey{qt.Key("id"), qt.Session("ts", "5s")}, slidingAggs...).
				OutputMode(v1.OutputAppend).FilesSink(out, v1.FormatJSON)
		}},
		{name: "session-gap-expr", input: filesInput(diffSessions), query: func(in, out string) *qt.Query {
			// u2's row with a null qty has a null gap: no session holds it.
			gap := v1.GroupKey{Session: &v1.SessionWindow{Column: "ts", GapExpr: "qty > 8 ? duration('10s') : duration('4s')"}}
			return base("session-gap-expr", in).Watermark("ts", "5s").Aggregate("", []v1.GroupKey{gap, qt.Key("id")}, slidingAggs...).
				OutputMode(v1.OutputAppend).FilesSink(out, v1.FormatJSON)
		}},
		{name: "session-late", input: filesInput(diffSessionsLate), query: func(in, out string) *qt.Query {
			return base("session-late", in).Watermark("ts", "5s").Aggregate("", []v1.GroupKey{qt.Key("id"), qt.Session("ts", "5s")}, slidingAggs...).
				OutputMode(v1.OutputAppend).FilesSink(out, v1.FormatJSON)
		}},
		{name: "session-touch", input: filesInput(diffSessionsTouch), query: func(in, out string) *qt.Query {
			return base("session-touch", in).Watermark("ts", "5s").Aggregate("", []v1.GroupKey{qt.Key("id"), qt.Session("ts", "5s")}, slidingAggs...).
				OutputMode(v1.OutputAppend).FilesSink(out, v1.FormatJSON)
		}},
		{name: "cel-properties", input: writeRandomRows, query: func(in, out string) *qt.Query {
			return qt.Make("cel-properties", "diff").FilesSource("rows", in, v1.FormatJSON, celColumns...).
				Select(celProjections()...).FilesSink(out, v1.FormatJSON).AvailableNow()
		}},
		{name: "complete-delta", delta: true, query: func(in, out string) *qt.Query {
			return base("complete-delta", in).Aggregate("", []v1.GroupKey{{Column: "id"}}, v1.Aggregation{Name: "n", Function: v1.AggCount}).
				OutputMode(v1.OutputComplete).DeltaSink(out, "id")
		}},
	}
}

func ptr[T any](v T) *T { return &v }

// withInput gives tc its own input.
func withInput(tc diffCase, input func(t *testing.T, in string)) diffCase {
	tc.input = input
	return tc
}

// diffNullTimeOrders and diffNullTimePayments are the stream joins' input with rows whose
// event time is null, on both sides and in both batches, one with a key that has matches: they
// match nothing, and an outer side writes them at once with nulls (docs/state.md), Spark as the
// built-in engine.
var (
	diffNullTimeOrders = []string{
		`{"id":"a1","qty":1,"amount":1.5,"ts":"2024-01-01T00:00:01Z"}
{"id":"a1","qty":2,"amount":2.0,"ts":null}
{"id":"c1","qty":5,"amount":10.0,"ts":"2024-01-01T00:00:14Z"}
`,
		`{"id":"a3","qty":6,"amount":1.0,"ts":"2024-01-01T00:00:21Z"}
{"id":"n2","qty":7,"amount":7.0}
`,
	}
	diffNullTimePayments = []string{
		`{"pid":"a1","paid":1.5,"pts":"2024-01-01T00:00:02Z"}
{"pid":"c1","paid":3.0,"pts":null}
{"pid":"c1","paid":0.75,"pts":"2024-01-01T00:00:15Z"}
`,
		`{"pid":"a3","paid":1.0,"pts":"2024-01-01T00:00:22Z"}
{"pid":"q9","paid":2.0}
`,
	}
)

// writeNullTimeInput writes diffNullTimeOrders into in and diffNullTimePayments beside it.
func writeNullTimeInput(t *testing.T, in string) {
	t.Helper()
	writeFiles(t, in, diffNullTimeOrders)
	writeFiles(t, filepath.Join(filepath.Dir(in), "payments"), diffNullTimePayments)
}

func TestDifferential(t *testing.T) {
	t.Parallel()
	runner := sparktest.Runner(t)
	ctx := context.Background()
	// Three at a time: each runs on the built-in engine, then in the oracle's JVM.
	casesAtOnce(t, 3, diffCases(), func(tc diffCase) string { return tc.name }, func(t *testing.T, _ int, tc diffCase) {
		dir := t.TempDir()
		in := filepath.Join(dir, "in")
		if tc.input != nil {
			tc.input(t, in)
		} else {
			writeInput(t, in)
		}
		builtin := runBuiltin(t, ctx, tc.query(in, filepath.Join(dir, "out-lockstep")).Checkpoint(filepath.Join(dir, "ck-lockstep")).Obj())
		want := readOutput(t, ctx, filepath.Join(dir, "out-lockstep"), tc.delta)
		var sparkSum any
		if !tc.delta {
			res := theOracle(t).run(t, tc.query(in, filepath.Join(dir, "out-spark")).Spec(), filepath.Join(dir, "ck-spark"))
			if !res.Ran {
				t.Fatalf("run on spark (shared JVM): %s %s", res.ErrorClass, res.Message)
			}
			sparkSum = fmt.Sprintf("%d rows", len(res.Rows))
		} else {
			sparkSum = runSpark(t, ctx, runner, tc.query(in, filepath.Join(dir, "out-spark")).Checkpoint(filepath.Join(dir, "ck-spark")).Obj())
		}
		have := readOutput(t, ctx, filepath.Join(dir, "out-spark"), tc.delta)
		if len(want) == 0 {
			t.Fatalf("the built-in engine wrote no rows: the case compares nothing")
		}
		slices.Sort(want)
		t.Logf("%d rows on both runtimes, e.g. %s", len(want), want[0])
		if diff := cmp.Diff(want, have); diff != "" {
			t.Errorf("output on spark differs from the built-in engine's (-lockstep +spark):\n%s\nsummaries: lockstep %+v, spark %+v", diff, builtin, sparkSum)
		}
	})
}

func writeInput(t *testing.T, dir string) {
	t.Helper()
	writeFiles(t, dir, diffInput)
	writeFiles(t, filepath.Join(filepath.Dir(dir), "payments"), diffPayments)
	writeFiles(t, filepath.Join(filepath.Dir(dir), "customers"), []string{diffCustomers})
}

// filesInput writes files as a case's own input.
func filesInput(files []string) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) { writeFiles(t, dir, files) }
}

// writeFiles writes files into dir, one a file, each modified a minute after the one before
// (oldest first on both runtimes).
func writeFiles(t testing.TB, dir string, files []string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-time.Hour)
	for i, data := range files {
		p := filepath.Join(dir, fmt.Sprintf("part-%d.json", i))
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		mt := base.Add(time.Duration(i) * time.Minute)
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
}

func runBuiltin(t *testing.T, ctx context.Context, obj *v1.StreamingQuery, opts ...engine.Option) engine.Summary {
	t.Helper()
	reg := engine.NewRegistry()
	for _, err := range []error{
		reg.RegisterSource(v1.SourceFiles, source.FilesSpec(), source.NewFiles),
		reg.RegisterSink(v1.SinkFiles, sink.FilesSpec(), sink.NewFiles),
		reg.RegisterSink(v1.SinkDelta, delta.SinkSpec(), delta.NewSink),
		reg.RegisterSource(v1.SourceDelta, delta.SourceSpec(), delta.NewSource),
		reg.RegisterStatic(v1.StaticFilesKind, source.StaticFilesSpec(), source.NewStaticFiles),
		reg.RegisterStatic(v1.StaticDeltaKind, delta.StaticSpec(), delta.NewStatic),
		reg.RegisterStatic(v1.StaticPostgresKind, postgres.StaticSpec(), postgres.NewStatic),
		reg.RegisterSink(v1.SinkWebhook, webhook.SinkSpec(), webhook.NewSink),
		reg.RegisterSource(v1.SourceKafka, kafka.SourceSpec(), kafka.NewSource),
		reg.RegisterSink(v1.SinkKafka, kafka.SinkSpec(), kafka.NewSink),
		reg.RegisterSink(v1.SinkPostgres, postgres.SinkSpec(), postgres.NewSink),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	q, err := engine.New(obj, reg, append([]engine.Option{engine.WithCheckpoint(obj.Spec.Checkpoint.Location)}, opts...)...)
	if err != nil {
		t.Fatalf("engine.New: %v", err)
	}
	sum, err := q.Run(ctx)
	if err != nil {
		t.Fatalf("run on the built-in engine: %v", err)
	}
	return sum
}

func runSpark(t *testing.T, ctx context.Context, runner spark.Runner, obj *v1.StreamingQuery) engine.Summary {
	t.Helper()
	q, err := spark.New(obj, spark.Options{Runner: runner, LogPath: filepath.Join(t.TempDir(), "spark.log")})
	if err != nil {
		t.Fatalf("spark.New: %v", err)
	}
	sum, err := q.Run(ctx)
	if err != nil {
		log, _ := os.ReadFile(q.LogPath())
		t.Fatalf("run on spark: %v\nSpark's log, last lines:\n%s", err, tail(string(log), 40))
	}
	return sum
}

// compareRuntimes runs query("lockstep") on the built-in engine and query("spark") on Spark,
// each into its own files or Delta sink (opts reach an s3:// one), and fails t when what they
// wrote differs (a multiset), or when the built-in engine wrote nothing. what names the case.
func compareRuntimes(t *testing.T, ctx context.Context, runner spark.Runner, what string, query func(name string) *v1.StreamingQuery, opts ...s3.Option) {
	t.Helper()
	compareRuntimesWith(t, ctx, func(obj *v1.StreamingQuery) { runSpark(t, ctx, runner, obj) }, what, query, opts...)
}

// compareRuntimesWith is compareRuntimes with Spark run by onSpark (such as a shared oracle JVM's
// run, which saves a JVM's start a query).
func compareRuntimesWith(t *testing.T, ctx context.Context, onSpark func(*v1.StreamingQuery), what string, query func(name string) *v1.StreamingQuery, opts ...s3.Option) {
	t.Helper()
	read := func(obj *v1.StreamingQuery) []string {
		if d := obj.Spec.Sink.Delta; d != nil {
			return readOutput(t, ctx, d.Path, true, opts...)
		}
		return readOutput(t, ctx, obj.Spec.Sink.Files.Path, false, opts...)
	}
	builtin, sparkQuery := query("lockstep"), query("spark")
	runBuiltin(t, ctx, builtin)
	onSpark(sparkQuery)
	want, got := read(builtin), read(sparkQuery)
	if len(want) == 0 {
		t.Fatalf("%s: the built-in engine wrote no rows", what)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s: spark differs from the built-in engine (-lockstep +spark):\n%s", what, diff)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// readOutput returns the output's rows (opts open an s3:// dir) as sorted strings (a multiset), each value written
// by type: timestamps in UTC RFC 3339, doubles to 12 significant digits.
func readOutput(t *testing.T, ctx context.Context, dir string, isDelta bool, opts ...s3.Option) []string {
	t.Helper()
	store, err := s3.OpenFolder(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	var cols v1.Columns
	var rows []engine.Row
	if isDelta {
		tbl := delta.Open(store)
		snap, err := tbl.Snapshot(ctx)
		if err != nil {
			t.Fatalf("read delta table %s: %v", dir, err)
		}
		c, rs, err := tbl.ReadAll(ctx, snap)
		if err != nil {
			t.Fatalf("read delta table %s: %v", dir, err)
		}
		cols = c
		for _, r := range rs {
			rows = append(rows, engine.Row(r))
		}
	} else if cols, rows, err = sink.ReadRows(ctx, store); err != nil {
		t.Fatalf("read files output %s: %v", dir, err)
	}
	return formatRows(cols, rows)
}

// formatRows returns rows as sorted strings (a multiset), each value named by its column of
// cols and written by type (formatValue).
func formatRows(cols v1.Columns, rows []engine.Row) []string {
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		var sb strings.Builder
		for i, v := range r {
			if i > 0 {
				sb.WriteString(" ")
			}
			name := fmt.Sprint(i)
			if i < len(cols) {
				name = cols[i].Name
			}
			sb.WriteString(name + "=" + formatValue(v))
		}
		out = append(out, sb.String())
	}
	slices.Sort(out)
	return out
}

func formatValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case float64:
		return fmt.Sprintf("%.12g", x)
	}
	return fmt.Sprint(v)
}
