package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOrdersEnrichedExample runs examples/queries/orders-enriched.yaml with the CLI on its
// bundled data (output and checkpoint in a temporary folder), then checks that `checkpoint
// describe` shows the static side's snapshot the last batch joined against.
func TestOrdersEnrichedExample(t *testing.T) {
	data, err := os.ReadFile("../../examples/queries/orders-enriched.yaml")
	if err != nil {
		t.Fatal(err)
	}
	examples, err := filepath.Abs("../../examples/queries/data")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out, ckpt := filepath.Join(dir, "out"), filepath.Join(dir, "ckpt")
	spec := strings.NewReplacer("examples/queries/data", examples, ".lockstep/output/orders-enriched", out).Replace(string(data))
	file := writeFile(t, filepath.Join(dir, "orders-enriched.yaml"), spec)
	if _, stderr, code := runCommand(t, "run", "-f", file, "--checkpoint", ckpt); code != exitOK {
		t.Fatalf("run exit %d:\n%s", code, stderr)
	}
	var lines []string
	files, _ := filepath.Glob(filepath.Join(out, "*.json"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.Split(strings.TrimSpace(string(b)), "\n")...)
	}
	joined := strings.Join(lines, "\n")
	for _, want := range []string{`"country_name":"Germany","region":"EMEA"`, `"country":"es","country_name":null,"region":null`} {
		if !strings.Contains(joined, want) {
			t.Errorf("output lacks %s:\n%s", want, joined)
		}
	}
	stdout, stderr, code := runCommand(t, "checkpoint", "describe", ckpt)
	if code != exitOK {
		t.Fatalf("describe exit %d:\n%s", code, stderr)
	}
	containsAll(t, "describe", stdout, "Static join snapshots of batch 1:", "countries", "files sha256:", "(1 files)")
}
