package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/compat"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

const planData = "testdata/plan/"

// testPlanOptions are the options of a plan that opens only local checkpoints.
func testPlanOptions() planOptions { return planOptions{} }

// runPlan runs lockstep plan with args and returns its standard output, exit code and error.
func runPlan(t *testing.T, o planOptions, args ...string) (string, int, error) {
	t.Helper()
	return runCobra(planCommand(o), args...)
}

// runCobra runs cmd with args and returns its standard output, exit code and error.
func runCobra(cmd *cobra.Command, args ...string) (string, int, error) {
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	cmd.SetArgs(args)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.ExecuteContext(context.Background())
	code := exitOK
	if err != nil {
		code = exitFailure
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
	}
	return out.String(), code, err
}

// newCheckpoint creates a checkpoint in a new folder, with the shape of the query in
// shapeOf recorded from batch 0 unless shapeOf is "".
func newCheckpoint(t *testing.T, shapeOf string) (dir, id string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "checkpoint")
	c := claimRevenue(t, dir)
	if shapeOf != "" {
		recordShapeOf(t, c, shapeOf)
		commitBatch(t, c, 0)
	}
	return dir, c.Metadata().ID
}

// recordShapeOf records in c, from batch 0, the shape of the query in the file spec, as the
// engine running it would.
func recordShapeOf(t *testing.T, c *checkpoint.Checkpoint, spec string) {
	t.Helper()
	q, err := readQueryFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	sh, err := compat.ShapeOf(&q.Spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := compat.RecordShape(t.Context(), c, 0, sh); err != nil {
		t.Fatal(err)
	}
}

// addBatch commits batch in the checkpoint in dir, recording no shape.
func addBatch(t *testing.T, dir string, batch int64) {
	t.Helper()
	commitBatch(t, claimRevenue(t, dir), batch)
}

// claimRevenue claims the checkpoint in the folder dir, made if need be, for the query
// payments/revenue.
func claimRevenue(t *testing.T, dir string) *checkpoint.Checkpoint {
	t.Helper()
	store, err := checkpoint.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := checkpoint.Claim(t.Context(), store, checkpoint.Owner{Namespace: "payments", Name: "revenue"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// commitBatch adds batch's offsets and commit entries: a shape recorded from batch on is
// then one the committed batches ran under.
func commitBatch(t *testing.T, c *checkpoint.Checkpoint, batch int64) {
	t.Helper()
	o := checkpoint.Offsets{BatchID: batch, Sources: []checkpoint.SourceOffset{{Source: "orders", Offset: json.RawMessage(`{"logOffset":0}`)}}}
	if err := c.AddOffsets(t.Context(), o); err != nil {
		t.Fatal(err)
	}
	if err := c.AddCommit(t.Context(), checkpoint.Commit{BatchID: batch}); err != nil {
		t.Fatal(err)
	}
}

func TestPlanGolden(t *testing.T) {
	withShape, id := newCheckpoint(t, planData+"old.yaml")
	empty := filepath.Join(t.TempDir(), "none")
	cases := []struct {
		name     string
		args     []string
		wantCode int
	}{
		{"from-allowed", []string{"-f", planData + "new-allowed.yaml", "--from", planData + "old.yaml"}, exitOK},
		{"from-rejected", []string{"-f", planData + "new-rejected.yaml", "--from", planData + "old.yaml"}, exitRefused},
		{"from-rejected-json", []string{"-f", planData + "new-rejected.yaml", "--from", planData + "old.yaml", "-o", "json"}, exitRefused},
		{"from-unchanged", []string{"-f", planData + "old.yaml", "--from", planData + "old.yaml"}, exitOK},
		{"checkpoint-rejected", []string{"-f", planData + "new-rejected.yaml", "--checkpoint", withShape}, exitRefused},
		{"checkpoint-none", []string{"-f", planData + "new-rejected.yaml", "--checkpoint", empty}, exitOK},
		{"checkpoint-none-unbounded", []string{"-f", planData + "new-unbounded.yaml", "--checkpoint", empty}, exitOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, code, err := runPlan(t, testPlanOptions(), tc.args...)
			if code != tc.wantCode {
				t.Fatalf("lockstep plan %s: exit %d (%v), want %d; output:\n%s", strings.Join(tc.args, " "), code, err, tc.wantCode, out)
			}
			out = strings.NewReplacer(withShape, "$CHECKPOINT", empty, "$EMPTY", id, "$QUERY_ID").Replace(out)
			ext := ".txt"
			if strings.HasSuffix(tc.name, "json") {
				ext = ".json"
			}
			planGolden(t, tc.name+ext, out)
		})
	}
}

// located writes a copy of the manifest file with spec.checkpoint.location set to loc, and
// returns its path.
func located(t *testing.T, file, loc string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), filepath.Base(file))
	data = append(data, []byte("  checkpoint: {location: "+loc+"}\n")...)
	if err := os.WriteFile(out, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPlanFromMovedLocation judges, with --from, a new query whose checkpoint.location is not
// the old one's: the query starts afresh there, as the admission webhook and the Terraform
// provider judge it, so the changes the old checkpoint would refuse are allowed and the plan
// says why. The same location written differently is no move.
func TestPlanFromMovedLocation(t *testing.T) {
	old := located(t, planData+"old.yaml", "/checkpoints/payments/revenue")
	moved := located(t, planData+"new-rejected.yaml", "/checkpoints/payments/revenue-v2")
	out, code, err := runPlan(t, testPlanOptions(), "-f", moved, "--from", old)
	if code != exitOK {
		t.Fatalf("exit %d (%v), want %d; output:\n%s", code, err, exitOK, out)
	}
	out = strings.NewReplacer(moved, "new-moved.yaml", old, "old.yaml").Replace(out)
	planGolden(t, "from-moved.txt", out)

	same := located(t, planData+"new-rejected.yaml", "file:///checkpoints/payments/revenue/")
	if out, code, err := runPlan(t, testPlanOptions(), "-f", same, "--from", old); code != exitRefused {
		t.Errorf("the same location written as a file URL: exit %d (%v), want %d; output:\n%s", code, err, exitRefused, out)
	}

	js, code, _ := runPlan(t, testPlanOptions(), "-f", moved, "--from", old, "-o", "json")
	var v compat.Verdict
	if err := json.Unmarshal([]byte(js), &v); err != nil || code != exitOK || !v.Fresh || v.Severity == compat.Rejected {
		t.Errorf("-o json of a moved query: exit %d, %v, %+v; want a fresh verdict", code, err, v)
	}
}

// TestPlanJSON checks the JSON form's fields, which tools read.
func TestPlanJSON(t *testing.T) {
	out, code, _ := runPlan(t, testPlanOptions(), "-f", planData+"new-rejected.yaml", "--from", planData+"old.yaml", "-o", "json")
	if code != exitRefused {
		t.Fatalf("exit %d, want %d", code, exitRefused)
	}
	var got struct {
		Verdict         string `json:"verdict"`
		Guarantee       string `json:"guarantee"`
		GuaranteeReason string `json:"guaranteeReason"`
		Findings        []struct {
			Rule, Severity, Path, Old, New, Message, Remedy string
		} `json:"findings"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("decode %s: %v", out, err)
	}
	if got.Verdict != "rejected" || got.Guarantee != "exactly-once" || got.GuaranteeReason == "" {
		t.Errorf("verdict %q, guarantee %q (%q); want rejected, exactly-once with a reason", got.Verdict, got.Guarantee, got.GuaranteeReason)
	}
	var rules []string
	for _, f := range got.Findings {
		rules = append(rules, f.Rule)
		if f.Severity == "" || f.Path == "" || f.Message == "" || f.Remedy == "" {
			t.Errorf("finding %s lacks a field: %+v", f.Rule, f)
		}
	}
	if diff := cmp.Diff([]string{"window-size", "aggregate-function", "state-partitions"}, rules); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
}

func TestPlanCheckpoint(t *testing.T) {
	t.Run("a relative location", func(t *testing.T) {
		dir, _ := newCheckpoint(t, planData+"old.yaml")
		wd, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		t.Chdir(filepath.Dir(dir))
		out, code, err := runPlan(t, testPlanOptions(), "-f", filepath.Join(wd, planData+"new-allowed.yaml"), "--checkpoint", filepath.Base(dir))
		if code != exitOK || !strings.Contains(out, "Verdict: warning") {
			t.Errorf("exit %d (%v), output:\n%s\nwant exit 0 and a warning", code, err, out)
		}
	})
	t.Run("a checkpoint that has committed no batch", func(t *testing.T) {
		dir, _ := newCheckpoint(t, "")
		out, code, err := runPlan(t, testPlanOptions(), "-f", planData+"new-rejected.yaml", "--checkpoint", dir)
		if code != exitOK || !strings.Contains(out, "it has committed no batch yet") || !strings.Contains(out, "everything is allowed") {
			t.Errorf("exit %d (%v), output:\n%s\nwant exit 0, no batch yet, everything allowed", code, err, out)
		}
	})
	t.Run("batches without a shape cannot be judged", func(t *testing.T) {
		dir, _ := newCheckpoint(t, "")
		addBatch(t, dir, 0)
		_, code, err := runPlan(t, testPlanOptions(), "-f", planData+"new-rejected.yaml", "--checkpoint", dir)
		if code != exitInvalid || err == nil || !strings.Contains(err.Error(), "records no shape") {
			t.Errorf("exit %d (%v), want %d: records no shape", code, err, exitInvalid)
		}
	})
	t.Run("a shape from a newer Lockstep", func(t *testing.T) {
		dir, _ := newCheckpoint(t, "")
		c := claimRevenue(t, dir)
		if err := c.RecordShape(context.Background(), 0, []byte(`{"version": 99}`)); err != nil {
			t.Fatal(err)
		}
		commitBatch(t, c, 0)
		_, code, err := runPlan(t, testPlanOptions(), "-f", planData+"old.yaml", "--checkpoint", dir)
		if code != exitInvalid || !errors.Is(err, compat.ErrNewerShape) {
			t.Errorf("exit %d (%v), want %d wrapping compat.ErrNewerShape", code, err, exitInvalid)
		}
	})
	t.Run("the checkpoint is only read", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "untouched")
		if _, code, err := runPlan(t, testPlanOptions(), "-f", planData+"old.yaml", "--checkpoint", dir); code != exitOK {
			t.Fatalf("exit %d (%v)", code, err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("plan created %s: %v", dir, err)
		}
	})
}

func TestPlanInvalidInput(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string // in the error
	}{
		{"an invalid new spec", []string{"-f", planData + "invalid.yaml", "--from", planData + "old.yaml"}, "spec.sink"},
		{"an invalid old spec", []string{"-f", planData + "old.yaml", "--from", planData + "invalid.yaml"}, "spec.sink"},
		{"a missing file", []string{"-f", planData + "missing.yaml", "--from", planData + "old.yaml"}, "missing.yaml"},
		{"no -f", []string{"--from", planData + "old.yaml"}, "-f NEW.yaml"},
		{"neither --checkpoint nor --from", []string{"-f", planData + "old.yaml"}, "exactly one of"},
		{"both --checkpoint and --from", []string{"-f", planData + "old.yaml", "--from", planData + "old.yaml", "--checkpoint", "/tmp/x"}, "exactly one of"},
		{"another output format", []string{"-f", planData + "old.yaml", "--from", planData + "old.yaml", "-o", "yaml"}, "--output"},
		{"an unknown flag", []string{"-f", planData + "old.yaml", "--form", planData + "old.yaml"}, "unknown flag"},
		{"a malformed location", []string{"-f", planData + "old.yaml", "--checkpoint", "gs://bucket/x"}, "location"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, code, err := runPlan(t, testPlanOptions(), tc.args...)
			if code != exitInvalid || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("lockstep plan %s: exit %d, error %v; want %d and an error naming %q", strings.Join(tc.args, " "), code, err, exitInvalid, tc.want)
			}
			if out != "" {
				t.Errorf("printed a plan for invalid input:\n%s", out)
			}
		})
	}
}

// TestPlanCommand runs the command as the binary builds it, with the features the engine
// supports today.
func TestPlanCommand(t *testing.T) {
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	q := "../../examples/queries/quickstart.yaml"
	cmd.SetArgs([]string{"plan", "-f", q, "--from", q})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("lockstep plan = %v", err)
	}
	if !strings.Contains(out.String(), "No changes that matter to the checkpoint.") {
		t.Errorf("output:\n%s", out.String())
	}
}

func planGolden(t *testing.T, name, got string) {
	t.Helper()
	path := planData + name
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd/lockstep -run TestPlan -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s is stale (-want +got); run go test ./cmd/lockstep -run TestPlan -update and review:\n%s", path, diff)
	}
}

// TestPlanAfterEngineRun is the end-to-end flow: the engine runs a query for a few batches
// and records its shape; lockstep plan --checkpoint then judges changed specs against that
// checkpoint; and the engine refuses a rejected spec with exit 3 without writing anything
// to the checkpoint.
func TestPlanAfterEngineRun(t *testing.T) {
	root := t.TempDir()
	d := newQueryDirs(t, root,
		`{"order_id":"a","country":"de","amount":3.5}`+"\n"+`{"order_id":"b","country":"fr","amount":0}`+"\n",
		`{"order_id":"c","country":"nl","amount":1.25}`+"\n",
		`{"order_id":"d","country":"de","amount":7}`+"\n",
	)
	in, out, ck := d.in, d.out, d.ck
	query := func(name, edit string) string {
		spec := fmt.Sprintf(`apiVersion: streaming.lockstep.dev/v1
kind: StreamingQuery
metadata: {name: orders, namespace: e2e}
spec:
  sources:
  - name: orders
    files: {path: %s, format: json, maxFilesPerTrigger: 1}
    schema:
      columns:
      - {name: order_id, type: string}
      - {name: country, type: string}
      - {name: amount, type: double}
  transform:
  - filter: "amount > 0.0"
  - select: [{name: order_id, expr: order_id}, {name: country, expr: country.upperAscii()}]
  sink:
    files: {path: %s, format: json}
  trigger: {availableNow: true}
  checkpoint: {location: %s}
`, in, out, ck)
		return writeFile(t, filepath.Join(root, name), editQuery(t, spec, edit))
	}
	if code, err := engineRun(t, query("v1.yaml", "")); code != exitOK {
		t.Fatalf("lockstep engine (v1) = exit %d: %v", code, err)
	}
	before := snapshot(t, ck)
	commits := 0
	for k := range before {
		if strings.HasPrefix(k, checkpoint.CommitsDir) {
			commits++
		}
	}
	if commits < 3 {
		t.Fatalf("the engine committed %d batches, want 3 (one file each); checkpoint holds %v", commits, slices.Sorted(maps.Keys(before)))
	}
	if !slices.ContainsFunc(slices.Collect(maps.Keys(before)), func(k string) bool { return strings.HasPrefix(k, "shape/") }) {
		t.Fatalf("the engine recorded no shape; checkpoint holds %v", slices.Sorted(maps.Keys(before)))
	}

	opts := planOptions{}
	allowed := query("allowed.yaml", "maxFilesPerTrigger: 1 => maxFilesPerTrigger: 2")
	got, code, err := runPlan(t, opts, "-f", allowed, "--checkpoint", ck)
	if code != exitOK || !strings.Contains(got, "✓ rate-limit spec.sources[0].files.maxFilesPerTrigger") {
		t.Errorf("plan (allowed): exit %d (%v), output:\n%s", code, err, got)
	}
	rejected := query("rejected.yaml", "format: json}\n  trigger => format: parquet}\n  trigger")
	got, code, err = runPlan(t, opts, "-f", rejected, "--checkpoint", ck)
	if code != exitRefused || !strings.Contains(got, "✗ files-sink-format spec.sink.files.format") {
		t.Errorf("plan (rejected): exit %d (%v), output:\n%s", code, err, got)
	}

	code, err = engineRun(t, rejected)
	var rej *compat.RejectedError
	if code != exitRefused || !errors.As(err, &rej) {
		t.Errorf("lockstep engine (rejected) = exit %d (%v), want %d with a *compat.RejectedError", code, err, exitRefused)
	}
	if diff := cmp.Diff(before, snapshot(t, ck)); diff != "" {
		t.Errorf("a refused start changed the checkpoint (-before +after):\n%s", diff)
	}
}

// execute runs lockstep with args, discarding its output, and returns its exit code and error.
func execute(t *testing.T, args ...string) (int, error) {
	t.Helper()
	_, _, err := runRoot(t, args...)
	return codeOf(err), err
}

// engineRun runs lockstep engine on the query in file, as the pod does but without the
// health endpoint and termination message.
func engineRun(t *testing.T, file string) (int, error) {
	t.Helper()
	return execute(t, "engine", "--query", file, "--health-addr", "", "--termination-message-path", "")
}

// writeFile writes content to path and returns path.
func writeFile(t testing.TB, path, content string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// editQuery applies edit, "old => new", to the first old in spec; an empty edit leaves spec
// as it is.
func editQuery(t testing.TB, spec, edit string) string {
	t.Helper()
	if edit == "" {
		return spec
	}
	old, new, _ := strings.Cut(edit, " => ")
	if !strings.Contains(spec, old) {
		t.Fatalf("no %q to edit in:\n%s", old, spec)
	}
	return strings.Replace(spec, old, new, 1)
}

// statefulQuery is a windowed aggregation with a watermark, files → files in append mode;
// %IN%, %OUT% and %CHECKPOINT% are replaced by folders.
const statefulQuery = `apiVersion: streaming.lockstep.dev/v1
kind: StreamingQuery
metadata: {name: revenue, namespace: e2e}
spec:
  sources:
  - name: orders
    files: {path: %IN%, format: json, maxFilesPerTrigger: 1}
    schema:
      columns:
      - {name: order_id, type: string}
      - {name: country, type: string}
      - {name: amount, type: double}
      - {name: ts, type: timestamp}
  transform:
  - watermark: {column: ts, delay: 10m}
  - aggregate:
      name: revenue
      groupBy: [{column: country}, {window: {column: ts, duration: 5m}}]
      aggregates:
      - {name: orders, function: count}
      - {name: revenue, function: sum, column: amount}
  sink:
    files: {path: %OUT%, format: json}
  outputMode: append
  trigger: {availableNow: true}
  checkpoint: {location: %CHECKPOINT%}
`

// statefulFiles are four input files of statefulQuery, one batch each. Event time advances
// by file, so that the watermark closes the early windows.
var statefulFiles = []string{
	`{"order_id":"a","country":"de","amount":3.5,"ts":"2026-01-01T00:00:10Z"}` + "\n" + `{"order_id":"b","country":"fr","amount":2,"ts":"2026-01-01T00:01:00Z"}` + "\n",
	`{"order_id":"c","country":"de","amount":1.25,"ts":"2026-01-01T00:04:00Z"}` + "\n" + `{"order_id":"d","country":"de","amount":4,"ts":"2026-01-01T00:07:00Z"}` + "\n",
	`{"order_id":"e","country":"fr","amount":7,"ts":"2026-01-01T00:20:00Z"}` + "\n",
	`{"order_id":"f","country":"nl","amount":5,"ts":"2026-01-01T00:40:00Z"}` + "\n",
}

// TestPlanAfterStatefulEngineRun is the end-to-end flow with state: the engine runs a
// windowed aggregation with a watermark for several batches, one input file each; lockstep
// plan --checkpoint then allows a longer watermark delay with a warning, and rejects another
// aggregate function or swapped grouping keys with the rule and the remedy (exit 3); the
// engine's start guard refuses each rejected spec with exit 3 and leaves the checkpoint and
// the sink's folder byte for byte as they were, in lockstep run as in lockstep engine (the
// pod); and the allowed spec runs and is recorded.
func TestPlanAfterStatefulEngineRun(t *testing.T) {
	root := t.TempDir()
	d := newQueryDirs(t, root, statefulFiles...)
	in, out, ck := d.in, d.out, d.ck
	// query writes the stateful query, with edit ("old => new") applied, to root/name.
	query := func(name, edit string) string {
		spec := strings.NewReplacer("%IN%", in, "%OUT%", out, "%CHECKPOINT%", ck).Replace(statefulQuery)
		return writeFile(t, filepath.Join(root, name), editQuery(t, spec, edit))
	}
	count := func(files map[string]string, prefix string) int {
		n := 0
		for k := range files {
			if strings.HasPrefix(k, prefix) {
				n++
			}
		}
		return n
	}

	if code, err := execute(t, "run", "-f", query("v1.yaml", ""), "--checkpoint", ck); code != exitOK {
		t.Fatalf("lockstep run (v1) = exit %d: %v", code, err)
	}
	before, sink := snapshot(t, ck), snapshot(t, out)
	if n := count(before, checkpoint.CommitsDir); n < 4 {
		t.Fatalf("the engine committed %d batches, want at least 4 (one per file); checkpoint holds %v", n, slices.Sorted(maps.Keys(before)))
	}
	if count(before, checkpoint.ShapeDir) != 1 || count(before, checkpoint.StateDir+"revenue/") == 0 {
		t.Fatalf("want one shape and the aggregate's state in the checkpoint; it holds %v", slices.Sorted(maps.Keys(before)))
	}
	if !slices.ContainsFunc(slices.Collect(maps.Values(sink)), func(data string) bool { return strings.Contains(data, `"window_start"`) }) {
		t.Fatalf("the watermark closed no window: the sink's folder holds %v", sink)
	}

	opts := planOptions{}
	const revenuePath = "spec.transform[1].aggregate"
	cases := []struct {
		name, edit string
		wantCode   int
		rule       string   // the rule that judges the change
		want       []string // in the plan
	}{
		{
			name: "a longer watermark delay", edit: "delay: 10m => delay: 1h", wantCode: exitOK, rule: "watermark-delay",
			want: []string{
				"! watermark-delay spec.transform[0].watermark.delay\n    10m → 1h\n",
				"The watermark delay grew from 10m to 1h",
				"Remedy: Revert spec.transform[0].watermark.delay to 10m if that is not what you want.",
				"Verdict: warning (0 rejected, 1 with a warning, 0 allowed)",
			},
		},
		{
			name: "sum becomes max", edit: "function: sum => function: max", wantCode: exitRefused, rule: "aggregate-function",
			want: []string{
				"✗ aggregate-function " + revenuePath + ".aggregates[1].function\n    revenue = sum(amount double) → revenue = max(amount double)\n",
				"its state holds a partial sum for every group",
				"Remedy: Revert " + revenuePath + ".aggregates[1].function to sum, or start fresh at a new spec.checkpoint.location: the query then reads orders from every file already in " + in,
				"Verdict: rejected (1 rejected",
			},
		},
		{
			name: "grouping keys swapped", wantCode: exitRefused, rule: "key-order",
			edit: "groupBy: [{column: country}, {window: {column: ts, duration: 5m}}] => groupBy: [{window: {column: ts, duration: 5m}}, {column: country}]",
			want: []string{
				"✗ key-order " + revenuePath + ".groupBy\n    (country string, window(ts, 5m)) → (window(ts, 5m), country string)\n",
				"the order is part of the state key",
				"Remedy: Restore the order (country, window), or start fresh at a new spec.checkpoint.location",
				"Verdict: rejected (1 rejected",
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			file := query(strings.ReplaceAll(tc.name, " ", "-")+".yaml", tc.edit)
			got, code, err := runPlan(t, opts, "-f", file, "--checkpoint", ck)
			if code != tc.wantCode {
				t.Errorf("lockstep plan: exit %d (%v), want %d; output:\n%s", code, err, tc.wantCode, got)
			}
			containsAll(t, "lockstep plan output", got, tc.want...)
			if tc.wantCode != exitRefused {
				return
			}
			for _, args := range [][]string{
				{"run", "-f", file, "--checkpoint", ck},
				{"engine", "--query", file, "--health-addr", "", "--termination-message-path", ""},
			} {
				code, err = execute(t, args...)
				var rej *compat.RejectedError
				if code != exitRefused || !errors.As(err, &rej) || !strings.Contains(err.Error(), tc.rule) {
					t.Errorf("lockstep %s = exit %d (%v), want %d with a *compat.RejectedError naming %s", args[0], code, err, exitRefused, tc.rule)
				}
				if diff := cmp.Diff(before, snapshot(t, ck)); diff != "" {
					t.Errorf("lockstep %s: a refused start changed the checkpoint (-before +after):\n%s", args[0], diff)
				}
				if diff := cmp.Diff(sink, snapshot(t, out)); diff != "" {
					t.Errorf("lockstep %s: a refused start changed the sink's folder (-before +after):\n%s", args[0], diff)
				}
			}
		})
	}

	// The allowed change starts with no new data: its shape is recorded for the next batch,
	// but no batch ran under it, so the change is still judged against the committed batches'.
	allowed := filepath.Join(root, "a-longer-watermark-delay.yaml")
	if code, err := execute(t, "run", "-f", allowed, "--checkpoint", ck); code != exitOK {
		t.Fatalf("lockstep run (allowed) = exit %d: %v", code, err)
	}
	if n := count(snapshot(t, ck), checkpoint.ShapeDir); n != 2 {
		t.Errorf("the checkpoint holds %d shapes after the allowed change, want 2", n)
	}
	got, code, err := runPlan(t, opts, "-f", allowed, "--checkpoint", ck)
	if code != exitOK || !strings.Contains(got, "! watermark-delay") {
		t.Errorf("lockstep plan after an allowed start that ran no batch: exit %d (%v), output:\n%s", code, err, got)
	}
	// Once a batch committed under it, judged against it the same spec changes nothing.
	name := filepath.Join(in, "orders-9.json")
	if err := os.WriteFile(name, []byte(`{"order_id":"g","country":"nl","amount":1,"ts":"2026-01-01T00:50:00Z"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, err := execute(t, "run", "-f", allowed, "--checkpoint", ck); code != exitOK {
		t.Fatalf("lockstep run (allowed, new data) = exit %d: %v", code, err)
	}
	got, code, err = runPlan(t, opts, "-f", allowed, "--checkpoint", ck)
	if code != exitOK || !strings.Contains(got, "No changes that matter to the checkpoint.") {
		t.Errorf("lockstep plan after the allowed run: exit %d (%v), output:\n%s", code, err, got)
	}
}

// snapshot returns every file under dir with its content, keyed by slash path.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = string(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestPlanOnS3 reads the shape from a checkpoint on S3 with the environment's settings, and
// writes nothing to the bucket.
func TestPlanOnS3(t *testing.T) {
	srv, location, store := s3TestStore(t)
	c, err := checkpoint.Claim(t.Context(), store, checkpoint.Owner{Namespace: "payments", Name: "revenue"})
	if err != nil {
		t.Fatal(err)
	}
	recordShapeOf(t, c, planData+"old.yaml")
	commitBatch(t, c, 0)
	before := bucketObjects(t, srv)

	o := testPlanOptions()
	o.openOpts = newPlanCommandOptions().openOpts
	out, code, err := runPlan(t, o, "-f", planData+"new-rejected.yaml", "--checkpoint", location)
	if code != exitRefused || !strings.Contains(out, "from batch 0 (query id "+c.Metadata().ID+")") || !strings.Contains(out, "✗ aggregate-function") {
		t.Errorf("plan on S3: exit %d (%v), output:\n%s", code, err, out)
	}
	out, code, err = runPlan(t, o, "-f", planData+"new-rejected.yaml", "--checkpoint", "s3://"+srv.Bucket+"/nothing/here")
	if code != exitOK || !strings.Contains(out, "there is no checkpoint there yet") {
		t.Errorf("plan on an empty S3 prefix: exit %d (%v), output:\n%s", code, err, out)
	}
	if after := bucketObjects(t, srv); !cmp.Equal(before, after) {
		t.Errorf("plan changed the bucket:\n%s", cmp.Diff(before, after))
	}
}
