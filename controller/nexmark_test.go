package controller_test

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
)

// TestNexmarkQueryIsAdmitted: the API server defaults a nexmark source from
// the CRD's markers and admits it; one with a schema is refused by the CRD's
// rule.
func TestNexmarkQueryIsAdmitted(t *testing.T) {
	f, _ := webhookFixture(t)
	nexmark := func(name string) *querytest.Query {
		return querytest.Make(name, f.ns).NexmarkSource("bids", v1.NexmarkSource{AsFastAsPossible: true}).
			Filter("auction % 123 == 0").FilesSink("s3://"+f.s3.Bucket+"/out/"+name, v1.FormatJSON).CheckpointStore(f.store.Name)
	}
	f.create(nexmark("bids").Obj())
	got := f.get("bids").Spec.Sources[0].Nexmark
	if got.Table != v1.NexmarkBid || got.EventsPerSecond != 10_000 || got.MaxEventsPerTrigger != 100_000 || !got.AsFastAsPossible {
		t.Errorf("nexmark source as stored = %+v, want table bid, 10000 events a second, 100000 a batch", got)
	}
	q := nexmark("typed").Obj()
	q.Spec.Sources[0].Schema = &v1.Schema{Columns: v1.Columns{{Name: "auction", Type: v1.TypeLong}}}
	err := f.c.Create(context.Background(), q)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "a nexmark source takes no schema") {
		t.Errorf("Create with a nexmark source and a schema = %v, want the CRD's rule", err)
	}
}
