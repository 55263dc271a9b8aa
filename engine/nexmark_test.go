package engine_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
)

// TestNexmarkJoins runs q3 and q8 (enginetest.NexmarkPersonQueries), stream joins bounded in
// event time, over 200,000 Nexmark events in batches of 20,000, and compares their output with
// Nexmark's unbounded joins computed by a loop over the same people and auctions. At 10,000
// events a second or more q3's bound (a seller registered at most 5 s before the auction, 1 s
// after) holds every seller the generator picks, and the outputs are equal; at 1,000 a second
// the bound spans 100 people, and the bounded join keeps a subset (the counts are logged). q8's
// bound (10 s either way, its window's length) never drops a match.
func TestNexmarkJoins(t *testing.T) {
	queries := map[string]enginetest.NexmarkQuery{}
	for _, q := range enginetest.NexmarkPersonQueries {
		queries[q.Name] = q
	}
	tests := []struct {
		query string
		rate  int64
		drops bool // the bounded join keeps a strict subset of the unbounded one's rows
	}{
		{"q3", 1_000, true},
		{"q3", 10_000, false},
		{"q3", 100_000, false},
		{"q8", 10_000, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/rate=%d", tt.query, tt.rate), func(t *testing.T) {
			events := int64(200_000)
			gen := v1.NexmarkSource{EventsPerSecond: tt.rate, AsFastAsPossible: true, MaxEventsPerTrigger: 20_000,
				NumEvents: &events, StartTime: "2026-01-05T10:00:00Z"}
			dir := t.TempDir()
			q := queries[tt.query].Steps(querytest.Make("nexmark-"+tt.query, "default").
				NexmarkSource("persons", v1.NexmarkSource{Table: v1.NexmarkPerson})).
				FilesSink(filepath.Join(dir, "out"), v1.FormatParquet).AvailableNow().Checkpoint(filepath.Join(dir, "ckpt")).
				Edit(func(s *v1.StreamingQuerySpec) { enginetest.NexmarkGenerate(s, gen) })
			run(t, q.Obj())
			got := outputRows(t, filepath.Join(dir, "out"))

			persons, auctions := nexmarkRows(t, v1.NexmarkPerson, gen), nexmarkRows(t, v1.NexmarkAuction, gen)
			want := unboundedQ3(persons, auctions)
			if tt.query == "q8" {
				want = unboundedQ8(persons, auctions)
			}
			enginetest.SortRows(want)
			t.Logf("%s at %d events a second: %d rows bounded, %d unbounded", tt.query, tt.rate, len(got), len(want))
			if len(want) == 0 {
				t.Fatal("the unbounded join matches nothing: the test compares nothing")
			}
			if !tt.drops {
				if diff := cmp.Diff(fmt.Sprint(want), fmt.Sprint(got)); diff != "" {
					t.Errorf("bounded join (+) differs from the unbounded one (-):\n%s", diff)
				}
				return
			}
			if !isSubset(got, want) || len(got) >= len(want) {
				t.Errorf("the bounded join's %d rows are not a strict subset of the unbounded join's %d", len(got), len(want))
			}
		})
	}
}

// unboundedQ3 is Nexmark's q3 over every person and auction: name, city, state and auction id
// of the auctions of category 10 whose seller lives in OR, ID or CA.
func unboundedQ3(persons, auctions []engine.Row) []engine.Row {
	local := map[int64]engine.Row{}
	for _, p := range persons { // id, name, emailAddress, creditCard, city, state, dateTime, extra
		if s := p[5].(string); s == "OR" || s == "ID" || s == "CA" {
			local[p[0].(int64)] = p
		}
	}
	var out []engine.Row
	for _, a := range auctions { // id, itemName, description, initialBid, reserve, dateTime, expires, seller, category, extra
		if p, ok := local[a[7].(int64)]; ok && a[8].(int64) == 10 {
			out = append(out, engine.Row{p[1], p[4], p[5], a[0]})
		}
	}
	return out
}

// unboundedQ8 is Nexmark's q8: the id, name and window start of each person who opened an
// auction in the 10 s tumbling window in which they registered.
func unboundedQ8(persons, auctions []engine.Row) []engine.Row {
	type sellerWindow struct {
		seller int64
		start  time.Time
	}
	window := func(t time.Time) time.Time { return t.Truncate(10 * time.Second).UTC() }
	sold := map[sellerWindow]bool{}
	for _, a := range auctions {
		sold[sellerWindow{a[7].(int64), window(a[5].(time.Time))}] = true
	}
	var out []engine.Row
	for _, p := range persons {
		if w := window(p[6].(time.Time)); sold[sellerWindow{p[0].(int64), w}] {
			out = append(out, engine.Row{p[0], p[1], w})
		}
	}
	return out
}

// nexmarkRows returns the rows of table that the nexmark source generates as gen says.
func nexmarkRows(t *testing.T, table v1.NexmarkTable, gen v1.NexmarkSource) []engine.Row {
	t.Helper()
	out := filepath.Join(t.TempDir(), string(table))
	q := querytest.Make("nexmark-"+string(table), "default").NexmarkSource(string(table), v1.NexmarkSource{Table: table}).
		FilesSink(out, v1.FormatParquet).AvailableNow().Checkpoint(out + "-ckpt").
		Edit(func(s *v1.StreamingQuerySpec) { enginetest.NexmarkGenerate(s, gen) })
	run(t, q.Obj())
	return outputRows(t, out)
}

// outputRows reads the rows a files sink committed in dir, sorted.
func outputRows(t *testing.T, dir string) []engine.Row {
	t.Helper()
	return enginetest.OutputRowsAt(t, dir)
}

// isSubset reports whether the multiset sub is within rows.
func isSubset(sub, rows []engine.Row) bool {
	left := map[string]int{}
	for _, r := range rows {
		left[fmt.Sprint(r)]++
	}
	for _, r := range sub {
		k := fmt.Sprint(r)
		if left[k] == 0 {
			return false
		}
		left[k]--
	}
	return true
}
