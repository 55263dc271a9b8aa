package enginetest

import (
	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
)

// NexmarkQueries are Nexmark's queries as the spec's steps over the bid table (auction,
// bidder, price, channel, url, dateTime, extra), for the benchmarks of the built-in engine
// (engine's BenchmarkNexmark) and of both runtimes (engine/spark's BenchmarkRuntimes).
var NexmarkQueries = []struct {
	Name  string
	Steps func(q *querytest.Query) *querytest.Query
}{
	// q0: pass-through.
	{"q0", func(q *querytest.Query) *querytest.Query { return q }},
	// q1: currency conversion, SELECT auction, bidder, 0.908 * price, dateTime, extra.
	{"q1", func(q *querytest.Query) *querytest.Query {
		return q.Select(querytest.As("auction", "auction"), querytest.As("bidder", "bidder"),
			querytest.As("price", "0.908 * double(price)"), querytest.As("dateTime", "dateTime"), querytest.As("extra", "extra"))
	}},
	// q2: selection, SELECT auction, price WHERE auction % 123 = 0.
	{"q2", func(q *querytest.Query) *querytest.Query {
		return q.Filter("auction % 123 == 0").Select(querytest.As("auction", "auction"), querytest.As("price", "price"))
	}},
	// q5-style hot items, the join-free part: bids per auction in sliding
	// windows of 10 s every 2 s, emitted when the watermark closes them.
	{"q5", func(q *querytest.Query) *querytest.Query {
		return q.Watermark("dateTime", "0s").
			Aggregate("hot", []v1.GroupKey{querytest.SlidingWindow("dateTime", "10s", "2s"), {Column: "auction"}},
				querytest.Agg("num", v1.AggCount, "")).OutputMode(v1.OutputAppend)
	}},
	// q7-style highest bid: the maximum price per 10 s tumbling window.
	{"q7", func(q *querytest.Query) *querytest.Query {
		return q.Watermark("dateTime", "0s").
			Aggregate("highest", []v1.GroupKey{querytest.Window("dateTime", "10s")},
				querytest.Agg("price", v1.AggMax, "price")).OutputMode(v1.OutputAppend)
	}},
	// q11, user sessions: bids per bidder per session (a gap of 10 s ends one), emitted when
	// the watermark closes the session.
	{"q11", func(q *querytest.Query) *querytest.Query {
		return q.Watermark("dateTime", "0s").
			Aggregate("sessions", []v1.GroupKey{{Column: "bidder"}, querytest.Session("dateTime", "10s")},
				querytest.Agg("bids", v1.AggCount, "")).OutputMode(v1.OutputAppend)
	}},
	// q4's shape, a join then an aggregation: each bid joined with its auction (a bid within
	// 10 s of the auction's creation), then the average price per category per 10 s window.
	// Nexmark's q4 takes each auction's winning bid first (an aggregation before the join's
	// average), which a query here cannot chain yet; this is the join-then-aggregate half.
	{"q4-shape", func(q *querytest.Query) *querytest.Query {
		return q.NexmarkSource("auctions", v1.NexmarkSource{Table: v1.NexmarkAuction}).
			Watermark("dateTime", "0s").
			Join(v1.Join{Name: "bid-auction", Keys: querytest.Keys("auction", "id"),
				Stream: querytest.StreamSide("auctions", "dateTime", "dateTime", "0s", "10s", "0s"),
				Select: []v1.JoinColumn{{Side: v1.SideLeft, Column: "price"}, {Side: v1.SideLeft, Column: "dateTime"}, {Side: v1.SideRight, Column: "category"}}}).
			Aggregate("by-category", []v1.GroupKey{{Column: "category"}, querytest.Window("dateTime", "10s")},
				querytest.Agg("avg_price", v1.AggAvg, "price")).OutputMode(v1.OutputAppend)
	}},
}
