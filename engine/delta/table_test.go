package delta_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/engine/delta"
)

func TestWriteThenRead(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func() checkpoint.Store) {
		ctx := t.Context()
		tbl := delta.Open(open())
		var want []delta.Row
		for b := range 3 {
			rows := orders(b, 50)
			res, err := tbl.Write(ctx, delta.Write{AppID: "q1", Version: int64(b), Columns: orderColumns, Rows: rows})
			if err != nil {
				t.Fatalf("Write(batch %d) error = %v", b, err)
			}
			if res.Skipped || res.Version != int64(b) || len(res.Files) != 1 {
				t.Fatalf("Write(batch %d) = %+v, want version %d with one file", b, res, b)
			}
			want = append(want, rows...)
		}
		s, cols, got := readAll(t, open())
		if s.Version != 2 {
			t.Errorf("Version = %d, want 2", s.Version)
		}
		if diff := cmp.Diff(orderColumns, cols); diff != "" {
			t.Errorf("Columns() diff (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(sortRows(want), got); diff != "" {
			t.Errorf("rows diff (-want +got):\n%s", diff)
		}
		if v, ok := s.TxnVersion("q1"); !ok || v != 2 {
			t.Errorf("TxnVersion(q1) = %d, %t, want 2, true", v, ok)
		}
		if s.Protocol != (delta.Protocol{MinReaderVersion: 1, MinWriterVersion: 2}) {
			t.Errorf("Protocol = %+v, want reader 1, writer 2", s.Protocol)
		}
	})
}

// A replayed batch (same query id, batch id not above the table's txn) is
// found in the table and skipped; a fresh query id with batch ids from 0 is
// not.
func TestReplayIsSkippedFreshQueryIsNot(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func() checkpoint.Store) {
		ctx := t.Context()
		tbl := delta.Open(open())
		for b := range 4 {
			if _, err := tbl.Write(ctx, delta.Write{AppID: "query-a", Version: int64(b), Columns: orderColumns, Rows: orders(b, 10)}); err != nil {
				t.Fatal(err)
			}
		}
		for _, tc := range []struct {
			name     string
			tbl      *delta.Table
			appID    string
			version  int64
			wantSkip bool
		}{
			{"replay of the newest batch", tbl, "query-a", 3, true},
			{"replay of an older batch", tbl, "query-a", 1, true},
			{"replay through a new Table (a restarted engine)", delta.Open(open()), "query-a", 3, true},
			{"fresh checkpoint: new query id, batch 0", delta.Open(open()), "query-b", 0, false},
			{"next batch of the first query", delta.Open(open()), "query-a", 4, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				before, _, _ := readAll(t, open())
				res, err := tc.tbl.Write(ctx, delta.Write{AppID: tc.appID, Version: tc.version, Columns: orderColumns, Rows: orders(100+int(tc.version), 5)})
				if err != nil {
					t.Fatalf("Write() error = %v", err)
				}
				after, _, _ := readAll(t, open())
				if res.Skipped != tc.wantSkip {
					t.Errorf("Write(%s, %d).Skipped = %t, want %t", tc.appID, tc.version, res.Skipped, tc.wantSkip)
				}
				grew := after.Version > before.Version
				if grew == tc.wantSkip {
					t.Errorf("table version %d -> %d, want a commit: %t", before.Version, after.Version, !tc.wantSkip)
				}
				if v, _ := after.TxnVersion(tc.appID); v < tc.version {
					t.Errorf("TxnVersion(%s) = %d, want >= %d", tc.appID, v, tc.version)
				}
			})
		}
	})
}

