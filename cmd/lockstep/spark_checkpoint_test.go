package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/minio/minio-go/v7"

	"github.com/lockstep-dev/lockstep/engine/spark/sparktest"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// plainSparkJob runs testdata/sparkjob/PlainJob.java, a Spark job with no Lockstep code, over
// input into the checkpoint ckpt, with settings (KEY=VALUE: Spark's, or the files sources').
func plainSparkJob(t *testing.T, kind, input, ckpt string, settings ...string) {
	t.Helper()
	src, err := filepath.Abs("testdata/sparkjob/PlainJob.java")
	if err != nil {
		t.Fatal(err)
	}
	cmd := sparktest.Runner(t).ProgramCommand(src, 768<<20, append([]string{kind, input, ckpt}, settings...)...)
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
	defer adoptsUnnamed(t, input, ckpt) // after the plans below

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
	describeOnS3(t, ckpt, out)
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

// adoptsUnnamed: the spark runtime takes over the checkpoint that PlainJob's dedup-agg wrote,
// whose source is unnamed (source evolution off): it leaves the source unnamed, so Spark finds
// the files source's log by position and the state it kept. The first batch reads only the
// new file; the watermark then closes fr's window of o4 and o5, and o1's duplicate is dropped.
func adoptsUnnamed(t *testing.T, input, ckpt string) {
	t.Helper()
	writeOrders(t, input, 2, "o5 fr 7 205", "o1 de 99 210", "o6 de 1 400")
	stdout, stderr, code := runCommand(t, "run", "--runtime", "spark", "-f", sparkOrdersQuery(t, input, ckpt, availableNow))
	if code != exitOK || !strings.Contains(stderr, "adopted the Spark checkpoint") {
		t.Fatalf("run on a Spark checkpoint with an unnamed source: exit %d, want it adopted:\n%s\n%s", code, stderr, stdout)
	}
	if row := consoleRow(stdout, "fr", "10:03:00"); !strings.Contains(row, "|2 ") || !strings.Contains(row, "|12.0") || !strings.Contains(row, "|7.0") {
		t.Errorf("adoption of the unnamed source: fr's window at 10:03 = %q, want orders 2, revenue 12.0, top 7.0:\n%s", row, stdout)
	}
	if strings.Contains(stdout, "|de ") || strings.Contains(stdout, "10:00:00") || strings.Contains(stdout, "10:01:00") {
		t.Errorf("adoption of the unnamed source output old input again, or o1's duplicate:\n%s", stdout)
	}
}

func availableNow(y string) string {
	return strings.Replace(y, "  sink: {console: {}}", "  trigger: {availableNow: true}\n  sink: {console: {}}", 1)
}

// TestSparkCheckpointAdoption: `lockstep run --runtime spark` on the checkpoint that a plain
// Spark job (PlainJob's dedup-agg-named: orders o1–o4, Spark's watermark at 190s) wrote. An
// incompatible query is refused with the plan's findings and the checkpoint is left byte for
// byte as it was; the matching query adopts it, keeps Spark's query id, offsets and state (old
// files are not read again, a duplicate of o1 is dropped, the open window of o4 gets o5), and
// from then on it is an ordinary Lockstep query: plans judge against its records, and the next
// run resumes.
func TestSparkCheckpointAdoption(t *testing.T) {
	input, ckpt := t.TempDir(), filepath.Join(t.TempDir(), "ckpt")
	writeOrders(t, input, 0, "o1 de 10 5", "o2 fr 20 6", "o1 de 10 5")
	writeOrders(t, input, 1, "o3 de 30 70", "o4 fr 5 200")
	plainSparkJob(t, "dedup-agg-named", input, ckpt)
	before := treeOf(t, ckpt)
	sparkMeta, err := os.ReadFile(filepath.Join(ckpt, "metadata"))
	if err != nil {
		t.Fatal(err)
	}
	writeOrders(t, input, 2, "o5 fr 7 205", "o1 de 99 210", "o6 de 1 400")

	regroup := func(y string) string {
		return strings.Replace(availableNow(y), "{column: country}", "{column: order_id}", 1)
	}
	_, stderr, code := runCommand(t, "run", "--runtime", "spark", "-f", sparkOrdersQuery(t, input, ckpt, regroup))
	for _, want := range []string{"refuses this query; nothing was written to it", "✗ key-columns", "Remedy", "Inferred from Spark's files"} {
		if code != exitRefused || !strings.Contains(stderr, want) {
			t.Errorf("run of an incompatible query: exit %d, want %d saying %q:\n%s", code, exitRefused, want, stderr)
		}
	}
	if diff := cmp.Diff(before, treeOf(t, ckpt)); diff != "" {
		t.Fatalf("the refused run changed the checkpoint (-before +after):\n%s", diff)
	}

	query := sparkOrdersQuery(t, input, ckpt, availableNow)
	stdout, stderr, code := runCommand(t, "run", "--runtime", "spark", "-f", query)
	if code != exitOK || !strings.Contains(stderr, "adopted the Spark checkpoint") {
		t.Fatalf("run of the matching query: exit %d:\n%s\n%s", code, stderr, stdout)
	}
	t.Logf("adoption run:\n%s%s", stderr, stdout)
	// The first batch reads only the new file; the watermark (390s) then closes fr's window of o4 and
	// o5. Old windows are not output again, and o1's duplicate (de, 210s) is dropped by the
	// state Spark kept: no row of de at all (o6's window is still open).
	if row := consoleRow(stdout, "fr", "10:03:00"); !strings.Contains(row, "|2 ") || !strings.Contains(row, "|12.0") || !strings.Contains(row, "|7.0") {
		t.Errorf("adoption run: fr's window at 10:03 = %q, want orders 2, revenue 12.0, top 7.0:\n%s", row, stdout)
	}
	if strings.Contains(stdout, "|de ") || strings.Contains(stdout, "10:00:00") || strings.Contains(stdout, "10:01:00") {
		t.Errorf("adoption run output old input again, or o1's duplicate:\n%s", stdout)
	}
	after, err := os.ReadFile(filepath.Join(ckpt, "metadata"))
	if err != nil || string(after) != string(sparkMeta) {
		t.Errorf("Spark's metadata after adoption = %q (%v), want %q kept", after, err, sparkMeta)
	}
	var records struct {
		ID    string `json:"id"`
		Owner struct{ Namespace, Name string }
	}
	data, err := os.ReadFile(filepath.Join(ckpt, "_lockstep", "metadata"))
	if err != nil || json.Unmarshal(data, &records) != nil {
		t.Fatalf("no owner record after adoption: %v %s", err, data)
	}
	if !strings.Contains(string(sparkMeta), records.ID) || records.Owner.Namespace != "shop" || records.Owner.Name != "orders" {
		t.Errorf("owner record %s, want shop/orders with Spark's query id (%s)", data, sparkMeta)
	}

	// From now on an ordinary Lockstep query: plans judge against Lockstep's records, and a
	// second run resumes.
	out, code, _ := runPlan(t, testPlanOptions(), "--runtime", "spark", "-f", query, "--checkpoint", ckpt)
	if code != exitOK || !strings.Contains(out, "the shape recorded in checkpoint") {
		t.Errorf("plan after adoption: exit %d, want %d against Lockstep's records:\n%s", code, exitOK, out)
	}
	out, code, _ = runPlan(t, testPlanOptions(), "--runtime", "spark", "-f", sparkOrdersQuery(t, input, ckpt, regroup), "--checkpoint", ckpt)
	if code != exitRefused || !strings.Contains(out, "key-columns") || strings.Contains(out, "Inferred from Spark's files") {
		t.Errorf("plan of the incompatible query after adoption: exit %d, want %d naming key-columns:\n%s", code, exitRefused, out)
	}
	// The adoption recorded the full shape: an aggregate's input computed another way, which
	// the Spark checkpoint could not tell (spark-unrecorded), is now judged as a change.
	cents := func(y string) string {
		return strings.Replace(availableNow(y), "  - watermark:", "  - select: [{name: order_id, expr: order_id}, {name: country, expr: country}, {name: amount, expr: amount * 100.0}, {name: ts, expr: ts}]\n  - watermark:", 1)
	}
	out, _, _ = runPlan(t, testPlanOptions(), "--runtime", "spark", "-f", sparkOrdersQuery(t, input, ckpt, cents), "--checkpoint", ckpt)
	if !strings.Contains(out, "state-input-expression") || strings.Contains(out, "spark-unrecorded") {
		t.Errorf("plan of the sum in cents after adoption: want it judged (state-input-expression), not unrecorded:\n%s", out)
	}
	writeOrders(t, input, 3, "o7 fr 1 500")
	stdout, stderr, code = runCommand(t, "run", "--runtime", "spark", "-f", query)
	t.Logf("second run:\n%s%s", stderr, stdout)
	if code != exitOK || strings.Contains(stderr, "adopted") || !strings.Contains(stderr, "lockstep: resuming from batch ") {
		t.Fatalf("second run: exit %d, want an ordinary restart:\n%s\n%s", code, stderr, stdout)
	}
	if row := consoleRow(stdout, "de", "10:06:00"); !strings.Contains(row, "|1 ") || !strings.Contains(row, "|1.0") {
		t.Errorf("second run: de's window at 10:06 = %q, want o6 alone:\n%s", row, stdout)
	}
}

// consoleRow returns the row of Spark's console sink for country whose window starts at
// start (hh:mm:ss), "" when there is none.
func consoleRow(out, country, start string) string {
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "|"+country+" ") && strings.Contains(line, start) {
			return line
		}
	}
	return ""
}

