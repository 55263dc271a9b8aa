package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/controller"
)

// envEngineImage names the engine image when --engine-image is not given; the manager's
// Deployment sets it to its own image.
const envEngineImage = "LOCKSTEP_ENGINE_IMAGE"

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
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                  scheme,
		Cache:                   controller.CacheOptions(),
		Metrics:                 metricsserver.Options{BindAddress: cfg.metricsAddr},
		HealthProbeBindAddress:  cfg.probeAddr,
		LeaderElection:          cfg.leaderElect,
		LeaderElectionID:        "controller.streaming.lockstep.dev",
		LeaderElectionNamespace: cfg.leaderElectionNamespace,
		// The next leader starts at once when this one stops cleanly.
		LeaderElectionReleaseOnCancel: true,
		WebhookServer:                 webhook.NewServer(webhook.Options{Port: cfg.webhookPort, CertDir: cfg.webhookCertDir}),
	})
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
	return mgr.Start(ctrl.SetupSignalHandler())
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
