package controller

import (
	"context"
	"fmt"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/compat"
)

var (
	_ admission.Defaulter[*v1.StreamingQuery] = (*QueryWebhook)(nil)
	_ admission.Validator[*v1.StreamingQuery] = (*QueryWebhook)(nil)
)

// DefaultCheckpointBudget is how long admission waits for the checkpoint, by default: well
// below the webhooks' timeout (10s), so that a slow or hung store admits the change with a
// warning instead of failing the request.
const DefaultCheckpointBudget = 3 * time.Second

// QueryWebhook defaults and validates StreamingQueries at admission, compat check included.
// It is safe for concurrent use.
type QueryWebhook struct {
	client  client.Reader // StreamingQueries (cached)
	reader  client.Reader // CheckpointStores, Secrets, Namespaces (uncached)
	budget  time.Duration
	metrics *Metrics
}

// A WebhookOption configures a QueryWebhook.
type WebhookOption func(*QueryWebhook)

// WithVerdictMetrics counts the compat findings of admitted and refused changes in m; the
// default counts nothing.
func WithVerdictMetrics(m *Metrics) WebhookOption { return func(w *QueryWebhook) { w.metrics = m } }

// WithCheckpointBudget bounds the checkpoint reads of one admission request, the store's
// access check included. When they take longer, the change is admitted with a warning that
// it was not judged against the checkpoint (the controller judges it before the engine runs
// it). Keep it well below the webhooks' timeoutSeconds (10). Default 3s.
func WithCheckpointBudget(d time.Duration) WebhookOption {
	return func(w *QueryWebhook) { w.budget = d }
}

// NewQueryWebhook returns the webhook with the manager's clients.
func NewQueryWebhook(mgr ctrl.Manager, opts ...WebhookOption) *QueryWebhook {
	w := &QueryWebhook{client: mgr.GetClient(), reader: mgr.GetAPIReader(), budget: DefaultCheckpointBudget}
	for _, opt := range opts {
		opt(w)
	}
	return w
}

// mutatePath is where the defaulting webhook is served (the marker below names it too).
const mutatePath = "/mutate-streaming-lockstep-dev-v1-streamingquery"

// SetupWithManager registers the defaulting and validating webhooks of StreamingQuery.
func (w *QueryWebhook) SetupWithManager(mgr ctrl.Manager) error {
	if err := indexQueries(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	mutate := admission.WithDefaulter(mgr.GetScheme(), w)
	mutate.Handler = schemaFirst{decoder: admission.NewDecoder(mgr.GetScheme()), next: mutate.Handler}
	mgr.GetWebhookServer().Register(mutatePath, mutate)
	return ctrl.NewWebhookManagedBy(mgr, &v1.StreamingQuery{}).WithValidator(w).Complete()
}

// schemaFirst admits unchanged a request whose object does not decode into a StreamingQuery
// (a value of the wrong type, such as a number for a path). Mutating webhooks run before the
// API server checks the CRD's schema; left to the defaulter, such a request would be denied
// with a Go decoding error ("cannot unmarshal number into Go struct field …") instead of the
// schema's Invalid error that names the field path. Admitted here, the schema refuses it.
type schemaFirst struct {
	decoder admission.Decoder
	next    admission.Handler
}

func (h schemaFirst) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Delete && len(req.Object.Raw) > 0 {
		if err := h.decoder.DecodeRaw(req.Object, &v1.StreamingQuery{}); err != nil {
			return admission.Allowed("not defaulted: the object does not match the schema, whose validation says where")
		}
	}
	return h.next.Handle(ctx, req)
}

// The path must be mutatePath.
// +kubebuilder:webhook:path=/mutate-streaming-lockstep-dev-v1-streamingquery,mutating=true,failurePolicy=fail,sideEffects=None,groups=streaming.lockstep.dev,resources=streamingqueries,verbs=create;update,versions=v1,name=mstreamingquery.lockstep.dev,admissionReviewVersions=v1,timeoutSeconds=10

// Default fills spec.checkpoint.location from the store's location template when it is
// empty. A store that does not exist leaves it empty; validation says why.
func (w *QueryWebhook) Default(ctx context.Context, q *v1.StreamingQuery) error {
	if q.Spec.Checkpoint.Location != "" || q.Spec.Checkpoint.Store == "" || q.DeletionTimestamp != nil {
		return nil
	}
	var st v1.CheckpointStore
	err := w.reader.Get(ctx, client.ObjectKey{Name: q.Spec.Checkpoint.Store}, &st)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get CheckpointStore %s: %w", q.Spec.Checkpoint.Store, err)
	}
	name := q.Name
	if name == "" {
		return nil // generateName: the location cannot be derived; validation refuses
	}
	loc, err := st.Spec.Location(q.Namespace, name)
	if err != nil {
		return nil
	}
	q.Spec.Checkpoint.Location = loc
	return nil
}

// +kubebuilder:webhook:path=/validate-streaming-lockstep-dev-v1-streamingquery,mutating=false,failurePolicy=fail,sideEffects=None,groups=streaming.lockstep.dev,resources=streamingqueries,verbs=create;update,versions=v1,name=vstreamingquery.lockstep.dev,admissionReviewVersions=v1,timeoutSeconds=10

// ValidateCreate validates a new query: spec, placement, unique location and compat against
// a checkpoint already at its location.
func (w *QueryWebhook) ValidateCreate(ctx context.Context, q *v1.StreamingQuery) (admission.Warnings, error) {
	return w.validate(ctx, q)
}

