package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-dev/lockstep/engine"
)

// runCommand runs lockstep with args and returns its standard output, its
// standard error (with the error main would print) and its exit code.
func runCommand(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	out, errOut, err := runRoot(t, args...)
	if err != nil {
		errOut += "Error: " + err.Error() + "\n"
	}
	return out, errOut, codeOf(err)
}

// runRoot runs lockstep's root command with args and returns what it wrote to its standard
// output and error, and the error it returned.
func runRoot(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	root := newRootCommand()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err = root.ExecuteContext(t.Context())
	return out.String(), errOut.String(), err
}

// ordersQuery is a files→files query on in, writing out, named name.
const ordersQuery = `apiVersion: streaming.lockstep.dev/v1
kind: StreamingQuery
metadata: {name: %NAME%, namespace: shop}
spec:
  sources:
  - name: orders
    files: {path: %IN%, format: json}
    schema:
      columns: [{name: id, type: string}, {name: amount, type: double}]
    onMalformed: %POLICY%
  transform:
  - filter: "amount > 0.0"
  sink:
    files: {path: %OUT%, format: json}
  trigger: {availableNow: true}
`

type runFixture struct {
	dir, in, out string
}

func newRunFixture(t *testing.T, input string) *runFixture {
	t.Helper()
	dir := t.TempDir()
	f := &runFixture{dir: dir, in: filepath.Join(dir, "in"), out: filepath.Join(dir, "out")}
	if err := os.MkdirAll(f.in, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.in, "orders.json"), []byte(input), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// spec writes the query with the given name and malformed policy.
func (f *runFixture) spec(t *testing.T, name, policy string) string {
	t.Helper()
	y := strings.NewReplacer("%NAME%", name, "%IN%", f.in, "%OUT%", f.out, "%POLICY%", policy).Replace(ordersQuery)
	p := filepath.Join(f.dir, name+"-"+policy+".yaml")
	if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const goodOrders = `{"id":"a","amount":1}
{"id":"b","amount":-1}
{"id":"c","amount":2}
`

// goodOrdersFirstRun is what the first run of the orders query over goodOrders logs, on
// either runtime.
var goodOrdersFirstRun = []string{
	"lockstep: query shop/orders, id ",
	"lockstep: new checkpoint; starting at batch 0",
	"lockstep: delivery guarantee: exactly-once",
	"batch 0: 3 rows in, 2 out, ",
	"lockstep: done: 1 batches, 3 rows in, 2 out, 0 malformed in ",
}

// containsAll checks that got, the output named what, holds each of wants.
func containsAll(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, got)
		}
	}
}

