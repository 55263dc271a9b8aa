package delta_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/delta"
	"github.com/lockstep-dev/lockstep/engine/delta/deltatest"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
)

var counterColumns = v1.Columns{{Name: "country", Type: v1.TypeString}, {Name: "id", Type: v1.TypeLong}, {Name: "n", Type: v1.TypeLong}}

// counters returns rows (country, id, n) for ids [from, to), each country in
// turn.
func counters(from, to int, n int64) []delta.Row {
	countries := []string{"DE", "FR", "US"}
	var rows []delta.Row
	for id := from; id < to; id++ {
		rows = append(rows, delta.Row{countries[id%3], int64(id), n})
	}
	return rows
}

// A merge rewrites only the files that hold one of the batch's keys: the
// others are ruled out by their partition values or their min/max stats
// (or, when the stats cannot rule a file out, read and left alone).
func TestMergeRewritesOnlyTheFilesThatHoldTheKeys(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name         string
		partitions   []string
		keys         []string
		update       []delta.Row // batch 10's rows
		wantRemoved  int
		wantAdded    int
		wantReplaced map[int64]int64 // id → new n
	}{
		{"stats rule out files", nil, []string{"id"},
			[]delta.Row{{"DE", int64(42), int64(7)}, {"FR", int64(44), int64(7)}}, 1, 1, map[int64]int64{42: 7, 44: 7}},
		// Each rewritten file is replaced by one of its own keys; the new key gets a file.
		{"two files of keys and a new key", nil, []string{"id"},
			[]delta.Row{{"DE", int64(12), int64(7)}, {"US", int64(95), int64(7)}, {"US", int64(1000), int64(7)}}, 2, 3, map[int64]int64{12: 7, 95: 7}},
		{"partitions rule out files", []string{"country"}, []string{"country", "id"},
			[]delta.Row{{"US", int64(41), int64(7)}}, 1, 1, map[int64]int64{41: 7}},
		{"new keys only: nothing rewritten", nil, []string{"id"},
			[]delta.Row{{"DE", int64(5000), int64(7)}}, 0, 1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := localStore(t, t.TempDir())
			tbl := delta.Open(store)
			// Ten batches of ten keys each: ids [10b, 10b+10).
			for b := range 10 {
				if _, err := tbl.Write(ctx, delta.Write{AppID: "q", Version: int64(b), Columns: counterColumns, Rows: counters(10*b, 10*b+10, 1),
					Mode: delta.Merge, Keys: tc.keys, PartitionColumns: tc.partitions}); err != nil {
					t.Fatal(err)
				}
			}
			before, err := tbl.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			res, err := tbl.Write(ctx, delta.Write{AppID: "q", Version: 10, Columns: counterColumns, Rows: tc.update, Mode: delta.Merge, Keys: tc.keys})
			if err != nil {
				t.Fatal(err)
			}
			// Partitioned tables write one file per partition per batch.
			if res.Removed != tc.wantRemoved || len(res.Files) != tc.wantAdded {
				t.Errorf("merge removed %d and added %d files of %d, want %d and %d", res.Removed, len(res.Files), before.NumFiles(), tc.wantRemoved, tc.wantAdded)
			}
			_, _, got := readAll(t, store)
			want := map[int64]int64{}
			for id := range 100 {
				want[int64(id)] = 1
			}
			for id, n := range tc.wantReplaced {
				want[id] = n
			}
			for _, r := range tc.update {
				if _, old := want[r[1].(int64)]; !old {
					want[r[1].(int64)] = r[2].(int64)
				}
			}
			gotByID := map[int64]int64{}
			for _, r := range got {
				id := r[1].(int64)
				if _, dup := gotByID[id]; dup {
					t.Errorf("key %d appears twice", id)
				}
				gotByID[id] = r[2].(int64)
			}
			if diff := cmp.Diff(want, gotByID); diff != "" {
				t.Errorf("table content by id (-want +got):\n%s", diff)
			}
			// A replay of batch 10 with other rows writes nothing.
			again, err := tbl.Write(ctx, delta.Write{AppID: "q", Version: 10, Columns: counterColumns, Rows: counters(0, 100, 9), Mode: delta.Merge, Keys: tc.keys})
			if err != nil || !again.Skipped {
				t.Errorf("replay of batch 10 = %+v, %v; want skipped", again, err)
			}
		})
	}
}

// Merges whose keys straddle the previous batch's (a windowed aggregation:
// the open window and late rows of the one before) rewrite a bounded number
// of rows however many batches came before: a replacement file holds only
// the keys of the file it replaces, so its stats do not widen. (Writing the
// kept rows of every rewritten file together with the new keys made one file
// that every batch hit and that grew by each batch's new keys.)
func TestMergeRewritesDoNotGrowWithTheBatches(t *testing.T) {
	ctx := context.Background()
	store := localStore(t, t.TempDir())
	tbl := delta.Open(store)
	const batch = 10
	for b := range 60 {
		// Ids [10b, 10b+10): new; and 3 of the previous batch's ids again.
		rows := counters(batch*b, batch*b+batch, int64(b))
		if b > 0 {
			rows = append(rows, counters(batch*b-3, batch*b, int64(b))...)
		}
		res, err := tbl.Write(ctx, delta.Write{AppID: "q", Version: int64(b), Columns: counterColumns, Rows: rows, Mode: delta.Merge, Keys: []string{"id"}})
		if err != nil {
			t.Fatal(err)
		}
		var written int64
		for _, f := range res.Files {
			s, err := delta.ParseStats(f.Stats)
			if err != nil {
				t.Fatal(err)
			}
			written += s.NumRecords
		}
		// The previous batch's new-key file is rewritten: at most its 10 rows, and the batch's.
		if rewritten := written - int64(len(rows)); rewritten > batch {
			t.Fatalf("batch %d rewrote %d rows of %d files, want at most %d", b, rewritten, res.Removed, batch)
		}
	}
	_, _, got := readAll(t, store)
	if len(got) != 60*batch {
		t.Errorf("table holds %d rows, want %d (one per id)", len(got), 60*batch)
	}
}

