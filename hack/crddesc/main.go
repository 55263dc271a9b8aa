// Command crddesc folds the descriptions of the CRD manifests named on its command line, in
// place, so that `kubectl explain` shows them as flowing text (see internal/crddesc). `make
// generate` runs it on config/crd/bases after controller-gen:
//
//	go run ./hack/crddesc config/crd/bases/*.yaml
package main

import (
	"fmt"
	"os"

	"github.com/lockstep-dev/lockstep/internal/crddesc"
)

func main() {
	for _, path := range os.Args[1:] {
		if err := fold(path); err != nil {
			fmt.Fprintln(os.Stderr, "crddesc:", err)
			os.Exit(1)
		}
	}
}

func fold(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, crddesc.Fold(b), info.Mode().Perm()); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
