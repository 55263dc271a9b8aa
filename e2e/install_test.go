//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/lockstep-dev/lockstep/internal/gobuild"
	"github.com/lockstep-dev/lockstep/internal/ociimage"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

const (
	// imageName and imageTag are the lockstep image built from the checkout; the
	// installation's kustomization points at it, as a user's would at a release.
	imageName = "localhost/lockstep"
	imageTag  = "e2e"
	// version is what `lockstep version` of the image prints.
	version = "v0.0.0-e2e"
	// controllerNamespace and controllerDeployment are where config/dev installs Lockstep.
	controllerNamespace  = "lockstep-system"
	controllerDeployment = "lockstep-controller"
	// sparkImageRef is Lockstep's Spark image built from the checkout (spark_test.go); the
	// controller runs spark queries on it.
	sparkImageRef = "localhost/lockstep-spark:e2e"
	// installTimeout bounds the image build, the import and the controller's rollout.
	installTimeout = 10 * time.Minute
)

// install is Lockstep installed on the real node; the tests of this binary share it.
type install struct {
	node *testenv.Node
	c    client.Client
}

// installed is the one installation of this test binary, made by the first test.
var installed struct {
	mu  sync.Mutex
	in  *install
	err error
}

// lockstep returns the real node with Lockstep installed on it, installing on first use.
func lockstep(t *testing.T) *install {
	t.Helper()
	node := testenv.RealNode(t)
	installed.mu.Lock()
	defer installed.mu.Unlock()
	if installed.in == nil && installed.err == nil {
		installed.in, installed.err = installLockstep(t, node)
	}
	if installed.err != nil {
		t.Fatal(installed.err)
	}
	return installed.in
}

// nodeClient is a client of the node's API server that knows the built-in
// kinds and Lockstep's.
func nodeClient(node *testenv.Node) (client.Client, error) {
	return client.New(node.Config, client.Options{Scheme: testenv.Scheme()})
}

func installLockstep(t *testing.T, node *testenv.Node) (*install, error) {
	ctx, cancel := context.WithTimeout(context.Background(), installTimeout)
	defer cancel()
	start := time.Now()
	c, err := nodeClient(node)
	if err != nil {
		return nil, err
	}
	in := &install{node: node, c: c}
	tarball, err := buildImage(ctx, t.TempDir())
	if err != nil {
		return nil, err
	}
	if err := node.ImportImage(tarball); err != nil {
		return nil, err
	}
	t.Logf("e2e: image %s:%s built and imported in %s", imageName, imageTag, time.Since(start).Round(time.Second))
	if err := in.deploy(ctx, t.TempDir()); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, in.diagnose(ctx))
	}
	t.Logf("e2e: Lockstep installed and serving its webhooks %s after the start", time.Since(start).Round(time.Second))
	return in, nil
}

// repoRoot is the module's root folder, found from this file.
func repoRoot() string {
	_, file, _, _ := goruntime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// buildImage builds the lockstep image from the checkout into a tarball: what `make
// image` does, without Docker or a registry.
func buildImage(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "lockstep")
	if err := gobuild.Static(ctx, repoRoot(), "./cmd/lockstep", bin, "-X main.version="+version); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "lockstep.tar")
	_, err := ociimage.Write(ociimage.Spec{
		Ref: imageName + ":" + imageTag, Binary: bin, Entrypoint: "/lockstep",
		Labels: map[string]string{"org.opencontainers.image.version": version},
	}, out)
	return out, err
}

