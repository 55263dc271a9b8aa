package delta_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/delta"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

func TestMain(m *testing.M) {
	if file := os.Getenv(envChild); file != "" {
		os.Exit(runChild(file)) // a crash test's child process
	}
	testenv.Main(m)
}

// storeKinds are the stores every table test runs on.
var storeKinds = []string{"local", "s3"}

// localStore opens the local folder dir as a Store.
func localStore(t testing.TB, dir string) checkpoint.Store {
	t.Helper()
	s, err := checkpoint.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// txnVersions is a snapshot's txn versions by application id.
func txnVersions(s *delta.Snapshot) map[string]int64 {
	txns := map[string]int64{}
	for _, x := range s.Txns() {
		txns[x.AppID] = x.Version
	}
	return txns
}

// newLocation returns a function that opens a new Store on one fresh table
// location of the given kind, so that several Table values (several
// writers) can share the table.
func newLocation(t testing.TB, kind string) func() checkpoint.Store {
	t.Helper()
	switch kind {
	case "local":
		dir := t.TempDir()
		return func() checkpoint.Store {
			return localStore(t, dir)
		}
	case "s3":
		srv := testenv.S3(t)
		return func() checkpoint.Store {
			s, err := s3.Open(context.Background(), srv.Bucket, "lake/orders",
				s3.WithEndpoint(srv.URL), s3.WithRegion(srv.Region), s3.WithCredentials(srv.AccessKey, srv.SecretKey, ""))
			if err != nil {
				t.Fatalf("open s3 store: %v", err)
			}
			return s
		}
	}
	t.Fatalf("unknown store kind %q", kind)
	return nil
}

// forEachStore runs f as a subtest per store kind.
func forEachStore(t *testing.T, f func(t *testing.T, open func() checkpoint.Store)) {
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) { f(t, newLocation(t, kind)) })
	}
}

var orderColumns = v1.Columns{
	{Name: "order_id", Type: v1.TypeString},
	{Name: "country", Type: v1.TypeString},
	{Name: "amount", Type: v1.TypeDouble},
	{Name: "qty", Type: v1.TypeLong},
	{Name: "paid", Type: v1.TypeBoolean},
	{Name: "ts", Type: v1.TypeTimestamp},
}

var epoch = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// orders returns n rows for batch b, deterministic, with a few nulls.
func orders(b, n int) []delta.Row {
	countries := []string{"DE", "FR", "US", "JP"}
	rows := make([]delta.Row, n)
	for i := range n {
		var paid any = i%3 != 0
		if i%7 == 6 {
			paid = nil
		}
		rows[i] = delta.Row{
			fmt.Sprintf("b%03d-o%05d", b, i),
			countries[(b+i)%len(countries)],
			float64(i) * 1.25,
			int64(b*1000 + i),
			paid,
			epoch.Add(time.Duration(b)*time.Hour + time.Duration(i)*time.Millisecond + 7*time.Microsecond),
		}
	}
	return rows
}

// sortRows orders rows by their first column (order ids are unique).
func sortRows(rows []delta.Row) []delta.Row {
	out := slices.Clone(rows)
	slices.SortFunc(out, func(a, b delta.Row) int { return cmp.Compare(fmt.Sprint(a[0]), fmt.Sprint(b[0])) })
	return out
}

// readAll reads the table's newest snapshot through a fresh Table.
func readAll(t testing.TB, store checkpoint.Store) (*delta.Snapshot, v1.Columns, []delta.Row) {
	t.Helper()
	tbl := delta.Open(store)
	s, err := tbl.Snapshot(context.Background())
	if err != nil {
		t.Fatalf("Snapshot() error = %v", err)
	}
	cols, rows, err := tbl.ReadAll(context.Background(), s)
	if err != nil {
		t.Fatalf("ReadAll() error = %v", err)
	}
	return s, cols, sortRows(rows)
}

// tableContent is the table's newest snapshot and its rows as engine rows,
// sorted by their printed form (nil for an empty table, as the sink suite
// expects).
func tableContent(t testing.TB, tbl *delta.Table) (*delta.Snapshot, []engine.Row) {
	t.Helper()
	s, err := tbl.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, rows, err := tbl.ReadAll(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	var out []engine.Row
	for _, r := range rows {
		out = append(out, engine.Row(r))
	}
	enginetest.SortRows(out)
	return s, out
}

// countingStore counts the Gets per key, to see what a reader reads.
type countingStore struct {
	checkpoint.Store
	mu    sync.Mutex
	gets  map[string]int
	lists int
}

func (s *countingStore) List(ctx context.Context, prefix string) ([]checkpoint.ObjectInfo, error) {
	s.mu.Lock()
	s.lists++
	s.mu.Unlock()
	return s.Store.List(ctx, prefix)
}

// requests returns how many Gets and Lists the store served.
func (s *countingStore) requests() (gets, lists int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.gets {
		gets += n
	}
	return gets, s.lists
}

func (s *countingStore) Get(ctx context.Context, key string) ([]byte, error) {
	s.mu.Lock()
	if s.gets == nil {
		s.gets = map[string]int{}
	}
	s.gets[key]++
	s.mu.Unlock()
	return s.Store.Get(ctx, key)
}

func (s *countingStore) commitsRead() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	for k := range s.gets {
		if strings.HasSuffix(k, ".json") {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// hookStore calls before(key) before each Create, so a test can slip a
// concurrent commit in between a writer's snapshot and its commit.
type hookStore struct {
	checkpoint.Store
	before func(key string)
}

func (s *hookStore) Create(ctx context.Context, key string, data []byte) error {
	if s.before != nil {
		s.before(key)
	}
	return s.Store.Create(ctx, key, data)
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }
