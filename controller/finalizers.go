package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Finalizers are added and removed with JSON patches (RFC 6902) that touch the finalizer
// list alone. An Update of the whole object would conflict with every other write since the
// (cached) copy was read, a status write or a spec change; a merge patch would replace the
// whole list, losing a finalizer another client added meanwhile, or bringing back one it
// removed (the garbage collector's foregroundDeletion). The patches below conflict only when
// the list itself changed under them (their test fails, the API server answers 422 and the
// reconcile is retried).

// jsonPatchOp is one operation of a JSON patch.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

const finalizersPath = "/metadata/finalizers"

// addFinalizer adds finalizer f to obj on the API server, and updates obj from its answer.
// It does nothing when obj has f.
func addFinalizer(ctx context.Context, c client.Writer, obj client.Object, f string) error {
	fs := obj.GetFinalizers()
	if slices.Contains(fs, f) {
		return nil
	}
	ops := []jsonPatchOp{{Op: "add", Path: finalizersPath + "/-", Value: f}}
	if len(fs) == 0 {
		// Create the list, unless another client did meanwhile (the test fails): an add
		// would replace it.
		ops = []jsonPatchOp{{Op: "test", Path: finalizersPath, Value: nil}, {Op: "add", Path: finalizersPath, Value: []string{f}}}
	}
	if err := patchJSON(ctx, c, obj, ops); err != nil {
		return fmt.Errorf("add finalizer %s: %w", f, err)
	}
	return nil
}

// removeFinalizer removes finalizer f from obj on the API server, and updates obj from its
// answer. It does nothing when obj does not have f.
func removeFinalizer(ctx context.Context, c client.Writer, obj client.Object, f string) error {
	i := slices.Index(obj.GetFinalizers(), f)
	if i < 0 {
		return nil
	}
	at := fmt.Sprintf("%s/%d", finalizersPath, i)
	// The test makes sure the index still names f.
	ops := []jsonPatchOp{{Op: "test", Path: at, Value: f}, {Op: "remove", Path: at}}
	if err := patchJSON(ctx, c, obj, ops); err != nil {
		return fmt.Errorf("remove finalizer %s: %w", f, err)
	}
	return nil
}

func patchJSON(ctx context.Context, c client.Writer, obj client.Object, ops []jsonPatchOp) error {
	data, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	return c.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, data))
}
