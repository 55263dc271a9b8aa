package controller

import (
	"context"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// The finalizer patches neither conflict with writes to the rest of the object since the
// copy was read, nor lose or bring back a finalizer another client changed meanwhile: they
// fail when the list itself changed where they would write it, and succeed on a fresh copy.
func TestFinalizerPatches(t *testing.T) {
	ctx := context.Background()
	c := testenv.Client(t, testenv.ControlPlane(t))
	const ours, other = "streaming.lockstep.dev/test", "example.com/other"
	store := func(t *testing.T, name string, finalizers ...string) *v1.CheckpointStore {
		t.Helper()
		st := &v1.CheckpointStore{
			ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: finalizers},
			Spec: v1.CheckpointStoreSpec{S3: v1.S3Store{Endpoint: "http://127.0.0.1:1", Bucket: "bucket", Region: "us-east-1"},
				CredentialsSecretName: "s3"},
		}
		if err := c.Create(ctx, st); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			var now v1.CheckpointStore
			if c.Get(ctx, client.ObjectKeyFromObject(st), &now) == nil {
				now.Finalizers = nil
				_ = c.Update(ctx, &now)
				_ = c.Delete(ctx, &now)
			}
		})
		return st.DeepCopy()
	}
	// edit changes the stored store behind the copies already read.
	edit := func(t *testing.T, st *v1.CheckpointStore, change func(*v1.CheckpointStore)) {
		t.Helper()
		var now v1.CheckpointStore
		if err := c.Get(ctx, client.ObjectKeyFromObject(st), &now); err != nil {
			t.Fatal(err)
		}
		change(&now)
		if err := c.Update(ctx, &now); err != nil {
			t.Fatal(err)
		}
	}
	finalizers := func(t *testing.T, st *v1.CheckpointStore) []string {
		t.Helper()
		var now v1.CheckpointStore
		if err := c.Get(ctx, client.ObjectKeyFromObject(st), &now); err != nil {
			t.Fatal(err)
		}
		return now.Finalizers
	}

	t.Run("add over another write", func(t *testing.T) {
		stale := store(t, "finalizers-add-stale")
		edit(t, stale, func(st *v1.CheckpointStore) { st.Labels = map[string]string{"changed": "yes"} })
		if err := addFinalizer(ctx, c, stale, ours); err != nil {
			t.Fatalf("addFinalizer(stale copy) = %v, want no conflict", err)
		}
		if got := finalizers(t, stale); !slices.Equal(got, []string{ours}) || !slices.Equal(stale.Finalizers, got) {
			t.Errorf("finalizers = %v (copy %v), want [%s]", got, stale.Finalizers, ours)
		}
	})
	t.Run("add beside another's", func(t *testing.T) {
		stale := store(t, "finalizers-add-beside", other)
		edit(t, stale, func(st *v1.CheckpointStore) { st.Finalizers = append(st.Finalizers, "example.com/third") })
		if err := addFinalizer(ctx, c, stale, ours); err != nil {
			t.Fatal(err)
		}
		if got := finalizers(t, stale); !slices.Equal(got, []string{other, "example.com/third", ours}) {
			t.Errorf("finalizers = %v, want the others' kept and ours appended", got)
		}
	})
	t.Run("add to a list created meanwhile", func(t *testing.T) {
		stale := store(t, "finalizers-add-created")
		edit(t, stale, func(st *v1.CheckpointStore) { st.Finalizers = []string{other} })
		if err := addFinalizer(ctx, c, stale, ours); err == nil {
			t.Errorf("addFinalizer(copy without the list) = nil, want an error rather than replace %v", finalizers(t, stale))
		}
		fresh := stale.DeepCopy()
		if err := c.Get(ctx, client.ObjectKeyFromObject(stale), fresh); err != nil {
			t.Fatal(err)
		}
		if err := addFinalizer(ctx, c, fresh, ours); err != nil {
			t.Fatal(err)
		}
		if got := finalizers(t, stale); !slices.Equal(got, []string{other, ours}) {
			t.Errorf("finalizers = %v, want [%s %s]", got, other, ours)
		}
	})
	t.Run("remove", func(t *testing.T) {
		stale := store(t, "finalizers-remove", other, ours)
		edit(t, stale, func(st *v1.CheckpointStore) { st.Labels = map[string]string{"changed": "yes"} })
		if err := removeFinalizer(ctx, c, stale, ours); err != nil {
			t.Fatalf("removeFinalizer(stale copy) = %v, want no conflict", err)
		}
		if got := finalizers(t, stale); !slices.Equal(got, []string{other}) {
			t.Errorf("finalizers = %v, want [%s]", got, other)
		}
	})
	t.Run("remove after the list moved", func(t *testing.T) {
		stale := store(t, "finalizers-remove-moved", other, ours)
		edit(t, stale, func(st *v1.CheckpointStore) { st.Finalizers = []string{ours} }) // another client removed its own
		if err := removeFinalizer(ctx, c, stale, ours); err == nil {
			t.Errorf("removeFinalizer(copy with a moved list) = nil, want an error rather than remove another index (now %v)", finalizers(t, stale))
		}
		if got := finalizers(t, stale); !slices.Equal(got, []string{ours}) {
			t.Errorf("finalizers = %v, want [%s] left for a retry", got, ours)
		}
	})
}
