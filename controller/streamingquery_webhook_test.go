package controller_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/compat"
	"github.com/lockstep-dev/lockstep/controller"
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

// webhookFixture is a fixture on the control plane with webhooks, with the manager (with
// opts) serving them, and a client that records warnings.
func webhookFixture(t *testing.T, opts ...controller.Option) (*fixture, *warnings) {
	wh := testenv.ControlPlaneWithWebhooks(t)
	w := &warnings{}
	cfg := rest.CopyConfig(wh.Config)
	cfg.WarningHandler = w
	f := newFixture(t, cfg)
	f.startManager(wh, opts...)
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

// TestWebhookAdmitsQueryBeforeItsSecret: `kubectl apply -f dir/` may create a query before
// the store's credentials Secret. Admission admits it with a warning naming the Secret; the
// query waits for it (Pending, SecretMissing) and its engine starts once it exists.
func TestWebhookAdmitsQueryBeforeItsSecret(t *testing.T) {
	f, w := webhookFixture(t)
	ctx := context.Background()
	var sec corev1.Secret
	if err := f.c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "s3-credentials"}, &sec); err != nil {
		t.Fatal(err)
	}
	if err := f.c.Delete(ctx, &sec); err != nil {
		t.Fatal(err)
	}
	w.take()
	if err := f.c.Create(ctx, f.query("orders").Obj()); err != nil {
		t.Fatalf("Create before the Secret = %v (%s), want admitted", err, statusCauses(err))
	}
	if got := strings.Join(w.take(), "\n"); !strings.Contains(got, "spec.checkpoint.store: Secret "+f.ns+"/s3-credentials") || !strings.Contains(got, "does not exist") {
		t.Errorf("warnings = %q, want one naming the missing Secret", got)
	}
	q := f.eventuallyCondition("orders", v1.ConditionReady, metav1.ConditionFalse, v1.ReasonSecretMissing)
	if q.Status.Phase != v1.PhasePending {
		t.Errorf("phase = %s, want Pending", q.Status.Phase)
	}
	if err := f.c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: controller.EngineName("orders")}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("get engine Deployment before the Secret = %v, want NotFound", err)
	}

	f.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s3-credentials", Namespace: f.ns}, Data: sec.Data})
	f.eventuallyReplicas("orders", 1)
	f.eventuallyCondition("orders", v1.ConditionCompatible, metav1.ConditionTrue, v1.ReasonNoCheckpoint)
}

// TestWebhookAdmitsWhenTheStoreHangs: a store that never answers delays admission by the
// checkpoint budget only; each change is admitted with a warning that names the location and
// says it was not judged, and a suspend stops the running engine.
func TestWebhookAdmitsWhenTheStoreHangs(t *testing.T) {
	f, w := webhookFixture(t, controller.WithReadBudget(2*time.Second))
	f.create(f.query("orders").Obj())
	f.writeCheckpoint(f.get("orders"), 0, 0, time.Now())
	if _, d := f.engine("orders"); *d.Spec.Replicas != 1 {
		t.Fatalf("engine replicas = %d, want 1", *d.Spec.Replicas)
	}

	// From now on the store takes every request and never answers, as a hung store does.
	proxy := testenv.NewS3Proxy(t, f.s3, 1)
	proxy.Inject(testenv.Rule{Kind: testenv.Delay, Times: testenv.Always, Delay: time.Hour})
	f.store.Spec.S3.Endpoint = proxy.Server().URL
	if err := f.c.Update(context.Background(), f.store); err != nil {
		t.Fatal(err)
	}
	w.take()
	wantWarning := func(what, name string) {
		t.Helper()
		got := strings.Join(w.take(), "\n")
		t.Logf("%s: warnings:\n%s", what, got)
		want := "spec.checkpoint: could not read the checkpoint at " + f.location(name) + " within " + controller.DefaultCheckpointBudget.String() +
			" (the store is slow or unreachable): the change was admitted without being judged against the checkpoint"
		if !strings.Contains(got, want) {
			t.Errorf("%s: warnings\n%s\nwant one containing %q", what, got, want)
		}
	}
	if err := f.update("orders", func(q *v1.StreamingQuery) { q.Spec.Suspend = true }); err != nil {
		t.Fatalf("Update(suspend: true) = %v, want admitted", err)
	}
	wantWarning("suspend", "orders")
	if err := f.update("orders", func(q *v1.StreamingQuery) { q.Spec.Transform[0].Filter = "amount > 1.0" }, client.DryRunAll); err != nil {
		t.Fatalf("dry-run Update = %v, want admitted", err)
	}
	wantWarning("dry-run change", "orders")
	f.create(f.query("other").Obj())
	wantWarning("create", "other")

	q := f.eventuallySuspended("orders")
	if c := condition(q, v1.ConditionCheckpointReachable); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "did not answer within 2s") {
		t.Errorf("CheckpointReachable = %+v, want False saying the store did not answer within the budget", c)
	}
}

