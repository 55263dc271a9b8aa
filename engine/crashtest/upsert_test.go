package crashtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/engine/delta/deltatest"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// pgDSNEnv is the variable the postgres sink of the tests reads its
// connection string from.
const pgDSNEnv = "CRASH_PG_DSN"

// event is one input record, kept by the test to aggregate the input on its
// own.
type event struct {
	id, country string
	amount      float64
	ts          time.Time
}

// upsertAgg is an update-mode aggregation under test, with the table it
// must leave for a given input, computed here independently of the engine.
type upsertAgg struct {
	name, transform string
	keys            int    // the leading output columns that are the key
	partition       string // the delta table's partition column, or ""
	table           func(events []event) []string
}

// upsertAggs are a windowed aggregation (with a watermark, so that state is
// evicted and no-data batches run) and a keyed one.
var upsertAggs = []upsertAgg{
	{name: "windowed", keys: 2, transform: `
  - watermark: {column: ts, delay: 5s}
  - aggregate:
      groupBy: [{window: {column: ts, duration: 10s}}]
      aggregates:
      - {name: orders, function: count}
      - {name: revenue, function: sum, column: amount}
      - {name: top, function: max, column: amount}`,
		table: func(events []event) []string {
			return aggregate(events, func(e event) []any {
				start := e.ts.Truncate(10 * time.Second)
				return []any{start, start.Add(10 * time.Second)}
			}, false)
		}},
	{name: "keyed", keys: 1, partition: "country", transform: keyedByCountry,
		table: func(events []event) []string {
			return aggregate(events, func(e event) []any { return []any{e.country} }, true)
		}},
}

// aggregate groups events by key and returns one rendered row per group:
// the key, then count, sum and (with buyers) the distinct ids, then max.
func aggregate(events []event, key func(event) []any, buyers bool) []string {
	type group struct {
		key      []any
		n        int64
		sum, top float64
		ids      map[string]bool
	}
	groups := map[string]*group{}
	for _, e := range events {
		k := key(e)
		g := groups[render(k)]
		if g == nil {
			g = &group{key: k, top: e.amount, ids: map[string]bool{}}
			groups[render(k)] = g
		}
		g.n++
		g.sum += e.amount
		g.top = max(g.top, e.amount)
		g.ids[e.id] = true
	}
	var rows []string
	for _, g := range groups {
		row := append(g.key, g.n, g.sum)
		if buyers {
			row = append(row, int64(len(g.ids)))
		}
		rows = append(rows, render(append(row, g.top)))
	}
	slices.Sort(rows)
	return rows
}

// render prints a row's values the same way whichever reader returned them.
func render(row []any) string {
	cells := make([]string, len(row))
	for i, v := range row {
		switch v := v.(type) {
		case nil:
			cells[i] = "null"
		case time.Time:
			cells[i] = v.UTC().Format(time.RFC3339Nano)
		case float64:
			cells[i] = strconv.FormatFloat(v, 'g', -1, 64)
		default:
			cells[i] = fmt.Sprint(v)
		}
	}
	return strings.Join(cells, " | ")
}

// upsertSetup is one scenario: the input, checkpoint and table (a delta
// folder or a postgres database), local or on S3.
type upsertSetup struct {
	t        *testing.T
	agg      upsertAgg
	sinkKind string // delta or postgres
	dir      string // scratch folder for specs
	in, ckpt string
	table    string // the delta table's location
	dsn      string // the postgres database
	cfg      []s3.Option
	env      []string
	events   []event
	files    int
}

// newUpsert returns a scenario of the aggregation into sinkKind, its input,
// checkpoint and delta table in a local folder (store "local") or on S3
// (versitygw, "s3"). A postgres table is in a new database of dsn, or of the
// shared server when dsn is "".
func newUpsert(t *testing.T, agg upsertAgg, sinkKind, store, dsn string) *upsertSetup {
	var srv *testenv.S3Server
	if store == "s3" {
		srv = testenv.S3(t)
	}
	return newUpsertOn(t, agg, sinkKind, srv, dsn)
}

// newUpsertOn is newUpsert with the input, checkpoint and delta table in a
// new bucket of srv, or in a local folder when srv is nil.
func newUpsertOn(t *testing.T, agg upsertAgg, sinkKind string, srv *testenv.S3Server, dsn string) *upsertSetup {
	u := &upsertSetup{t: t, agg: agg, sinkKind: sinkKind, dir: t.TempDir(), dsn: dsn}
	root := u.dir
	if srv != nil {
		root, u.cfg, u.env = "s3://"+srv.Bucket, srv.Options(), srv.Env()
	}
	u.in, u.ckpt, u.table = root+"/in", root+"/ckpt", root+"/table"
	if sinkKind == "postgres" {
		if u.dsn == "" {
			u.dsn = testenv.Postgres(t)
		}
		u.env = append(u.env, pgDSNEnv+"="+u.dsn)
	}
	return u
}

