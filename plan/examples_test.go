package plan_test

import (
	"os"
	"path/filepath"
	"testing"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/plan"
)

// TestExamples reads every example query strictly and validates it.
func TestExamples(t *testing.T) {
	files, err := filepath.Glob("../examples/queries/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples found: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			f, err := os.Open(file)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			q, err := v1.ReadQuery(f)
			if err != nil {
				t.Fatalf("ReadQuery(%s) error = %v", file, err)
			}
			if errs := plan.Validate(q); len(errs) > 0 {
				t.Errorf("Validate() = \n%s", describe(errs))
			}
		})
	}
}