// TestWebhookRejectionsNameTheQuery: a refusal names the query, as the API server's own
// errors do ("StreamingQuery.streaming.lockstep.dev "orders" is invalid"), also when the name
// is generated.
func TestWebhookRejectionsNameTheQuery(t *testing.T) {
	f, _ := webhookFixture(t)
	f.create(f.query("orders").Obj())
	f.writeCheckpoint(f.get("orders"), 0, 0, time.Now())

	err := f.update("orders", func(q *v1.StreamingQuery) { q.Spec.Sources[0].Files.Path = "s3://" + f.s3.Bucket + "/landing/other" })
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `StreamingQuery.streaming.lockstep.dev "orders" is invalid`) {
		t.Errorf("incompatible Update = %v, want Invalid naming the query", err)
	}
	err = f.c.Create(context.Background(), f.query("bad").Filter("amount +").Obj())
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `StreamingQuery.streaming.lockstep.dev "bad" is invalid`) {
		t.Errorf("invalid Create = %v, want Invalid naming the query", err)
	}
	for _, dryRun := range []bool{true, false} {
		var opts []client.CreateOption
		if dryRun {
			opts = append(opts, client.DryRunAll)
		}
		q := f.query("").Filter("amount +").Obj()
		q.GenerateName = "gen-"
		err = f.c.Create(context.Background(), q, opts...)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `StreamingQuery.streaming.lockstep.dev "gen-`) {
			t.Errorf("invalid Create with generateName (dryRun=%v) = %v, want Invalid naming the query", dryRun, err)
		}
	}
}

// TestWebhookTypeErrorsAreSchemaErrors: a value of the wrong type is refused by the API
// server's schema, with its field path, not by the defaulting webhook failing to decode it.
func TestWebhookTypeErrorsAreSchemaErrors(t *testing.T) {
	f, _ := webhookFixture(t)
	q := f.query("typed").Obj()
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(q)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: raw}
	u.SetGroupVersionKind(v1.GroupVersion.WithKind(v1.KindStreamingQuery))
	sources, _, _ := unstructured.NestedSlice(u.Object, "spec", "sources")
	if err := unstructured.SetNestedField(sources[0].(map[string]any), int64(5), "files", "path"); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedSlice(u.Object, sources, "spec", "sources"); err != nil {
		t.Fatal(err)
	}
	err = f.c.Create(context.Background(), u)
	causes := statusCauses(err)
	if !apierrors.IsInvalid(err) || !strings.Contains(causes, "spec.sources[0].files.path: ") || !strings.Contains(err.Error(), "must be of type string") {
		t.Errorf("Create with a number for spec.sources[0].files.path = %v (causes:\n%s), want the schema's Invalid with the field path", err, causes)
	}
}

