package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/jackc/pgx/v5"

	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/engine/delta"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// exampleDir returns a folder to run an example of examples/queries in as its header says
// (from the repository's root): it holds a copy of examples/queries/data, and the example's
// relative output and checkpoint folders land in it.
func exampleDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "examples/queries/data"), os.DirFS("../../examples/queries/data")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// revenueRow is one row of the update-aggregation examples' tables.
type revenueRow struct {
	Country     string
	WindowStart time.Time
	Orders      int64
	Revenue     float64
}

// wantRevenue is the examples' result for the bundled orders: amount > 0, revenue =
// amount × qty, all in the window 10:00–10:05.
var wantRevenue = []revenueRow{
	{"DE", time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC), 2, 19.99 + 7.25*4},
	{"ES", time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC), 1, 30},
	{"FR", time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC), 2, 5.5*3 + 42},
	{"US", time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC), 1, 240},
}

// TestUpdateAggregationExamples runs examples/queries/revenue-to-delta.yaml and
// revenue-to-postgres.yaml with lockstep run, as their headers say, twice: the first run
// writes three batches (the second updating two keys of the first, the third with no rows
// moving the watermark), the second finds nothing new, and the table holds one row per key.
func TestUpdateAggregationExamples(t *testing.T) {
	for _, tc := range []struct {
		example string
		setup   func(t *testing.T)
		read    func(t *testing.T, dir string) []revenueRow
	}{
		{"revenue-to-delta.yaml", func(*testing.T) {}, readRevenueDelta},
		{"revenue-to-postgres.yaml", func(t *testing.T) { t.Setenv("REVENUE_DB_DSN", testenv.Postgres(t)) }, readRevenuePostgres},
	} {
		t.Run(tc.example, func(t *testing.T) {
			tc.setup(t)
			example, err := filepath.Abs(filepath.Join("../../examples/queries", tc.example))
			if err != nil {
				t.Fatal(err)
			}
			dir := exampleDir(t)
			t.Chdir(dir)
			_, stderr, code := runCommand(t, "run", "-f", example)
			if code != exitOK {
				t.Fatalf("first run: exit %d:\n%s", code, stderr)
			}
			if _, stderr, code := runCommand(t, "run", "-f", example); code != exitOK {
				t.Fatalf("second run: exit %d:\n%s", code, stderr)
			}
			if diff := cmp.Diff(wantRevenue, tc.read(t, dir), cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Errorf("table (-want +got):\n%s", diff)
			}
		})
	}
}

func readRevenueDelta(t *testing.T, dir string) []revenueRow {
	t.Helper()
	store, err := checkpoint.OpenDir(filepath.Join(dir, ".lockstep/output/revenue-to-delta"))
	if err != nil {
		t.Fatal(err)
	}
	tbl := delta.Open(store)
	snap, err := tbl.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if snap.Version != 2 {
		t.Errorf("table version %d, want 2: one commit per batch, three batches", snap.Version)
	}
	cols, rows, err := tbl.ReadAll(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	at := map[string]int{}
	for i, c := range cols {
		at[c.Name] = i
	}
	var out []revenueRow
	for _, r := range rows {
		out = append(out, revenueRow{r[at["country"]].(string), r[at["window_start"]].(time.Time), r[at["orders"]].(int64), r[at["revenue"]].(float64)})
	}
	sortRevenue(out)
	return out
}

func readRevenuePostgres(t *testing.T, _ string) []revenueRow {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, os.Getenv("REVENUE_DB_DSN"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT country, window_start, orders, revenue FROM revenue_by_country ORDER BY country")
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (revenueRow, error) {
		var v revenueRow
		err := r.Scan(&v.Country, &v.WindowStart, &v.Orders, &v.Revenue)
		v.WindowStart = v.WindowStart.UTC()
		return v, err
	})
	if err != nil {
		t.Fatal(err)
	}
	var batches int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM lockstep_batches").Scan(&batches); err != nil || batches != 3 {
		t.Errorf("lockstep_batches holds %d rows (%v), want 3: one per batch", batches, err)
	}
	return out
}

func sortRevenue(rows []revenueRow) {
	for i := range rows {
		for j := i + 1; j < len(rows); j++ {
			if rows[j].Country < rows[i].Country {
				rows[i], rows[j] = rows[j], rows[i]
			}
		}
	}
}
