package spark_test

import (
	"context"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/engine/spark/sparktest"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// TestDifferentialPostgres: a window aggregation in update mode upserted into PostgreSQL (the
// rows and the lockstep_batches row in one transaction) on both runtimes: the same table, and
// one lockstep_batches row per committed batch.
func TestDifferentialPostgres(t *testing.T) {
	runner := sparktest.Runner(t)
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

	conn := pgConnect(t, ctx, dsn)
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

// TestDifferentialPostgresStatic: orders joined (left outer) with a PostgreSQL table on both
// runtimes give the same rows. The table's columns are of other types than the schema's
// (integer, numeric, varchar, timestamp without time zone), which PostgreSQL casts for both; the
// connection string names the table's schema on the search path and a time zone, in which
// PostgreSQL reads the timestamp without time zone, and a password (which the trusting test
// server ignores), which reaches Spark's reader through the runner's environment.
func TestDifferentialPostgresStatic(t *testing.T) {
	runner := sparktest.Runner(t)
	ctx := context.Background()
	dsn := testenv.Postgres(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, sql := range []string{
		"CREATE SCHEMA crm",
		"CREATE TABLE crm.customers (cid text, name varchar(20), tier integer, score numeric(6,2), vip boolean, since timestamptz, seen timestamp)",
		`INSERT INTO crm.customers VALUES
			('a1', 'Ann', 1, 12.5, true, '2023-05-01T00:00:00Z', '2023-05-01 08:30:00.123456'),
			('b1', 'Bob', NULL, -0.25, false, '2023-07-22T04:26:40+02:00', NULL),
			('a1', 'Ann B', 2, NULL, NULL, NULL, '2023-06-01 00:00:00'),
			(NULL, 'nobody', 3, 1, true, '2023-01-01T00:00:00Z', '2023-01-01 00:00:00'),
			('c1', 'Cy', 2147483647, 9999.99, false, '1970-01-01T00:00:00Z', '2024-03-31 02:30:00')`,
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), "not-needed")
	q := u.Query()
	q.Set("search_path", "crm")
	q.Set("timezone", "America/New_York")
	u.RawQuery = q.Encode()
	const env = "LOCKSTEP_TEST_CRM_DSN"
	t.Setenv(env, u.String())

	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	writeInput(t, in)
	static := qt.StaticPostgres("customers", env, qt.Col("cid", v1.TypeString), qt.Col("name", v1.TypeString), qt.Col("tier", v1.TypeLong),
		qt.Col("score", v1.TypeDouble), qt.Col("vip", v1.TypeBoolean), qt.Col("since", v1.TypeTimestamp), qt.Col("seen", v1.TypeTimestamp))
	query := func(name string) *v1.StreamingQuery {
		return qt.Make("pg-static-"+name, "diff").FilesSource("orders", in, v1.FormatJSON, diffColumns...).
			EditSource("orders", func(s *v1.Source) { s.Files.MaxFilesPerTrigger = ptr[int32](1) }).
			Join(v1.Join{Type: v1.JoinLeftOuter, Keys: qt.Keys("id", "cid"), Static: static, RightPrefix: "c_"}).
			FilesSink(filepath.Join(dir, "out-"+name), v1.FormatJSON).AvailableNow().Checkpoint(filepath.Join(dir, "ck-"+name)).Obj()
	}
	compareRuntimes(t, ctx, runner, "a PostgreSQL static side", query)
}

// pgConnect connects to the database of v1.PostgresDSNEnv, until the test ends.
func pgConnect(t *testing.T, ctx context.Context, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
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