// deploy installs Lockstep as docs/kubernetes.md tells a user without cert-manager to:
// config/dev/gen-cert.sh, then `kubectl kustomize config/dev | kubectl apply
// --server-side -f -`, with the image set in config/manager/kustomization.yaml. It works
// on a copy of config/, so that the checkout is left as it is; the only addition is
// imagePullPolicy Never, since the node has no registry to pull from.
func (in *install) deploy(ctx context.Context, dir string) error {
	config := filepath.Join(dir, "config")
	if err := os.CopyFS(config, os.DirFS(filepath.Join(repoRoot(), "config"))); err != nil {
		return fmt.Errorf("copy config/: %w", err)
	}
	_ = os.RemoveAll(filepath.Join(config, "dev", "certs")) // the checkout's own, if any
	if err := setImage(filepath.Join(config, "manager", "kustomization.yaml"), imageName, imageTag); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, filepath.Join(config, "dev", "gen-cert.sh")).CombinedOutput(); err != nil {
		return fmt.Errorf("config/dev/gen-cert.sh: %w\n%s", err, out)
	}
	overlay := filepath.Join(dir, "e2e")
	if err := os.MkdirAll(overlay, 0o755); err != nil {
		return err
	}
	kustomization := `resources: [../config/dev]
patches:
- target: {kind: Deployment, name: ` + controllerDeployment + `}
  patch: |-
    - op: add
      path: /spec/template/spec/containers/0/imagePullPolicy
      value: Never
- target: {kind: Deployment, name: ` + controllerDeployment + `}
  patch: |-
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: ` + controllerDeployment + `}
    spec:
      template:
        spec:
          containers:
          - name: manager
            env:
            - {name: LOCKSTEP_SPARK_IMAGE, value: ` + sparkImageRef + `}
`
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		return err
	}
	manifests, err := in.node.Kubectl(ctx, nil, "kustomize", overlay)
	if err != nil {
		return err
	}
	if _, err := in.node.Kubectl(ctx, manifests, "apply", "--server-side", "-f", "-"); err != nil {
		return err
	}
	if _, err := in.node.Kubectl(ctx, nil, "-n", controllerNamespace, "rollout", "status", "deployment/"+controllerDeployment, "--timeout=8m"); err != nil {
		return err
	}
	return in.waitWebhook(ctx)
}

// setImage points the kustomization's image "lockstep" at name:tag, as `kustomize edit
// set image` would.
func setImage(path, name, tag string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var k map[string]any
	if err := yaml.Unmarshal(data, &k); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	images, _ := k["images"].([]any)
	found := false
	for _, img := range images {
		if m, ok := img.(map[string]any); ok && m["name"] == "lockstep" {
			m["newName"], m["newTag"] = name, tag
			found = true
		}
	}
	if !found {
		return fmt.Errorf("%s has no image named lockstep to point at %s:%s", path, name, tag)
	}
	out, err := yaml.Marshal(k)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}

// waitWebhook waits until the API server reaches the controller's admission webhooks: a
// server-side dry run of a query is answered by them (admitted or refused) rather than
// failing to call them.
func (in *install) waitWebhook(ctx context.Context) error {
	probe := []byte(`apiVersion: streaming.lockstep.dev/v1
kind: StreamingQuery
metadata: {name: webhook-probe, namespace: default}
spec:
  sources: [{name: ticks, rate: {rowsPerSecond: 1}}]
  sink: {console: {}}
  checkpoint: {location: "s3://probe/default/webhook-probe"}
`)
	var last error
	for {
		_, err := in.node.Kubectl(ctx, probe, "apply", "--dry-run=server", "-f", "-")
		if err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("the API server cannot call the webhooks: %w", last)
		case <-time.After(time.Second):
		}
	}
}

// diagnose returns what explains a failed installation or test: the controller's pods and
// logs, and the node components' errors.
func (in *install) diagnose(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var b strings.Builder
	for _, args := range [][]string{
		{"get", "pods", "-A", "-o", "wide"},
		{"-n", controllerNamespace, "describe", "pods"},
		{"-n", controllerNamespace, "logs", "deployment/" + controllerDeployment, "--tail=40"},
		{"get", "events", "-A", "--sort-by=.lastTimestamp"},
	} {
		out, err := in.node.Kubectl(ctx, nil, args...)
		fmt.Fprintf(&b, "--- kubectl %s\n%s", strings.Join(args, " "), out)
		if err != nil {
			fmt.Fprintf(&b, "(%v)\n", err)
		}
	}
	b.WriteString(in.node.Diagnose())
	return b.String()
}
