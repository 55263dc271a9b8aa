package generated_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/lockstep-dev/lockstep/internal/crddesc"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// TestGeneratedFilesAreCurrent runs controller-gen into a temporary folder and
// compares its output with the files checked in.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	gen := testenv.Tool(t, "controller-gen")
	root := filepath.Join("..", "..")
	out := t.TempDir()
	cmd := exec.Command(gen,
		"object", "paths=./api/...", "output:object:dir="+out,
		"crd", "paths=./api/...", "output:crd:dir="+filepath.Join(out, "crd"))
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("controller-gen: %v\n%s", err, b)
	}
	pairs := map[string]string{
		filepath.Join(out, "zz_generated.deepcopy.go"): filepath.Join(root, "api", "v1", "zz_generated.deepcopy.go"),
	}
	crds, err := filepath.Glob(filepath.Join(out, "crd", "*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("controller-gen wrote no CRDs (%v)", err)
	}
	for _, f := range crds {
		// As `make generate` writes them: descriptions folded (internal/crddesc).
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, crddesc.Fold(b), 0o644); err != nil {
			t.Fatal(err)
		}
		pairs[f] = filepath.Join(root, "config", "crd", "bases", filepath.Base(f))
	}
	for fresh, checkedIn := range pairs {
		want, err := os.ReadFile(fresh)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(checkedIn)
		if err != nil {
			t.Errorf("%s: %v; run `make generate`", checkedIn, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run `make generate` and commit the result", checkedIn)
		}
	}
}
