package controller

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	crevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/compat"
)

// Defaults of the reconciler's options.
const (
	DefaultResync = 30 * time.Second
	// DefaultFollow is the shortest time between two status polls of a running query whose
	// batches commit (see nextPoll).
	DefaultFollow = 5 * time.Second
	// DefaultReadBudget bounds the checkpoint reads of one reconcile: a store that hangs
	// delays the reconcile (and so a suspend) by at most this much, then the checkpoint is
	// reported unreachable.
	DefaultReadBudget = 10 * time.Second
	// DefaultMaxConcurrentReconciles is how many queries are reconciled at once.
	DefaultMaxConcurrentReconciles = 4
	// deletionPoll is how often a deletion with retention Delete checks that the engine has
	// stopped before it deletes the checkpoint.
	deletionPoll = 2 * time.Second
)

// Event reasons of the controller, besides the condition reasons of api/v1.
const (
	EventEngineCreated       = "EngineCreated"
	EventEngineRolled        = "EngineRolled"
	EventCheckpointDeleted   = "CheckpointDeleted"
	EventCheckpointRetained  = "CheckpointRetained"
	EventCheckpointNotDelete = "CheckpointNotDeleted"
)

// QueryReconciler runs each StreamingQuery as an engine Deployment and reports its progress
// from the checkpoint. See the package documentation.
type QueryReconciler struct {
	client   client.Client
	reader   client.Reader
	scheme   *runtime.Scheme
	recorder events.EventRecorder
	clock    clock.PassiveClock
	engine   EngineSettings
	resync   time.Duration
	follow   time.Duration
	budget   time.Duration
	workers  int
	polls    *poller
	trends   *trends
	// pgServers are the servers the queries' postgres Secrets named (compat's identity).
	pgServers *pgServers
	metrics   *Metrics
}

// Option configures a QueryReconciler.
type Option func(*QueryReconciler)

// WithMetrics counts reconcile errors in m; the default counts nothing.
func WithMetrics(m *Metrics) Option { return func(r *QueryReconciler) { r.metrics = m } }

// WithClock sets the clock that stamps conditions and judges progress. Default: the real clock.
func WithClock(c clock.PassiveClock) Option { return func(r *QueryReconciler) { r.clock = c } }

// WithEngine sets the settings of engine pods (image, grace period, service account).
func WithEngine(s EngineSettings) Option { return func(r *QueryReconciler) { r.engine = s } }

// WithResync sets how often the status of a running query is refreshed from its checkpoint.
// Default 30s.
func WithResync(d time.Duration) Option { return func(r *QueryReconciler) { r.resync = d } }

// WithFollow sets the shortest time between two status polls of a running query whose
// batches commit: its status is read again just after its next batch is due to commit, but
// no sooner than this, nor later than the resync. Default 5s; a poll of a busy query costs its
// checkpoint 2 small GETs and, when the status changed, one write to the API server.
func WithFollow(d time.Duration) Option { return func(r *QueryReconciler) { r.follow = d } }

// WithMaxConcurrentReconciles sets how many queries are reconciled at once. Default 4: a
// reconcile mostly waits on S3 and the API server, and 1,000 queries at the default resync
// need about 33 reconciles a second.
func WithMaxConcurrentReconciles(n int) Option { return func(r *QueryReconciler) { r.workers = n } }

// WithReadBudget bounds the checkpoint reads of one reconcile (the store's access check
// included): when they take longer the checkpoint counts as unreachable for this reconcile.
// Default 10s.
func WithReadBudget(d time.Duration) Option { return func(r *QueryReconciler) { r.budget = d } }

// NewQueryReconciler returns a reconciler that uses the manager's client (cached), its API
// reader (for Secrets and Namespaces, which are never cached) and an event recorder named
// lockstep-controller.
func NewQueryReconciler(mgr ctrl.Manager, opts ...Option) *QueryReconciler {
	r := &QueryReconciler{
		client:    mgr.GetClient(),
		reader:    mgr.GetAPIReader(),
		scheme:    mgr.GetScheme(),
		recorder:  mgr.GetEventRecorder(fieldOwner),
		clock:     clock.RealClock{},
		resync:    DefaultResync,
		follow:    DefaultFollow,
		budget:    DefaultReadBudget,
		workers:   DefaultMaxConcurrentReconciles,
		polls:     &poller{},
		trends:    &trends{},
		pgServers: &pgServers{},
	}
	for _, opt := range opts {
		opt(r)
	}
	return r
}

