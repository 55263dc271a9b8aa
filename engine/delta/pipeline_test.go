package delta_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/delta"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
	"github.com/lockstep-dev/lockstep/engine/kafka"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// wait bounds how long a test waits for a crashed run.
const wait = 30 * time.Second

// registry is the built-in registry plus the delta sink and source, as
// `lockstep run` fills it.
func registry(t testing.TB) *engine.Registry {
	t.Helper()
	reg := enginetest.Registry(t)
	if err := reg.RegisterSink(v1.SinkDelta, delta.SinkSpec(), delta.NewSink); err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterSource(v1.SourceDelta, delta.SourceSpec(), delta.NewSource); err != nil {
		t.Fatal(err)
	}
	if _, ok := reg.SourceSpec(v1.SourceKafka); !ok {
		if err := reg.RegisterSource(v1.SourceKafka, kafka.SourceSpec(), kafka.NewSource); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

// pipeline is A: files → delta table, and B: delta table → files, with
// their input, table, output and checkpoints on one kind of store.
type pipeline struct {
	kind                 string
	in, table, out       string
	ckptA, ckptB         string
	cfg                  []s3.Option
	opts                 []engine.Option
	env                  []string // the S3 settings, for child processes
	files                int
	want                 []engine.Row // A's output for the input so far
	aMaxFiles, bMaxFiles int32
}

func newPipeline(t *testing.T, kind string) *pipeline {
	t.Helper()
	p := &pipeline{kind: kind, aMaxFiles: 2, bMaxFiles: 3}
	switch kind {
	case "local":
		root := t.TempDir()
		p.in, p.table, p.out, p.ckptA, p.ckptB = root+"/in", root+"/table", root+"/out", root+"/ckpt-a", root+"/ckpt-b"
		if err := os.MkdirAll(p.in, 0o755); err != nil {
			t.Fatal(err)
		}
	case "s3":
		// The settings are passed, not set in the environment, so that
		// tests on S3 can run in parallel.
		s := testenv.S3(t)
		p.cfg = s.Options()
		p.env = s.Env()
		b := "s3://" + s.Bucket
		p.in, p.table, p.out, p.ckptA, p.ckptB = b+"/in", b+"/lake/orders", b+"/out", b+"/ckpt/a", b+"/ckpt/b"
		p.opts = []engine.Option{engine.WithS3(p.cfg...)}
	}
	return p
}

func (p *pipeline) folder(t testing.TB, loc string) checkpoint.Store {
	t.Helper()
	f, err := s3.OpenFolder(loc, p.cfg...)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// add writes n JSON files of 3 orders each and records A's output for them.
func (p *pipeline) add(t testing.TB, n int) {
	t.Helper()
	in := p.folder(t, p.in)
	countries := []string{"de", "fr", "us"}
	for range n {
		i := p.files
		p.files++
		var lines []string
		for j := range 3 {
			id := fmt.Sprintf("o-%04d-%d", i, j)
			amount := float64(j) - 0.5 // -0.5 is filtered out
			country := countries[(i+j)%3]
			lines = append(lines, fmt.Sprintf(`{"id":%q,"country":%q,"amount":%g,"qty":2}`, id, country, amount))
			if amount > 0 {
				p.want = append(p.want, engine.Row{id, strings.ToUpper(country), amount * 2})
			}
		}
		if err := in.Put(context.Background(), fmt.Sprintf("orders-%04d.json", i), []byte(strings.Join(lines, "\n")+"\n")); err != nil {
			t.Fatal(err)
		}
		if p.kind == "local" {
			at := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second)
			os.Chtimes(p.in+fmt.Sprintf("/orders-%04d.json", i), at, at)
		}
	}
}

// orders is the start of the pipeline's files queries named name: the orders
// in p.in, maxFiles files a batch, those with a positive amount.
func (p *pipeline) orders(name string, maxFiles int32) *querytest.Query {
	return querytest.Make(name, "shop").
		FilesSource("orders", p.in, v1.FormatJSON,
			querytest.Col("id", v1.TypeString), querytest.Col("country", v1.TypeString),
			querytest.Col("amount", v1.TypeDouble), querytest.Col("qty", v1.TypeLong)).
		EditSource("orders", func(s *v1.Source) { s.Files.MaxFilesPerTrigger = new(maxFiles) }).
		Filter("amount > 0.0")
}

// queryA is files → delta, partitioned by country.
func (p *pipeline) queryA() *v1.StreamingQuery {
	return p.orders("orders-to-delta", p.aMaxFiles).
		Select(querytest.As("id", "id"), querytest.As("country", "country.upperAscii()"), querytest.As("total", "amount * double(qty)")).
		DeltaSink(p.table, "country").
		Checkpoint(p.ckptA).
		AvailableNow().Obj()
}

// queryB is delta → files, reading A's table.
func (p *pipeline) queryB() *v1.StreamingQuery {
	return querytest.Make("delta-to-files", "shop").
		DeltaSource("orders", p.table,
			querytest.Col("id", v1.TypeString), querytest.Col("country", v1.TypeString), querytest.Col("total", v1.TypeDouble)).
		EditSource("orders", func(s *v1.Source) { s.Delta.MaxFilesPerTrigger = new(p.bMaxFiles) }).
		FilesSink(p.out, v1.FormatJSON).
		Checkpoint(p.ckptB).
		AvailableNow().Obj()
}

func (p *pipeline) query(t testing.TB, q *v1.StreamingQuery, opts ...engine.Option) *engine.Query {
	t.Helper()
	eq, err := engine.New(q, registry(t), append(append([]engine.Option{}, p.opts...), opts...)...)
	if err != nil {
		t.Fatalf("engine.New(%s): %v", q.Name, err)
	}
	return eq
}

func (p *pipeline) run(t testing.TB, q *v1.StreamingQuery, opts ...engine.Option) engine.Summary {
	t.Helper()
	sum, err := p.query(t, q, opts...).Run(context.Background())
	if err != nil {
		t.Fatalf("Run(%s): %v", q.Name, err)
	}
	return sum
}

// crash runs q until a phase hook ends its goroutine, as a crash would:
// nothing after that point runs.
func (p *pipeline) crash(t *testing.T, q *v1.StreamingQuery, phase engine.Phase, batch int64) {
	t.Helper()
	eq := p.query(t, q, engine.WithPhaseHook(func(ph engine.Phase, b int64) {
		if ph == phase && b == batch {
			runtime.Goexit()
		}
	}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := eq.Run(context.Background())
		t.Errorf("Run(%s) returned %v; want a crash at %s of batch %d", q.Name, err, phase, batch)
	}()
	select {
	case <-done:
	case <-time.After(wait):
		t.Fatal("no crash")
	}
}

// tableRows is the table's content, sorted.
func (p *pipeline) tableRows(t testing.TB) (*delta.Snapshot, []engine.Row) {
	t.Helper()
	return tableContent(t, delta.Open(p.folder(t, p.table)))
}

func (p *pipeline) wantRows() []engine.Row {
	want := append([]engine.Row(nil), p.want...)
	enginetest.SortRows(want)
	return want
}

// checkTable compares the table's content with A's expected output, and
// checks that each committed batch is exactly one table commit.
func (p *pipeline) checkTable(t *testing.T, sum engine.Summary) {
	t.Helper()
	p.checkContent(t, p.wantRows(), sum)
}

// checkContent compares the table's content with want (sorted), and checks
// that the run that summed up as sum made exactly one table commit a batch:
// the table's version and the query's txn version are its last batch. It
// returns the table's snapshot.
func (p *pipeline) checkContent(t *testing.T, want []engine.Row, sum engine.Summary) *delta.Snapshot {
	t.Helper()
	s, got := p.tableRows(t)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("table content (-want +got):\n%s", diff)
	}
	if v, ok := s.TxnVersion(sum.QueryID); !ok || v != sum.LastCommitted {
		t.Errorf("txn version of query %s = %d, %t; want the last batch, %d", sum.QueryID, v, ok, sum.LastCommitted)
	}
	if s.Version != sum.LastCommitted {
		t.Errorf("table version = %d, want %d: one commit per batch", s.Version, sum.LastCommitted)
	}
	return s
}

// A files → delta query crashed at every phase of a batch, then restarted,
// leaves the same table content as an uninterrupted run: the replayed batch
// finds its txn(query id, batch id) in the table.
func TestFilesToDeltaCrashAtEveryPhase(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			clean := newPipeline(t, kind)
			clean.add(t, 7)
			_, uninterrupted := clean.tableRows(t)
			clean.checkTable(t, clean.run(t, clean.queryA()))
			_, uninterrupted = clean.tableRows(t)

			for _, phase := range engine.Phases() {
				t.Run(string(phase), func(t *testing.T) {
					p := newPipeline(t, kind)
					p.add(t, 7)
					p.crash(t, p.queryA(), phase, 1)
					sum := p.run(t, p.queryA())
					p.checkTable(t, sum)
					if _, got := p.tableRows(t); !cmp.Equal(uninterrupted, got) {
						t.Errorf("content differs from the uninterrupted run:\n%s", cmp.Diff(uninterrupted, got))
					}
				})
			}
		})
	}
}

