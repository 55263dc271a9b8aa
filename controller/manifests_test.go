package controller_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// kustomizeVersion is the kustomize run through the Go module proxy when kubectl (which
// embeds kustomize) is not on PATH.
const kustomizeVersion = "sigs.k8s.io/kustomize/kustomize/v5@v5.5.0"

// kustomize renders a folder of config/ as `make deploy` does.
func kustomize(t *testing.T, dir string) []byte {
	t.Helper()
	var cmd *exec.Cmd
	if kubectl, err := exec.LookPath("kubectl"); err == nil {
		cmd = exec.Command(kubectl, "kustomize", dir)
	} else {
		cmd = exec.Command("go", "run", kustomizeVersion, "build", dir)
		cmd.Dir = t.TempDir() // outside the module: go run pkg@version ignores go.mod
		cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	}
	return testenv.Output(t, cmd)
}

// TestDeployManifests renders config/default (cert-manager) and config/dev (self-signed)
// and applies every object to the real API server with server-side dry-run. Only
// cert-manager's kinds, whose CRDs the test server lacks, may be unknown.
func TestDeployManifests(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	c := testenv.Client(t, testenv.ControlPlane(t))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "lockstep-system"}}
	if err := c.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	gen := exec.Command(filepath.Join(root, "config", "dev", "gen-cert.sh"))
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("config/dev/gen-cert.sh: %v\n%s", err, out)
	}
	for _, overlay := range []string{"default", "dev"} {
		t.Run(overlay, func(t *testing.T) {
			rendered := kustomize(t, filepath.Join(root, "config", overlay))
			kinds := map[string]int{}
			for _, u := range testenv.DecodeManifests(t, rendered) {
				kinds[u.GetKind()]++
				err := c.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("lockstep-test"), client.ForceOwnership, client.DryRunAll)
				if meta.IsNoMatchError(err) && u.GroupVersionKind().Group == "cert-manager.io" {
					continue
				}
				if err != nil {
					t.Errorf("server-side dry-run apply of %s %s: %v", u.GetKind(), u.GetName(), err)
				}
			}
			for _, k := range []string{"CustomResourceDefinition", "Deployment", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ServiceAccount", "Service", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
				if kinds[k] == 0 {
					t.Errorf("config/%s renders no %s (kinds: %v)", overlay, k, kinds)
				}
			}
		})
	}
}