// describeOnS3 copies the Spark checkpoint in ckpt to a bucket, as it would be on S3, and
// checks that `checkpoint describe` of the s3:// location says what it says of the folder
// (local) and writes nothing there.
func describeOnS3(t *testing.T, ckpt, local string) {
	t.Helper()
	srv := testenv.S3(t)
	srv.Setenv(t)
	c := srv.Client(t)
	for rel := range treeOf(t, ckpt) {
		if strings.HasSuffix(rel, "/") {
			continue
		}
		if _, err := c.FPutObject(t.Context(), srv.Bucket, "plain/"+filepath.ToSlash(rel), filepath.Join(ckpt, rel), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	before := bucketObjects(t, srv)
	location := "s3://" + srv.Bucket + "/plain"
	out, code := runCheckpointCmd(t, "checkpoint", "describe", location)
	if code != exitOK {
		t.Fatalf("describe %s: exit %d:\n%s", location, code, out)
	}
	if want := strings.Replace(local, ckpt, location, 1); out != want {
		t.Errorf("describe on S3 differs from the folder's (-folder +s3):\n%s", cmp.Diff(want, out))
	}
	if after := bucketObjects(t, srv); !cmp.Equal(before, after) {
		t.Errorf("describe changed the bucket:\n%s", cmp.Diff(before, after))
	}
}

// treeOf returns every folder and file under dir, with the files' bytes.
func treeOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	tree := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			tree[rel+"/"] = ""
			return nil
		}
		data, err := os.ReadFile(p)
		tree[rel] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// sparkSumCountQuery is the StreamingQuery a team would write for PlainJob's sum-count, with
// edit applied to its YAML.
func sparkSumCountQuery(t *testing.T, input, ckpt string, edit func(string) string) string {
	t.Helper()
	return sparkOrdersQuery(t, input, ckpt, func(y string) string {
		y = strings.Replace(y, "  - dropDuplicates: {columns: [order_id]}\n", "", 1)
		y = strings.Replace(y, "duration: 1m", "duration: 2m", 1)
		y = strings.Replace(y, "aggregates: [{name: orders, function: count}, {name: revenue, function: sum, column: amount}, {name: top, function: max, column: amount}]",
			"aggregates: [{name: revenue, function: sum, column: amount}, {name: orders, function: count}]", 1)
		if edit != nil {
			y = edit(y)
		}
		return y
	})
}

// TestPlainSparkSumCount: plans against the checkpoint of a plain Spark job (PlainJob's
// sum-count: sum(amount), count() per country and 2-minute window, no dedup). The unchanged
// job is not refused although its buffer (sum, count) is an average's too, and an average is
// not refused either; the windows' size is read from the state rows, so 1-minute windows are
// refused; a dropDuplicates added before the aggregation is refused as a step added; what the
// checkpoint does not record (the aggregate's input) is a warning naming it.
func TestPlainSparkSumCount(t *testing.T) {
	input, ckpt := t.TempDir(), filepath.Join(t.TempDir(), "ckpt")
	writeOrders(t, input, 0, "o1 de 10 5", "o2 fr 20 6", "o3 de 30 70", "o4 fr 5 200")
	plainSparkJob(t, "sum-count", input, ckpt)
	if out, code := runCheckpointCmd(t, "checkpoint", "describe", ckpt); code != exitOK || !strings.Contains(out, "2m0s long, e.g. [") {
		t.Errorf("describe (exit %d) does not show the windows of the state rows:\n%s", code, out)
	}

	for _, tc := range []struct {
		name string
		edit func(string) string
		code int
		want []string // in the plan's output
		not  []string
	}{
		{name: "the job unchanged", code: exitOK, want: []string{"aggregate functions sum, count", "windows of 2m (end − start", "spark-unrecorded"},
			not: []string{"aggregate-added", "aggregate-removed", "! spark-unrecorded spec.transform[1].aggregate.groupBy[1].window"}},
		{name: "windows of 1 minute", edit: func(y string) string { return strings.Replace(y, "duration: 2m", "duration: 1m", 1) },
			code: exitRefused, want: []string{"✗ window-size", "2m → 1m"}},
		{name: "an average", edit: func(y string) string {
			return strings.Replace(y, "aggregates: [{name: revenue, function: sum, column: amount}, {name: orders, function: count}]", "aggregates: [{name: mean, function: avg, column: amount}]", 1)
		}, code: exitOK, want: []string{"aggregate functions avg"}, not: []string{"aggregate-added", "aggregate-removed"}},
		{name: "the input of the sum in cents", edit: func(y string) string {
			return strings.Replace(y, "  - watermark:", "  - select: [{name: order_id, expr: order_id}, {name: country, expr: country}, {name: amount, expr: amount * 100.0}, {name: ts, expr: ts}]\n  - watermark:", 1)
		}, code: exitOK, want: []string{"! spark-unrecorded spec.transform[2].aggregate.aggregates[0]", "sum(amount double) where amount = amount*100.0"}},
		{name: "a dropDuplicates before the aggregation", edit: func(y string) string {
			return strings.Replace(y, "  - aggregate:", "  - dropDuplicates: {columns: [order_id]}\n  - aggregate:", 1)
		}, code: exitRefused, want: []string{"✗ operator-added spec.transform[1].dropDuplicates", "A dropDuplicates step was added"}, not: []string{"operator-kind", "aggregate-added"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code, _ := runPlan(t, testPlanOptions(), "-f", sparkSumCountQuery(t, input, ckpt, tc.edit), "--checkpoint", ckpt)
			if code != tc.code {
				t.Errorf("plan: exit %d, want %d:\n%s", code, tc.code, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("plan does not say %q:\n%s", w, out)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(out, n) {
					t.Errorf("plan says %q:\n%s", n, out)
				}
			}
		})
	}
}

// TestSparkCheckpointAdoptedRebuild: `lockstep checkpoint rebuild` on a Spark checkpoint that a
// plain Spark job wrote (batches 0–1, one file each) and Lockstep adopted (batch 2). Lockstep's
// records start at the adopted batch; the plan offers the rebuild (Spark's offsets log, which
// it does not read, decides), the rebuild replays batches 0–2 from Spark's log for the query
// without its dropDuplicates, and the next run counts o1's duplicate of batch 1.
// (engine/spark's TestSparkRebuildAdopted compares the output with an uninterrupted run.)
func TestSparkCheckpointAdoptedRebuild(t *testing.T) {
	input, ckpt := t.TempDir(), filepath.Join(t.TempDir(), "ckpt")
	writeOrders(t, input, 0, "o1 de 10 5", "o2 fr 20 6")
	writeOrders(t, input, 1, "o3 de 5 20", "o1 de 10 5")
	plainSparkJob(t, "dedup-agg", input, ckpt, "maxFilesPerTrigger=1", "spark.sql.streaming.noDataMicroBatches.enabled=false")
	onSpark := func(y string) string {
		return strings.Replace(availableNow(y), "  outputMode: append\n", "  outputMode: append\n  runtime: {spark: {}}\n", 1)
	}
	writeOrders(t, input, 2, "o4 de 30 50")
	stdout, stderr, code := runCommand(t, "run", "-f", sparkOrdersQuery(t, input, ckpt, onSpark))
	if code != exitOK || !strings.Contains(stderr, "adopted the Spark checkpoint") {
		t.Fatalf("run of the matching query: exit %d, want it adopted:\n%s\n%s", code, stderr, stdout)
	}

	v2 := sparkOrdersQuery(t, input, ckpt, func(y string) string {
		return strings.Replace(onSpark(y), "  - dropDuplicates: {columns: [order_id]}\n", "", 1)
	})
	out, code, _ := runPlan(t, testPlanOptions(), "-f", v2, "--checkpoint", ckpt)
	if code != exitRefused || !strings.Contains(out, "operator-removed") || !strings.Contains(out, "Or rebuild the state from the retained input") {
		t.Fatalf("lockstep plan = exit %d, want 3 offering the rebuild:\n%s", code, out)
	}
	stdout, code, err := runCLI(t, "checkpoint", "rebuild", "-f", v2)
	if code != exitOK || !strings.Contains(stdout, "replays batches 0–") || !strings.Contains(stdout, "Rebuilt: generation 1 is current") {
		t.Fatalf("rebuild = exit %d (%v):\n%s", code, err, stdout)
	}
	// The watermark (190s) closes the windows of 10:00: de's holds o1 twice, o3 and o4.
	writeOrders(t, input, 3, "o6 fr 1 200")
	stdout, stderr, code = runCommand(t, "run", "-f", v2)
	if code != exitOK {
		t.Fatalf("run after the rebuild: exit %d:\n%s\n%s", code, stderr, stdout)
	}
	if row := consoleRow(stdout, "de", "10:00:00"); !strings.Contains(row, "|4 ") || !strings.Contains(row, "|55.0") || !strings.Contains(row, "|30.0") {
		t.Errorf("run after the rebuild: de's window at 10:00 = %q, want orders 4, revenue 55.0, top 30.0:\n%s", row, stdout)
	}
}
