package engine_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
)

// enrichment is a files → files query that enriches orders with a static folder of
// customers, left outer, one orders file a batch.
type enrichment struct {
	orders, customers, out, ckpt string
	n                            int
}

func newEnrichment(t *testing.T) *enrichment {
	t.Helper()
	return &enrichment{orders: t.TempDir(), customers: t.TempDir(), out: t.TempDir(), ckpt: filepath.Join(t.TempDir(), "ckpt")}
}

// writeFile writes lines as a file of dir whose modification time orders it after the ones
// before.
func writeLines(t *testing.T, dir, name string, at time.Time, lines ...string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, at, at); err != nil {
		t.Fatal(err)
	}
}

// addOrders writes one orders file with an order of each customer id.
func (e *enrichment) addOrders(t *testing.T, customers ...string) {
	t.Helper()
	var lines []string
	for _, c := range customers {
		lines = append(lines, fmt.Sprintf(`{"order_id":"o%d-%s","customer_id":%q,"amount":1.5}`, e.n, c, c))
	}
	writeLines(t, e.orders, fmt.Sprintf("orders-%03d.json", e.n), time.Date(2026, 1, 5, 10, 0, e.n, 0, time.UTC), lines...)
	e.n++
}

// addCustomers writes one customers file.
func (e *enrichment) addCustomers(t *testing.T, name string, idNames ...string) {
	t.Helper()
	var lines []string
	for i := 0; i+1 < len(idNames); i += 2 {
		lines = append(lines, fmt.Sprintf(`{"id":%q,"name":%q}`, idNames[i], idNames[i+1]))
	}
	writeLines(t, e.customers, name, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), lines...)
}

func (e *enrichment) query(refresh *v1.Refresh) *querytest.Query {
	static := querytest.StaticFiles(e.customers, v1.FormatJSON, querytest.Col("id", v1.TypeString), querytest.Col("name", v1.TypeString))
	static.Refresh = refresh
	return querytest.Make("enrich", "shop").
		FilesSource("orders", e.orders, v1.FormatJSON,
			querytest.Col("order_id", v1.TypeString), querytest.Col("customer_id", v1.TypeString), querytest.Col("amount", v1.TypeDouble)).
		EditSource("orders", func(s *v1.Source) { s.Files.MaxFilesPerTrigger = new(int32(1)) }).
		Join(v1.Join{Name: "customers", Type: v1.JoinLeftOuter, Keys: querytest.Keys("customer_id", "id"), Static: static, RightPrefix: "c_"}).
		FilesSink(e.out, v1.FormatJSON).
		Checkpoint(e.ckpt).
		AvailableNow()
}

func (e *enrichment) output(t *testing.T) []engine.Row {
	t.Helper()
	return enginetest.OutputRowsAt(t, e.out)
}

