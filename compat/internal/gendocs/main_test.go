package main

import (
	"bytes"
	"flag"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite docs/compatibility.md")

const page = "../../../docs/compatibility.md"

// TestPageIsCurrent fails when docs/compatibility.md does not match the rule table; run
// go generate ./compat (or this test with -update) and commit the page.
func TestPageIsCurrent(t *testing.T) {
	var b bytes.Buffer
	render(&b)
	if *update {
		if err := os.WriteFile(page, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(page)
	if err != nil {
		t.Fatalf("%v: run go generate ./compat", err)
	}
	if diff := cmp.Diff(string(want), b.String()); diff != "" {
		t.Errorf("docs/compatibility.md is stale; run go generate ./compat (-page +rules):\n%s", diff)
	}
}
