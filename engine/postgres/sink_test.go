package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
	"github.com/lockstep-dev/lockstep/engine/postgres"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// db is one test's database on the shared server.
type db struct{ dsn string }

func newDB(t *testing.T) db { return db{dsn: testenv.Postgres(t)} }

func (d db) sink(t *testing.T, spec v1.PostgresSink, cols v1.Columns, mode v1.OutputMode, keys []string) (engine.Sink, error) {
	t.Helper()
	spec.Connection = v1.PostgresConnection{DSNEnv: "PG_DSN"}
	s, err := postgres.NewSink(context.Background(), &v1.Sink{Postgres: &spec}, engine.SinkEnv{
		QueryID: "unused", Columns: cols, OutputMode: mode, Keys: keys,
		Getenv: func(name string) string {
			if name == "PG_DSN" {
				return d.dsn
			}
			return ""
		},
	})
	if err == nil {
		t.Cleanup(func() { s.(*postgres.Sink).Close() })
	}
	return s, err
}

func (d db) exec(t *testing.T, sql string) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), d.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// rows returns the table's rows as the sink suite's engine.Rows.
func (d db) rows(t *testing.T, table string) []engine.Row {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), d.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rs, err := conn.Query(context.Background(), "SELECT * FROM "+table)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var out []engine.Row
	for rs.Next() {
		vals, err := rs.Values()
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			if ts, ok := v.(time.Time); ok {
				vals[i] = ts.UTC()
			}
		}
		out = append(out, engine.Row(vals))
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	enginetest.SortRows(out)
	return out
}

// The postgres sink passes the engine's exactly-once sink suite on a real
// server, in append (COPY) and update (upsert) mode.
func TestSinkSuite(t *testing.T) {
	for _, mode := range []v1.OutputMode{v1.OutputAppend, v1.OutputUpdate} {
		t.Run(string(mode), func(t *testing.T) {
			enginetest.RunSinkSuite(t, func(t *testing.T) enginetest.SinkHarness {
				d := newDB(t)
				var keys []string
				if mode == v1.OutputUpdate {
					keys = enginetest.SinkKeys
				}
				return enginetest.SinkHarness{
					New: func(t *testing.T) engine.Sink {
						s, err := d.sink(t, v1.PostgresSink{Table: "out", CreateTable: true}, enginetest.SinkColumns, mode, keys)
						if err != nil {
							t.Fatalf("NewSink() error = %v", err)
						}
						return s
					},
					Read:   func(t *testing.T) []engine.Row { return d.rows(t, "out") },
					Upsert: mode == v1.OutputUpdate,
				}
			})
		})
	}
}

var allTypes = v1.Columns{
	{Name: "country", Type: v1.TypeString}, {Name: "window_start", Type: v1.TypeTimestamp},
	{Name: "orders", Type: v1.TypeLong}, {Name: "revenue", Type: v1.TypeDouble}, {Name: "big", Type: v1.TypeBoolean},
}

// Each output mode in its transaction, with every column type: update
// upserts by the keys (the last row of a key in a batch wins), complete
// replaces the contents, a global aggregate's one row is replaced.
func TestModes(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 10, 0, 0, 123456000, time.UTC)
	row := func(c string, n int64, r float64, big any) engine.Row { return engine.Row{c, at, n, r, big} }
	batch := func(id int64, rows ...engine.Row) *engine.Batch {
		return &engine.Batch{QueryID: "q", ID: id, Columns: allTypes, Rows: rows}
	}
	for _, tc := range []struct {
		name    string
		mode    v1.OutputMode
		keys    []string
		batches []*engine.Batch
		want    []engine.Row
	}{
		{"append", v1.OutputAppend, nil,
			[]*engine.Batch{batch(0, row("DE", 1, 1.5, true)), batch(1, row("DE", 2, 3, nil))},
			[]engine.Row{row("DE", 1, 1.5, true), row("DE", 2, 3, nil)}},
		{"update", v1.OutputUpdate, []string{"country", "window_start"},
			[]*engine.Batch{batch(0, row("DE", 1, 1.5, false), row("FR", 1, 2, false)), batch(1, row("DE", 2, 3, false), row("DE", 3, 4, true), row("US", 1, 1, nil))},
			[]engine.Row{row("DE", 3, 4, true), row("FR", 1, 2, false), row("US", 1, 1, nil)}},
		{"update of a global aggregate", v1.OutputUpdate, []string{},
			[]*engine.Batch{batch(0, row("", 1, 1, false)), batch(1, row("", 2, 2, false))},
			[]engine.Row{row("", 2, 2, false)}},
		{"complete", v1.OutputComplete, nil,
			[]*engine.Batch{batch(0, row("DE", 1, 1.5, false), row("FR", 1, 2, false)), batch(1, row("DE", 2, 3, true))},
			[]engine.Row{row("DE", 2, 3, true)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDB(t)
			s, err := d.sink(t, v1.PostgresSink{Table: "public.revenue", CreateTable: true}, allTypes, tc.mode, tc.keys)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range tc.batches {
				if err := s.Write(ctx, b); err != nil {
					t.Fatal(err)
				}
			}
			// A replay of the last batch changes nothing.
			if err := s.Write(ctx, batch(tc.batches[len(tc.batches)-1].ID, row("ZZ", 9, 9, true))); err != nil {
				t.Fatal(err)
			}
			want := append([]engine.Row(nil), tc.want...)
			enginetest.SortRows(want)
			if diff := cmp.Diff(want, d.rows(t, "revenue")); diff != "" {
				t.Errorf("table (-want +got):\n%s", diff)
			}
			if got := d.rows(t, postgres.ProgressTable); len(got) != len(tc.batches) {
				t.Errorf("%s holds %d rows, want %d: %v", postgres.ProgressTable, len(got), len(tc.batches), got)
			}
		})
	}
}

// An existing table that cannot take the output stops the query before its
// first batch, saying which column and what to do.
func TestSinkRefusesAMismatchedTable(t *testing.T) {
	cols := v1.Columns{{Name: "id", Type: v1.TypeString}, {Name: "n", Type: v1.TypeLong}}
	for _, tc := range []struct {
		name    string
		ddl     string
		mode    v1.OutputMode
		keys    []string
		wantErr error
	}{
		{"a column of another type", "CREATE TABLE t (id text PRIMARY KEY, n double precision)", v1.OutputAppend, nil, postgres.ErrSchemaMismatch},
		{"a missing column", "CREATE TABLE t (id text PRIMARY KEY)", v1.OutputAppend, nil, postgres.ErrSchemaMismatch},
		{"update without a unique key on the keys", "CREATE TABLE t (id text, n bigint)", v1.OutputUpdate, []string{"id"}, postgres.ErrSchemaMismatch},
		{"a missing table without createTable", "", v1.OutputAppend, nil, nil},
		{"varchar takes strings", "CREATE TABLE t (id varchar(20) PRIMARY KEY, n bigint, extra text)", v1.OutputUpdate, []string{"id"}, errNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDB(t)
			if tc.ddl != "" {
				d.exec(t, tc.ddl)
			}
			_, err := d.sink(t, v1.PostgresSink{Table: "t"}, cols, tc.mode, tc.keys)
			switch {
			case tc.wantErr == errNone:
				if err != nil {
					t.Fatalf("NewSink() error = %v, want none", err)
				}
			case err == nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Fatalf("NewSink() error = %v, want %v", err, tc.wantErr)
			}
			t.Logf("NewSink() error = %v", err)
		})
	}
}

var errNone = errors.New("no error")