func TestStaticJoinEnriches(t *testing.T) {
	e := newEnrichment(t)
	e.addCustomers(t, "a.json", "c1", "Ann", "c2", "Bob")
	e.addCustomers(t, "b.json", "c2", "Bea") // two customers c2: an order of c2 matches both
	e.addOrders(t, "c1", "c2")
	e.addOrders(t, "c3")
	rec := enginetest.NewRecorder()
	q := e.query(nil).Obj()
	eq := newQuery(t, q, engine.WithObserver(rec))
	if want := (v1.Columns{{Name: "order_id", Type: v1.TypeString}, {Name: "customer_id", Type: v1.TypeString}, {Name: "amount", Type: v1.TypeDouble},
		{Name: "c_id", Type: v1.TypeString}, {Name: "c_name", Type: v1.TypeString}}); !cmp.Equal(eq.Columns(), want) {
		t.Errorf("Columns() = %v, want %v", eq.Columns(), want)
	}
	if _, err := eq.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := []engine.Row{
		{"o0-c1", "c1", 1.5, "c1", "Ann"},
		{"o0-c2", "c2", 1.5, "c2", "Bea"},
		{"o0-c2", "c2", 1.5, "c2", "Bob"},
		{"o1-c3", "c3", 1.5, nil, nil},
	}
	if diff := cmp.Diff(want, e.output(t)); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	b := rec.Batches()
	if len(b) != 2 || len(b[0].Joins) != 1 || !b[0].Joins[0].Loaded || b[0].Joins[0].Rows != 3 || b[1].Joins[0].Loaded {
		t.Fatalf("batches' joins = %+v, want the snapshot of 3 rows loaded by batch 0 and kept by batch 1", b)
	}
	if !strings.Contains(string(b[0].Joins[0].Snapshot), `"fingerprint":"sha256:`) {
		t.Errorf("snapshot = %s, want a fingerprinted listing", b[0].Joins[0].Snapshot)
	}
	// The offsets log records it, for a replay.
	o := offsetsEntry(t, e.ckpt, 1)
	if j, ok := o.Join("customers"); !ok || string(j.Snapshot) != string(b[1].Joins[0].Snapshot) {
		t.Errorf("offsets/1 joins = %+v, want the batch's snapshot", o.Joins)
	}
}

// TestStaticJoinReplayJoinsRecordedSnapshot: a batch planned before a crash joins, when it
// is replayed, against the snapshot its offsets entry recorded, though the static folder
// changed meanwhile; the next batch refreshes (every 1ns: each batch lists the folder).
func TestStaticJoinReplayJoinsRecordedSnapshot(t *testing.T) {
	e := newEnrichment(t)
	e.addCustomers(t, "a.json", "c1", "Ann")
	e.addOrders(t, "c1")
	e.addOrders(t, "c9")
	e.addOrders(t, "c9")
	refresh := &v1.Refresh{Every: "1ns"}
	crash(t, newQuery(t, e.query(refresh).Obj(), crashAt(engine.PhaseOffsetsWritten, 1)))
	e.addCustomers(t, "b.json", "c9", "Zed")
	rec := enginetest.NewRecorder()
	run(t, e.query(refresh).Obj(), engine.WithObserver(rec))
	want := []engine.Row{
		{"o0-c1", "c1", 1.5, "c1", "Ann"},
		{"o1-c9", "c9", 1.5, nil, nil}, // replayed with the recorded snapshot: no c9 yet
		{"o2-c9", "c9", 1.5, "c9", "Zed"},
	}
	if diff := cmp.Diff(want, e.output(t)); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	b := rec.Batches()
	if len(b) != 2 || !b[0].Replay || b[0].Joins[0].Rows != 1 || b[1].Joins[0].Rows != 2 {
		t.Errorf("batches after the restart = %+v, want batch 1 replayed with 1 customer, batch 2 with 2", b)
	}
}

// annOrdered is an enrichment with customer c1, Ann, in a.json, whose one
// order of c1 a run joined.
func annOrdered(t *testing.T) *enrichment {
	t.Helper()
	e := newEnrichment(t)
	e.addCustomers(t, "a.json", "c1", "Ann")
	e.addOrders(t, "c1")
	run(t, e.query(nil).Obj())
	return e
}

// TestStaticJoinKeepsSnapshotWithoutRefresh: without refresh, the first batch's snapshot is
// kept across batches and runs; a rewritten file of it stops the query, naming the file.
func TestStaticJoinKeepsSnapshotWithoutRefresh(t *testing.T) {
	e := annOrdered(t)
	e.addCustomers(t, "b.json", "c1", "Other")
	e.addOrders(t, "c1")
	run(t, e.query(nil).Obj())
	want := []engine.Row{{"o0-c1", "c1", 1.5, "c1", "Ann"}, {"o1-c1", "c1", 1.5, "c1", "Ann"}}
	if diff := cmp.Diff(want, e.output(t)); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	e.addCustomers(t, "a.json", "c1", "Ann", "c2", "Bob")
	e.addOrders(t, "c2")
	_, err := newQuery(t, e.query(nil).Obj()).Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "a.json") || !strings.Contains(err.Error(), "rewritten") {
		t.Errorf("Run with a rewritten static file = %v, want an error naming it", err)
	}
}

