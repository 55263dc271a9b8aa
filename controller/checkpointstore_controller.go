package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
)

// StoreFinalizer holds a CheckpointStore while StreamingQueries name it: a query with
// retention Delete needs the store to delete its checkpoint when it goes, and a query's
// engine is stopped, not orphaned, while its store is being deleted. It is released as soon
// as no query names the store, or the StreamingQuery CRD is gone (an uninstall).
const StoreFinalizer = "streaming.lockstep.dev/store-in-use"

// DefaultProbeInterval is how often a store is probed again, by default. A store that has no
// credentials to probe with yet is looked at on every change of the queries that use it.
const DefaultProbeInterval = 2 * time.Minute

// probeTimeout bounds one probe: a list and two small writes, each retried once.
const probeTimeout = 20 * time.Second

// Event reasons of the store reconciler.
const (
	EventStoreReady    = "StoreReady"
	EventStoreNotReady = "StoreNotReady"
)

// StoreReconciler keeps each CheckpointStore's status: Ready from a probe of the bucket made
// as an engine would open it (s3.Open: a listing, then a create-if-absent twice, which the
// server must refuse the second time), with the credentials Secret of a namespace the store
// allows; the number of queries that name it; and the in-use finalizer StoreFinalizer.
//
// Stopping the engines of a store that is being deleted, or that no longer allows their
// namespace, is the QueryReconciler's job: it watches stores and reconciles their queries.
type StoreReconciler struct {
	client   client.Client
	reader   client.Reader
	recorder events.EventRecorder
	clock    clock.PassiveClock
	interval time.Duration
	// probedWith remembers, per store name, the resourceVersion of the Secret its last probe
	// used: a changed Secret is probed again at once.
	probedWith sync.Map
}

// StoreOption configures a StoreReconciler.
type StoreOption func(*StoreReconciler)

// WithProbeInterval sets how often a store is probed again. Default DefaultProbeInterval.
func WithProbeInterval(d time.Duration) StoreOption {
	return func(r *StoreReconciler) { r.interval = d }
}

// WithStoreClock sets the clock that stamps probes and conditions. Default: the real clock.
func WithStoreClock(c clock.PassiveClock) StoreOption {
	return func(r *StoreReconciler) { r.clock = c }
}

// NewStoreReconciler returns a reconciler that uses the manager's client (cached), its API
// reader (Secrets and Namespaces, never cached; and the query count that releases the
// finalizer, which must not come from a stale cache) and an event recorder.
func NewStoreReconciler(mgr ctrl.Manager, opts ...StoreOption) *StoreReconciler {
	r := &StoreReconciler{
		client:   mgr.GetClient(),
		reader:   mgr.GetAPIReader(),
		recorder: mgr.GetEventRecorder(fieldOwner),
		clock:    clock.RealClock{},
		interval: DefaultProbeInterval,
	}
	for _, opt := range opts {
		opt(r)
	}
	return r
}

// SetupWithManager registers the reconciler: it watches CheckpointStores, StreamingQueries
// (a query created, deleted or pointed at another store recounts the stores involved; status
// updates of queries are ignored), and the metadata of Secrets (a credentials Secret created
// or deleted probes the stores it concerns at once).
func (r *StoreReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := indexQueries(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1.CheckpointStore{}).
		Watches(&v1.StreamingQuery{}, handler.EnqueueRequestsFromMapFunc(storeOfQuery),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.storesOfSecret)).
		Named("checkpointstore").
		Complete(r)
}

