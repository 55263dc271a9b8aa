package v1_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
)

// TestAggregateTimeKeys: an aggregate groups by at most one window or one session, not by
// both; the second such key is refused and names the first.
func TestAggregateTimeKeys(t *testing.T) {
	window := qt.Window("ts", "5m")
	session := qt.Session("ts", "5m")
	both := "an aggregate groups by a window or by a session, not both"
	for _, tc := range []struct {
		name string
		keys []v1.GroupKey
		want []*field.Error
	}{
		{"one window", []v1.GroupKey{{Column: "country"}, window}, nil},
		{"one session", []v1.GroupKey{session, {Column: "country"}}, nil},
		{"two windows", []v1.GroupKey{window, {Column: "country"}, window}, []*field.Error{
			field.Forbidden(field.NewPath("spec", "transform").Index(0).Child("aggregate", "groupBy").Index(2).Child("window"),
				"an aggregate may have only one window (groupBy[0] is one)")}},
		{"two sessions", []v1.GroupKey{session, session}, []*field.Error{
			field.Forbidden(field.NewPath("spec", "transform").Index(0).Child("aggregate", "groupBy").Index(1).Child("session"),
				"an aggregate may have only one session window (groupBy[0] is one)")}},
		{"a window, then a session", []v1.GroupKey{window, session}, []*field.Error{
			field.Forbidden(field.NewPath("spec", "transform").Index(0).Child("aggregate", "groupBy").Index(1).Child("session"),
				both+" (groupBy[0] is a window): a row would belong to a window and a session at once")}},
		{"a session, then a window", []v1.GroupKey{{Column: "country"}, session, window}, []*field.Error{
			field.Forbidden(field.NewPath("spec", "transform").Index(0).Child("aggregate", "groupBy").Index(2).Child("window"),
				both+" (groupBy[1] is a session): a row would belong to a window and a session at once")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := qt.Orders().Aggregate("revenue", tc.keys, qt.Agg("orders", v1.AggCount, "")).Obj()
			var got []*field.Error
			for _, e := range q.Spec.Validate() {
				if e.Type == field.ErrorTypeForbidden {
					got = append(got, e)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Validate's Forbidden errors (-want +got):\n%s", diff)
			}
		})
	}
}
