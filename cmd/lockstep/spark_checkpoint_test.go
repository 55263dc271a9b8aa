package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// plainSparkJob runs testdata/sparkjob/PlainJob.java, a Spark job with no Lockstep code, over
// input into the checkpoint ckpt.
func plainSparkJob(t *testing.T, kind, input, ckpt string) {
	t.Helper()
	src, err := filepath.Abs("testdata/sparkjob/PlainJob.java")
	if err != nil {
		t.Fatal(err)
	}
	cmd := testenv.SparkRunner(t).ProgramCommand(src, 768<<20, kind, input, ckpt)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("plain Spark job %s: %v\n%s", kind, err, tail(string(out), 4000))
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// writeOrders writes one JSON file of orders (id, country, amount, second after t0) into
// dir/orders.
func writeOrders(t *testing.T, dir string, file int, orders ...string) {
	t.Helper()
	t0 := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	var lines []string
	for _, o := range orders {
		var id, country string
		var amount float64
		var sec int
		if _, err := fmt.Sscanf(o, "%s %s %g %d", &id, &country, &amount, &sec); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, fmt.Sprintf(`{"order_id":%q,"country":%q,"amount":%g,"ts":%q}`, id, country, amount, t0.Add(time.Duration(sec)*time.Second).Format(time.RFC3339)))
	}
	p := filepath.Join(dir, "orders", fmt.Sprintf("part-%03d.json", file))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// sparkOrdersQuery is the StreamingQuery a team would write for PlainJob's dedup-agg, with
// edit applied to its YAML.
func sparkOrdersQuery(t *testing.T, input, ckpt string, edit func(string) string) string {
	t.Helper()
	y := `apiVersion: streaming.lockstep.dev/v1
kind: StreamingQuery
metadata: {name: orders, namespace: shop}
spec:
  sources:
  - name: orders
    files: {path: ` + filepath.Join(input, "orders") + `, format: json}
    schema:
      columns: [{name: order_id, type: string}, {name: country, type: string}, {name: amount, type: double}, {name: ts, type: timestamp}]
  transform:
  - watermark: {column: ts, delay: 10s}
  - dropDuplicates: {columns: [order_id]}
  - aggregate:
      groupBy: [{column: country}, {window: {column: ts, duration: 1m}}]
      aggregates: [{name: orders, function: count}, {name: revenue, function: sum, column: amount}, {name: top, function: max, column: amount}]
  sink: {console: {}}
  outputMode: append
  stateStore: {partitions: 3}
  checkpoint: {location: ` + ckpt + `}
`
	if edit != nil {
		y = edit(y)
	}
	p := filepath.Join(t.TempDir(), "query.yaml")
	if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPlainSparkCheckpoint: describe, batches and plan on checkpoints that a plain Spark job
// wrote (a stateful aggregation after a dedup, and a stream–stream join): what Spark records
// is read without a JVM, and a change Spark's own restart check lets through is rejected.
func TestPlainSparkCheckpoint(t *testing.T) {
	input, ckpt := t.TempDir(), filepath.Join(t.TempDir(), "ckpt")
	writeOrders(t, input, 0, "o1 de 10 5", "o2 fr 20 6", "o1 de 10 5")
	plainSparkJob(t, "dedup-agg", input, ckpt)
	writeOrders(t, input, 1, "o3 de 30 70", "o4 fr 5 200")
	plainSparkJob(t, "dedup-agg", input, ckpt)

	out, code := runCheckpointCmd(t, "checkpoint", "describe", ckpt)
	if code != exitOK {
		t.Fatalf("describe exit %d:\n%s", code, out)
	}
	for _, want := range []string{
		"Written by:", "Apache Spark Structured Streaming",
		"spark.sql.shuffle.partitions = 3",
		"files, offset {\"logOffset\":",
		"dedupe, 3 state partitions", "key (order_id string",
		"stateStoreSave, 3 state partitions", "key (country string, window struct<start:timestamp,end:timestamp>)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("describe does not say %q:\n%s", want, out)
		}
	}
	out, code = runCheckpointCmd(t, "checkpoint", "describe", "-o", "json", ckpt)
	var d struct {
		WrittenBy string  `json:"writtenBy"`
		Committed []int64 `json:"committed"`
		Operators []struct {
			Name string `json:"name"`
		} `json:"operators"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &d) != nil || d.WrittenBy != "spark" || len(d.Committed) < 2 || len(d.Operators) != 2 {
		t.Errorf("describe -o json (exit %d) = %+v:\n%s", code, d, out)
	}
	if out, code = runCheckpointCmd(t, "checkpoint", "batches", ckpt); code != exitOK || !strings.Contains(out, "committed") {
		t.Errorf("batches exit %d:\n%s", code, out)
	}

	// The query that matches the job is not rejected, and the verdict says what it inferred.
	out, code, _ = runPlan(t, testPlanOptions(), "-f", sparkOrdersQuery(t, input, ckpt, nil), "--checkpoint", ckpt)
	if code != exitOK || !strings.Contains(out, "Inferred from Spark's files") || !strings.Contains(out, "aggregate functions count, sum, max") {
		t.Errorf("plan of the same query: exit %d:\n%s", code, out)
	}
	// Grouping by another string column: Spark compares only types and would restart with
	// wrong state; the plan rejects it.
	for name, tc := range map[string]struct {
		edit func(string) string
		rule string
	}{
		"grouping column": {func(y string) string { return strings.Replace(y, "{column: country}", "{column: order_id}", 1) }, "key-columns"},
		"max to min":      {func(y string) string { return strings.Replace(y, "function: max", "function: min", 1) }, "aggregate-function"},
		"partitions":      {func(y string) string { return strings.Replace(y, "partitions: 3", "partitions: 4", 1) }, "state-partitions"},
		"a second source": {func(y string) string {
			return strings.Replace(y, "  transform:", "  - name: more\n    files: {path: "+input+"/more, format: json}\n    schema:\n      columns: [{name: order_id, type: string}, {name: country, type: string}, {name: amount, type: double}, {name: ts, type: timestamp}]\n  transform:", 1)
		}, "spark-source-positions"},
	} {
		out, code, _ := runPlan(t, testPlanOptions(), "-f", sparkOrdersQuery(t, input, ckpt, tc.edit), "--checkpoint", ckpt)
		if code != exitRefused || !strings.Contains(out, tc.rule) {
			t.Errorf("plan with another %s: exit %d, want %d naming %s:\n%s", name, code, exitRefused, tc.rule, out)
		}
	}

	// A stream–stream join: its operator and the four stores of its two sides.
	join := filepath.Join(t.TempDir(), "join")
	pay := filepath.Join(input, "payments")
	if err := os.MkdirAll(pay, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pay, "p.json"), []byte(`{"pay_id":"o1","paid_ts":"2026-01-05T10:00:30Z"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	plainSparkJob(t, "stream-join", input, join)
	out, code = runCheckpointCmd(t, "checkpoint", "describe", join)
	if code != exitOK || !strings.Contains(out, "symmetricHashJoin") || !strings.Contains(out, "state left-keyToNumValues") {
		t.Errorf("describe of a join (exit %d):\n%s", code, out)
	}
}
