package controller_test

import (
	"context"
	"strings"
	"testing"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// TestCRDValidatesJoins: the API server itself (the CRD's rules, without the webhook) accepts a
// stream–static join and refuses the one-of mistakes of a join with the CRD's messages.
func TestCRDValidatesJoins(t *testing.T) {
	cfg := testenv.ControlPlane(t)
	f := newFixture(t, cfg)
	customers := func() *v1.StaticSide {
		return querytest.StaticDelta("s3://"+f.s3.Bucket+"/lake/customers", querytest.Col("id", v1.TypeString), querytest.Col("name", v1.TypeString))
	}
	f.create(f.query("enrich").Join(v1.Join{Name: "customers", Type: v1.JoinLeftOuter, Keys: querytest.Keys("id", "id"), Static: customers(), RightPrefix: "c_"}).Obj())

	cases := []struct {
		name string
		join v1.Join
		want string
	}{
		{"select and prefix", v1.Join{Keys: querytest.Keys("id", "id"), Static: customers(), RightPrefix: "c_",
			Select: []v1.JoinColumn{{Side: v1.SideLeft, Column: "id"}}}, "select and the prefixes are exclusive"},
		{"static and stream", v1.Join{Keys: querytest.Keys("id", "id"), Static: customers(),
			Stream: querytest.StreamSide("clicks", "t", "t", "0s", "0s", "0s")}, "exactly one of static, stream must be set"},
		{"onNewVersion on files", v1.Join{Keys: querytest.Keys("id", "id"), Static: &v1.StaticSide{
			Files: &v1.StaticFiles{Path: "/ref", Format: v1.FormatJSON}, Schema: customers().Schema, Refresh: &v1.Refresh{OnNewVersion: true}}},
			"refresh.onNewVersion needs a delta table"},
	}
	for _, tc := range cases {
		q := f.query("bad").Join(tc.join).Obj()
		err := f.c.Create(context.Background(), q)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: create = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	q := f.query("two").Filter("true").Obj()
	q.Spec.Transform[1].Join = &v1.Join{Keys: querytest.Keys("id", "id"), Static: customers()}
	if err := f.c.Create(context.Background(), q); err == nil || !strings.Contains(err.Error(), "exactly one of filter, select, watermark, aggregate, dropDuplicates, join must be set") {
		t.Errorf("a step with filter and join: create = %v, want the step's one-of message", err)
	}
}