// Null keys equal null keys, as an aggregation groups them; timestamps match
// at the microsecond precision files hold.
func TestMergeNullAndTimestampKeys(t *testing.T) {
	ctx := context.Background()
	cols := v1.Columns{{Name: "k", Type: v1.TypeString}, {Name: "at", Type: v1.TypeTimestamp}, {Name: "n", Type: v1.TypeLong}}
	store := localStore(t, t.TempDir())
	tbl := delta.Open(store)
	keys := []string{"k", "at"}
	at := epoch.Add(123456789) // nanoseconds the file drops
	for b, n := range []int64{1, 2, 3} {
		if _, err := tbl.Write(ctx, delta.Write{AppID: "q", Version: int64(b), Columns: cols, Mode: delta.Merge, Keys: keys,
			Rows: []delta.Row{{nil, at, n}, {"x", at, n * 10}}}); err != nil {
			t.Fatal(err)
		}
	}
	_, _, got := readAll(t, store)
	want := []delta.Row{{nil, at.Truncate(1000), int64(3)}, {"x", at.Truncate(1000), int64(30)}}
	if diff := cmp.Diff(sortRows(want), got); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
}

// DuckDB and delta-go read every version of a merged table: the rewritten
// files are removed (dataChange true) and their kept rows added again.
func TestMergedTableReadsElsewhere(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store := localStore(t, dir)
	tbl := delta.Open(store)
	for b := range 14 { // across the checkpoint at version 10
		rows := counters(7*b, 7*b+10, int64(b)) // 3 keys of the previous batch again
		if _, err := tbl.Write(ctx, delta.Write{AppID: "q", Version: int64(b), Columns: counterColumns, Rows: rows,
			Mode: delta.Merge, Keys: []string{"country", "id"}, PartitionColumns: []string{"country"}}); err != nil {
			t.Fatal(err)
		}
	}
	versions := deltatest.EveryVersion(t, dir)
	if len(versions) != 14 {
		t.Fatalf("%d versions, want 14", len(versions))
	}
	for _, v := range versions {
		if want := 7*int(v.Version) + 10; len(v.Rows) != want {
			t.Errorf("version %d holds %d rows, want %d (one per key)", v.Version, len(v.Rows), want)
		}
	}
	if v := versions[13].Txns["q"]; v != 13 {
		t.Errorf("txn version of q = %d, want 13", v)
	}
	// The newest version as DuckDB reads it from the Parquet checkpoint on.
	_, _, want := readAll(t, store)
	duck := deltatest.ReadWithDuckDB(t, dir)
	if diff := cmp.Diff(want, sortRows(duck.TypedRows(t))); diff != "" {
		t.Errorf("rows diff (-ours +DuckDB):\n%s", diff)
	}
}

// queryUpdate is files → aggregate (count and sum of total by country) →
// delta in update mode: the table holds one row per country.
func (p *pipeline) queryUpdate() *v1.StreamingQuery {
	return p.orders("revenue-by-country", 1).
		Select(querytest.As("country", "country.upperAscii()"), querytest.As("total", "amount * double(qty)")).
		Aggregate("revenue", []v1.GroupKey{querytest.Key("country")},
			querytest.Agg("orders", v1.AggCount, ""), querytest.Agg("revenue", v1.AggSum, "total")).
		DeltaSink(p.table, "country").
		OutputMode(v1.OutputUpdate).
		Checkpoint(p.ckptA).
		AvailableNow().Obj()
}

// wantAgg is queryAgg's table for the input so far.
func (p *pipeline) wantAgg() []engine.Row {
	count, sum := map[string]int64{}, map[string]float64{}
	for _, r := range p.want {
		count[r[1].(string)]++
		sum[r[1].(string)] += r[2].(float64)
	}
	var rows []engine.Row
	for c, n := range count {
		rows = append(rows, engine.Row{c, n, sum[c]})
	}
	return rows
}

func (p *pipeline) checkAgg(t *testing.T, sum engine.Summary) {
	t.Helper()
	want := p.wantAgg()
	enginetest.SortRows(want)
	p.checkContent(t, want, sum)
	everyVersionReads(t, delta.Open(p.folder(t, p.table)))
}

// An update aggregation into delta, killed (SIGKILL, in a child process) at
// every phase of a batch — between its data files and its commit among them
// — then run to the end: the table equals the aggregation of all input,
// one row per key, one commit per batch.
func TestAggregateToDeltaUpdateSIGKILLAtEveryPhase(t *testing.T) {
	killAtEveryPhase(t, 5, 2, (*pipeline).queryUpdate, (*pipeline).checkAgg)
}
