package v1_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
)

func TestDurationParse(t *testing.T) {
	cases := []struct {
		in      v1.Duration
		want    time.Duration
		wantErr bool
	}{
		{"", 0, false},
		{"10m", 10 * time.Minute, false},
		{"1h30m", 90 * time.Minute, false},
		{"500ms", 500 * time.Millisecond, false},
		{"10 minutes", 0, true},
		{"1d", 0, true},
		{"-5s", 0, true},
	}
	for _, tc := range cases {
		got, err := tc.in.Parse()
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("Duration(%q).Parse() = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestScheme(t *testing.T) {
	s := runtime.NewScheme()
	if err := v1.AddToScheme(s); err != nil {
		t.Fatalf("AddToScheme() error = %v", err)
	}
	for _, obj := range []runtime.Object{&v1.StreamingQuery{}, &v1.StreamingQueryList{}, &v1.CheckpointStore{}, &v1.CheckpointStoreList{}} {
		gvks, _, err := s.ObjectKinds(obj)
		if err != nil || len(gvks) != 1 || gvks[0].GroupVersion() != v1.GroupVersion {
			t.Errorf("ObjectKinds(%T) = %v, %v", obj, gvks, err)
		}
	}
}

func TestDeepCopy(t *testing.T) {
	q := qt.Orders().Watermark("ts", "1m").Aggregate("", []v1.GroupKey{qt.Window("ts", "5m")}, qt.Agg("n", v1.AggCount, "")).Obj()
	c := q.DeepCopy()
	c.Spec.Transform[1].Aggregate.GroupBy[0].Window.Duration = "10m"
	c.Spec.Sources[0].Schema.Columns[0].Name = "changed"
	if q.Spec.Transform[1].Aggregate.GroupBy[0].Window.Duration != "5m" || q.Spec.Sources[0].Schema.Columns[0].Name != "order_id" {
		t.Error("DeepCopy() shares memory with the original")
	}
}

func TestCheckpointStore(t *testing.T) {
	s := v1.CheckpointStore{Spec: v1.CheckpointStoreSpec{
		S3:                    v1.S3Store{Bucket: "checkpoints", Endpoint: "http://minio:9000"},
		CredentialsSecretName: "s3-credentials",
		AllowedNamespaces:     []string{"payments"},
		NamespaceSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{"lockstep.dev/tenant": "true"}},
	}}
	s.Default()
	loc, err := s.Spec.Location("payments", "revenue")
	if err != nil || loc != "s3://checkpoints/payments/revenue" {
		t.Errorf("Location() = %q, %v; want s3://checkpoints/payments/revenue", loc, err)
	}
	s.Spec.LocationTemplate = "teams/{{namespace}}/{{nmae}}"
	if _, err := s.Spec.Location("payments", "revenue"); err == nil {
		t.Error("Location() with an unknown placeholder: want an error")
	}
	for _, tc := range []struct {
		ns     string
		labels map[string]string
		want   bool
	}{
		{"payments", nil, true},
		{"web", map[string]string{"lockstep.dev/tenant": "true"}, true},
		{"web", nil, false},
	} {
		if got, err := s.Spec.Allows(tc.ns, tc.labels); got != tc.want || err != nil {
			t.Errorf("Allows(%s, %v) = %v, %v; want %v", tc.ns, tc.labels, got, err, tc.want)
		}
	}

	bad := v1.CheckpointStoreSpec{S3: v1.S3Store{Bucket: "B", Endpoint: "minio:9000"}, LocationTemplate: "{{name}}", AllowedNamespaces: []string{"Team"}}
	spec := field.NewPath("spec")
	want := field.ErrorList{
		field.Invalid(spec.Child("s3", "bucket"), "B", ""),
		field.Invalid(spec.Child("s3", "endpoint"), "minio:9000", ""),
		field.Required(spec.Child("credentialsSecretName"), ""),
		field.Invalid(spec.Child("locationTemplate"), "{{name}}", ""),
		field.Invalid(spec.Child("allowedNamespaces").Index(0), "Team", ""),
	}
	if diff := cmp.Diff(want, bad.Validate(), ignoreDetail); diff != "" {
		t.Errorf("Validate() mismatch (-want +got):\n%s", diff)
	}
}
