package crashtest

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"time"

	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/delta"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
)

// joinQuery enriches orders with a static Delta table of customers, left outer, refreshed on
// every new version of the table, into a Delta table.
const joinQuery = `apiVersion: streaming.lockstep.dev/v1
kind: StreamingQuery
metadata: {name: enrich, namespace: test}
spec:
  sources:
  - name: orders
    files: {path: %q, format: json, maxFilesPerTrigger: 1}
    schema:
      columns:
      - {name: id, type: string}
      - {name: customer_id, type: string}
      - {name: amount, type: double}
  transform:
  - join:
      name: customers
      type: leftOuter
      keys: [{left: customer_id, right: id}]
      static:
        delta: {path: %q}
        schema: {columns: [{name: id, type: string}, {name: name, type: string}]}
        refresh: {onNewVersion: true}
      select:
      - {side: left, column: id}
      - {side: left, column: amount}
      - {side: right, column: name, name: customer}
  sink:
    delta: {path: %q}
  trigger: {availableNow: true}
`

var customerColumns = v1.Columns{{Name: "id", Type: v1.TypeString}, {Name: "name", Type: v1.TypeString}}

// joinSetup is a stream–static scenario: the orders folder, the customers table (whose
// version the test moves on mid-run) and the output table.
type joinSetup struct {
	*setup
	customers string
	version   int // of the customers' names: v<version>-<id>
}

func newJoinSetup(s *setup) *joinSetup {
	j := &joinSetup{setup: s, customers: s.in + "-customers"}
	j.setCustomers(0)
	return j
}

// setCustomers replaces the customers table's content with customers c0..c4 named for
// version v: a new table version.
func (j *joinSetup) setCustomers(v int) {
	j.t.Helper()
	f := openFolder(j.t, j.customers, j.cfg)
	var rows []delta.Row
	for c := range 5 {
		rows = append(rows, delta.Row{fmt.Sprintf("c%d", c), fmt.Sprintf("v%d-c%d", v, c)})
	}
	if _, err := delta.Open(f).Write(context.Background(), delta.Write{Columns: customerColumns, Rows: rows, Mode: delta.Complete}); err != nil {
		j.t.Fatal(err)
	}
	j.version = v
}

// addOrders writes n more order files of 6 orders each, one of an unknown customer, and
// records the output rows they must produce with the customers' current version.
func (j *joinSetup) addOrders(n int) {
	j.t.Helper()
	addFiles(j.t, j.in, j.cfg, &j.files, n, "orders-%04d.json", func(i int, b *bytes.Buffer) {
		for k := range 6 {
			id, cust := fmt.Sprintf("o-%04d-%d", i, k), fmt.Sprintf("c%d", k)
			if k == 5 {
				cust = "unknown"
			}
			amount := float64(i) + float64(k)/10
			fmt.Fprintf(b, `{"id":%q,"customer_id":%q,"amount":%g}`+"\n", id, cust, amount)
			var name any
			if k < 5 {
				name = fmt.Sprintf("v%d-%s", j.version, cust)
			}
			j.want = append(j.want, engine.Row{id, amount, name})
		}
	})
}

func (j *joinSetup) command(ckpt, out string, env ...string) *exec.Cmd {
	return runCommand(j.t, j.dir, fmt.Appendf(nil, joinQuery, j.in, j.customers, out), ckpt, append(j.env, env...)...)
}

func (j *joinSetup) runToEnd(ckpt, out string) {
	j.t.Helper()
	if r := Run(j.t, j.command(ckpt, out)); r.Code != 0 {
		j.t.Fatalf("run: exit %d\n%s", r.Code, r.Stderr)
	}
}

