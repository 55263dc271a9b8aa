package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/controller"
)

// envEngineImage names the engine image when --engine-image is not given; the manager's
// Deployment sets it to its own image.
const envEngineImage = "LOCKSTEP_ENGINE_IMAGE"

// envSparkImage names the Spark image when --spark-image is not given.
const envSparkImage = "LOCKSTEP_SPARK_IMAGE"

// leaderElectionID names the Lease of the controller's leader election.
const leaderElectionID = "controller.streaming.lockstep.dev"

// shutdownTimeout bounds how long the manager's controllers, webhooks and servers may take
// to stop. The leader releases its Lease after they stop, so it must fit, with the release
// itself, in the pod's termination grace period (10 s in charts/lockstep and
// config/manager); controller-runtime's default of 30 s would let the kubelet kill a slow
// stop before the release, and the next leader wait out the Lease.
const shutdownTimeout = 5 * time.Second

// ownLeaseTimeout bounds the API calls that give the Lease to the controller's
// ServiceAccount at start.
const ownLeaseTimeout = 10 * time.Second

type controllerConfig struct {
	metricsAddr, probeAddr  string
	leaderElect             bool
	leaderElectionNamespace string
	webhooks                bool
	webhookPort             int
	webhookCertDir          string
	engine                  controller.EngineSettings
	resync                  time.Duration
	follow                  time.Duration
	readBudget              time.Duration
	webhookBudget           time.Duration
	storeProbe              time.Duration
	workers                 int
	qps                     float32
	burst                   int
}

