package source_test

import (
	"context"
	"encoding/json"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/source"
)

var nexmarkT0 = time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)

func newNexmark(t *testing.T, n v1.NexmarkSource) engine.Source {
	t.Helper()
	spec := &v1.Source{Name: "events", Nexmark: &n}
	spec.Default()
	s, err := source.NewNexmark(context.Background(), spec, engine.SourceEnv{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// readAll plans and reads batches until the source has no more, returning
// every batch's offsets and rows.
func readAll(t *testing.T, s engine.Source, batches int) (offsets []engine.Offset, rows [][]engine.Row) {
	t.Helper()
	ctx := context.Background()
	var start engine.Offset
	for b := range batches {
		p, err := s.Plan(ctx, engine.PlanRequest{Batch: int64(b), Start: start, Time: nexmarkT0, Limit: true})
		if err != nil {
			t.Fatal(err)
		}
		if !p.HasData {
			break
		}
		res, err := s.Read(ctx, engine.ReadRequest{Batch: int64(b), Start: start, End: p.End})
		if err != nil {
			t.Fatal(err)
		}
		offsets = append(offsets, start, p.End)
		rows = append(rows, res.Rows)
		start = p.End
	}
	return offsets, rows
}

func TestNexmarkIsDeterministic(t *testing.T) {
	for _, table := range []v1.NexmarkTable{v1.NexmarkBid, v1.NexmarkAuction, v1.NexmarkPerson} {
		t.Run(string(table), func(t *testing.T) {
			spec := v1.NexmarkSource{Table: table, AsFastAsPossible: true, MaxEventsPerTrigger: 1000, NumEvents: ptr(int64(5000)), Seed: 7}
			_, first := readAll(t, newNexmark(t, spec), 10)
			_, again := readAll(t, newNexmark(t, spec), 10)
			if len(first) != 5 {
				t.Fatalf("%d batches, want 5 of 1000 events", len(first))
			}
			if diff := cmp.Diff(first, again); diff != "" {
				t.Errorf("a second source with the same settings (-first +second):\n%s", diff)
			}
			spec.Seed = 8
			_, other := readAll(t, newNexmark(t, spec), 10)
			if reflect.DeepEqual(first, other) {
				t.Errorf("seed 8 yields the same rows as seed 7")
			}
		})
	}
}

func TestNexmarkReplaysAnOffsetRange(t *testing.T) {
	ctx := context.Background()
	spec := v1.NexmarkSource{AsFastAsPossible: true, MaxEventsPerTrigger: 777, Seed: 3, StartTime: "2026-01-05T10:00:00Z"}
	offsets, rows := readAll(t, newNexmark(t, spec), 6)
	// Another process, with other settings, reads the logged range of batch 4
	// from its offsets alone.
	replay := newNexmark(t, v1.NexmarkSource{Seed: 99, EventsPerSecond: 5, Table: v1.NexmarkBid})
	got, err := replay.Read(ctx, engine.ReadRequest{Batch: 4, Start: offsets[8], End: offsets[9]})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rows[4], got.Rows); diff != "" {
		t.Errorf("replayed batch 4 (-first +replay):\n%s", diff)
	}
	// The whole stream read in one range is the batches' rows end to end.
	whole, err := replay.Read(ctx, engine.ReadRequest{Start: nil, End: offsets[len(offsets)-1]})
	if err != nil {
		t.Fatal(err)
	}
	var joined []engine.Row
	for _, r := range rows {
		joined = append(joined, r...)
	}
	if diff := cmp.Diff(joined, whole.Rows); diff != "" {
		t.Errorf("one range (-batches +one range):\n%s", diff)
	}
}

func TestNexmarkProportionsAndRules(t *testing.T) {
	ctx := context.Background()
	const events = 100_000
	read := func(table v1.NexmarkTable) []engine.Row {
		s := newNexmark(t, v1.NexmarkSource{Table: table, StartTime: "2026-01-05T10:00:00Z"})
		end, _ := json.Marshal(map[string]any{"event": events, "eventsPerSecond": 10000, "baseMs": nexmarkT0.UnixMilli()})
		res, err := s.Read(ctx, engine.ReadRequest{End: end})
		if err != nil {
			t.Fatal(err)
		}
		return res.Rows
	}
	bids, auctions, people := read(v1.NexmarkBid), read(v1.NexmarkAuction), read(v1.NexmarkPerson)
	if len(people) != events/50 || len(auctions) != 3*events/50 || len(bids) != 46*events/50 {
		t.Fatalf("%d people, %d auctions, %d bids of %d events; want 1:3:46", len(people), len(auctions), len(bids), events)
	}
	for i, p := range people {
		if p[0] != int64(1000+i) {
			t.Fatalf("person %d has id %v, want %d", i, p[0], 1000+i)
		}
	}
	for i, a := range auctions {
		if a[0] != int64(1000+i) {
			t.Fatalf("auction %d has id %v, want %d", i, a[0], 1000+i)
		}
		if cat := a[8].(int64); cat < 10 || cat >= 15 {
			t.Fatalf("auction %d has category %d, want 10..14", i, cat)
		}
		if !a[6].(time.Time).After(a[5].(time.Time)) {
			t.Fatalf("auction %d expires at %v, not after its start %v", i, a[6], a[5])
		}
	}
	hot := 0
	var last time.Time
	for i, b := range bids {
		auction, bidder, price := b[0].(int64), b[1].(int64), b[2].(int64)
		// Bids go to auctions that exist or are about to (at most 10 ahead).
		if auction < 1000 || auction > 1000+int64(len(auctions))+10 {
			t.Fatalf("bid %d for auction %d, outside the auctions generated", i, auction)
		}
		if bidder < 1000 || bidder > 1000+int64(len(people))+10 {
			t.Fatalf("bid %d by person %d, outside the people generated", i, bidder)
		}
		if price < 100 || price > 100_000_000 {
			t.Fatalf("bid %d has price %d, want 1 to 1,000,000 dollars in cents", i, price)
		}
		if auction%100 == 0 {
			hot++
		}
		ts := b[5].(time.Time)
		if ts.Before(last) {
			t.Fatalf("bid %d at %v, before the previous one at %v", i, ts, last)
		}
		last = ts
		if n := len(b[6].(string)); n < 54 || n > 82 {
			t.Fatalf("bid %d has %d bytes of extra, want 54..82", i, n)
		}
	}
	// Half the bids go to a hot auction (plus the few others that are a multiple of 100).
	if share := float64(hot) / float64(len(bids)); share < 0.49 || share > 0.53 {
		t.Errorf("%.3f of bids for hot auctions, want about 0.5", share)
	}
	// At 10,000 events a second, 100,000 events span 10 s.
	if want := nexmarkT0.Add(10*time.Second - time.Millisecond); !last.Equal(want) {
		t.Errorf("last bid at %v, want %v", last, want)
	}
}

func TestNexmarkPaced(t *testing.T) {
	ctx := context.Background()
	s := newNexmark(t, v1.NexmarkSource{Table: v1.NexmarkPerson, EventsPerSecond: 100, MaxEventsPerTrigger: 150})
	p0, err := s.Plan(ctx, engine.PlanRequest{Time: nexmarkT0, Limit: true})
	if err != nil || !p0.HasData {
		t.Fatalf("first plan = %+v, %v; want event 0, a person", p0, err)
	}
	// Half a second later: events 1..50 are due, and person 1 is event 50.
	p1, err := s.Plan(ctx, engine.PlanRequest{Batch: 1, Start: p0.End, Time: nexmarkT0.Add(499 * time.Millisecond), Limit: true})
	if err != nil || p1.HasData {
		t.Fatalf("plan at 499ms = %+v, %v; want no person due", p1, err)
	}
	p1, err = s.Plan(ctx, engine.PlanRequest{Batch: 1, Start: p0.End, Time: nexmarkT0.Add(500 * time.Millisecond), Limit: true})
	if err != nil || !p1.HasData {
		t.Fatalf("plan at 500ms = %+v, %v; want person 1", p1, err)
	}
	res, err := s.Read(ctx, engine.ReadRequest{Batch: 1, Start: p0.End, End: p1.End})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 1 || res.Rows[0][0] != int64(1001) || !res.Rows[0][6].(time.Time).Equal(nexmarkT0.Add(500*time.Millisecond)) {
		t.Errorf("rows = %v, want person 1001 at 500ms", res.Rows)
	}
	// Ten seconds later, 1000 events are due but a batch takes 150.
	p2, err := s.Plan(ctx, engine.PlanRequest{Batch: 2, Start: p1.End, Time: nexmarkT0.Add(10 * time.Second), Limit: true})
	if err != nil || !p2.HasData || p2.Lag == nil || *p2.Lag != 1001-51-150 {
		t.Fatalf("plan at 10s = %+v, %v; want 150 events and a lag of %d", p2, err, 1001-51-150)
	}
}

func TestNexmarkRateChangeKeepsTimeMonotonic(t *testing.T) {
	ctx := context.Background()
	spec := v1.NexmarkSource{AsFastAsPossible: true, MaxEventsPerTrigger: 1000, EventsPerSecond: 1000, StartTime: "2026-01-05T10:00:00Z"}
	p0, err := newNexmark(t, spec).Plan(ctx, engine.PlanRequest{Time: nexmarkT0, Limit: true})
	if err != nil {
		t.Fatal(err)
	}
	spec.EventsPerSecond = 1_000_000
	s := newNexmark(t, spec)
	p1, err := s.Plan(ctx, engine.PlanRequest{Batch: 1, Start: p0.End, Time: nexmarkT0, Limit: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Read(ctx, engine.ReadRequest{Batch: 1, Start: p0.End, End: p1.End})
	if err != nil {
		t.Fatal(err)
	}
	// Event 1000 is where the old rate left the timeline: 1 s after event 0.
	first, lastRow := res.Rows[0][5].(time.Time), res.Rows[len(res.Rows)-1][5].(time.Time)
	if want := nexmarkT0.Add(time.Second); first.Before(want) || lastRow.After(want.Add(time.Millisecond)) {
		t.Errorf("events 1000..1999 at the new rate span %v..%v, want from %v on, 1 ms long", first, lastRow, want)
	}
}

func TestNexmarkAvailableNowNeedsAnEnd(t *testing.T) {
	ctx := context.Background()
	s := newNexmark(t, v1.NexmarkSource{AsFastAsPossible: true}).(engine.AvailableNowSource)
	if err := s.PrepareAvailableNow(ctx, nexmarkT0); err == nil {
		t.Errorf("PrepareAvailableNow of an unbounded source as fast as possible succeeded, want an error naming numEvents")
	}
	bounded := newNexmark(t, v1.NexmarkSource{AsFastAsPossible: true, NumEvents: ptr(int64(2500)), MaxEventsPerTrigger: 1000})
	offsets, _ := readAll(t, bounded, 10)
	if got := len(offsets) / 2; got != 3 {
		t.Errorf("%d batches of numEvents 2500 at 1000 a batch, want 3", got)
	}
}

func ptr[T any](v T) *T { return &v }

// BenchmarkNexmarkRead generates the bids of 500,000 events per op, the
// source's share of BenchmarkNexmark (engine): events per CPU-second of
// Read alone, garbage collection included. Run with -cpu 1.
func BenchmarkNexmarkRead(b *testing.B) {
	const events = 500_000
	s, err := source.NewNexmark(context.Background(), &v1.Source{Name: "bids", Nexmark: &v1.NexmarkSource{}}, engine.SourceEnv{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpu := cpuTime()
	var start int64
	for b.Loop() {
		from, _ := json.Marshal(map[string]any{"event": start, "eventsPerSecond": 100_000})
		to, _ := json.Marshal(map[string]any{"event": start + events, "eventsPerSecond": 100_000})
		if _, err := s.Read(context.Background(), engine.ReadRequest{Start: from, End: to}); err != nil {
			b.Fatal(err)
		}
		start += events
	}
	b.ReportMetric(float64(b.N*events)/(cpuTime()-cpu).Seconds(), "events/cpu-s")
	b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N*events), "cpu-ns/event")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestNexmarkPacedForMonths: the events due after months of pacing at a
// million a second are counted without overflow.
func TestNexmarkPacedForMonths(t *testing.T) {
	ctx := context.Background()
	s := newNexmark(t, v1.NexmarkSource{EventsPerSecond: 1_000_000, MaxEventsPerTrigger: 10})
	p0, err := s.Plan(ctx, engine.PlanRequest{Time: nexmarkT0, Limit: true})
	if err != nil {
		t.Fatal(err)
	}
	later := nexmarkT0.Add(90 * 24 * time.Hour)
	p1, err := s.Plan(ctx, engine.PlanRequest{Batch: 1, Start: p0.End, Time: later, Limit: true})
	if err != nil || !p1.HasData || p1.Lag == nil {
		t.Fatalf("plan after 90 days = %+v, %v", p1, err)
	}
	if want := int64(90*24*3600)*1_000_000 + 1 - 10; *p1.Lag != want { // event 0 is a person: batch 1 takes events 0..9
		t.Errorf("lag after 90 days = %d, want %d", *p1.Lag, want)
	}
}
