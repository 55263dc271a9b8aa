package layers_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/lockstep-dev/lockstep/"

// rules: a package under from imports none under not. A name ending in / is the folder's
// tree; another is the package and the packages below it.
var rules = []struct {
	from string
	not  []string
}{
	{"internal/", []string{"engine", "controller", "provider", "cmd/", "compat", "plan"}},
	{"api/", []string{"plan", "compat", "checkpoint", "engine", "controller", "provider", "cmd/"}},
	{"plan", []string{"compat", "checkpoint", "engine", "controller", "provider", "cmd/"}},
	{"compat", []string{"engine", "controller", "provider", "cmd/", "k8s.io/client-go/", "sigs.k8s.io/controller-runtime/", "github.com/hashicorp/"}},
	{"checkpoint", []string{"compat", "engine", "controller", "provider", "cmd/", "k8s.io/client-go/", "sigs.k8s.io/controller-runtime/", "github.com/hashicorp/"}},
	{"engine", []string{"controller", "provider", "cmd/"}},
}

// under says whether pkg (module-relative, or a full path outside the module) is name's.
func under(pkg, name string) bool {
	if strings.HasSuffix(name, "/") {
		return strings.HasPrefix(pkg, name)
	}
	return pkg == name || strings.HasPrefix(pkg, name+"/")
}

// TestLayers: no package imports one of a layer above its own (its non-test imports, as
// `go list` reads them).
func TestLayers(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		for _, r := range rules {
			if !under(pkg, r.from) || strings.HasSuffix(pkg, "test") { // test helpers (storetest, sparktest, ...) sit beside what they test
				continue
			}
			for _, imp := range fields[1:] {
				imp = strings.TrimPrefix(imp, module)
				for _, n := range r.not {
					if under(imp, n) {
						t.Errorf("%s imports %s: %s is below %s", pkg, imp, r.from, n)
					}
				}
			}
		}
	}
}
