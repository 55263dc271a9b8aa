package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
)

func TestNamespacePrefix(t *testing.T) {
	tests := []struct {
		tmpl, want string
		ok         bool
	}{
		{"", "s3://b/payments/", true},
		{"{{namespace}}/{{name}}", "s3://b/payments/", true},
		{"teams/{{namespace}}/q-{{name}}", "s3://b/teams/payments/", true},
		{"/{{namespace}}/x/{{name}}/cp", "s3://b/payments/x/", true},
		{"{{namespace}}-{{name}}", "", false},
		{"{{name}}/{{namespace}}", "", false},
		{"{{namespace}}", "", false},
	}
	for _, tt := range tests {
		s := &v1.CheckpointStoreSpec{S3: v1.S3Store{Bucket: "b"}, LocationTemplate: tt.tmpl}
		got, ok := NamespacePrefix(s, "payments")
		if got != tt.want || ok != tt.ok {
			t.Errorf("NamespacePrefix(%q) = %q, %v, want %q, %v", tt.tmpl, got, ok, tt.want, tt.ok)
		}
	}
}

func TestValidatePlacement(t *testing.T) {
	store := &v1.CheckpointStore{
		ObjectMeta: metav1.ObjectMeta{Name: "team"},
		Spec: v1.CheckpointStoreSpec{
			S3: v1.S3Store{Bucket: "cps"}, CredentialsSecretName: "s3",
			AllowedNamespaces: []string{"payments"},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"lockstep": "on"}},
		},
	}
	exact := store.DeepCopy()
	exact.Spec.LocationTemplate = "{{namespace}}-{{name}}"
	q := func(ns, loc string) *v1.StreamingQuery {
		return querytest.Make("q", ns).CheckpointStore("team").Checkpoint(loc).Obj()
	}
	cp := field.NewPath("spec", "checkpoint")
	tests := []struct {
		name   string
		q      *v1.StreamingQuery
		store  *v1.CheckpointStore
		labels map[string]string
		want   field.ErrorType // "" for none
		path   *field.Path
	}{
		{"default location", q("payments", "s3://cps/payments/q"), store, nil, "", nil},
		{"deeper location", q("payments", "s3://cps/payments/a/b"), store, nil, "", nil},
		{"selected by labels", q("web", "s3://cps/web/q"), store, map[string]string{"lockstep": "on"}, "", nil},
		{"no store named", querytest.Make("q", "payments").Checkpoint("s3://cps/payments/q").Obj(), nil, nil, field.ErrorTypeRequired, cp.Child("store")},
		{"store missing", q("payments", "s3://cps/payments/q"), nil, nil, field.ErrorTypeNotFound, cp.Child("store")},
		{"namespace not allowed", q("web", "s3://cps/web/q"), store, nil, field.ErrorTypeForbidden, cp.Child("store")},
		{"other namespace's prefix", q("payments", "s3://cps/web/q"), store, nil, field.ErrorTypeForbidden, cp.Child("location")},
		{"prefix itself", q("payments", "s3://cps/payments/"), store, nil, field.ErrorTypeForbidden, cp.Child("location")},
		{"similar namespace", q("payments", "s3://cps/payments-eu/q"), store, nil, field.ErrorTypeForbidden, cp.Child("location")},
		{"other bucket", q("payments", "s3://other/payments/q"), store, nil, field.ErrorTypeForbidden, cp.Child("location")},
		{"exact template ok", q("payments", "s3://cps/payments-q"), exact, nil, "", nil},
		{"exact template other", q("payments", "s3://cps/payments-q2"), exact, nil, field.ErrorTypeForbidden, cp.Child("location")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := ValidatePlacement(tt.q, tt.store, tt.labels)
			if tt.want == "" {
				if len(errs) > 0 {
					t.Fatalf("ValidatePlacement() = %v, want none", errs)
				}
				return
			}
			if len(errs) != 1 || errs[0].Type != tt.want || errs[0].Field != tt.path.String() {
				t.Fatalf("ValidatePlacement() = %v, want one %s on %s", errs, tt.want, tt.path)
			}
		})
	}
}

func TestValidateUniqueLocation(t *testing.T) {
	others := []v1.StreamingQuery{
		*querytest.Make("a", "ns").Checkpoint("s3://b/ns/a").Obj(),
		*querytest.Make("self", "ns").Checkpoint("s3://b/ns/self").Obj(),
	}
	tests := []struct {
		loc  string
		want int
	}{
		{"s3://b/ns/self", 0},
		{"s3://b/ns/ab", 0},
		{"s3://b/ns/a", 1},
		{"s3://b/ns/a/", 1},
		{"s3://b/ns/a/inner", 1},
		{"s3://b/ns", 1},
	}
	for _, tt := range tests {
		q := querytest.Make("self", "ns").Checkpoint(tt.loc).Obj()
		if got := ValidateUniqueLocation(q, others); len(got) != tt.want {
			t.Errorf("ValidateUniqueLocation(%s) = %v, want %d errors", tt.loc, got, tt.want)
		}
	}
	if diff := cmp.Diff(true, Overlaps("s3://b/x", "s3://b/x/y")); diff != "" {
		t.Error(diff)
	}
}