func newControllerCommand() *cobra.Command {
	var cfg controllerConfig
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run the Kubernetes controller and admission webhooks (the manager's entrypoint)",
		Long: `Run the controller that turns each StreamingQuery into an engine Deployment and reports
its status from the checkpoint, and the admission webhooks that default and validate
queries (compat against the checkpoint included). It uses the in-cluster configuration,
or $KUBECONFIG outside a cluster. See docs/kubernetes.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			image, err := engineImage(cfg.engine.Image, os.Getenv(envEngineImage), buildVersion())
			if err != nil {
				return withExitCode(exitInvalid, err)
			}
			cfg.engine.Image = image
			if cfg.engine.SparkImage, err = sparkImage(cfg.engine.SparkImage, os.Getenv(envSparkImage), buildVersion()); err != nil {
				return withExitCode(exitInvalid, err)
			}
			return runController(cmd, cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint; 0 disables it")
	f.StringVar(&cfg.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	f.BoolVar(&cfg.leaderElect, "leader-elect", false, "elect a leader, so that several replicas can run with one active")
	f.StringVar(&cfg.leaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's namespace)")
	f.BoolVar(&cfg.webhooks, "webhooks", true, "serve the admission webhooks")
	f.IntVar(&cfg.webhookPort, "webhook-port", 9443, "port of the webhook server")
	f.StringVar(&cfg.webhookCertDir, "webhook-cert-dir", "", "folder with tls.crt and tls.key for the webhook server (default: controller-runtime's)")
	f.StringVar(&cfg.engine.Image, "engine-image", "", "image of engine pods (default $"+envEngineImage+", else "+controller.EngineImageRepository+":<this controller's version>)")
	f.StringVar(&cfg.engine.SparkImage, "spark-image", "", "image of a spark query's driver and executors (default $"+envSparkImage+", else "+controller.SparkImageRepository+":<this controller's version>)")
	f.StringVar(&cfg.engine.ServiceAccountName, "engine-service-account", "", "service account of engine pods (default: the namespace's default)")
	f.DurationVar(&cfg.engine.GracePeriod, "engine-grace-period", 2*time.Minute, "how long a stopping engine may take to finish its batch")
	f.DurationVar(&cfg.resync, "resync", controller.DefaultResync, "how often a query's status is refreshed from its checkpoint")
	f.DurationVar(&cfg.follow, "status-follow-interval", controller.DefaultFollow,
		"the shortest time between two status refreshes of a running query whose batches commit (it is refreshed just after each batch is due)")
	f.DurationVar(&cfg.readBudget, "checkpoint-read-budget", controller.DefaultReadBudget, "how long one reconcile may spend reading a checkpoint before it counts as unreachable")
	f.DurationVar(&cfg.webhookBudget, "webhook-checkpoint-budget", controller.DefaultCheckpointBudget,
		"how long admission may spend reading a checkpoint before it admits the change with a warning that it was not judged; keep it well below the webhooks' 10s timeout")
	f.DurationVar(&cfg.storeProbe, "store-probe-interval", controller.DefaultProbeInterval,
		"how often each CheckpointStore is probed (a listing and a conditional write with an allowed namespace's credentials) for its Ready condition")
	f.IntVar(&cfg.workers, "max-concurrent-reconciles", controller.DefaultMaxConcurrentReconciles, "how many queries are reconciled at once")
	f.Float32Var(&cfg.qps, "kube-api-qps", 50, "requests per second the controller may send to the API server (client-go's default of 5 queues a cluster of many queries)")
	f.IntVar(&cfg.burst, "kube-api-burst", 100, "requests the controller may send to the API server in a burst")
	return cmd
}

func runController(cmd *cobra.Command, cfg controllerConfig) error {
	log := logr.FromSlogHandler(slog.NewJSONHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctrl.SetLogger(log)
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1.AddToScheme(scheme); err != nil {
		return err
	}
	restCfg, err := ctrl.GetConfig()
	if err != nil {
		return withExitCode(exitInvalid, fmt.Errorf("kubernetes configuration: %w", err))
	}
	restCfg.QPS, restCfg.Burst = cfg.qps, cfg.burst
	ctx := ctrl.SetupSignalHandler()
	mgr, err := newManager(ctx, restCfg, cfg, scheme, log)
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	metrics, err := controller.NewMetrics(ctrlmetrics.Registry, mgr.GetClient())
	if err != nil {
		return fmt.Errorf("controller metrics: %w", err)
	}
	if err := controller.NewQueryReconciler(mgr, controller.WithEngine(cfg.engine), controller.WithResync(cfg.resync), controller.WithFollow(cfg.follow), controller.WithReadBudget(cfg.readBudget),
		controller.WithMaxConcurrentReconciles(cfg.workers),
		controller.WithMetrics(metrics)).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the StreamingQuery controller: %w", err)
	}
	if err := controller.NewStoreReconciler(mgr, controller.WithProbeInterval(cfg.storeProbe)).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the CheckpointStore controller: %w", err)
	}
	ready := healthz.Ping
	if cfg.webhooks {
		if err := controller.NewQueryWebhook(mgr, controller.WithCheckpointBudget(cfg.webhookBudget), controller.WithVerdictMetrics(metrics)).SetupWithManager(mgr); err != nil {
			return fmt.Errorf("set up the webhooks: %w", err)
		}
		ready = mgr.GetWebhookServer().StartedChecker()
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", ready); err != nil {
		return err
	}
	log.Info("Starting controller", "version", buildVersion(), "engineImage", cfg.engine.Image, "webhooks", cfg.webhooks, "leaderElect", cfg.leaderElect)
	return mgr.Start(ctx)
}

// newManager makes the controller's manager, without controllers or webhooks. With leader
// election it first makes the leader Lease a dependent of the controller's ServiceAccount
// (ownLease); a failure there is logged, not returned: leader election works without it.
func newManager(ctx context.Context, restCfg *rest.Config, cfg controllerConfig, scheme *runtime.Scheme, log logr.Logger) (manager.Manager, error) {
	if cfg.leaderElect {
		octx, cancel := context.WithTimeout(ctx, ownLeaseTimeout)
		owner, err := ownLease(octx, restCfg, cfg.leaderElectionNamespace, leaderElectionID)
		cancel()
		switch {
		case err != nil:
			log.Error(err, "Could not make the leader Lease a dependent of the controller's ServiceAccount; an uninstall leaves it behind")
		case owner == "":
			log.Info("Left the leader Lease without an owner: the controller does not run as a ServiceAccount of the Lease's namespace")
		default:
			log.Info("Made the leader Lease a dependent of the controller's ServiceAccount", "serviceAccount", owner)
		}
	}
	return ctrl.NewManager(restCfg, managerOptions(cfg, scheme, log))
}

// managerOptions are the manager's settings for cfg.
func managerOptions(cfg controllerConfig, scheme *runtime.Scheme, log logr.Logger) ctrl.Options {
	shutdown := shutdownTimeout
	return ctrl.Options{
		Logger:                  log,
		Scheme:                  scheme,
		Cache:                   controller.CacheOptions(),
		Metrics:                 metricsserver.Options{BindAddress: cfg.metricsAddr},
		HealthProbeBindAddress:  cfg.probeAddr,
		LeaderElection:          cfg.leaderElect,
		LeaderElectionID:        leaderElectionID,
		LeaderElectionNamespace: cfg.leaderElectionNamespace,
		// The next leader starts at once when this one stops cleanly.
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       &shutdown,
		WebhookServer:                 webhook.NewServer(webhook.Options{Port: cfg.webhookPort, CertDir: cfg.webhookCertDir}),
	}
}

// ownLease makes the leader election Lease namespace/name a dependent of the ServiceAccount
// the controller runs as, and returns that account's name ("" when the controller runs as
// something else, or as the ServiceAccount of another namespace; namespace "" means the
// account's own, the pod's). The garbage collector then deletes the Lease with the account:
// `helm uninstall` and `kubectl delete -k` delete the account, its RBAC and the Deployment
// at once, so the stopping leader, whose token died with the account, cannot release the
// Lease itself, and the next installation would wait out a Lease that names a deleted pod.
//
// It creates the Lease, empty, when there is none, and otherwise adds the owner reference.
// A Lease owned by an earlier ServiceAccount of the same name (the last installation's,
// deleted since: a name is unique, the UID differs) also has its holder cleared: that
// holder's token was bound to the deleted account and can no longer renew, so the new
// leader is elected at once even when the garbage collector has not caught up. It needs
// get, create and update on leases in the namespace (the leader election Role has them).
func ownLease(ctx context.Context, cfg *rest.Config, namespace, name string) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", fmt.Errorf("kubernetes client: %w", err)
	}
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("review the controller's own identity: %w", err)
	}
	owner, ok := serviceAccountOwner(review.Status.UserInfo)
	if !ok {
		return "", nil
	}
	if namespace == "" {
		namespace = owner.namespace
	}
	if owner.namespace != namespace {
		// An owner must be in its dependent's namespace; one elsewhere counts as gone.
		return "", nil
	}
	leases := cs.CoordinationV1().Leases(namespace)
	err = retry.OnError(retry.DefaultRetry, func(err error) bool {
		return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
	}, func() error {
		lease, err := leases.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, OwnerReferences: []metav1.OwnerReference{owner.ref}}}
			_, err = leases.Create(ctx, lease, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		refs, earlier, changed := leaseOwners(lease.OwnerReferences, owner.ref)
		if !changed {
			return nil
		}
		lease.OwnerReferences = refs
		if earlier {
			lease.Spec = coordinationv1.LeaseSpec{LeaseTransitions: lease.Spec.LeaseTransitions}
		}
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return "", fmt.Errorf("lease %s/%s: %w", namespace, name, err)
	}
	return owner.ref.Name, nil
}

// saOwner is a ServiceAccount as the owner of a Lease.
type saOwner struct {
	namespace string
	ref       metav1.OwnerReference
}

// serviceAccountOwner returns the ServiceAccount that user is, as an owner reference: a
// user named system:serviceaccount:<namespace>:<name> whose UID (the account's) is known.
func serviceAccountOwner(user authenticationv1.UserInfo) (saOwner, bool) {
	qualified, ok := strings.CutPrefix(user.Username, "system:serviceaccount:")
	if !ok {
		return saOwner{}, false
	}
	namespace, name, ok := strings.Cut(qualified, ":")
	if !ok || namespace == "" || name == "" || user.UID == "" {
		return saOwner{}, false
	}
	return saOwner{namespace: namespace, ref: metav1.OwnerReference{
		APIVersion: "v1", Kind: "ServiceAccount", Name: name, UID: types.UID(user.UID),
	}}, true
}

// leaseOwners returns a Lease's owner references with owner among them, whether it dropped
// an earlier ServiceAccount of owner's name, and whether anything changed.
func leaseOwners(refs []metav1.OwnerReference, owner metav1.OwnerReference) (out []metav1.OwnerReference, earlier, changed bool) {
	for _, r := range refs {
		if r.UID == owner.UID {
			return refs, false, false
		}
	}
	for _, r := range refs {
		if r.APIVersion == owner.APIVersion && r.Kind == owner.Kind && r.Name == owner.Name {
			earlier = true
			continue
		}
		out = append(out, r)
	}
	return append(out, owner), earlier, true
}

// sparkImage returns the image of spark queries' pods: the flag, else the variable, else the
// released Spark image of the controller's version. A development build without either runs
// no spark query: its pods would get no image, and the API server says so in their status.
func sparkImage(flag, env, version string) (string, error) {
	image := cmp.Or(flag, env)
	if image == "" {
		image, _ = controller.DefaultSparkImage(version)
		return image, nil
	}
	if strings.HasSuffix(image, ":latest") {
		return "", fmt.Errorf("spark image %s: pin a version or a digest, not :latest", image)
	}
	return image, nil
}

// engineImage returns the image of engine pods: the flag, else the variable, else the released
// image of the controller's own version. A development build without either is refused, as is
// a moving :latest tag (an engine must run the code that judged its spec).
func engineImage(flag, env, version string) (string, error) {
	image := flag
	if image == "" {
		image = env
	}
	if image == "" {
		return controller.DefaultEngineImage(version)
	}
	if strings.HasSuffix(image, ":latest") {
		return "", fmt.Errorf("engine image %s: pin a version or a digest, not :latest", image)
	}
	return image, nil
}