// Writers of different queries appending at once all commit: a writer that
// loses a version retries at the next one.
func TestConcurrentBlindAppendsRetry(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func() checkpoint.Store) {
		const writers, batches, rowsPerBatch = 4, 5, 20
		ctx := t.Context()
		var wg sync.WaitGroup
		var mu sync.Mutex
		retries := 0
		errs := make(chan error, writers*batches)
		for w := range writers {
			wg.Go(func() {
				tbl := delta.Open(open())
				for b := range batches {
					res, err := tbl.Write(ctx, delta.Write{AppID: fmt.Sprintf("query-%d", w), Version: int64(b),
						Columns: orderColumns, Rows: orders(w*100+b, rowsPerBatch)})
					if err != nil {
						errs <- fmt.Errorf("writer %d batch %d: %w", w, b, err)
						return
					}
					if res.Skipped {
						errs <- fmt.Errorf("writer %d batch %d skipped", w, b)
					}
					mu.Lock()
					retries += res.Retries
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		s, _, rows := readAll(t, open())
		if s.Version != writers*batches-1 {
			t.Errorf("Version = %d, want %d (one commit per batch)", s.Version, writers*batches-1)
		}
		if len(rows) != writers*batches*rowsPerBatch {
			t.Errorf("rows = %d, want %d", len(rows), writers*batches*rowsPerBatch)
		}
		for w := range writers {
			if v, ok := s.TxnVersion(fmt.Sprintf("query-%d", w)); !ok || v != batches-1 {
				t.Errorf("TxnVersion(query-%d) = %d, %t, want %d", w, v, ok, batches-1)
			}
		}
		t.Logf("%d commits, %d lost races retried", s.Version+1, retries)
		if retries == 0 {
			t.Log("no race happened this time; TestLostRaceRetries forces one")
		}
	})
}

// A writer that loses the commit race to another query's append commits at
// the next version; one that loses to its own transaction (a second engine
// of the same query) skips.
func TestLostRace(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func() checkpoint.Store) {
		ctx := t.Context()
		if _, err := delta.Open(open()).Write(ctx, delta.Write{AppID: "setup", Version: 0, Columns: orderColumns, Rows: orders(0, 3)}); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name        string
			otherAppID  string
			wantSkipped bool
		}{
			{"other query appends first", "other-query", false},
			{"same query and batch commits first", "q", true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				before, _, _ := readAll(t, open())
				var once sync.Once
				hs := &hookStore{Store: open()}
				hs.before = func(key string) {
					if !strings.HasPrefix(key, "_delta_log/") {
						return
					}
					once.Do(func() {
						if _, err := delta.Open(open()).Write(ctx, delta.Write{AppID: tc.otherAppID, Version: before.Version + 10,
							Columns: orderColumns, Rows: orders(7, 2)}); err != nil {
							t.Errorf("concurrent Write() error = %v", err)
						}
					})
				}
				res, err := delta.Open(hs).Write(ctx, delta.Write{AppID: "q", Version: before.Version + 10, Columns: orderColumns, Rows: orders(8, 2)})
				if err != nil {
					t.Fatalf("Write() error = %v", err)
				}
				if res.Skipped != tc.wantSkipped {
					t.Errorf("Skipped = %t, want %t", res.Skipped, tc.wantSkipped)
				}
				after, _, _ := readAll(t, open())
				wantVersion := before.Version + 2
				if tc.wantSkipped {
					wantVersion = before.Version + 1
				} else if res.Retries != 1 || res.Version != wantVersion {
					t.Errorf("Write() = version %d after %d retries, want version %d after 1", res.Version, res.Retries, wantVersion)
				}
				if after.Version != wantVersion {
					t.Errorf("table version = %d, want %d", after.Version, wantVersion)
				}
			})
		}
	})
}

// Complete mode replaces the content in one commit (remove + add), and a
// concurrent append makes it fail with ErrConflict rather than drop the
// appended rows.
func TestComplete(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func() checkpoint.Store) {
		ctx := t.Context()
		cols := v1.Columns{{Name: "country", Type: v1.TypeString}, {Name: "orders", Type: v1.TypeLong}}
		tbl := delta.Open(open())
		results := [][]delta.Row{
			{{"DE", int64(1)}, {"FR", int64(2)}},
			{{"DE", int64(3)}, {"FR", int64(2)}, {"US", int64(1)}},
			{{"DE", int64(4)}, {"FR", int64(2)}, {"US", int64(5)}},
		}
		for b, rows := range results {
			if _, err := tbl.Write(ctx, delta.Write{AppID: "agg", Version: int64(b), Columns: cols, Rows: rows, Mode: delta.Complete}); err != nil {
				t.Fatalf("Write(batch %d) error = %v", b, err)
			}
		}
		s, _, got := readAll(t, open())
		if diff := cmp.Diff(results[2], got); diff != "" {
			t.Errorf("content diff (-want +got):\n%s", diff)
		}
		actions, err := tbl.Commit(ctx, s.Version)
		if err != nil {
			t.Fatal(err)
		}
		var adds, removes int
		for _, a := range actions {
			if a.Add != nil {
				adds++
			}
			if a.Remove != nil {
				removes++
			}
		}
		if adds != 1 || removes != 1 {
			t.Errorf("last commit has %d adds and %d removes, want 1 and 1", adds, removes)
		}

		var once sync.Once
		hs := &hookStore{Store: open()}
		hs.before = func(key string) {
			if strings.HasPrefix(key, "_delta_log/") {
				once.Do(func() {
					if _, err := delta.Open(open()).Write(ctx, delta.Write{AppID: "appender", Version: 0, Columns: cols, Rows: []delta.Row{{"JP", int64(9)}}}); err != nil {
						t.Errorf("concurrent append: %v", err)
					}
				})
			}
		}
		_, err = delta.Open(hs).Write(ctx, delta.Write{AppID: "agg", Version: 3, Columns: cols, Rows: results[0], Mode: delta.Complete})
		if !errors.Is(err, delta.ErrConflict) {
			t.Errorf("complete Write() racing an append: error = %v, want ErrConflict", err)
		}
		_, _, got = readAll(t, open())
		if want := append(results[2][:3:3], delta.Row{"JP", int64(9)}); !cmp.Equal(sortRows(want), got) {
			t.Errorf("content after the conflict = %v, want %v", got, want)
		}
	})
}