// addInput writes n more input files of 10 events each: event time
// advances 4 s a file, out of order by less than the watermark's delay (no
// event is late), ids repeat across files.
func (u *upsertSetup) addInput(n int) {
	u.t.Helper()
	t0 := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	countries := []string{"DE", "FR", "US", "JP"}
	addFiles(u.t, u.in, u.cfg, &u.files, n, "events-%04d.json", func(i int, b *bytes.Buffer) {
		for j := range 10 {
			e := event{id: fmt.Sprintf("u-%d", (i*7+j)%23), country: countries[(i+j*j)%4],
				amount: float64(j%5) + 0.25, ts: t0.Add(time.Duration(i*4+(j*3)%5) * time.Second)}
			u.events = append(u.events, e)
			fmt.Fprintf(b, `{"id":%q,"country":%q,"amount":%g,"ts":%q}`+"\n", e.id, e.country, e.amount, e.ts.Format(time.RFC3339))
		}
	})
}

func (u *upsertSetup) command(env ...string) *exec.Cmd {
	var sink string
	switch u.sinkKind {
	case "delta":
		sink = fmt.Sprintf("delta: {path: %q}", u.table)
		if u.agg.partition != "" {
			sink = fmt.Sprintf("delta: {path: %q, partitionColumns: [%s]}", u.table, u.agg.partition)
		}
	case "postgres":
		sink = fmt.Sprintf("postgres: {connection: {dsnEnv: %s}, table: %s, createTable: true}", pgDSNEnv, u.agg.name)
	}
	p := filepath.Join(u.dir, fmt.Sprintf("query-%d.yaml", time.Now().UnixNano()))
	body := fmt.Sprintf(statefulQuery, u.in, strings.TrimPrefix(u.agg.transform, "\n"), sink, "update")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		u.t.Fatal(err)
	}
	cmd := exec.Command(lockstep, "run", "-f", p, "--checkpoint", u.ckpt)
	cmd.Dir = u.dir
	cmd.Env = Env(append(slices.Clone(u.env), env...)...)
	return cmd
}

func (u *upsertSetup) runOnce(env ...string) Result {
	u.t.Helper()
	return Run(u.t, u.command(env...))
}

// finish runs the query to its end, with env added to the run's
// environment, and checks the table; it returns the rows the table must
// hold and those it holds.
func (u *upsertSetup) finish(env ...string) (want, got []string) {
	u.t.Helper()
	if r := u.runOnce(env...); r.Code != 0 {
		u.t.Fatalf("final run: exit %d\n%s", r.Code, r.Stderr)
	}
	return u.check()
}

// check compares the table with the aggregation of all input, computed
// here: every row once, no key twice. A delta table is read at every
// version, by this module's reader, DuckDB and delta-go: each version holds
// the aggregation of the first k input files for a k that never decreases,
// and carries the txn of a later batch than the version before (one commit
// per batch, none replayed).
func (u *upsertSetup) check() (want, got []string) {
	u.t.Helper()
	want = u.agg.table(u.events)
	switch u.sinkKind {
	case "delta":
		got = u.checkVersions()
	case "postgres":
		got = u.pgRows()
	}
	u.checkKeys("the table", got)
	if diff := cmp.Diff(want, got); diff != "" {
		u.t.Errorf("the table differs from the aggregation of the %d input files (-want +got):\n%s", u.files, diff)
	}
	return want, got
}

// checkKeys fails the test when two rows have the same key.
func (u *upsertSetup) checkKeys(what string, rows []string) {
	u.t.Helper()
	seen := map[string]bool{}
	for _, r := range rows {
		k := strings.Join(strings.Split(r, " | ")[:u.agg.keys], " | ")
		if seen[k] {
			u.t.Errorf("%s holds key %s twice", what, k)
		}
		seen[k] = true
	}
}