// ValidateUpdate validates a changed spec like ValidateCreate. Updates that leave the spec
// as it was (metadata, finalizers) and updates of a query being deleted are not checked.
func (w *QueryWebhook) ValidateUpdate(ctx context.Context, old, q *v1.StreamingQuery) (admission.Warnings, error) {
	if q.DeletionTimestamp != nil || equality.Semantic.DeepEqual(old.Spec, q.Spec) {
		return nil, nil
	}
	warnings, err := w.validate(ctx, q)
	if err == nil && compat.Moved(old.Spec.Checkpoint.Location, q.Spec.Checkpoint.Location) {
		warnings = append(warnings, "spec.checkpoint.location: "+compat.MovedText(old.Spec.Checkpoint.Location, q.Spec.Checkpoint.Location))
	}
	return warnings, err
}

// ValidateDelete allows every deletion.
func (w *QueryWebhook) ValidateDelete(context.Context, *v1.StreamingQuery) (admission.Warnings, error) {
	return nil, nil
}

func (w *QueryWebhook) validate(ctx context.Context, q *v1.StreamingQuery) (admission.Warnings, error) {
	j, err := w.judge().check(ctx, q)
	if err != nil {
		return nil, err
	}
	if r := j.refusal; r != nil {
		if r.reason == v1.ReasonSecretMissing {
			// The controller judges the spec and starts the engine once the Secret exists;
			// the status says what it waits for.
			return admission.Warnings{r.at.String() + ": " + r.err.Error() +
				"; the query was admitted without being judged against its checkpoint, which the controller does before the engine runs"}, nil
		}
		return nil, invalid(ctx, q, r.errs)
	}
	if u := j.unreachable; u != nil {
		reason := fmt.Sprintf("could not read the checkpoint at %s: %v", j.location, u.err)
		if u.budget > 0 {
			// What the store was doing when the budget ran out says nothing more; the log has it.
			logf.FromContext(ctx).Info("Could not read checkpoint at admission", "location", j.location, "budget", u.budget, "error", u.err.Error())
			reason = fmt.Sprintf("could not read the checkpoint at %s within %s (the store is slow or unreachable)", j.location, u.budget)
		}
		logf.FromContext(ctx).Info("Admitted a change not judged against its checkpoint", "streamingQuery", client.ObjectKeyFromObject(q), "reason", reason)
		return admission.Warnings{"spec.checkpoint: " + reason + ": the change was admitted without being judged against the checkpoint; " +
			"the controller judges it before the engine runs it, and keeps the running spec until it can"}, nil
	}
	if j.foreign != nil {
		return nil, invalid(ctx, q, field.ErrorList{j.foreign})
	}
	w.metrics.verdict(*j.verdict)
	warnings, err := ValidateVerdict(ctx, q, *j.verdict)
	if j.postgresNote != "" && j.snap.shaped {
		warnings = append(warnings, "spec.sink.postgres.connection: "+j.postgresNote)
	}
	return warnings, err
}

// judge is admission's judge: it reads the checkpoint's metadata and committed shape afresh
// within the budget, and the postgres sink's Secret.
func (w *QueryWebhook) judge() judge {
	return judge{
		checkpoints: checkpoints{reader: w.reader, cache: w.client},
		queries:     w.client,
		budget:      w.budget,
		read:        readCommitted,
		postgres: func(ctx context.Context, q *v1.StreamingQuery) (compat.Option, string) {
			return postgresServer(ctx, w.reader, q)
		},
	}
}

// readCommitted reads what a change is judged against (metadata and the committed batches'
// shape), opening the store read-only.
func readCommitted(ctx context.Context, cps checkpoints, q *v1.StreamingQuery, p placement) (snapshot, error) {
	store, err := cps.open(ctx, q.Namespace, p, true)
	if err != nil {
		return snapshot{}, err
	}
	_, snap, err := load(ctx, store)
	return snap, err
}

// ValidateVerdict turns a compat verdict into admission's terms: each rejected finding is a
// Forbidden error on its spec path, each warning an admission warning "<path>: <finding>".
// The error, when not nil, is an Invalid API status that names q and whose causes carry the
// paths.
func ValidateVerdict(ctx context.Context, q *v1.StreamingQuery, v compat.Verdict) (admission.Warnings, error) {
	var warnings admission.Warnings
	var errs field.ErrorList
	for _, f := range v.Findings {
		switch f.Severity {
		case compat.Rejected:
			errs = append(errs, &field.Error{Type: field.ErrorTypeForbidden, Field: f.Path, BadValue: f.New, Detail: compat.FindingText(f)})
		case compat.Warning:
			warnings = append(warnings, f.Path+": "+compat.FindingText(f))
		}
	}
	if len(errs) > 0 {
		return warnings, invalid(ctx, q, errs)
	}
	return warnings, nil
}

// invalid is the Invalid API status of q's errors. It names q as the API server's own errors
// do; a query without a name yet (the API server generates the name of a query created with
// generateName before the validating webhooks run, but not before the defaulting one) is
// named by the admission request, else by its generateName.
func invalid(ctx context.Context, q *v1.StreamingQuery, errs field.ErrorList) error {
	name := q.Name
	if req, err := admission.RequestFromContext(ctx); name == "" && err == nil {
		name = req.Name
	}
	if name == "" {
		name = q.GenerateName
	}
	return apierrors.NewInvalid(v1.GroupVersion.WithKind(v1.KindStreamingQuery).GroupKind(), name, errs)
}
