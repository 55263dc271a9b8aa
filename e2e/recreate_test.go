//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
)

// TestRecreatedQueryResumes: a built-in query deleted with its checkpoint retained (the
// default retention) and created again under the same name (a new UID) continues its
// checkpoint: the same query id, and the sink's values are 0..n-1 with no gap and no
// duplicate. The one ownership rule (checkpoint.Owner.Matches) admits it at admission and
// at the engine's claim alike; TestSparkOnKubernetes does the same for a spark query.
func TestRecreatedQueryResumes(t *testing.T) {
	t.Parallel()
	tn := newTenant(t)
	manifest := tn.rateQuery("ticks", "value >= 0", false)
	tn.apply(manifest)
	id := tn.committed("ticks", 2).Status.QueryID
	uid := tn.query("ticks").UID
	tn.recreate("ticks", manifest)
	if got := tn.query("ticks").UID; got == uid {
		t.Fatalf("the query kept its UID %s: it was not created again", uid)
	}
	q := tn.committed("ticks", 5)
	if q.Status.QueryID != id {
		t.Errorf("query id %s after the query was created again, want %s: it did not continue its checkpoint", q.Status.QueryID, id)
	}
	if err := contiguous(tn.values("out/ticks")); err != nil {
		t.Error(err)
	}
}

// recreate deletes the query name, waits until it is gone (its finalizer ran the
// checkpoint's retention), and applies manifest again.
func (tn *tenant) recreate(name, manifest string) {
	tn.t.Helper()
	tn.kubectl(nil, "-n", tn.ns, "delete", "sq", name, "--timeout=5m")
	tn.eventually("the deleted query "+name+" is gone", func() error {
		err := tn.in.c.Get(context.Background(), client.ObjectKey{Namespace: tn.ns, Name: name}, &v1.StreamingQuery{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("get: %v", err)
		}
		return nil
	})
	tn.apply(manifest)
}
