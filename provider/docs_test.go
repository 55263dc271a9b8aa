package provider

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// TestDocsAreCurrent runs the tfplugindocs line of generate.go into a temporary folder and
// compares the result with docs/terraform: the reference pages must be regenerated (make
// generate) whenever the schema, an example, a template or a plan golden file changes.
func TestDocsAreCurrent(t *testing.T) {
	args := tfplugindocsArgs(t)
	abs, err := filepath.Abs(filepath.Join("..", "cmd", "terraform-provider-lockstep"))
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	rel, err := filepath.Rel(abs, out)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range args {
		if a == "--rendered-website-dir" {
			args[i+1] = rel
		}
	}
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(testenv.Terraform(t))+string(os.PathListSeparator)+os.Getenv("PATH"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, b)
	}

	want := readTree(t, out)
	got := readTree(t, filepath.Join("..", "docs", "terraform"))
	for name, w := range want {
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("docs/terraform/%s is missing: run `make generate` and commit it", name)
		case !bytes.Equal(g, w):
			t.Errorf("docs/terraform/%s is stale: run `make generate` and commit it", name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("docs/terraform/%s is no longer generated: remove it", name)
		}
	}
}

// tfplugindocsArgs returns the arguments of go in generate.go's tfplugindocs line.
func tfplugindocsArgs(t testing.TB) []string {
	t.Helper()
	src, err := os.ReadFile("generate.go")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(src)) {
		if rest, ok := strings.CutPrefix(line, "//go:generate go "); ok && strings.Contains(rest, "tfplugindocs") {
			return strings.Fields(rest)
		}
	}
	t.Fatal("generate.go has no go:generate line that runs tfplugindocs")
	return nil
}

func readTree(t testing.TB, root string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		files[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
