package enginetest

import (
	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
)

// NexmarkQuery is one of Nexmark's queries as the spec's steps over the first nexmark source of
// its list (NexmarkLists), which the caller adds. Steps that join another table add that table's
// nexmark source themselves with only the table set: the caller sets how every nexmark source
// generates (NexmarkGenerate), or swaps each for files of its table.
type NexmarkQuery struct {
	Name  string
	Steps func(q *querytest.Query) *querytest.Query
}

// NexmarkLists are NexmarkQueries and NexmarkPersonQueries, each with the name and table of the
// first source its steps expect, for the benchmarks of the built-in engine (engine's
// BenchmarkNexmark) and of both runtimes (engine/spark's BenchmarkRuntimes).
var NexmarkLists = []struct {
	Source  string
	Table   v1.NexmarkTable
	Queries []NexmarkQuery
}{
	{"bids", v1.NexmarkBid, NexmarkQueries},
	{"persons", v1.NexmarkPerson, NexmarkPersonQueries},
}

// NexmarkGenerate sets how every nexmark source of s generates to gen's settings, keeping each
// source's table.
func NexmarkGenerate(s *v1.StreamingQuerySpec, gen v1.NexmarkSource) {
	for i := range s.Sources {
		if n := s.Sources[i].Nexmark; n != nil {
			table := n.Table
			*n = *gen.DeepCopy()
			n.Table = table
		}
	}
}

// NexmarkQueries are Nexmark's queries as the spec's steps over the bid table (source "bids":
// auction, bidder, price, channel, url, dateTime, extra).
var NexmarkQueries = []NexmarkQuery{
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
	// q4, average price per category (examples/queries/nexmark-q4.yaml): the auctions (a
	// source the steps add) joined with their bids within 10 s of opening (the bids source is
	// the join's right side), each auction's winning bid (the highest, grouped by the
	// auction's opening window so that all its bids land in one group), then the average
	// winning bid per category over those windows (an aggregate over an aggregate's windows).
	{"q4", func(q *querytest.Query) *querytest.Query {
		return q.NexmarkSource("auctions", v1.NexmarkSource{Table: v1.NexmarkAuction}).
			Watermark("dateTime", "0s").
			Join(v1.Join{Name: "auction-bids", Keys: querytest.Keys("id", "auction"),
				Stream: querytest.StreamSide("bids", "dateTime", "dateTime", "0s", "0s", "10s"),
				Select: []v1.JoinColumn{{Side: v1.SideLeft, Column: "id"}, {Side: v1.SideLeft, Column: "category"},
					{Side: v1.SideLeft, Column: "dateTime"}, {Side: v1.SideRight, Column: "price"}}}).
			Aggregate("winning-bids", []v1.GroupKey{{Column: "id"}, {Column: "category"}, querytest.Window("dateTime", "10s")},
				querytest.Agg("final", v1.AggMax, "price")).
			Aggregate("by-category", []v1.GroupKey{{Column: "category"}, querytest.Window(v1.ColumnWindowEnd, "10s")},
				querytest.Agg("avg_final", v1.AggAvg, "final"), querytest.Agg("auctions", v1.AggCount, "")).
			OutputMode(v1.OutputAppend)
	}},
	// q4's shape, a join then an aggregation: each bid joined with its auction (a bid within
	// 10 s of the auction's creation), then the average price per category per 10 s window:
	// q4 without its winning-bid step, every bid averaged.
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

// NexmarkPersonQueries are Nexmark's person–auction joins as the spec's steps over the person
// table (source "persons": id, name, emailAddress, creditCard, city, state, dateTime, extra),
// joined with the auction table (source "auctions", which the steps add). The examples
// examples/queries/nexmark-q3.yaml and nexmark-q8.yaml are the same queries.
var NexmarkPersonQueries = []NexmarkQuery{
	// q3, local item suggestion: the people of Oregon, Idaho and California with the auctions
	// of category 10 they sell (name, city, state, auction id). Nexmark's q3 is an unbounded
	// join, which keeps every person forever; here a stream join bounded in event time, so that
	// the watermarks evict both sides: an auction matches its seller when it was opened at most
	// 1 s before the seller registered or 5 s after. The generator's sellers are among the 1000
	// newest people (50,000 events: 5 s at the source's default 10,000 events a second, 0.5 s at
	// the benchmark's 100,000) or the next 10 (who register within 500 events), so at 10,000
	// events a second or more the bound drops no match of the unbounded join (engine's
	// TestNexmarkQ3Bound counts both); slower, it drops the auctions of sellers who registered
	// more than 5 s before.
	{"q3", func(q *querytest.Query) *querytest.Query {
		sellers := querytest.StreamSide("auctions", "dateTime", "dateTime", "0s", "1s", "5s")
		sellers.Transform = []v1.SideStep{{Filter: "category == 10"}}
		return q.NexmarkSource("auctions", v1.NexmarkSource{Table: v1.NexmarkAuction}).
			Watermark("dateTime", "0s").
			Filter("state == 'OR' || state == 'ID' || state == 'CA'").
			Join(v1.Join{Name: "local-items", Keys: querytest.Keys("id", "seller"), Stream: sellers,
				Select: []v1.JoinColumn{{Side: v1.SideLeft, Column: "name"}, {Side: v1.SideLeft, Column: "city"},
					{Side: v1.SideLeft, Column: "state"}, {Side: v1.SideRight, Column: "id"}}})
	}},
	// q8, monitor new users: the people who opened an auction in the 10 s tumbling window in
	// which they registered (id, name, the window's start). Nexmark's q8 joins each window's
	// distinct people with its distinct sellers; here both sides compute the window's start,
	// the join keys on it beside the id, and a leftSemi join yields each person once, at the
	// first match. Two rows of one window are less than 10 s apart, so the time bound of 10 s
	// either way drops no match; it lets the watermarks evict both sides 10 s on.
	{"q8", func(q *querytest.Query) *querytest.Query {
		const windowStart = "timestamp(int(dateTime) / 10 * 10)"
		sellers := querytest.StreamSide("auctions", "dateTime", "dateTime", "0s", "10s", "10s")
		sellers.Transform = []v1.SideStep{{Select: []v1.Projection{
			querytest.As("seller", "seller"), querytest.As("dateTime", "dateTime"), querytest.As("window_start", windowStart)}}}
		return q.NexmarkSource("auctions", v1.NexmarkSource{Table: v1.NexmarkAuction}).
			Select(querytest.As("id", "id"), querytest.As("name", "name"), querytest.As("dateTime", "dateTime"),
				querytest.As("window_start", windowStart)).
			Watermark("dateTime", "0s").
			Join(v1.Join{Name: "new-sellers", Type: v1.JoinLeftSemi, Keys: querytest.Keys("id", "seller", "window_start", "window_start"), Stream: sellers}).
			SelectColumns("id", "name", "window_start")
	}},
}
