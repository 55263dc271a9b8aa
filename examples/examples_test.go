// Package examples_test keeps the examples honest: every query of examples/queries says how it
// runs (the CLI-only ones are run by the engine's and CLI's tests), and every manifest of
// examples/kubernetes is valid, with the changed query allowed and the refused one rejected
// by the compatibility rules. The e2e suite (e2e/quickstart_test.go) applies
// examples/kubernetes on a real cluster, as the README's quickstart does.
package examples_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/compat"
	"github.com/lockstep-dev/lockstep/plan"
)

// TestQueriesSayHowTheyRun: a query example is either run by a test through the CLI or the
// engine ("CLI only") or is a reference that names services it cannot bring ("Reference").
func TestQueriesSayHowTheyRun(t *testing.T) {
	files, err := filepath.Glob("queries/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples/queries (%v)", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), "\n# CLI only: ") && !strings.Contains(string(data), "\n# Reference, not runnable as is: ") {
			t.Errorf("%s says neither \"# CLI only: …\" nor \"# Reference, not runnable as is: …\"", f)
		}
	}
}

func readQuery(t *testing.T, name string) *v1.StreamingQuery {
	t.Helper()
	q := querytest.Load(t, filepath.Join("kubernetes", name))
	if errs := plan.Validate(q); len(errs) > 0 {
		t.Errorf("%s: %v", name, errs.ToAggregate())
	}
	return q
}

func TestKubernetesExamples(t *testing.T) {
	data, err := os.ReadFile("kubernetes/store.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var store v1.CheckpointStore
	if err := yaml.UnmarshalStrict(data, &store); err != nil {
		t.Fatalf("store.yaml: %v", err)
	}
	if errs := store.Spec.Validate(); len(errs) > 0 {
		t.Errorf("store.yaml: %v", errs.ToAggregate())
	}

	q := readQuery(t, "query.yaml")
	if q.Spec.Checkpoint.Store != store.Name || q.Namespace != store.Spec.AllowedNamespaces[0] {
		t.Errorf("query.yaml uses store %q from namespace %s; store.yaml is %q for %v", q.Spec.Checkpoint.Store, q.Namespace, store.Name, store.Spec.AllowedNamespaces)
	}
	shape, err := compat.ShapeOf(&q.Spec)
	if err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]bool{"changed-query.yaml": false, "refused-query.yaml": true} {
		changed := readQuery(t, file)
		v := compat.Check(shape, &changed.Spec)
		if got := v.Severity == compat.Rejected; got != want {
			t.Errorf("compat.Check(query.yaml, %s) = %v, want rejected %t", file, v.Severity, want)
		}
	}
}
