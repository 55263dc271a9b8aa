package provider

import (
	"archive/zip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/lockstep-dev/lockstep/internal/gobuild"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// The install paths of docs/terraform/guides/install.md, run as written, with the real
// provider binary (not the one served by this test binary) and no registry: the Terraform CLI
// here has no network configuration, and nothing may be downloaded.

var (
	repoRoot     = filepath.Join("..")
	installDir   = filepath.Join(examplesDir, "install")
	platform     = runtime.GOOS + "_" + runtime.GOARCH
	binaryName   = "terraform-provider-lockstep"
	mirrorPath   = "/home/you/.terraform.d/plugins" // as the docs' mirror.tfrc writes it
	overridePath = "/home/you/lockstep/bin"         // as the docs' dev-overrides.tfrc writes it
)

// installEnv is the environment of a user whose home is home: Terraform reads its CLI
// configuration and local mirror from there; Go keeps this machine's caches, so that make
// downloads nothing.
func installEnv(t *testing.T, home string) []string {
	t.Helper()
	env := []string{"HOME=" + home, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1", "TF_CLI_ARGS=-no-color",
		"PATH=" + filepath.Dir(testenv.Terraform(t)) + string(os.PathListSeparator) + os.Getenv("PATH")}
	for _, v := range []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOFLAGS", "GOTOOLCHAIN", "GOPROXY"} {
		out, err := exec.Command("go", "env", v).Output()
		if err != nil {
			t.Fatal(err)
		}
		env = append(env, v+"="+strings.TrimSpace(string(out)))
	}
	return env
}

