package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// WebhookControlPlane is a Kubernetes control plane whose API server calls the admission
// webhooks of config/webhook at a local address that the test binary serves: start a
// manager whose webhook server listens on Host:Port with the certificates in CertDir.
type WebhookControlPlane struct {
	Config  *rest.Config
	Host    string
	Port    int
	CertDir string
}

// webhookShared is the webhook control plane of this test binary, started on first use.
var webhookShared struct {
	mu  sync.Mutex
	cp  *WebhookControlPlane
	err error
}

// ControlPlaneWithWebhooks returns the shared control plane with Lockstep's CRDs and its
// webhooks (config/webhook/manifests.yaml) installed, pointing at this test binary. It is a
// second API server besides ControlPlane's, so that tests there can create objects the
// webhooks would refuse. Give each test its own namespace; only one manager at a time may
// serve the webhooks.
func ControlPlaneWithWebhooks(t testing.TB) *WebhookControlPlane {
	t.Helper()
	webhookShared.mu.Lock()
	defer webhookShared.mu.Unlock()
	if webhookShared.cp == nil && webhookShared.err == nil {
		webhookShared.cp, webhookShared.err = startWebhookControlPlane()
	}
	if webhookShared.err != nil {
		t.Fatal(webhookShared.err)
	}
	cp := *webhookShared.cp
	cp.Config = rest.CopyConfig(cp.Config)
	return &cp
}

func startWebhookControlPlane() (*WebhookControlPlane, error) {
	shared.mu.Lock()
	err := needMain()
	shared.mu.Unlock()
	if err != nil {
		return nil, err
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		for _, name := range []string{"kube-apiserver", "etcd"} {
			if _, err := LookupTool(name); err != nil {
				return nil, err
			}
		}
		assets = ToolsDir()
	}
	root := moduleRoot()
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		WebhookInstallOptions: envtest.WebhookInstallOptions{
			Paths: []string{filepath.Join(root, "config", "webhook", "manifests.yaml")},
		},
		ControlPlaneStartTimeout: startTimeout,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("start control plane with webhooks (kube-apiserver, etcd from %s): %w", assets, err)
	}
	shared.mu.Lock()
	shared.stops = append(shared.stops, func() { _ = env.Stop() })
	shared.mu.Unlock()
	o := &env.WebhookInstallOptions
	return &WebhookControlPlane{Config: cfg, Host: o.LocalServingHost, Port: o.LocalServingPort, CertDir: o.LocalServingCertDir}, nil
}
