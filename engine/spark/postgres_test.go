package spark_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// TestDifferentialPostgres: a window aggregation in update mode upserted into PostgreSQL (the
// rows and the lockstep_batches row in one transaction) on both runtimes: the same table, and
// one lockstep_batches row per committed batch.
func TestDifferentialPostgres(t *testing.T) {
	runner := testenv.SparkRunner(t)
	ctx := context.Background()
	dsn := testenv.Postgres(t)
	t.Setenv(v1.PostgresDSNEnv, dsn)
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	writeInput(t, in)
	window := []v1.GroupKey{{Window: &v1.Window{Column: "ts", Duration: "10s"}}}
	query := func(name string) *v1.StreamingQuery {
		return qt.Make("pg-"+name, "diff").FilesSource("orders", in, v1.FormatJSON, diffColumns...).
			EditSource("orders", func(s *v1.Source) { s.Files.MaxFilesPerTrigger = ptr[int32](1) }).
			Watermark("ts", "5s").Aggregate("", window, v1.Aggregation{Name: "n", Function: v1.AggCount}, v1.Aggregation{Name: "total", Function: v1.AggSum, Column: "qty"}).
			OutputMode(v1.OutputUpdate).
			Sink(v1.Sink{Postgres: &v1.PostgresSink{Table: "out_" + name, CreateTable: true, Connection: v1.PostgresConnection{DSNEnv: v1.PostgresDSNEnv}}}).
			AvailableNow().Checkpoint(filepath.Join(dir, "ck-"+name)).Obj()
	}
	runBuiltin(t, ctx, query("lockstep"))
	sparkSum := runSpark(t, ctx, runner, query("spark"))

	conn := pgConnect(t, ctx)
	read := func(table string) []string {
		return pgRows(t, ctx, conn, "SELECT window_start, window_end, n, total FROM "+table)
	}
	want, got := read("out_lockstep"), read("out_spark")
	if len(want) == 0 {
		t.Fatal("the built-in engine wrote no rows")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("table on spark differs (-lockstep +spark):\n%s", diff)
	}
	var batches int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM lockstep_batches WHERE query_id = $1", sparkSum.QueryID).Scan(&batches); err != nil {
		t.Fatal(err)
	}
	if want := sparkSum.LastCommitted + 1; int64(batches) != want {
		t.Errorf("lockstep_batches holds %d rows of the spark query, want %d (one per committed batch)", batches, want)
	}
}

// pgConnect connects to the database of v1.PostgresDSNEnv, until the test ends.
func pgConnect(t *testing.T, ctx context.Context) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, os.Getenv(v1.PostgresDSNEnv))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// pgRows returns the rows of a query as sorted strings (a multiset), values as readOutput
// writes them.
func pgRows(t *testing.T, ctx context.Context, conn *pgx.Conn, query string) []string {
	t.Helper()
	rows, err := conn.Query(ctx, query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	var out []string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		var parts []string
		for _, v := range vals {
			parts = append(parts, formatValue(v))
		}
		out = append(out, strings.Join(parts, " "))
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	slices.Sort(out)
	return out
}