// A → delta → B: B's output equals A's input (content), with A and B each
// crashed once and more input arriving between runs.
func TestChainedThroughDelta(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			p := newPipeline(t, kind)
			p.add(t, 5)
			p.crash(t, p.queryA(), engine.PhaseSinkWrite, 1)
			a := p.run(t, p.queryA())
			p.crash(t, p.queryB(), engine.PhaseSinkCommitted, 0)
			b := p.run(t, p.queryB())
			p.add(t, 4)
			p.crash(t, p.queryA(), engine.PhaseSinkCommitted, a.LastCommitted+1)
			p.run(t, p.queryA())
			p.crash(t, p.queryB(), engine.PhaseSinkWrite, b.LastCommitted+1)
			p.run(t, p.queryB())

			got := enginetest.OutputRows(t, p.folder(t, p.out))
			if diff := cmp.Diff(p.wantRows(), got); diff != "" {
				t.Errorf("B's output (-A's input, transformed +B's output):\n%s", diff)
			}
		})
	}
}

// A delta source that fell behind log retention stops the query with the
// data-loss error.
func TestQueryStopsOnDataLoss(t *testing.T) {
	p := newPipeline(t, "local")
	p.aMaxFiles, p.bMaxFiles = 1, 1
	p.add(t, 3)
	p.run(t, p.queryA())
	p.run(t, p.queryB()) // B has read versions 0-2
	p.add(t, 20)
	p.run(t, p.queryA()) // versions 3-22; checkpoints 10 and 20
	tbl := delta.Open(p.folder(t, p.table))
	if _, err := tbl.CleanupLog(context.Background(), 20); err != nil {
		t.Fatal(err)
	}
	_, err := p.query(t, p.queryB()).Run(context.Background())
	var dl *delta.DataLossError
	if !errorsAs(err, &dl) || dl.Need != 3 || dl.Oldest != 20 {
		t.Fatalf("Run(B) error = %v, want a DataLossError needing version 3", err)
	}
	if n := strings.Count(err.Error(), "source orders"); n != 1 {
		t.Errorf("Run(B) error = %v names the source %d times, want once (the engine's prefix)", err, n)
	}
	t.Logf("Run(B): %v", err)
}