// SetupWithManager registers the reconciler: it watches StreamingQueries, the Deployments,
// Jobs and ConfigMaps they own, and the engine pods (by label), CheckpointStores (every query
// of a changed store is reconciled again), and the metadata of Secrets (the queries of a
// Secret's namespace that use it are reconciled again: a credentials Secret created, rotated
// or deleted starts, reopens or stops their engines at once).
func (r *QueryReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := indexQueries(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1.StreamingQuery{}, builder.WithPredicates(notStatusOnly)).
		Owns(&appsv1.Deployment{}).
		Owns(&batchv1.Job{}).
		Owns(&corev1.ConfigMap{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(queryOfPod)).
		Watches(&v1.CheckpointStore{}, handler.EnqueueRequestsFromMapFunc(r.queriesOfStore), builder.WithPredicates(notStatusOnly)).
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.queriesOfSecret)).
		Named("streamingquery").
		WithOptions(crcontroller.Options{MaxConcurrentReconciles: r.workers}).
		Complete(r)
}

// notStatusOnly drops the updates that change only an object's status. A query's: the
// reconciler writes it itself, and reconciling again for its own write would double the
// reconciles of every running query. A store's: its probe rewrites the status every few
// minutes, and each rewrite would reconcile every query of the store, none of which reads it. Spec (generation), labels, annotations, finalizers and
// deletion still reconcile at once; the resync covers the rest.
var notStatusOnly = predicate.Funcs{UpdateFunc: func(e crevent.UpdateEvent) bool {
	o, n := e.ObjectOld, e.ObjectNew
	return o.GetGeneration() != n.GetGeneration() ||
		!equality.Semantic.DeepEqual(o.GetLabels(), n.GetLabels()) ||
		!equality.Semantic.DeepEqual(o.GetAnnotations(), n.GetAnnotations()) ||
		!equality.Semantic.DeepEqual(o.GetFinalizers(), n.GetFinalizers()) ||
		!equality.Semantic.DeepEqual(o.GetDeletionTimestamp(), n.GetDeletionTimestamp())
}}

// +kubebuilder:rbac:groups=streaming.lockstep.dev,resources=streamingqueries,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=streaming.lockstep.dev,resources=streamingqueries/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=streaming.lockstep.dev,resources=streamingqueries/finalizers,verbs=update
// +kubebuilder:rbac:groups=streaming.lockstep.dev,resources=checkpointstores,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// The Role of a spark query's driver (sparkRole) holds these: Kubernetes lets the controller
// grant only what it holds itself.
// +kubebuilder:rbac:groups="",resources=pods;services;configmaps;persistentvolumeclaims,verbs=get;list;watch;create;update;patch;delete;deletecollection
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings one query's engine and status in line with its spec and checkpoint.
func (r *QueryReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res, err := r.reconcile(ctx, req)
	if err != nil {
		r.metrics.reconcileFailed(req.Namespace, req.Name)
	}
	return res, err
}

func (r *QueryReconciler) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var q v1.StreamingQuery
	if err := r.client.Get(ctx, req.NamespacedName, &q); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !q.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, &q)
	}
	if err := addFinalizer(ctx, r.client, &q, Finalizer); err != nil {
		return ctrl.Result{}, err
	}
	old := q.Status.DeepCopy()
	o, err := r.observe(ctx, &q)
	if err != nil {
		return ctrl.Result{}, err
	}
	a, err := r.apply(ctx, &q, &o)
	if err != nil {
		return ctrl.Result{}, err
	}
	q.Status = r.status(&q, old, &o, a)
	if c, ok := o.commitSeen(); ok && a.refusal == nil && !q.Spec.Suspend {
		for _, e := range r.trends.fold(req.NamespacedName, c, q.Spec.Trigger.Interval()) {
			r.record(&q, e)
		}
	}
	// The transitions this status write records are announced once it succeeded: a
	// reconcile that read a stale query (the cache behind its own last write) would announce
	// them again, and its write conflicts.
	announced := announcements(q.Generation, old, &q.Status)
	if !equality.Semantic.DeepEqual(old, &q.Status) {
		// An Update, not a patch: the status is computed from the status read, and its
		// announcements hold only if that is still the stored one.
		if err := r.client.Status().Update(ctx, &q); err != nil {
			return ctrl.Result{}, fmt.Errorf("update status: %w", err)
		}
	}
	for _, e := range announced {
		r.record(&q, e)
	}
	if o.refusal != nil && o.store == nil {
		// Nothing to watch but the query and its store: their changes reconcile again.
		return ctrl.Result{}, reconcile.TerminalError(o.refusal.err)
	}
	return ctrl.Result{RequeueAfter: r.nextPoll(&q, old)}, nil
}

