package controller_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// warnings collects the admission warnings the API server returns.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, msg)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.msgs
	w.msgs = nil
	return m
}

// webhookFixture is a fixture on the control plane with webhooks, with the manager serving
// them, and a client that records warnings.
func webhookFixture(t *testing.T) (*fixture, *warnings) {
	wh := testenv.ControlPlaneWithWebhooks(t)
	w := &warnings{}
	cfg := rest.CopyConfig(wh.Config)
	cfg.WarningHandler = w
	f := newFixture(t, cfg)
	f.startManager(wh)
	return f, w
}

func statusCauses(err error) string {
	var b strings.Builder
	if s, ok := err.(apierrors.APIStatus); ok && s.Status().Details != nil {
		for _, c := range s.Status().Details.Causes {
			b.WriteString(c.Field + ": " + c.Message + "\n")
		}
	}
	return b.String()
}

func TestWebhookDefaultsLocation(t *testing.T) {
	f, _ := webhookFixture(t)
	f.create(f.query("orders").Obj())
	if got := f.get("orders").Spec.Checkpoint.Location; got != f.location("orders") {
		t.Errorf("spec.checkpoint.location = %q, want %q", got, f.location("orders"))
	}
}

func TestWebhookRefusesIncompatibleChange(t *testing.T) {
	f, w := webhookFixture(t)
	f.create(f.query("orders").Obj())
	f.writeCheckpoint(f.get("orders"), 0, 0, time.Now())

	for _, dryRun := range []bool{true, false} {
		var opts []client.UpdateOption
		if dryRun {
			opts = append(opts, client.DryRunAll)
		}
		err := f.update("orders", func(q *v1.StreamingQuery) {
			q.Spec.Sources[0].Files.Path = "s3://" + f.s3.Bucket + "/landing/other"
		}, opts...)
		if !apierrors.IsInvalid(err) {
			t.Fatalf("Update(dryRun=%v) = %v, want Invalid", dryRun, err)
		}
		causes := statusCauses(err)
		if !strings.Contains(causes, "spec.sources[0]") || !strings.Contains(causes, "Remedy:") {
			t.Errorf("Update(dryRun=%v) causes:\n%s\nwant the finding's path and remedy (error %v)", dryRun, causes, err)
		}
	}
	if got := f.get("orders").Spec.Sources[0].Files.Path; strings.HasSuffix(got, "other") {
		t.Errorf("the refused spec was stored: path %s", got)
	}

	// A compatible change passes, dry-run and for real.
	w.take()
	edit := func(q *v1.StreamingQuery) { q.Spec.Transform[0].Filter = "amount > 1.0" }
	if err := f.update("orders", edit, client.DryRunAll); err != nil {
		t.Fatalf("dry-run compatible Update = %v", err)
	}
	if err := f.update("orders", edit); err != nil {
		t.Fatalf("compatible Update = %v", err)
	}
}

func TestWebhookWarnings(t *testing.T) {
	f, w := webhookFixture(t)
	f.create(f.query("orders").Obj())
	f.writeCheckpoint(f.get("orders"), 0, 0, time.Now())
	w.take()
	if err := f.update("orders", func(q *v1.StreamingQuery) { q.Spec.Sink = v1.Sink{Console: &v1.ConsoleSink{}} }, client.DryRunAll); err != nil {
		t.Fatalf("Update = %v", err)
	}
	got := w.take()
	if len(got) == 0 || !strings.Contains(strings.Join(got, "\n"), "spec.sink") {
		t.Errorf("warnings = %q, want one on spec.sink", got)
	}
}

func TestWebhookRefusesPlacement(t *testing.T) {
	f, _ := webhookFixture(t)
	f.create(f.query("a").Obj())
	other := &v1.CheckpointStore{
		ObjectMeta: metav1.ObjectMeta{Name: f.ns + "-closed"},
		Spec: v1.CheckpointStoreSpec{
			S3: v1.S3Store{Endpoint: f.s3.URL, Bucket: f.s3.Bucket}, CredentialsSecretName: "s3-credentials",
			AllowedNamespaces: []string{"someone-else"},
		},
	}
	f.create(other)
	t.Cleanup(func() { _ = f.c.Delete(context.Background(), other) })

	tests := []struct {
		name  string
		q     *v1.StreamingQuery
		field string
		want  string
	}{
		{"shared location", f.query("b").Checkpoint(f.location("a")).Obj(), "spec.checkpoint.location", "StreamingQuery " + f.ns + "/a"},
		{"nested location", f.query("c").Checkpoint(f.location("a") + "/inner").Obj(), "spec.checkpoint.location", "inside or around"},
		{"outside the namespace prefix", f.query("d").Checkpoint("s3://" + f.s3.Bucket + "/other-team/d").Obj(), "spec.checkpoint.location", "outside"},
		{"namespace not allowed", f.query("e").CheckpointStore(other.Name).Obj(), "spec.checkpoint.store", "may not use CheckpointStore"},
		{"store missing", f.query("g").CheckpointStore("no-such-store").Obj(), "spec.checkpoint.store", "Not found"},
		{"invalid spec", f.query("h").Filter("amount +").Obj(), "spec.transform[1].filter", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, dryRun := range []bool{true, false} {
				var opts []client.CreateOption
				if dryRun {
					opts = append(opts, client.DryRunAll)
				}
				err := f.c.Create(context.Background(), tt.q.DeepCopy(), opts...)
				if !apierrors.IsInvalid(err) {
					t.Fatalf("Create(dryRun=%v) = %v, want Invalid", dryRun, err)
				}
				causes := statusCauses(err)
				if !strings.Contains(causes, tt.field+": ") || !strings.Contains(causes, tt.want) {
					t.Errorf("Create(dryRun=%v) causes:\n%s\nwant %s: …%s…", dryRun, causes, tt.field, tt.want)
				}
			}
		})
	}
	if err := f.c.Create(context.Background(), f.query("ok").Obj(), client.DryRunAll); err != nil {
		t.Errorf("dry-run Create of an acceptable query = %v", err)
	}
}
