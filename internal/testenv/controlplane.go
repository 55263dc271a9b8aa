package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

type controlPlane struct {
	env *envtest.Environment
	cfg *rest.Config
}

// ControlPlane returns a rest.Config for the shared Kubernetes control plane
// (kube-apiserver and etcd from the tool cache, through envtest) of this test
// binary, with Lockstep's CRDs from config/crd installed. Give each test its
// own namespace. KUBEBUILDER_ASSETS, when set, names another binary folder.
func ControlPlane(t testing.TB) *rest.Config {
	t.Helper()
	shared.mu.Lock()
	if shared.cp == nil && shared.cpErr == nil {
		shared.cp, shared.cpErr = startControlPlane()
	}
	cp, err := shared.cp, shared.cpErr
	shared.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	return rest.CopyConfig(cp.cfg)
}

func startControlPlane() (*controlPlane, error) {
	if err := needMain(); err != nil {
		return nil, err
	}
	assets, err := envtestAssets()
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		CRDDirectoryPaths:        []string{filepath.Join(moduleRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing:    false,
		ControlPlaneStartTimeout: startTimeout,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("start control plane (kube-apiserver, etcd from %s): %w", assets, err)
	}
	shared.stops = append(shared.stops, func() { _ = env.Stop() })
	return &controlPlane{env: env, cfg: cfg}, nil
}

// moduleRoot is the folder of the module's go.mod, found from this file.
func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// envtestAssets returns the folder of the kube-apiserver and etcd binaries envtest starts:
// $KUBEBUILDER_ASSETS, or the tools folder once both are found there.
func envtestAssets() (string, error) {
	if assets := os.Getenv("KUBEBUILDER_ASSETS"); assets != "" {
		return assets, nil
	}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if _, err := LookupTool(name); err != nil {
			return "", err
		}
	}
	return ToolsDir(), nil
}