// observation is everything a reconcile learned before acting: the judgement of the query
// (see judge), its engine's children and pods, and what it should run. A refused query's
// observation stops at the refusal: it has no ConfigMap to run and no engine state.
type observation struct {
	judgement
	configMap  *corev1.ConfigMap
	deployment *appsv1.Deployment
	job        *batchv1.Job // the engine's workload when the trigger ends by itself
	pods       []corev1.Pod
	// executors are a spark query's executor pods.
	executors []corev1.Pod
	// desiredCM is the ConfigMap to run: the new spec's, or the existing one when the
	// checkpoint was not read or refuses the spec.
	desiredCM *corev1.ConfigMap
	// engineSpecKept is true when the spec renders the engine's query as it stands: the
	// generation changed nothing the engine sees.
	engineSpecKept bool
	engine         engineState
	completed      bool
}

// observe reads the query's children and pods, and judges the query (its store, checkpoint
// and spec).
func (r *QueryReconciler) observe(ctx context.Context, q *v1.StreamingQuery) (observation, error) {
	var o observation
	var err error
	if o.configMap, err = getOrNil(ctx, r.client, q.Namespace, EngineName(q.Name), &corev1.ConfigMap{}); err != nil {
		return o, err
	}
	if o.deployment, err = getOrNil(ctx, r.client, q.Namespace, EngineName(q.Name), &appsv1.Deployment{}); err != nil {
		return o, err
	}
	if o.job, err = getOrNil(ctx, r.client, q.Namespace, EngineName(q.Name), &batchv1.Job{}); err != nil {
		return o, err
	}
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.InNamespace(q.Namespace), client.MatchingLabels{LabelQuery: q.Name, LabelComponent: componentEngine}); err != nil {
		return o, fmt.Errorf("list engine pods: %w", err)
	}
	o.pods = pods.Items
	if isSpark(q) {
		var execs corev1.PodList
		if err := r.client.List(ctx, &execs, client.InNamespace(q.Namespace), client.MatchingLabels{LabelQuery: q.Name, LabelComponent: ComponentSparkExecutor}); err != nil {
			return o, fmt.Errorf("list executor pods: %w", err)
		}
		o.executors = execs.Items
	}

	if o.judgement, err = r.judge(o.pods).check(ctx, q); err != nil {
		return o, err
	}
	if o.refusal != nil {
		return o, nil
	}
	desired, err := RenderConfigMap(o.located, o.store, r.engine)
	if err != nil {
		return o, err
	}
	o.engineSpecKept = o.configMap != nil && equality.Semantic.DeepEqual(o.configMap.Data, desired.Data)
	switch {
	case o.blocked || o.unreachable != nil:
		// A change that was not judged, or was rejected, does not reach the engine.
		o.desiredCM = o.configMap
	default:
		o.desiredCM = desired
	}
	var hash string
	if o.desiredCM != nil {
		hash = SpecHash(o.desiredCM)
	}
	o.engine = jobState(inspectPods(o.pods, hash), o.job, hash)
	old := q.Status
	o.completed = endsByItself(&q.Spec) && !o.blocked &&
		(o.engine.completed || old.Phase == v1.PhaseCompleted && old.ObservedGeneration == q.Generation)
	return o, nil
}