func TestValidateVerdictNamesTheQuery(t *testing.T) {
	rejected := compat.Verdict{Severity: compat.Rejected, Findings: []compat.Finding{{Rule: "files-path", Severity: compat.Rejected, Path: "spec.sources[0].files.path", Old: "a", New: "b", Message: "Moved."}}}
	named := querytest.Make("orders", "ns").Obj()
	unnamed := querytest.Make("", "ns").Obj()
	unnamed.GenerateName = "orders-"
	tests := []struct {
		name string
		q    *v1.StreamingQuery
		req  string // the admission request's name
		want string
	}{
		{"named", named, "", `StreamingQuery.streaming.lockstep.dev "orders" is invalid`},
		{"named by the request", unnamed, "orders-x1", `StreamingQuery.streaming.lockstep.dev "orders-x1" is invalid`},
		{"generateName", unnamed, "", `StreamingQuery.streaming.lockstep.dev "orders-" is invalid`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var req admission.Request
			req.Name = tt.req
			ctx := admission.NewContextWithRequest(context.Background(), req)
			_, err := controller.ValidateVerdict(ctx, tt.q, rejected)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ValidateVerdict() = %v, want Invalid containing %q", err, tt.want)
			}
		})
	}
}

// TestNamesAcceptUnderscores: source and stateful-step names may hold '_' (orders_eu,
// per_order), as the CRD's pattern and the webhook's validation both allow; a name that is not
// one path segment is refused by the API server with its field path.
func TestNamesAcceptUnderscores(t *testing.T) {
	f, _ := webhookFixture(t)
	ok := f.query("underscores").EditSource("orders", func(s *v1.Source) { s.Name = "orders_eu" }).DropDuplicates("per_order", "id").Obj()
	f.create(ok)
	if got := f.get("underscores").Spec.Sources[0].Name; got != "orders_eu" {
		t.Errorf("stored source name = %q, want orders_eu", got)
	}
	for _, name := range []string{"orders/eu", "orders_", "Orders_EU", ".."} {
		bad := f.query("bad-name").EditSource("orders", func(s *v1.Source) { s.Name = name }).Obj()
		err := f.c.Create(context.Background(), bad, client.DryRunAll)
		if !apierrors.IsInvalid(err) || !strings.Contains(statusCauses(err), "spec.sources[0].name") {
			t.Errorf("Create with source name %q = %v (causes:\n%s), want Invalid at spec.sources[0].name", name, err, statusCauses(err))
		}
	}
}

// TestWebhookWarnsOfMovedLocation: a new checkpoint.location is a fresh start, and the
// admission warning says so in compat.MovedText's words, which lockstep plan --from prints
// too; the same location written with a trailing '/' is no move.
func TestWebhookWarnsOfMovedLocation(t *testing.T) {
	f, w := webhookFixture(t)
	f.create(f.query("orders").Obj())
	from := f.get("orders").Spec.Checkpoint.Location
	w.take()
	to := from + "-v2"
	if err := f.update("orders", func(q *v1.StreamingQuery) { q.Spec.Checkpoint.Location = to }, client.DryRunAll); err != nil {
		t.Fatalf("Update = %v", err)
	}
	want := "spec.checkpoint.location: " + compat.MovedText(from, to)
	if got := w.take(); !slices.Contains(got, want) {
		t.Errorf("warnings = %q, want %q", got, want)
	}
	if err := f.update("orders", func(q *v1.StreamingQuery) { q.Spec.Checkpoint.Location = from + "/" }, client.DryRunAll); err != nil {
		t.Fatalf("Update = %v", err)
	}
	for _, got := range w.take() {
		if strings.HasPrefix(got, "spec.checkpoint.location: changed") {
			t.Errorf("the same location with a trailing '/' warned %q", got)
		}
	}
}

