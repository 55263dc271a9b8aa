package charts_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// TestMakeImagesAreWhatTheInstallRuns: `make image` and `make image-spark` tag their tarballs
// as config/dev's controller expects its own image and the Spark image
// ($LOCKSTEP_SPARK_IMAGE), so that a newcomer who builds, imports and installs with the
// defaults runs what was built; and one INSTALL_IMAGE given to every step (build, render,
// deploy) names the same repository and tag at each.
func TestMakeImagesAreWhatTheInstallRuns(t *testing.T) {
	kubectl := kubectlTool(t)

	// What config/dev installs, as docs/kubernetes.md has a user apply it: a copy of
	// config/ with a placeholder certificate where config/dev/gen-cert.sh writes one.
	config := filepath.Join(t.TempDir(), "config")
	if err := os.CopyFS(config, os.DirFS(filepath.Join(root(t), "config"))); err != nil {
		t.Fatal(err)
	}
	certs := filepath.Join(config, "dev", "certs")
	if err := os.MkdirAll(certs, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{
		"tls.crt": "placeholder", "tls.key": "placeholder",
		"ca-patch.yaml": "- op: add\n  path: /webhooks/0/clientConfig/caBundle\n  value: cGxhY2Vob2xkZXI=\n",
	} {
		if err := os.WriteFile(filepath.Join(certs, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command(kubectl, "kustomize", filepath.Join(config, "dev")).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize config/dev: %v\n%s", err, out)
	}
	c := find[appsv1.Deployment](t, decode(t, out), "Deployment", "-controller").Spec.Template.Spec.Containers[0]
	wantImage, wantSpark := c.Image, envOf(c, "LOCKSTEP_SPARK_IMAGE")

	steps := makeDryRun(t, "image", "image-spark", "render", "OVERLAY=config/dev")
	for _, want := range []string{
		"go run ./hack/image -ref " + wantImage + " ",
		"go run ./hack/image-spark -ref " + wantSpark + " ",
		"hack/install-manifests.sh config/dev " + wantImage + " " + wantSpark,
	} {
		if !strings.Contains(steps, want) {
			t.Errorf("make image image-spark render OVERLAY=config/dev runs\n%s\nwant %q: config/dev's controller runs %s and spark queries on %s",
				steps, want, wantImage, wantSpark)
		}
	}

	// One image given to every step: the Spark image follows it, repository and tag.
	steps = makeDryRun(t, "image", "image-spark", "install.yaml", "INSTALL_IMAGE=registry.example:5000/team/lockstep:v9")
	for _, want := range []string{
		"go run ./hack/image -ref registry.example:5000/team/lockstep:v9 ",
		"go run ./hack/image-spark -ref registry.example:5000/team/lockstep-spark:v9 ",
		"hack/install-manifests.sh config/default registry.example:5000/team/lockstep:v9 registry.example:5000/team/lockstep-spark:v9",
	} {
		if !strings.Contains(steps, want) {
			t.Errorf("make image image-spark install.yaml INSTALL_IMAGE=registry.example:5000/team/lockstep:v9 runs\n%s\nwant %q", steps, want)
		}
	}
}

// makeDryRun returns the commands make would run for args (make -n), in the checkout.
func makeDryRun(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("make", append([]string{"-n", "--no-print-directory"}, args...)...)
	cmd.Dir = root(t)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestMakeTestNamesWhatFailed: when a package fails, make test's run (hack/test.sh) still
// waits for the e2e suite, prints its output, and ends with every failed test's line, so that
// CI's log, cut to its last lines, names the failure. (Under `set -e` a failed `go test` ended
// the recipe at once: CI showed the passing packages' lines and "Error 2", nothing else.)
func TestMakeTestNamesWhatFailed(t *testing.T) {
	cmd := exec.Command("hack/test.sh", "-count=1", "./hack/testdata/failpkg")
	cmd.Dir = root(t)
	cmd.Env = append(os.Environ(), "E2E=echo e2e-output; echo '--- FAIL: TestOnTheNode (1.00s)'; exit 1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("hack/test.sh on a failing package: want a non-zero exit, got %v\n%s", err, out)
	}
	_, summary, ok := strings.Cut(string(out), "make test: what failed:\n")
	if !ok || !strings.Contains(string(out), "e2e-output") {
		t.Fatalf("want the e2e output and then a summary of the failures:\n%s", out)
	}
	for _, want := range []string{"--- FAIL: TestFails", "FAIL\tgithub.com/lockstep-dev/lockstep/hack/testdata/failpkg", "--- FAIL: TestOnTheNode"} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary lacks %q:\n%s", want, summary)
		}
	}
}