// judge is the reconciler's judge of a query whose engine pods are pods: it reads the
// checkpoint through the poller (as little as its memory of the last poll allows) and the
// postgres sink's server from memory, and refuses a store being deleted.
func (r *QueryReconciler) judge(pods []corev1.Pod) judge {
	return judge{
		checkpoints: checkpoints{reader: r.reader, cache: r.client},
		queries:     r.client,
		budget:      r.budget,
		read: func(ctx context.Context, cps checkpoints, q *v1.StreamingQuery, p placement) (snapshot, error) {
			return r.polls.poll(ctx, cps, q, p, pods)
		},
		postgres: func(ctx context.Context, q *v1.StreamingQuery) (compat.Option, string) {
			return r.pgServers.option(ctx, r.reader, r.client, q), ""
		},
		refuseDeletingStore: true,
	}
}

// applied is what apply did, for the status.
type applied struct {
	// deployment and job are the engine's workload as apply left it; nil when there is none.
	deployment *appsv1.Deployment
	job        *batchv1.Job
	// refusal is the API server's refusal of the workload apply rendered (see
	// workloadRefusal); nil when it took it.
	refusal *refusal
}

// apply creates or updates the ConfigMap and the engine's workload (workload.go), and returns
// what it did. It does not change o.
func (r *QueryReconciler) apply(ctx context.Context, q *v1.StreamingQuery, o *observation) (applied, error) {
	log := logf.FromContext(ctx)
	a := applied{deployment: o.deployment, job: o.job}
	if o.refusal != nil && o.refusal.revoked {
		// The store no longer lets this query write: stop the engine (the checkpoint keeps
		// its progress) until it does again.
		return r.stopRevoked(ctx, a)
	}
	if o.refusal != nil || o.desiredCM == nil || o.store == nil {
		// The spec or store is refused, or nothing was ever judged runnable: keep what runs
		// as is, unless suspended.
		if o.refusal != nil && q.Spec.Suspend {
			return r.suspendWorkload(ctx, a)
		}
		return a, nil
	}
	cm := o.desiredCM
	if o.configMap == nil {
		if err := controllerutil.SetControllerReference(q, cm, r.scheme); err != nil {
			return a, err
		}
		if err := r.client.Create(ctx, cm); err != nil {
			return a, fmt.Errorf("create ConfigMap: %w", err)
		}
		log.Info("Created ConfigMap", "configMap", client.ObjectKeyFromObject(cm))
	} else if !equality.Semantic.DeepEqual(o.configMap.Data, cm.Data) || !equality.Semantic.DeepEqual(o.configMap.BinaryData, cm.BinaryData) ||
		o.configMap.Annotations[AnnotationGeneration] != cm.Annotations[AnnotationGeneration] {
		upd := o.configMap.DeepCopy()
		upd.Data, upd.BinaryData = cm.Data, cm.BinaryData
		upd.Labels, upd.Annotations = cm.Labels, cm.Annotations
		// An Update, not a merge patch: it replaces the rendering whole, where a patch from
		// a stale cached copy could leave a key the new rendering dropped.
		if err := r.client.Update(ctx, upd); err != nil {
			return a, fmt.Errorf("update ConfigMap: %w", err)
		}
		log.Info("Updated ConfigMap", "configMap", client.ObjectKeyFromObject(cm), "generation", q.Generation)
	}
	replicas := int32(1)
	if o.completed {
		replicas = 0
	}
	if isSpark(q) {
		if err := r.applySparkAccess(ctx, q); err != nil {
			return a, err
		}
		if err := r.deleteStaleExecutors(ctx, o); err != nil {
			return a, err
		}
	}
	return r.applyWorkload(ctx, q, o, cm, replicas)
}

// suspendWorkload stops the engine of a refused query that is suspended.
func (r *QueryReconciler) suspendWorkload(ctx context.Context, a applied) (applied, error) {
	if d := a.deployment; d != nil && deploymentReplicas(d) > 0 {
		upd := d.DeepCopy()
		upd.Spec.Replicas = ptr.To(int32(0))
		if err := r.client.Patch(ctx, upd, client.MergeFrom(d)); err != nil {
			return a, fmt.Errorf("scale Deployment %s to 0: %w", d.Name, err)
		}
		a.deployment = upd
		return a, nil
	}
	if j := a.job; j != nil && (j.Spec.Suspend == nil || !*j.Spec.Suspend) {
		upd := j.DeepCopy()
		upd.Spec.Suspend = ptr.To(true)
		if err := r.client.Patch(ctx, upd, client.MergeFrom(j)); err != nil {
			return a, fmt.Errorf("suspend Job %s: %w", j.Name, err)
		}
		a.job = upd
	}
	return a, nil
}