// A new output column is added to the table's schema; a changed type is
// refused with a SchemaError that names the column and both types.
func TestSchemaEvolution(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func() checkpoint.Store) {
		ctx := t.Context()
		tbl := delta.Open(open())
		narrow := v1.Columns{{Name: "id", Type: v1.TypeString}, {Name: "n", Type: v1.TypeLong}}
		wide := append(narrow[:2:2], v1.Column{Name: "note", Type: v1.TypeString})
		if _, err := tbl.Write(ctx, delta.Write{AppID: "q", Version: 0, Columns: narrow, Rows: []delta.Row{{"a", int64(1)}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := tbl.Write(ctx, delta.Write{AppID: "q", Version: 1, Columns: wide, Rows: []delta.Row{{"b", int64(2), "hello"}}}); err != nil {
			t.Fatalf("Write(new column) error = %v", err)
		}
		_, cols, rows := readAll(t, open())
		if diff := cmp.Diff(wide, cols); diff != "" {
			t.Errorf("columns diff (-want +got):\n%s", diff)
		}
		want := []delta.Row{{"a", int64(1), nil}, {"b", int64(2), "hello"}}
		if diff := cmp.Diff(want, rows); diff != "" {
			t.Errorf("rows diff (-want +got):\n%s", diff)
		}

		changed := v1.Columns{{Name: "id", Type: v1.TypeString}, {Name: "n", Type: v1.TypeDouble}}
		_, err := tbl.Write(ctx, delta.Write{AppID: "q", Version: 2, Columns: changed, Rows: []delta.Row{{"c", 1.5}}})
		var se *delta.SchemaError
		if !errors.Is(err, delta.ErrSchemaMismatch) || !errors.As(err, &se) {
			t.Fatalf("Write(changed type) error = %v, want a *SchemaError", err)
		}
		if se.Column != "n" || se.TableType != "long" || se.QueryType != "double" {
			t.Errorf("SchemaError = %+v, want column n, long in the table, double in the query", se)
		}
		t.Logf("message: %v", err)
		if s, _, _ := readAll(t, open()); s.Version != 1 {
			t.Errorf("version after a refused write = %d, want 1", s.Version)
		}
	})
}

func TestPartitionedTable(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func() checkpoint.Store) {
		ctx := t.Context()
		tbl := delta.Open(open())
		cols := v1.Columns{{Name: "id", Type: v1.TypeLong}, {Name: "region", Type: v1.TypeString}, {Name: "v", Type: v1.TypeDouble}}
		rows := []delta.Row{
			{int64(1), "eu west", 1.0}, {int64(2), "us/east", 2.0}, {int64(3), nil, 3.0},
			{int64(4), "eu west", 4.0}, {int64(5), "100%", 5.0}, {int64(6), ".hidden", 6.0},
		}
		res, err := tbl.Write(ctx, delta.Write{AppID: "q", Version: 0, Columns: cols, Rows: rows, PartitionColumns: []string{"region"}})
		if err != nil {
			t.Fatalf("Write() error = %v", err)
		}
		if len(res.Files) != 5 {
			t.Errorf("files = %d, want 5 (one per partition)", len(res.Files))
		}
		_, _, got := readAll(t, open())
		if diff := cmp.Diff(rows, got); diff != "" {
			t.Errorf("rows diff (-want +got):\n%s", diff)
		}
		_, err = tbl.Write(ctx, delta.Write{AppID: "q", Version: 1, Columns: cols, Rows: rows, PartitionColumns: []string{"id"}})
		if !errors.Is(err, delta.ErrSchemaMismatch) {
			t.Errorf("Write(other partition columns) error = %v, want ErrSchemaMismatch", err)
		}
	})
}

func TestStats(t *testing.T) {
	ctx := t.Context()
	tbl := delta.Open(newLocation(t, "local")())
	rows := orders(1, 10)
	res, err := tbl.Write(ctx, delta.Write{Columns: orderColumns, Rows: rows})
	if err != nil {
		t.Fatal(err)
	}
	st, err := delta.ParseStats(res.Files[0].Stats)
	if err != nil {
		t.Fatal(err)
	}
	if st.NumRecords != 10 {
		t.Errorf("numRecords = %d, want 10", st.NumRecords)
	}
	wantMin := map[string]string{"order_id": "b001-o00000", "qty": "1000", "amount": "0", "ts": "2026-11-30T13:00:00.000Z"}
	wantMax := map[string]string{"order_id": "b001-o00009", "qty": "1009", "amount": "11.25", "ts": "2026-11-30T13:00:00.010Z"}
	for col, want := range wantMin {
		if got := fmt.Sprint(st.MinValues[col]); got != want {
			t.Errorf("minValues[%s] = %s, want %s", col, got, want)
		}
	}
	for col, want := range wantMax {
		if got := fmt.Sprint(st.MaxValues[col]); got != want {
			t.Errorf("maxValues[%s] = %s, want %s", col, got, want)
		}
	}
	if st.NullCount["paid"] != 1 || st.NullCount["order_id"] != 0 {
		t.Errorf("nullCount = %v, want paid 1, order_id 0", st.NullCount)
	}
}

func TestNoTable(t *testing.T) {
	s, err := delta.Open(newLocation(t, "local")()).Snapshot(context.Background())
	if err != nil || s.Exists() || s.Version != -1 {
		t.Errorf("Snapshot() of an empty folder = %+v, %v; want version -1", s, err)
	}
}
