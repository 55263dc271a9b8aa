package v1_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
)

// Details are messages for people; the tests compare type, path and value.
var ignoreDetail = cmpopts.IgnoreFields(field.Error{}, "Detail")

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