// stopRevoked stops the engine of a query its store no longer admits. The Deployment loses
// its template hash, so that the store's admitting the query again renders it afresh (with
// one replica) rather than finding it current.
func (r *QueryReconciler) stopRevoked(ctx context.Context, a applied) (applied, error) {
	if d := a.deployment; d != nil && deploymentReplicas(d) > 0 {
		upd := d.DeepCopy()
		upd.Spec.Replicas = ptr.To(int32(0))
		delete(upd.Annotations, annotationTemplateHash)
		if err := r.client.Patch(ctx, upd, client.MergeFrom(d)); err != nil {
			return a, fmt.Errorf("scale Deployment %s to 0: %w", d.Name, err)
		}
		logf.FromContext(ctx).Info("Stopped the engine: its CheckpointStore refuses the query", "deployment", client.ObjectKeyFromObject(d))
		a.deployment = upd
		return a, nil
	}
	return r.suspendWorkload(ctx, a)
}

// finalize applies the query's checkpoint retention, then lets it go.
func (r *QueryReconciler) finalize(ctx context.Context, q *v1.StreamingQuery) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(q, Finalizer) {
		return ctrl.Result{}, nil
	}
	if q.Spec.Checkpoint.Retention == v1.RetentionDelete {
		done, err := r.deleteCheckpoint(ctx, q)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !done {
			return ctrl.Result{RequeueAfter: deletionPoll}, nil
		}
	}
	if err := removeFinalizer(ctx, r.client, q, Finalizer); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.forget(client.ObjectKeyFromObject(q))
	return ctrl.Result{}, nil
}

// forget drops what the reconciler remembers of a query that is gone: its poll of the
// checkpoint, its PostgreSQL server and its progress trend.
func (r *QueryReconciler) forget(q types.NamespacedName) {
	r.polls.forget(q)
	r.pgServers.forget(q)
	r.trends.forget(q)
}

// deleteCheckpoint stops the engine and, once no engine pod is left, deletes the checkpoint
// if it belongs to the query. It reports false while the engine is still stopping.
func (r *QueryReconciler) deleteCheckpoint(ctx context.Context, q *v1.StreamingQuery) (bool, error) {
	log := logf.FromContext(ctx)
	for _, kind := range []struct {
		name string
		obj  client.Object
	}{{"Deployment", &appsv1.Deployment{}}, {"Job", &batchv1.Job{}}} {
		w, err := getOrNil(ctx, r.client, q.Namespace, EngineName(q.Name), kind.obj)
		if err != nil {
			return false, err
		}
		if w != nil {
			if err := r.client.Delete(ctx, w, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
				return false, fmt.Errorf("delete %s: %w", kind.name, err)
			}
			return false, nil
		}
	}
	var pods corev1.PodList
	if err := r.reader.List(ctx, &pods, client.InNamespace(q.Namespace), client.MatchingLabels{LabelQuery: q.Name, LabelComponent: componentEngine}); err != nil {
		return false, fmt.Errorf("list engine pods: %w", err)
	}
	if len(pods.Items) > 0 {
		return false, nil // an engine may still write: wait until it has stopped
	}
	cps := checkpoints{reader: r.reader, cache: r.client}
	p, refused, err := cps.locate(ctx, q)
	if err == nil && len(refused) > 0 {
		err = fmt.Errorf("%w: %w", errStoreRefused, refused.ToAggregate())
	}
	if err == nil {
		var s snapshot
		store, oerr := cps.open(ctx, q.Namespace, p, false)
		if oerr == nil {
			_, s, oerr = load(ctx, store)
		}
		switch {
		case oerr != nil:
			err = oerr
		case !s.exists:
			return true, nil
		case !s.ownedBy(q):
			r.recorder.Eventf(q, nil, corev1.EventTypeWarning, EventCheckpointRetained, "Delete",
				"Kept checkpoint %s: it belongs to %s, not to this query", p.location, s.meta.Owner)
			return true, nil
		default:
			if p.records != "" {
				// Spark's files first, Lockstep's records (and their owner) last, so that a
				// deletion cut short still finds whose checkpoint it is.
				root := p
				root.records = ""
				rs, err := cps.open(ctx, q.Namespace, root, false)
				if err != nil {
					return false, err
				}
				if err := deleteAllBut(ctx, rs, p.records+"/"); err != nil {
					return false, err
				}
			}
			if err := deleteAll(ctx, store); err != nil {
				return false, err // transient: retried
			}
			log.Info("Deleted checkpoint", "location", p.location)
			r.recorder.Eventf(q, nil, corev1.EventTypeNormal, EventCheckpointDeleted, "Delete", "Deleted checkpoint %s (retention Delete)", p.location)
			return true, nil
		}
	}
	if errors.Is(err, errStoreRefused) {
		// A store or Secret that is gone will not come back for a query being deleted:
		// keep the checkpoint rather than block the deletion forever.
		r.recorder.Eventf(q, nil, corev1.EventTypeWarning, EventCheckpointNotDelete, "Delete", "Kept the checkpoint: %v", err)
		return true, nil
	}
	return false, err
}