// output reads the Delta table at out, sorted.
func (j *joinSetup) output(out string) []engine.Row {
	j.t.Helper()
	f := openFolder(j.t, out, j.cfg)
	tbl := delta.Open(f)
	snap, err := tbl.Snapshot(context.Background())
	if err != nil {
		j.t.Fatal(err)
	}
	_, rows, err := tbl.ReadAll(context.Background(), snap)
	if err != nil {
		j.t.Fatal(err)
	}
	got := make([]engine.Row, len(rows))
	for i, r := range rows {
		got[i] = engine.Row(r)
	}
	enginetest.SortRows(got)
	return got
}

func (j *joinSetup) check(out string, against []engine.Row, what string) {
	j.t.Helper()
	want := append([]engine.Row(nil), against...)
	enginetest.SortRows(want)
	if diff := cmp.Diff(want, j.output(out)); diff != "" {
		j.t.Errorf("output differs from %s (-want +got):\n%s", what, diff)
	}
}

// TestStaticJoinPhaseKills kills the binary at each phase boundary of batch 0 and 2 of an
// enrichment into Delta, then moves the customers table to a new version before the restart.
// Batches up to the killed one were planned with version 0 and join against it, the replayed
// one included; the batches after it join against version 1: what an uninterrupted run whose
// table moved on after that batch writes, each order once.
func TestStaticJoinPhaseKills(t *testing.T) {
	for _, kind := range []string{"local", "s3"} {
		for _, p := range Points() {
			t.Run(kind+"/"+p.String(), func(t *testing.T) {
				t.Parallel()
				newSetup := newLocal
				if kind == "s3" {
					newSetup = newS3
				}
				j := newJoinSetup(newSetup(t, 1))
				j.addOrders(5)
				r := Run(t, j.command(j.ckpt, j.out, p.Env()))
				if !r.Killed {
					t.Fatalf("the run was not killed at %s: exit %d\n%s", p, r.Code, r.Stderr)
				}
				// One file a batch: files 0..p.Batch were planned against version 0.
				for i := int(p.Batch) + 1; i < 5; i++ {
					for k := range 5 {
						j.want[i*6+k][2] = fmt.Sprintf("v1-c%d", k)
					}
				}
				j.setCustomers(1)
				j.runToEnd(j.ckpt, j.out)
				j.check(j.out, j.want, "each order joined with the version its batch was planned against")
			})
		}
	}
}

// TestStaticJoinRandomKills kills the binary at ≥ 50 random instants (25 before and 25 after
// the customers table moves to a new version mid-run) and checks the output against an
// uninterrupted run that sees the same versions at the same points, and against the orders
// each joined with the version current when it was written.
func TestStaticJoinRandomKills(t *testing.T) {
	for _, kind := range []string{"local", "s3"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			s := newLocal(t, 1)
			if kind == "s3" {
				s = newS3(t, 1)
			}
			j := newJoinSetup(s)
			ref, refCkpt := j.out+"-reference", j.ckpt+"-reference"
			// Time a run of 20 batches and one with nothing to do, to aim the kills.
			j.addOrders(20)
			began := time.Now()
			j.runToEnd(j.ckpt+"-timing", j.out+"-timing")
			full := time.Since(began)
			began = time.Now()
			j.runToEnd(j.ckpt+"-timing", j.out+"-timing")
			startup := time.Since(began)
			span := startup + 8*(max(full-startup, time.Millisecond)/20)
			for phase := range 2 {
				finished := KillRandomly(t, 25, span, func(bool) *exec.Cmd {
					j.addOrders(2)
					return j.command(j.ckpt, j.out)
				})
				j.runToEnd(j.ckpt, j.out) // every order so far, with this version
				j.runToEnd(refCkpt, ref)
				t.Logf("phase %d (customers v%d): 25 runs killed, %d ran to the end; %d order files", phase, j.version, finished, j.files)
				if phase == 0 {
					j.setCustomers(1) // the refresh, mid-run
				}
			}
			j.check(j.out, j.output(ref), "an uninterrupted run's")
			j.check(j.out, j.want, "the orders, each joined once with its version")
		})
	}
}
