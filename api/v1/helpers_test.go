package v1_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
)

// Details are messages for people; the tests compare type, path and value.
var ignoreDetail = cmpopts.IgnoreFields(field.Error{}, "Detail")

// orders is a valid files → files query over a typical event schema.
func orders() *qt.Query {
	return qt.Make("q", "ns").
		FilesSource("orders", "/data/orders", "json",
			qt.Col("order_id", v1.TypeString), qt.Col("country", v1.TypeString),
			qt.Col("amount", v1.TypeDouble), qt.Col("qty", v1.TypeLong), qt.Col("ts", v1.TypeTimestamp)).
		FilesSink("/data/out", "json")
}

func ptr[T any](v T) *T { return &v }

// checkValidate validates q's spec and compares the errors, as "Type field" lines, with want.
func checkValidate(t *testing.T, q *v1.StreamingQuery, want []string) {
	t.Helper()
	var got []string
	for _, e := range q.Spec.Validate() {
		got = append(got, string(e.Type)+" "+e.Field)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Validate (-want +got):\n%s", diff)
	}
}