// TestStaticJoinTableChanged: the join's static side moves to another folder (a change the
// planner allows with a warning, as a filter): the next batch reads a snapshot of the new
// folder, not the recorded one's files from it; a batch planned before the change and
// replayed after it joins the new folder's newest snapshot, its recorded one being of the
// old folder. The offsets log names the side of each snapshot.
func TestStaticJoinTableChanged(t *testing.T) {
	e := annOrdered(t)
	old := e.customers
	e.customers = t.TempDir()
	e.addCustomers(t, "other.json", "c1", "Ada", "c2", "Bob")
	e.addOrders(t, "c1")
	e.addOrders(t, "c2")
	crash(t, newQuery(t, e.query(nil).Obj(), crashAt(engine.PhaseOffsetsWritten, 2)))
	if j, ok := offsetsEntry(t, e.ckpt, 2).Join("customers"); !ok || j.Side != "files:"+e.customers {
		t.Errorf("offsets/2's snapshot is of %q, want the new folder's", j.Side)
	}
	if j, _ := offsetsEntry(t, e.ckpt, 0).Join("customers"); j.Side != "files:"+old {
		t.Errorf("offsets/0's snapshot is of %q, want the old folder's", j.Side)
	}
	run(t, e.query(nil).Obj())
	want := []engine.Row{
		{"o0-c1", "c1", 1.5, "c1", "Ann"},
		{"o1-c1", "c1", 1.5, "c1", "Ada"},
		{"o2-c2", "c2", 1.5, "c2", "Bob"},
	}
	if diff := cmp.Diff(want, e.output(t)); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}

	// A batch planned with the old folder and replayed after the change.
	f := newEnrichment(t)
	f.addCustomers(t, "a.json", "c1", "Ann")
	f.addOrders(t, "c1")
	f.addOrders(t, "c1")
	crash(t, newQuery(t, f.query(nil).Obj(), crashAt(engine.PhaseOffsetsWritten, 1)))
	f.customers = t.TempDir()
	f.addCustomers(t, "other.json", "c1", "Ada")
	run(t, f.query(nil).Obj())
	want = []engine.Row{{"o0-c1", "c1", 1.5, "c1", "Ann"}, {"o1-c1", "c1", 1.5, "c1", "Ada"}}
	if diff := cmp.Diff(want, f.output(t)); diff != "" {
		t.Errorf("the replayed batch's output (-want +got):\n%s", diff)
	}
}

func TestStaticJoinNeedsItsKindRegistered(t *testing.T) {
	e := newEnrichment(t)
	q := e.query(nil).Obj()
	q.Spec.Transform[0].Join.Static = querytest.StaticDelta("/lake/customers", querytest.Col("id", v1.TypeString), querytest.Col("name", v1.TypeString))
	_, err := engine.New(q, enginetest.Registry(t))
	if err == nil || !strings.Contains(err.Error(), "spec.transform[0].join.static.delta") {
		t.Errorf("New = %v, want the unregistered static kind refused at its field", err)
	}
}

func offsetsEntry(t *testing.T, location string, batch int64) checkpoint.Offsets {
	t.Helper()
	store, err := checkpoint.Open(t.Context(), location)
	if err != nil {
		t.Fatal(err)
	}
	data, err := store.Get(t.Context(), "offsets/"+checkpoint.BatchName(batch))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitN(string(data), "\n", 3)
	var h struct {
		Joins []checkpoint.JoinSnapshot `json:"joins"`
	}
	if err := json.Unmarshal([]byte(lines[1]), &h); err != nil {
		t.Fatal(err)
	}
	return checkpoint.Offsets{Joins: h.Joins}
}