// checkVersions reads every version of the delta table (a local copy of it
// when it is on S3) and returns the newest's rows.
func (u *upsertSetup) checkVersions() []string {
	u.t.Helper()
	dir := u.table
	if u.cfg != nil {
		dir = localCopy(u.t, u.table, u.cfg)
	}
	prefix := map[string]int{} // the aggregation of the first k files → k
	for k := 0; k <= u.files; k++ {
		prefix[strings.Join(u.agg.table(u.events[:k*10]), "\n")] = k
	}
	versions := deltatest.EveryVersion(u.t, dir)
	var rows []string
	lastK, lastTxn := -1, int64(-1)
	for _, v := range versions {
		rows = rows[:0]
		for _, r := range v.Rows {
			rows = append(rows, render(r))
		}
		slices.Sort(rows)
		u.checkKeys(fmt.Sprintf("version %d", v.Version), rows)
		k, ok := prefix[strings.Join(rows, "\n")]
		switch {
		case !ok:
			u.t.Errorf("version %d (%d rows) is not the aggregation of any prefix of the input", v.Version, len(rows))
		case k < lastK:
			u.t.Errorf("version %d holds the aggregation of %d files, the version before of %d", v.Version, k, lastK)
		}
		lastK = max(lastK, k)
		if len(v.Txns) != 1 {
			u.t.Errorf("version %d carries txns %v, want one query's", v.Version, v.Txns)
		}
		for _, b := range v.Txns {
			if b <= lastTxn {
				u.t.Errorf("version %d carries batch %d, the version before batch %d: a batch committed twice", v.Version, b, lastTxn)
			}
			lastTxn = b
		}
	}
	u.t.Logf("%d versions, the last of batch %d; %d input files", len(versions), lastTxn, u.files)
	return rows
}