func TestRunAndResume(t *testing.T) {
	f := newRunFixture(t, goodOrders)
	ckpt := filepath.Join(f.dir, "ckpt")
	_, stderr, code := runCommand(t, "run", "-f", f.spec(t, "orders", "fail"), "--checkpoint", ckpt)
	if code != exitOK {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	containsAll(t, "output", stderr, goodOrdersFirstRun...)
	_, stderr, code = runCommand(t, "run", "-f", f.spec(t, "orders", "fail"), "--checkpoint", ckpt)
	if code != exitOK || !strings.Contains(stderr, "lockstep: resuming from batch 1 (batches up to 0 are committed)") {
		t.Errorf("second run: exit %d:\n%s", code, stderr)
	}
}

func TestRunProgressJSON(t *testing.T) {
	f := newRunFixture(t, goodOrders)
	_, stderr, code := runCommand(t, "run", "-f", f.spec(t, "orders", "fail"), "--checkpoint", filepath.Join(f.dir, "ckpt"), "--progress", "json")
	if code != exitOK {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	var events []string
	for line := range strings.Lines(stderr) {
		var obj map[string]any
		if err := json.Unmarshal([]byte(line), &obj); err != nil {
			t.Fatalf("line %q is not JSON: %v", line, err)
		}
		events = append(events, obj["event"].(string))
		if obj["event"] == "progress" && (obj["batchId"] != 0.0 || obj["numInputRows"] != 3.0 || obj["numOutputRows"] != 2.0) {
			t.Errorf("progress = %v", obj)
		}
	}
	if strings.Join(events, ",") != "start,progress,summary" {
		t.Errorf("events %v, want start, progress, summary", events)
	}
}

func TestRunDefaultCheckpointLocation(t *testing.T) {
	f := newRunFixture(t, goodOrders)
	t.Chdir(f.dir)
	if _, stderr, code := runCommand(t, "run", "-f", f.spec(t, "orders", "fail")); code != exitOK {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(f.dir, ".lockstep/checkpoints/shop/orders/metadata")); err != nil {
		t.Errorf("no checkpoint at ./.lockstep/checkpoints/shop/orders: %v", err)
	}
}

func TestRunExitCodes(t *testing.T) {
	f := newRunFixture(t, "{\"id\":\"a\",\"amount\":1}\n{broken\n")
	ckpt := filepath.Join(f.dir, "ckpt")
	invalid := filepath.Join(f.dir, "invalid.yaml")
	if err := os.WriteFile(invalid, []byte(`apiVersion: streaming.lockstep.dev/v1
kind: StreamingQuery
metadata: {name: Bad_Name}
spec:
  sources:
  - name: in
    files: {path: /in, format: xml}
  transform:
  - filter: "amount >"
  sink: {console: {}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	unknownField := filepath.Join(f.dir, "unknown.yaml")
	if err := os.WriteFile(unknownField, []byte("apiVersion: streaming.lockstep.dev/v1\nkind: StreamingQuery\nmetadata: {name: q}\nspec: {sourcez: []}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		env  string
		code int
		want []string
	}{
		{
			name: "every field error",
			args: []string{"run", "-f", invalid},
			code: exitInvalid,
			want: []string{"metadata.name", "spec.sources[0].files.format", "spec.sources[0].schema", "spec.transform[0].filter"},
		},
		{name: "unknown field", args: []string{"run", "-f", unknownField}, code: exitInvalid, want: []string{`unknown field "spec.sourcez"`}},
		{name: "missing file", args: []string{"run", "-f", filepath.Join(f.dir, "nope.yaml")}, code: exitInvalid, want: []string{"no such file"}},
		{name: "bad progress", args: []string{"run", "-f", invalid, "--progress", "xml"}, code: exitInvalid, want: []string{"--progress"}},
		{name: "bad crash point", args: []string{"run", "-f", f.spec(t, "orders", "skip")}, env: "nowhere:1", code: exitInvalid, want: []string{engine.CrashAtEnv}},
		{
			name: "malformed record",
			args: []string{"run", "-f", f.spec(t, "orders", "fail"), "--checkpoint", ckpt},
			code: exitFailure,
			want: []string{filepath.Join(f.in, "orders.json") + " line 2", "onMalformed: fail"},
		},
		{
			name: "another query's checkpoint",
			args: []string{"run", "-f", f.spec(t, "other", "skip"), "--checkpoint", ckpt},
			code: exitRefused,
			want: []string{"belongs to shop/orders, not shop/other"},
		},
		{
			name: "malformed record skipped",
			args: []string{"run", "-f", f.spec(t, "orders", "skip"), "--checkpoint", ckpt},
			code: exitOK,
			want: []string{"batch 0: 1 rows in, 1 out, ", ", 1 malformed"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(engine.CrashAtEnv, tt.env)
			_, stderr, code := runCommand(t, tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d:\n%s", code, tt.code, stderr)
			}
			containsAll(t, "output", stderr, tt.want...)
		})
	}
}

// TestRunRefusesIncompatibleChange: the checkpoint's shape refuses a source
// re-pointed under the same name (exit 3), as `lockstep plan` would.
func TestRunRefusesIncompatibleChange(t *testing.T) {
	f := newRunFixture(t, goodOrders)
	ckpt := filepath.Join(f.dir, "ckpt")
	if _, stderr, code := runCommand(t, "run", "-f", f.spec(t, "orders", "fail"), "--checkpoint", ckpt); code != exitOK {
		t.Fatalf("first run: exit %d:\n%s", code, stderr)
	}
	f.in = filepath.Join(f.dir, "elsewhere")
	_, stderr, code := runCommand(t, "run", "-f", f.spec(t, "orders", "skip"), "--checkpoint", ckpt)
	if code != exitRefused || !strings.Contains(stderr, "spec.sources[0]") {
		t.Errorf("exit %d, want %d naming the source:\n%s", code, exitRefused, stderr)
	}
}

// TestRunNexmarkExamples runs every examples/queries/nexmark-*.yaml as its comment says, twice:
// the first run reads the events in batches and, the queries being stateful, one more without
// data in which the watermark closes the last windows, sessions or join bounds; the second finds
// nothing new. q3's and q8's rows out are those of the unbounded joins (engine's
// TestNexmarkJoins).
func TestRunNexmarkExamples(t *testing.T) {
	want := map[string]struct{ stderr, stdout []string }{
		"nexmark-q3.yaml": {
			stderr: []string{"batch 0: 1600 rows in, ", "lockstep: done: 6 batches, 8000 rows in, 777 out"},
			stdout: []string{"|name|city|state|id|"},
		},
		"nexmark-q4.yaml": {
			stderr: []string{"batch 0: 19600 rows in, ", "lockstep: done: 6 batches, 98000 rows in, 40 out"},
			stdout: []string{"|category|window_start|window_end|avg_final|auctions|"},
		},
		"nexmark-q5.yaml": {
			stderr: []string{"lockstep: query default/nexmark-q5, id ", "lockstep: delivery guarantee: none",
				"batch 0: 92000 rows in, ", "lockstep: done: 6 batches, 460000 rows in, "},
			stdout: []string{"|window_start|", "Batch:5"},
		},
		"nexmark-q8.yaml": {
			stderr: []string{"batch 0: 1600 rows in, ", "lockstep: done: 11 batches, 16000 rows in, 1806 out"},
			stdout: []string{"|id|name|window_start|"},
		},
		"nexmark-q11.yaml": {
			stderr: []string{"batch 0: 18400 rows in, ", "lockstep: done: 6 batches, 92000 rows in, 11265 out"},
			stdout: []string{"|bidder|window_start|window_end|bids|"},
		},
	}
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "queries", "nexmark-*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no nexmark examples (%v)", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			w, ok := want[filepath.Base(file)]
			if !ok {
				t.Fatalf("%s has no expected output here: add it", file)
			}
			ckpt := filepath.Join(t.TempDir(), "ckpt")
			stdout, stderr, code := runCommand(t, "run", "-f", file, "--checkpoint", ckpt)
			if code != exitOK {
				t.Fatalf("exit %d:\n%s", code, stderr)
			}
			containsAll(t, "output", stderr, w.stderr...)
			console := strings.ReplaceAll(stdout, " ", "") // the console pads its columns
			for _, s := range w.stdout {
				if !strings.Contains(console, s) {
					t.Errorf("console output lacks %q:\n%s", s, stdout)
				}
			}
			_, stderr, code = runCommand(t, "run", "-f", file, "--checkpoint", ckpt)
			if code != exitOK || !strings.Contains(stderr, "lockstep: done: 0 batches") {
				t.Errorf("second run: exit %d:\n%s", code, stderr)
			}
		})
	}
}