func runIn(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// copyInstallExample copies examples/terraform/install's main.tf to a new folder.
func copyInstallExample(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join(installDir, "main.tf"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeRC writes the docs' CLI configuration file name as home/.terraformrc, with its
// placeholder path replaced by path.
func writeRC(t *testing.T, home, name, placeholder, path string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(installDir, name))
	if err != nil {
		t.Fatal(err)
	}
	rc := strings.ReplaceAll(string(b), placeholder, path)
	if err := os.WriteFile(filepath.Join(home, ".terraformrc"), []byte(rc), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestInstallFromFilesystemMirror runs `make install-provider`, then terraform init and plan
// in the install example: first with Terraform's implied local mirror (no CLI
// configuration), then with the docs' mirror.tfrc, which never asks a registry.
func TestInstallFromFilesystemMirror(t *testing.T) {
	c := newLockstepCluster(t)
	home := t.TempDir()
	env := installEnv(t, home)
	runIn(t, repoRoot, env, "make", "--no-print-directory", "install-provider")
	mirror := filepath.Join(home, ".terraform.d", "plugins")
	if _, err := os.Stat(filepath.Join(mirror, "registry.terraform.io", "lockstep-dev", "lockstep")); err != nil {
		t.Fatalf("make install-provider laid out no mirror: %v", err)
	}
	env = append(env, "TF_VAR_kubeconfig="+c.kubeconfig, "TF_VAR_checkpoint_store="+c.store)
	for _, tc := range []struct{ name, rc string }{{"implied mirror", ""}, {"mirror.tfrc", "mirror.tfrc"}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.rc != "" {
				writeRC(t, home, tc.rc, mirrorPath, mirror)
			}
			dir := copyInstallExample(t)
			out := runIn(t, dir, env, "terraform", "init", "-input=false")
			if !strings.Contains(out, "Installing lockstep-dev/lockstep") {
				t.Errorf("terraform init did not install the provider from the mirror:\n%s", out)
			}
			out = runIn(t, dir, env, "terraform", "plan", "-input=false")
			if !strings.Contains(out, `bucket = "`+c.s3.Bucket+`"`) {
				t.Errorf("terraform plan did not read the store with the installed provider:\n%s", out)
			}
		})
	}
}

// TestInstallWithDevOverrides builds the provider and points the docs' dev-overrides.tfrc at
// it: terraform plan runs it without terraform init.
func TestInstallWithDevOverrides(t *testing.T) {
	c := newLockstepCluster(t)
	home := t.TempDir()
	env := installEnv(t, home)
	bin := t.TempDir()
	if err := gobuild.Binary(context.Background(), repoRoot, "./cmd/terraform-provider-lockstep", filepath.Join(bin, binaryName)); err != nil {
		t.Fatal(err)
	}
	writeRC(t, home, "dev-overrides.tfrc", overridePath, bin)
	env = append(env, "TF_VAR_kubeconfig="+c.kubeconfig, "TF_VAR_checkpoint_store="+c.store)
	out := runIn(t, copyInstallExample(t), env, "terraform", "plan", "-input=false")
	if !strings.Contains(out, "Provider development overrides are in effect") || !strings.Contains(out, `bucket = "`+c.s3.Bucket+`"`) {
		t.Errorf("terraform plan did not run the overridden provider:\n%s", out)
	}
}

// TestProviderReleaseArtifacts builds the release artifacts for this platform, checks them
// against SHA256SUMS, and installs the zip from a packed filesystem mirror, as a private
// mirror serves it.
func TestProviderReleaseArtifacts(t *testing.T) {
	home := t.TempDir()
	env := installEnv(t, home)
	dist := t.TempDir()
	const version = "0.1.0"
	runIn(t, repoRoot, env, "make", "--no-print-directory", "provider-release",
		"PROVIDER_VERSION="+version, "PROVIDER_PLATFORMS="+platform, "PROVIDER_DIST="+dist)
	name := binaryName + "_" + version
	sums, err := os.ReadFile(filepath.Join(dist, name+"_SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{name + "_" + platform + ".zip", name + "_manifest.json"}
	for _, f := range want {
		b, err := os.ReadFile(filepath.Join(dist, f))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		if line := hex.EncodeToString(sum[:]) + "  " + f; !strings.Contains(string(sums), line) {
			t.Errorf("SHA256SUMS lacks %q:\n%s", line, sums)
		}
	}
	if m, _ := os.ReadFile(filepath.Join(dist, name+"_manifest.json")); !strings.Contains(string(m), `"6.0"`) {
		t.Errorf("the manifest does not name protocol 6.0:\n%s", m)
	}

	mirror := filepath.Join(t.TempDir(), "mirror")
	packed := filepath.Join(mirror, "registry.terraform.io", "lockstep-dev", "lockstep")
	if err := os.MkdirAll(packed, 0o755); err != nil {
		t.Fatal(err)
	}
	zip, _ := os.ReadFile(filepath.Join(dist, want[0]))
	if err := os.WriteFile(filepath.Join(packed, want[0]), zip, 0o644); err != nil {
		t.Fatal(err)
	}
	writeRC(t, home, "mirror.tfrc", mirrorPath, mirror)
	out := runIn(t, copyInstallExample(t), env, "terraform", "init", "-input=false")
	if !strings.Contains(out, "Installed lockstep-dev/lockstep v"+version) {
		t.Errorf("terraform init did not install the release zip:\n%s", out)
	}
}

// standInVersion is the version under which packKubernetesStandIn puts the stand-in in a
// mirror; it meets the platform module's constraint on hashicorp/kubernetes.
const standInVersion = "2.38.0"

// packKubernetesStandIn puts this test binary in mirror as hashicorp/kubernetes, in the packed
// layout that `terraform providers mirror` writes:
// registry.terraform.io/hashicorp/kubernetes/terraform-provider-kubernetes_<version>_<os>_<arch>.zip.
// Started by Terraform with standInEnv set, the binary serves kubernetesStandIn.
func packKubernetesStandIn(t *testing.T, mirror string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(mirror, "registry.terraform.io", "hashicorp", "kubernetes")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "terraform-provider-kubernetes_"+standInVersion+"_"+platform+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	h := &zip.FileHeader{Name: "terraform-provider-kubernetes_v" + standInVersion, Method: zip.Store}
	h.SetMode(0o755)
	w, err := zw.CreateHeader(h)
	if err == nil {
		_, err = w.Write(bin)
	}
	if err == nil {
		err = zw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("pack the hashicorp/kubernetes stand-in: %v", err)
	}
}

// TestInstallOfflineForPlatform takes the install guide's offline path for the platform
// module, which needs hashicorp/kubernetes besides this provider: make install-provider, and
// hashicorp/kubernetes in the same mirror as terraform providers mirror lays it out (a
// stand-in with its schema, since nothing can be downloaded here). terraform init then
// installs both from the mirror, and terraform validate runs both, with Terraform's implied
// mirror (no CLI configuration) and with the guide's offline.tfrc, which asks no registry.
func TestInstallOfflineForPlatform(t *testing.T) {
	home := t.TempDir()
	env := installEnv(t, home)
	runIn(t, repoRoot, env, "make", "--no-print-directory", "install-provider")
	mirror := filepath.Join(home, ".terraform.d", "plugins")
	packKubernetesStandIn(t, mirror)
	env = append(env, standInEnv+"="+standInKubernetes)
	for _, tc := range []struct{ name, rc string }{{"implied mirror", ""}, {"offline.tfrc", "offline.tfrc"}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.rc != "" {
				writeRC(t, home, tc.rc, mirrorPath, mirror)
			}
			dir := copyExample(t, filepath.Join(examplesDir, "platform"))
			out := runIn(t, dir, env, "terraform", "init", "-input=false", "-backend=false")
			for _, want := range []string{"Installed lockstep-dev/lockstep", "Installed hashicorp/kubernetes v" + standInVersion} {
				if !strings.Contains(out, want) {
					t.Errorf("terraform init did not say %q:\n%s", want, out)
				}
			}
			runIn(t, dir, env, "terraform", "validate")
		})
	}
}