// localCopy copies the objects under loc (on S3) to a new local folder,
// for DuckDB and delta-go, which read delta tables from folders.
func localCopy(t testing.TB, loc string, cfg []s3.Option) string {
	t.Helper()
	ctx := context.Background()
	f := openFolder(t, loc, cfg)
	objs, err := f.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, o := range objs {
		b, err := f.Get(ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(o.Key))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// pgRows returns the postgres table's rows, rendered and sorted, and checks
// that lockstep_batches holds each batch once.
func (u *upsertSetup) pgRows() []string {
	u.t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u.dsn)
	if err != nil {
		u.t.Fatal(err)
	}
	defer conn.Close(ctx)
	rs, err := conn.Query(ctx, "SELECT * FROM "+u.agg.name)
	if err != nil {
		u.t.Fatal(err)
	}
	var rows []string
	for rs.Next() {
		vals, err := rs.Values()
		if err != nil {
			u.t.Fatal(err)
		}
		rows = append(rows, render(vals))
	}
	if err := rs.Err(); err != nil {
		u.t.Fatal(err)
	}
	slices.Sort(rows)
	var queries, batches, distinct int
	if err := conn.QueryRow(ctx, "SELECT count(DISTINCT query_id), count(*), count(DISTINCT (query_id, batch_id)) FROM lockstep_batches").
		Scan(&queries, &batches, &distinct); err != nil {
		u.t.Fatal(err)
	}
	if queries != 1 || batches != distinct {
		u.t.Errorf("lockstep_batches holds %d rows of %d queries, %d distinct: want one query's, each batch once", batches, queries, distinct)
	}
	u.t.Logf("%d batches in lockstep_batches; %d input files", batches, u.files)
	return rows
}

// upsertScenarios are the pipelines killed: each aggregation into each
// upserting sink.
func upsertScenarios() []struct {
	name, sink string
	agg        upsertAgg
} {
	var out []struct {
		name, sink string
		agg        upsertAgg
	}
	for _, sink := range []string{"delta", "postgres"} {
		for _, agg := range upsertAggs {
			out = append(out, struct {
				name, sink string
				agg        upsertAgg
			}{agg.name + "-to-" + sink, sink, agg})
		}
	}
	return out
}

// TestUpsertPhaseKills kills each update-mode pipeline with SIGKILL at every
// phase boundary of batches 0 and 2 (for delta between its data files and
// its commit, for postgres before its transaction commits), locally and on
// S3, then lets a run finish.
func TestUpsertPhaseKills(t *testing.T) {
	for _, sc := range upsertScenarios() {
		for _, store := range []string{"local", "s3"} {
			for _, p := range Points() {
				t.Run(fmt.Sprintf("%s/%s/%s", sc.name, store, p), func(t *testing.T) {
					t.Parallel()
					u := newUpsert(t, sc.agg, sc.sink, store, "")
					u.addInput(6)
					if r := u.runOnce(p.Env()); !r.Killed {
						t.Fatalf("the run was not killed at %s: exit %d\n%s", p, r.Code, r.Stderr)
					}
					u.finish()
				})
			}
		}
	}
}

// upsertKills is how many random SIGKILLs each update-mode pipeline gets on
// each store: 60 in all per pipeline.
const upsertKills = 30

// TestUpsertRandomKills kills each update-mode pipeline with SIGKILL at
// random instants, locally and on S3, adding input whenever a run got to the
// end, then lets a run finish.
func TestUpsertRandomKills(t *testing.T) {
	for _, sc := range upsertScenarios() {
		for _, store := range []string{"local", "s3"} {
			t.Run(sc.name+"/"+store, func(t *testing.T) {
				t.Parallel()
				u := newUpsert(t, sc.agg, sc.sink, store, "")
				u.addInput(20)
				timing := newUpsert(t, sc.agg, sc.sink, store, "")
				timing.addInput(20)
				began := time.Now()
				if r := timing.runOnce(); r.Code != 0 {
					t.Fatalf("timing run: exit %d\n%s", r.Code, r.Stderr)
				}
				span := max(time.Since(began), 200*time.Millisecond)
				finished := KillRandomly(t, upsertKills, span, func(finishedLast bool) *exec.Cmd {
					if finishedLast {
						u.addInput(3)
					}
					return u.command()
				})
				t.Logf("%d runs killed at random instants within %s, %d ran to the end; %d input files", upsertKills, span, finished, u.files)
				u.finish()
			})
		}
	}
}

// TestUpsertPostgresRestart stops PostgreSQL (fast: sessions ended, the
// transaction in flight rolled back; or immediately, as a crash) in the
// middle of runs of each update-mode pipeline into postgres, and starts it
// again a moment later. A run fails the batch that hits the stopped server
// and exits 1, as do runs started while it is down; restarted as Kubernetes
// would, the query replays the batch and loses nothing.
func TestUpsertPostgresRestart(t *testing.T) {
	for _, agg := range upsertAggs {
		t.Run(agg.name, func(t *testing.T) {
			t.Parallel()
			srv := testenv.OwnPostgres(t)
			u := newUpsert(t, agg, "postgres", "local", srv.Database(t))
			runs := map[string]int{}
			modes := []testenv.PostgresStop{testenv.PostgresFast, testenv.PostgresImmediate, testenv.PostgresFast, testenv.PostgresImmediate}
			for i, mode := range modes {
				u.addInput(12)
				r, started := runStoppingPostgres(t, u.command(), srv, mode, time.Duration(i)*500*time.Millisecond)
				switch {
				case r.Code == 0:
					runs["stopped under: exit 0"]++
				case r.Code == 1 && strings.Contains(r.Stderr, "postgres sink: batch "):
					runs["stopped under: exit 1, the batch failed"]++
				default:
					t.Fatalf("run %d: exit %d\n%s", i, r.Code, r.Stderr)
				}
				// Restarts while the server may still be coming back.
				for attempt := 0; ; attempt++ {
					r := u.runOnce()
					if r.Code == 0 {
						runs["restart: exit 0"]++
						break
					}
					if r.Code != 1 || !strings.Contains(r.Stderr, "postgres sink") || attempt == 200 {
						t.Fatalf("restart %d after stop %d: exit %d\n%s", attempt, i, r.Code, r.Stderr)
					}
					runs["restart: exit 1, server away"]++
					time.Sleep(200 * time.Millisecond)
				}
				if err := <-started; err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("runs %v; %d input files", runs, u.files)
			if runs["stopped under: exit 1, the batch failed"] == 0 {
				t.Error("no batch failed on the stopped server: the stops hit no query")
			}
			u.finish()
		})
	}
}

// runStoppingPostgres runs cmd and, once it has committed a batch, stops
// the server with mode and, downtime later, starts it again, while the run
// goes on. It returns how the run ended, and where the start reports (the
// server may still be down when the run has ended).
func runStoppingPostgres(t *testing.T, cmd *exec.Cmd, srv *testenv.PostgresServer, mode testenv.PostgresStop, downtime time.Duration) (Result, <-chan error) {
	t.Helper()
	started := make(chan error, 1)
	stopped := false
	var stderr bytes.Buffer
	r := runWatching(t, cmd, &stderr, func(line string) {
		if !stopped && strings.HasPrefix(line, "batch ") {
			stopped = true
			srv.Stop(mode)
			go func() {
				time.Sleep(downtime)
				started <- srv.Start()
			}()
		}
	})
	if !stopped {
		t.Log("the run ended before its first batch; the server was not stopped")
		started <- nil
	}
	return r, started
}
