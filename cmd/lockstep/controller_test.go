package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// usageFlag matches a flag in cobra's usage text: "      --resync duration   how often…".
var usageFlag = regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z0-9-]+)`)

// TestControllerFlagsDocumented: every flag of `lockstep controller` has a row in the flag
// table of docs/kubernetes.md, and the table names no flag the command does not have.
func TestControllerFlagsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "kubernetes.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for line := range strings.SplitSeq(string(doc), "\n") {
		if name, ok := strings.CutPrefix(line, "| `--"); ok {
			name, _, _ = strings.Cut(name, "`")
			rows[name] = true
		}
	}
	flags := usageFlag.FindAllStringSubmatch(newControllerCommand().Flags().FlagUsages(), -1)
	if len(flags) == 0 {
		t.Fatal("found no flags in the usage of `lockstep controller`")
	}
	for _, m := range flags {
		if !rows[m[1]] {
			t.Errorf("docs/kubernetes.md has no row for `--%s`", m[1])
		}
		delete(rows, m[1])
	}
	for name := range rows {
		t.Errorf("docs/kubernetes.md documents `--%s`, which `lockstep controller` does not have", name)
	}
}
