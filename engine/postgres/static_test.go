package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
	"github.com/lockstep-dev/lockstep/engine/postgres"
)

// staticJoin is a files → files query enriching orders with a PostgreSQL table of
// customers, left outer, one orders file a batch.
type staticJoin struct {
	db                db
	orders, out, ckpt string
	n                 int
}

func newStaticJoin(t *testing.T) *staticJoin {
	t.Helper()
	s := &staticJoin{db: newDB(t), orders: t.TempDir(), out: t.TempDir(), ckpt: filepath.Join(t.TempDir(), "ckpt")}
	s.db.exec(t, "CREATE TABLE customers (id text PRIMARY KEY, name text, since timestamptz)")
	return s
}

func (s *staticJoin) addOrder(t *testing.T, customer string) {
	t.Helper()
	p := filepath.Join(s.orders, fmt.Sprintf("orders-%03d.json", s.n))
	line := fmt.Sprintf(`{"order_id":"o%d","customer_id":%q}`+"\n", s.n, customer)
	if err := os.WriteFile(p, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 5, 10, 0, s.n, 0, time.UTC)
	if err := os.Chtimes(p, at, at); err != nil {
		t.Fatal(err)
	}
	s.n++
}

func (s *staticJoin) query(refresh *v1.Refresh) *v1.StreamingQuery {
	return querytest.Make("enrich", "shop").
		FilesSource("orders", s.orders, v1.FormatJSON, querytest.Col("order_id", v1.TypeString), querytest.Col("customer_id", v1.TypeString)).
		EditSource("orders", func(src *v1.Source) { src.Files.MaxFilesPerTrigger = new(int32(1)) }).
		Join(v1.Join{Name: "customers", Type: v1.JoinLeftOuter, Keys: querytest.Keys("customer_id", "id"), RightPrefix: "c_",
			Static: &v1.StaticSide{
				Postgres: &v1.StaticPostgres{Connection: v1.PostgresConnection{DSNEnv: "CUSTOMERS_DSN"}, Table: "customers"},
				Schema:   &v1.Schema{Columns: v1.Columns{{Name: "id", Type: v1.TypeString}, {Name: "name", Type: v1.TypeString}, {Name: "since", Type: v1.TypeTimestamp}}},
				Refresh:  refresh,
			}}).
		FilesSink(s.out, v1.FormatJSON).
		Checkpoint(s.ckpt).
		AvailableNow().
		Obj()
}

func (s *staticJoin) engine(t *testing.T, q *v1.StreamingQuery, opts ...engine.Option) *engine.Query {
	t.Helper()
	reg := enginetest.Registry(t)
	if err := reg.RegisterStatic(v1.StaticPostgresKind, postgres.StaticSpec(), postgres.NewStatic); err != nil {
		t.Fatal(err)
	}
	env := func(name string) string {
		if name == "CUSTOMERS_DSN" {
			return s.db.dsn
		}
		return ""
	}
	eq, err := engine.New(q, reg, append(opts, engine.WithEnv(env))...)
	if err != nil {
		t.Fatal(err)
	}
	return eq
}

func (s *staticJoin) output(t *testing.T) []engine.Row {
	t.Helper()
	return enginetest.OutputRowsAt(t, s.out)
}

// TestStaticPostgresJoin joins with a PostgreSQL table refreshed every batch: each batch
// records the rows' digest, and a later batch sees the rows added since.
func TestStaticPostgresJoin(t *testing.T) {
	s := newStaticJoin(t)
	s.db.exec(t, "INSERT INTO customers VALUES ('c1', 'Ann', '2020-01-02T03:04:05Z')")
	s.addOrder(t, "c1")
	s.addOrder(t, "c2")
	rec := enginetest.NewRecorder()
	if _, err := s.engine(t, s.query(&v1.Refresh{Every: "1ns"}), engine.WithObserver(rec)).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.db.exec(t, "INSERT INTO customers VALUES ('c2', 'Bob', NULL)")
	s.addOrder(t, "c2")
	if _, err := s.engine(t, s.query(&v1.Refresh{Every: "1ns"}), engine.WithObserver(rec)).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	since := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	want := []engine.Row{
		{"o0", "c1", "c1", "Ann", since},
		{"o1", "c2", nil, nil, nil},
		{"o2", "c2", "c2", "Bob", nil},
	}
	if diff := cmp.Diff(fmt.Sprint(want), fmt.Sprint(s.output(t))); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	b := rec.Batches()
	if len(b) != 3 || len(b[2].Joins) != 1 || b[0].Joins[0].Rows != 1 || b[2].Joins[0].Rows != 2 {
		t.Fatalf("batches = %+v, want 3 joining 1, 1 and 2 customers", b)
	}
	if string(b[0].Joins[0].Snapshot) == string(b[2].Joins[0].Snapshot) {
		t.Errorf("snapshots of 1 and 2 customers are both named %s", b[0].Joins[0].Snapshot)
	}
}

// TestStaticPostgresReplayNeedsTheRecordedRows: a batch replayed after the table changed
// cannot join its recorded snapshot, which PostgreSQL no longer has: the run stops, naming
// the table; with the rows restored, the replay joins them.
func TestStaticPostgresReplayNeedsTheRecordedRows(t *testing.T) {
	s := newStaticJoin(t)
	s.db.exec(t, "INSERT INTO customers VALUES ('c1', 'Ann', NULL)")
	s.addOrder(t, "c1")
	crashed := make(chan struct{})
	q := s.engine(t, s.query(nil), engine.WithPhaseHook(func(p engine.Phase, b int64) {
		if p == engine.PhaseOffsetsWritten && b == 0 {
			close(crashed)
			runtime.Goexit()
		}
	}))
	go q.Run(context.Background()) //nolint:errcheck // ends at the crash
	<-crashed
	s.db.exec(t, "UPDATE customers SET name = 'Anna'")
	_, err := s.engine(t, s.query(nil)).Run(context.Background())
	if !errors.Is(err, postgres.ErrSnapshotChanged) {
		t.Fatalf("Run after the table changed = %v, want ErrSnapshotChanged", err)
	}
	s.db.exec(t, "UPDATE customers SET name = 'Ann'")
	if _, err := s.engine(t, s.query(nil)).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fmt.Sprint([]engine.Row{{"o0", "c1", "c1", "Ann", nil}}), fmt.Sprint(s.output(t))); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}