// queryOfPod maps an engine pod to its query.
func queryOfPod(_ context.Context, obj client.Object) []reconcile.Request {
	name, ok := obj.GetLabels()[LabelQuery]
	if c := obj.GetLabels()[LabelComponent]; !ok || c != componentEngine && c != ComponentSparkExecutor {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}}}
}

// queriesOfStore maps a CheckpointStore to the queries that use it.
func (r *QueryReconciler) queriesOfStore(ctx context.Context, obj client.Object) []reconcile.Request {
	queries, err := queriesNaming(ctx, r.client, obj.GetName())
	if err != nil {
		logf.FromContext(ctx).Error(err, "Listing StreamingQueries for a CheckpointStore failed", "checkpointStore", obj.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(queries))
	for _, q := range queries {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&q)})
	}
	return reqs
}

// queriesOfSecret maps a Secret to the queries of its namespace that use it: as their
// store's credentials, or named by their spec.
func (r *QueryReconciler) queriesOfSecret(ctx context.Context, obj client.Object) []reconcile.Request {
	var all v1.StreamingQueryList
	if err := r.client.List(ctx, &all, client.InNamespace(obj.GetNamespace())); err != nil {
		logf.FromContext(ctx).Error(err, "Listing StreamingQueries for a Secret failed", "secret", client.ObjectKeyFromObject(obj))
		return nil
	}
	credentials := map[string]string{} // store → its credentials Secret
	var reqs []reconcile.Request
	for i := range all.Items {
		q := &all.Items[i]
		used := false
		if name := q.Spec.Checkpoint.Store; name != "" {
			sec, ok := credentials[name]
			if !ok {
				var st v1.CheckpointStore
				if err := r.client.Get(ctx, types.NamespacedName{Name: name}, &st); err == nil {
					sec = st.Spec.CredentialsSecretName
				}
				credentials[name] = sec
			}
			used = sec == obj.GetName()
		}
		for _, u := range secretUses(q.Spec.DeepCopy()) {
			used = used || u.secret == obj.GetName()
		}
		if used {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(q)})
		}
	}
	return reqs
}

func getOrNil[T client.Object](ctx context.Context, c client.Reader, namespace, name string, obj T) (T, error) {
	var zero T
	err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return zero, nil
	}
	if err != nil {
		return zero, fmt.Errorf("get %T %s/%s: %w", obj, namespace, name, err)
	}
	return obj, nil
}

// record emits an Event about q.
func (r *QueryReconciler) record(q *v1.StreamingQuery, e event) {
	r.recorder.Eventf(q, nil, e.typ, e.reason, e.action, "%s", truncate(e.note, maxEventNote))
}

// maxEventNote is the longest note an events.k8s.io Event takes (1 kB), with room to spare.
const maxEventNote = 1000

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

func deploymentReplicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

// endsByItself reports whether the query's trigger ends (availableNow, once).
func endsByItself(s *v1.StreamingQuerySpec) bool { return s.Trigger.AvailableNow || s.Trigger.Once }

// generationOf returns the generation a ConfigMap renders, or 0.
func generationOf(cm *corev1.ConfigMap) int64 {
	if cm == nil {
		return 0
	}
	g, _ := strconv.ParseInt(cm.Annotations[AnnotationGeneration], 10, 64)
	return g
}