// +kubebuilder:rbac:groups=streaming.lockstep.dev,resources=checkpointstores,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=streaming.lockstep.dev,resources=checkpointstores/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=streaming.lockstep.dev,resources=checkpointstores/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// Leader election (and client-go's older recorders) write core Events, not events.k8s.io ones.
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Reconcile probes one store when a probe is due, counts its queries and applies its
// finalizer.
func (r *StoreReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var st v1.CheckpointStore
	if err := r.client.Get(ctx, req.NamespacedName, &st); err != nil {
		if apierrors.IsNotFound(err) {
			r.probedWith.Delete(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !st.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, &st)
	}
	if err := addFinalizer(ctx, r.client, &st, StoreFinalizer); err != nil {
		return ctrl.Result{}, err
	}
	users, err := r.users(ctx, st.Name, false)
	if err != nil {
		return ctrl.Result{}, err
	}
	old := st.Status.DeepCopy()
	st.Status.Queries = int32(len(users))
	st.Status.ObservedGeneration = st.Generation
	if r.probeDue(ctx, &st) {
		if err := r.probe(ctx, &st, users); err != nil {
			return ctrl.Result{}, err
		}
	}
	if !equality.Semantic.DeepEqual(old, &st.Status) {
		// An Update, not a patch: the status is computed from the status read (its probe
		// time, its Ready), and the announcement holds only if that is still the stored one.
		if err := r.client.Status().Update(ctx, &st); err != nil {
			return ctrl.Result{}, fmt.Errorf("update status: %w", err)
		}
		r.announce(&st, old)
	}
	return ctrl.Result{RequeueAfter: r.nextProbe(&st)}, nil
}

// finalize lets a store go once no query names it, and until then says which do.
func (r *StoreReconciler) finalize(ctx context.Context, st *v1.CheckpointStore) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(st, StoreFinalizer) {
		return ctrl.Result{}, nil
	}
	// The API server's answer, not the cache's: a stale cache must neither keep the store
	// nor let it go early, and a missing StreamingQuery kind (the CRD deleted) lets it go.
	users, err := r.users(ctx, st.Name, true)
	if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
		users, err = nil, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(users) == 0 {
		if err := removeFinalizer(ctx, r.client, st, StoreFinalizer); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		logf.FromContext(ctx).Info("Released CheckpointStore", "checkpointStore", st.Name)
		return ctrl.Result{}, nil
	}
	old := st.Status.DeepCopy()
	st.Status.Queries = int32(len(users))
	r.setCondition(st, metav1.ConditionFalse, v1.ReasonDeleting, deletingMessage(users))
	if !equality.Semantic.DeepEqual(old, &st.Status) {
		// An Update, as in Reconcile: the status is computed from the status read.
		if err := r.client.Status().Update(ctx, st); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	// The queries' deletion reconciles again; the requeue is for a missed event.
	return ctrl.Result{RequeueAfter: r.interval}, nil
}

// deletingMessage names the queries a deletion waits for (the first few).
func deletingMessage(users []types.NamespacedName) string {
	const shown = 5
	names := make([]string, 0, shown)
	for i, u := range users {
		if i == shown {
			names = append(names, fmt.Sprintf("and %d more", len(users)-shown))
			break
		}
		names = append(names, u.String())
	}
	return fmt.Sprintf("Deletion waits for %d StreamingQueries that name the store (%s); their engines are stopped. "+
		"Delete them or point them at another store, and the store goes", len(users), strings.Join(names, ", "))
}

// users returns the queries that name the store, sorted, from the cache's store index; with
// fromServer, from a list of every query the API server holds (it has no such index).
func (r *StoreReconciler) users(ctx context.Context, store string, fromServer bool) ([]types.NamespacedName, error) {
	var queries []v1.StreamingQuery
	if fromServer {
		var all v1.StreamingQueryList
		if err := r.reader.List(ctx, &all); err != nil {
			return nil, fmt.Errorf("list StreamingQueries: %w", err)
		}
		queries = slices.DeleteFunc(all.Items, func(q v1.StreamingQuery) bool { return q.Spec.Checkpoint.Store != store })
	} else {
		var err error
		if queries, err = queriesNaming(ctx, r.client, store); err != nil {
			return nil, err
		}
	}
	users := make([]types.NamespacedName, 0, len(queries))
	for _, q := range queries {
		users = append(users, client.ObjectKeyFromObject(&q))
	}
	slices.SortFunc(users, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	return users, nil
}

// probeDue reports whether the store should be probed now: never probed, its spec changed
// since, the interval passed, there was nothing to probe with last time, or the Secret it
// was probed with is gone or changed (as far as this controller remembers).
func (r *StoreReconciler) probeDue(ctx context.Context, st *v1.CheckpointStore) bool {
	c := meta.FindStatusCondition(st.Status.Conditions, v1.ConditionReady)
	if c == nil || c.ObservedGeneration != st.Generation || c.Reason == v1.ReasonNoCredentials || c.Reason == v1.ReasonDeleting {
		return true
	}
	if ns := st.Status.ProbedNamespace; ns != "" {
		v, err := secretVersion(ctx, r.client, ns, st.Spec.CredentialsSecretName)
		if prev, known := r.probedWith.Load(st.Name); err == nil && (v == "" || known && prev != v) {
			return true
		}
	}
	last := st.Status.LastProbeTime
	return last == nil || r.clock.Since(last.Time) >= r.interval
}

// nextProbe is how long until the next probe is due.
func (r *StoreReconciler) nextProbe(st *v1.CheckpointStore) time.Duration {
	if last := st.Status.LastProbeTime; last != nil {
		if d := r.interval - r.clock.Since(last.Time); d > 0 {
			return d
		}
	}
	return r.interval
}

// probe opens the store as an engine of an allowed namespace would, and sets Ready from the
// outcome. Its error is for failures of the cluster (a Secret that could not be read), not
// of the store.
func (r *StoreReconciler) probe(ctx context.Context, st *v1.CheckpointStore, users []types.NamespacedName) error {
	namespaces, err := r.allowedNamespaces(ctx, st, users)
	if err != nil {
		return err
	}
	cps := checkpoints{reader: r.reader}
	var sec *corev1.Secret
	var ns string
	for _, n := range namespaces {
		s, err := cps.secret(ctx, n, placement{store: st})
		if errors.Is(err, errStoreRefused) {
			continue
		}
		if err != nil {
			return err
		}
		sec, ns = s, n
		break
	}
	if sec != nil {
		r.probedWith.Store(st.Name, sec.ResourceVersion)
	} else {
		r.probedWith.Delete(st.Name)
	}
	now := metav1.NewTime(r.clock.Now())
	st.Status.LastProbeTime = &now
	if sec == nil {
		st.Status.ProbedNamespace = ""
		looked := "no namespace is allowed yet: list one in allowedNamespaces or select it with namespaceSelector"
		if len(namespaces) > 0 {
			looked = "looked in " + strings.Join(namespaces, ", ")
		}
		r.setCondition(st, metav1.ConditionUnknown, v1.ReasonNoCredentials,
			fmt.Sprintf("No namespace the store allows holds Secret %s with %s and %s to probe with (%s)",
				st.Spec.CredentialsSecretName, EnvAccessKeyID, EnvSecretAccessKey, looked))
		return nil
	}
	st.Status.ProbedNamespace = ns
	loc := probeLocation(&st.Spec, ns)
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	_, err = openStore(pctx, placement{store: st, location: loc}, sec, false)
	status, reason := metav1.ConditionFalse, probeReason(err)
	msg := fmt.Sprintf("With Secret %s/%s: ", ns, st.Spec.CredentialsSecretName)
	if err == nil {
		status = metav1.ConditionTrue
		msg += fmt.Sprintf("listed %s and saw the server refuse a second create-if-absent of one object, as checkpoints need", loc)
	} else {
		if pctx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("no answer within %s: %w", probeTimeout, err)
		}
		msg += err.Error()
	}
	r.setCondition(st, status, reason, msg)
	return nil
}

// probeReason is the Ready reason of a probe's outcome.
func probeReason(err error) string {
	switch {
	case err == nil:
		return v1.ReasonProbed
	case errors.Is(err, s3.ErrNoSuchBucket):
		return v1.ReasonBucketMissing
	case errors.Is(err, s3.ErrCredentials):
		return v1.ReasonCredentialsRejected
	case errors.Is(err, s3.ErrAccessDenied):
		return v1.ReasonAccessDenied
	case errors.Is(err, s3.ErrConditionalWritesIgnored):
		return v1.ReasonConditionalWritesIgnored
	case errors.Is(err, errStoreRefused), errors.Is(err, checkpoint.ErrInvalidLocation):
		return v1.ReasonInvalidSettings
	default:
		return v1.ReasonUnreachable
	}
}

// probeLocation is where the probe writes its scratch object for namespace ns: under the
// namespace's prefix, which is what a tenant's credentials may be limited to.
func probeLocation(s *v1.CheckpointStoreSpec, ns string) string {
	if prefix, ok := NamespacePrefix(s, ns); ok {
		return strings.TrimRight(prefix, "/")
	}
	loc, err := s.Location(ns, "lockstep-probe")
	if err != nil {
		return "s3://" + s.S3.Bucket // the probe then fails as the queries would
	}
	return loc
}

// allowedNamespaces returns the namespaces whose credentials may probe the store: those of
// its queries first (what runs matters most), then the listed ones, then the selected ones.
func (r *StoreReconciler) allowedNamespaces(ctx context.Context, st *v1.CheckpointStore, users []types.NamespacedName) ([]string, error) {
	allowed := map[string]bool{}
	for _, n := range st.Spec.AllowedNamespaces {
		allowed[n] = true
	}
	var selected []string
	if st.Spec.NamespaceSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(st.Spec.NamespaceSelector)
		if err == nil {
			var list corev1.NamespaceList
			if err := r.reader.List(ctx, &list, client.MatchingLabelsSelector{Selector: sel}); err != nil {
				return nil, fmt.Errorf("list Namespaces selected by CheckpointStore %s: %w", st.Name, err)
			}
			for _, n := range list.Items {
				allowed[n.Name] = true
				selected = append(selected, n.Name)
			}
		}
	}
	var out []string
	add := func(n string) {
		if allowed[n] && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	for _, u := range users {
		add(u.Namespace)
	}
	for _, n := range st.Spec.AllowedNamespaces {
		add(n)
	}
	slices.Sort(selected)
	for _, n := range selected {
		add(n)
	}
	return out, nil
}

// announce emits an Event when Ready changed status or reason.
func (r *StoreReconciler) announce(st *v1.CheckpointStore, old *v1.CheckpointStoreStatus) {
	c := meta.FindStatusCondition(st.Status.Conditions, v1.ConditionReady)
	if c == nil {
		return
	}
	if p := meta.FindStatusCondition(old.Conditions, v1.ConditionReady); p != nil && p.Status == c.Status && p.Reason == c.Reason {
		return
	}
	switch c.Status {
	case metav1.ConditionTrue:
		r.recorder.Eventf(st, nil, corev1.EventTypeNormal, EventStoreReady, "Probe", "%s", truncate(c.Message, maxEventNote))
	case metav1.ConditionFalse:
		r.recorder.Eventf(st, nil, corev1.EventTypeWarning, EventStoreNotReady, "Probe", "%s: %s", c.Reason, truncate(c.Message, maxEventNote-50))
	}
}

func (r *StoreReconciler) setCondition(st *v1.CheckpointStore, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&st.Status.Conditions, metav1.Condition{
		Type: v1.ConditionReady, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: st.Generation, LastTransitionTime: metav1.NewTime(r.clock.Now()),
	})
}

// storesOfSecret maps a Secret to the stores it may be the credentials of, whose probe it may
// change: those waiting for credentials, and those probed with it.
func (r *StoreReconciler) storesOfSecret(ctx context.Context, obj client.Object) []reconcile.Request {
	var all v1.CheckpointStoreList
	if err := r.client.List(ctx, &all); err != nil {
		logf.FromContext(ctx).Error(err, "Listing CheckpointStores for a Secret failed", "secret", client.ObjectKeyFromObject(obj))
		return nil
	}
	var reqs []reconcile.Request
	for i := range all.Items {
		st := &all.Items[i]
		if st.Spec.CredentialsSecretName != obj.GetName() {
			continue
		}
		c := meta.FindStatusCondition(st.Status.Conditions, v1.ConditionReady)
		if c == nil || c.Reason == v1.ReasonNoCredentials || st.Status.ProbedNamespace == obj.GetNamespace() {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: st.Name}})
		}
	}
	return reqs
}

// storeOfQuery maps a query to the store it names.
func storeOfQuery(_ context.Context, obj client.Object) []reconcile.Request {
	q, ok := obj.(*v1.StreamingQuery)
	if !ok || q.Spec.Checkpoint.Store == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: q.Spec.Checkpoint.Store}}}
}