// TestDeltaSourceRefusesOnMalformedSkip: the CRD refuses onMalformed skip or deadLetter on a
// delta source, as validation does, naming the source.
func TestDeltaSourceRefusesOnMalformedSkip(t *testing.T) {
	f, _ := webhookFixture(t)
	q := f.query("delta-skip").Edit(func(s *v1.StreamingQuerySpec) {
		s.Sources[0] = v1.Source{Name: "orders", Delta: &v1.DeltaSource{Path: "s3://" + f.s3.Bucket + "/lake/orders"},
			Schema: s.Sources[0].Schema, OnMalformed: v1.MalformedSkip}
	}).Obj()
	err := f.c.Create(context.Background(), q, client.DryRunAll)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "a delta source takes only onMalformed: fail") || !strings.Contains(statusCauses(err), "spec.sources[0]") {
		t.Errorf("Create of a delta source with onMalformed skip = %v (causes:\n%s), want Invalid at spec.sources[0]", err, statusCauses(err))
	}
}

// The webhook judges a postgres sink by the server and database its Secret's connection
// string names, as the engine recorded them: a query moved to another Secret naming the same
// database is admitted; one naming another server is refused, and so is any change once the
// Secret itself names another server.
func TestWebhookJudgesPostgresSinkByItsServer(t *testing.T) {
	f, w := webhookFixture(t)
	for name, dsn := range map[string]string{
		"db-a": "postgres://app:secret-a@db1.example.com:5432/shop",
		"db-b": "host=db1.example.com dbname=shop user=reader password=secret-b",
		"db-c": "postgres://app:secret-c@db2.example.com:5432/shop",
	} {
		f.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns}, StringData: map[string]string{v1.PostgresDSNSecretKey: dsn}})
	}
	pgSink := func(secret string) v1.Sink {
		return v1.Sink{Postgres: &v1.PostgresSink{Connection: v1.PostgresConnection{SecretName: secret}, Table: "clean"}}
	}
	f.create(f.query("orders").Sink(pgSink("db-a")).Obj())
	// The engine records the server from the Secret's connection string.
	f.writeCheckpoint(f.get("orders"), 0, 0, time.Now(), compat.WithPostgresServer("db1.example.com:5432/shop"))

	if err := f.update("orders", func(q *v1.StreamingQuery) { q.Spec.Sink = pgSink("db-b") }, client.DryRunAll); err != nil {
		t.Errorf("another Secret naming the same database: Update = %v (%s), want admitted", err, statusCauses(err))
	}
	err := f.update("orders", func(q *v1.StreamingQuery) { q.Spec.Sink = pgSink("db-c") }, client.DryRunAll)
	if causes := statusCauses(err); !apierrors.IsInvalid(err) || !strings.Contains(causes, "db2.example.com:5432/shop") || !strings.Contains(causes, "Remedy:") {
		t.Errorf("a Secret naming another server: Update = %v\n%s\nwant Invalid naming the servers, with a remedy", err, causes)
	} else if strings.Contains(causes, "secret-") {
		t.Errorf("the refusal quotes a password:\n%s", causes)
	}

	// The Secret repointed at another server: even an unrelated change is refused.
	var sec corev1.Secret
	if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: "db-a"}, &sec); err != nil {
		t.Fatal(err)
	}
	sec.Data[v1.PostgresDSNSecretKey] = []byte("postgres://app:secret-a@db2.example.com:5432/shop")
	if err := f.c.Update(context.Background(), &sec); err != nil {
		t.Fatal(err)
	}
	err = f.update("orders", func(q *v1.StreamingQuery) { q.Spec.Transform[0].Filter = "amount > 1.0" }, client.DryRunAll)
	if causes := statusCauses(err); !apierrors.IsInvalid(err) || !strings.Contains(causes, "Point secret/db-a back at db1.example.com:5432/shop") {
		t.Errorf("Secret repointed: Update = %v\n%s\nwant Invalid, pointing the Secret back", err, causes)
	}

	// A Secret without a dsn: judged by its name, with a warning saying so.
	sec.Data = map[string][]byte{"url": []byte("postgres://db1.example.com/shop")}
	if err := f.c.Update(context.Background(), &sec); err != nil {
		t.Fatal(err)
	}
	w.take()
	if err := f.update("orders", func(q *v1.StreamingQuery) { q.Spec.Transform[0].Filter = "amount > 1.0" }, client.DryRunAll); err != nil {
		t.Errorf("Secret without dsn, same name: Update = %v (%s), want admitted", err, statusCauses(err))
	}
	if got := strings.Join(w.take(), "\n"); !strings.Contains(got, "spec.sink.postgres.connection") || !strings.Contains(got, "judged by the Secret's name") {
		t.Errorf("warnings = %q, want one saying the sink is judged by the Secret's name", got)
	}
}