// queryAgg is files → count and sum per country → delta, in complete mode:
// each batch replaces the table's content with the whole result.
func (p *pipeline) queryAgg() *v1.StreamingQuery {
	return p.orders("revenue-to-delta", p.aMaxFiles).
		Select(querytest.As("country", "country.upperAscii()"), querytest.As("total", "amount * double(qty)")).
		Aggregate("revenue", []v1.GroupKey{{Column: "country"}},
			v1.Aggregation{Name: "orders", Function: "count"}, v1.Aggregation{Name: "revenue", Function: "sum", Column: "total"}).
		DeltaSink(p.table).
		OutputMode(v1.OutputComplete).
		Checkpoint(p.ckptA).
		AvailableNow().Obj()
}

// Complete mode end to end: an aggregation's whole result replaces the
// table's content at every batch (remove + add in one commit), also across
// a crash between the data files and the commit.
func TestCompleteModeAggregation(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			p := newPipeline(t, kind)
			p.add(t, 4)
			p.crash(t, p.queryAgg(), engine.PhaseSinkWrite, 1)
			p.run(t, p.queryAgg())
			p.add(t, 3)
			sum := p.run(t, p.queryAgg())

			type agg struct {
				n   int64
				sum float64
			}
			by := map[string]*agg{}
			for _, r := range p.want {
				a := by[r[1].(string)]
				if a == nil {
					a = &agg{}
					by[r[1].(string)] = a
				}
				a.n++
				a.sum += r[2].(float64)
			}
			var want []engine.Row
			for c, a := range by {
				want = append(want, engine.Row{c, a.n, a.sum})
			}
			enginetest.SortRows(want)
			s := p.checkContent(t, want, sum)
			tbl := delta.Open(p.folder(t, p.table))
			actions, err := tbl.Commit(context.Background(), s.Version)
			if err != nil {
				t.Fatal(err)
			}
			removes := 0
			for _, a := range actions {
				if a.Remove != nil {
					removes++
				}
			}
			if removes == 0 {
				t.Errorf("the last complete-mode commit removes nothing; want the previous result's files removed")
			}
		})
	}
}