// TestWebhookJudgesAgainstTheCommittedShape: a shape recorded for a batch that has not
// committed (an engine started with a spec, then stopped before its first batch) is not
// what a change is judged against; the shape the committed batches ran under is.
func TestWebhookJudgesAgainstTheCommittedShape(t *testing.T) {
	f, _ := webhookFixture(t)
	f.create(f.query("orders").Obj())
	f.writeCheckpoint(f.get("orders"), 0, 0, time.Now())
	unrun := f.get("orders").DeepCopy()
	unrun.Spec.Sources[0].Files.Path = "s3://" + f.s3.Bucket + "/landing/other"
	f.claim(unrun, 1)

	if err := f.update("orders", func(q *v1.StreamingQuery) { q.Spec.Transform[0].Filter = "amount > 1.0" }); err != nil {
		t.Fatalf("Update judged against the shape batch 1 was to run under, not batch 0's: %v", err)
	}
	err := f.update("orders", func(q *v1.StreamingQuery) { q.Spec.Sources[0].Files.Path = unrun.Spec.Sources[0].Files.Path })
	if !apierrors.IsInvalid(err) || !strings.Contains(statusCauses(err), "spec.sources[0]") {
		t.Errorf("moving the source to the unrun shape's path = %v, want Invalid at spec.sources[0]: batch 0 read the old path", err)
	}
}

// TestForeignCheckpointRefusedByBoth: admission and the reconciler judge a query with one
// judge, so a checkpoint that belongs to another query refuses it in both: admission denies
// the query on spec.checkpoint.location, and a query that got past admission (created
// without the webhooks) is Blocked with Compatible=False CheckpointOwnedElsewhere, and no
// engine runs on the other query's checkpoint.
func TestForeignCheckpointRefusedByBoth(t *testing.T) {
	ctx := context.Background()
	claim := func(f *fixture) {
		t.Helper()
		if _, err := checkpoint.Claim(ctx, f.openCheckpoint("orders"), checkpoint.Owner{Namespace: f.ns, Name: "previous"}); err != nil {
			t.Fatal(err)
		}
	}

	f, _ := webhookFixture(t)
	claim(f)
	err := f.c.Create(ctx, f.query("orders").Obj())
	if causes := statusCauses(err); !apierrors.IsInvalid(err) ||
		!strings.Contains(causes, "spec.checkpoint.location: ") || !strings.Contains(causes, "belongs to "+f.ns+"/previous") {
		t.Errorf("Create on another query's checkpoint = %v, causes:\n%s\nwant Invalid on spec.checkpoint.location naming the owner", err, causes)
	}

	g := newFixture(t, testenv.ControlPlane(t))
	g.startManager(nil)
	claim(g)
	g.create(g.query("orders").Obj())
	q := g.eventuallyCondition("orders", v1.ConditionCompatible, metav1.ConditionFalse, v1.ReasonCheckpointOwnedElsewhere)
	if c := condition(q, v1.ConditionCompatible); !strings.Contains(c.Message, "belongs to "+g.ns+"/previous") {
		t.Errorf("Compatible = %+v, want it to name the owner", c)
	}
	q = g.eventuallyCondition("orders", v1.ConditionReady, metav1.ConditionFalse, v1.ReasonIncompatibleChange)
	if q.Status.Phase != v1.PhaseBlocked {
		t.Errorf("phase = %s, want Blocked", q.Status.Phase)
	}
	if err := g.c.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: controller.EngineName("orders")}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("get engine Deployment = %v, want NotFound", err)
	}
}
