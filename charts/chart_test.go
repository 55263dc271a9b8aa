// Package charts_test lints and renders the Helm chart charts/lockstep with the helm CLI of
// the tool cache, checks that it installs what config/ installs (the same RBAC rules and
// webhooks, the generated CRDs, a pinned image), and applies its rendering to a real API
// server with server-side dry-run. It also renders `make install.yaml`'s manifests.
package charts_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/lockstep-dev/lockstep/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const (
	chart     = "lockstep"
	release   = "lockstep"
	namespace = "lockstep-system"
)

func root(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// helm runs the cached helm CLI in the repository's root with a throwaway home.
func helm(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(testenv.Tool(t, "helm"), args...)
	cmd.Dir = root(t)
	cmd.Env = append(os.Environ(), testenv.HelmHome(t.TempDir())...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, errors.New(err.Error() + ": " + stderr.String())
	}
	return out, nil
}

// appVersion is the chart's appVersion: the release it installs.
func appVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root(t), "charts", chart, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	return c.AppVersion
}

func decode(t *testing.T, manifests []byte) []*unstructured.Unstructured {
	t.Helper()
	return testenv.DecodeManifests(t, manifests)
}

// find returns the one object of the kind (and, when not empty, name suffix), converted.
func find[T any](t *testing.T, objs []*unstructured.Unstructured, kind, suffix string) *T {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind && strings.HasSuffix(o.GetName(), suffix) {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d %s objects named *%s, want 1", len(found), kind, suffix)
	}
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(found[0].Object, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func readObjects(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root(t), path))
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, data)
}

func TestChartLint(t *testing.T) {
	for _, set := range []string{"", "webhook.certManager.enabled=true"} {
		args := []string{"lint", "--strict", "charts/" + chart}
		if set != "" {
			args = append(args, "--set", set)
		}
		if out, err := helm(t, args...); err != nil {
			t.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// grants flattens RBAC rules into "group/resource:verb" grants, so that two ways of writing
// the same rules compare equal.
func grants(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out = append(out, g+"/"+res+":"+v)
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func TestChartTemplate(t *testing.T) {
	out, err := helm(t, "template", release, "charts/"+chart, "--namespace", namespace, "--include-crds")
	if err != nil {
		t.Fatal(err)
	}
	objs := decode(t, out)

	// The checksum of a new self-signed certificate is 16 hex digits, which YAML reads as a
	// number when they happen to be digits with one "e" (the API server then refused the
	// Deployment: "cannot unmarshal number into … annotations of type string").
	t.Run("checksum is a string", func(t *testing.T) {
		if !regexp.MustCompile(`checksum/webhook-cert: "[0-9a-f]{16}"`).Match(out) {
			t.Errorf("the webhook certificate's checksum annotation is not quoted:\n%s", regexp.MustCompile(`.*checksum/webhook-cert.*`).Find(out))
		}
	})

	t.Run("image", func(t *testing.T) {
		want := "ghcr.io/lockstep-dev/lockstep:" + appVersion(t)
		d := find[appsv1.Deployment](t, objs, "Deployment", "-controller")
		c := d.Spec.Template.Spec.Containers[0]
		if c.Image != want {
			t.Errorf("controller image = %s, want %s", c.Image, want)
		}
		var engine string
		for _, e := range c.Env {
			if e.Name == "LOCKSTEP_ENGINE_IMAGE" {
				engine = e.Value
			}
		}
		if engine != want {
			t.Errorf("LOCKSTEP_ENGINE_IMAGE = %q, want %s", engine, want)
		}
		// Spark queries run Lockstep's Spark image of the same release, or engine.sparkImage.
		if got, want := envOf(c, "LOCKSTEP_SPARK_IMAGE"), "ghcr.io/lockstep-dev/lockstep-spark:"+appVersion(t); got != want {
			t.Errorf("LOCKSTEP_SPARK_IMAGE = %q, want %s", got, want)
		}
		out, err := helm(t, "template", release, "charts/"+chart, "--set", "engine.sparkImage=registry.example/spark:v9")
		if err != nil {
			t.Fatal(err)
		}
		d = find[appsv1.Deployment](t, decode(t, out), "Deployment", "-controller")
		if got := envOf(d.Spec.Template.Spec.Containers[0], "LOCKSTEP_SPARK_IMAGE"); got != "registry.example/spark:v9" {
			t.Errorf("LOCKSTEP_SPARK_IMAGE with engine.sparkImage set = %q, want registry.example/spark:v9", got)
		}
		if _, err := helm(t, "template", release, "charts/"+chart, "--set", "image.tag=latest"); err == nil || !strings.Contains(err.Error(), "not latest") {
			t.Errorf("helm template with image.tag=latest: error %v, want a refusal", err)
		}
	})

	t.Run("kustomize image", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join(root(t), "config", "manager", "kustomization.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if want := "newTag: " + appVersion(t); !strings.Contains(string(data), want) {
			t.Errorf("config/manager/kustomization.yaml lacks %q: config/ and the chart must install the same release", want)
		}
		d := find[appsv1.Deployment](t, readObjects(t, "config/manager/manager.yaml"), "Deployment", "controller")
		if got, want := envOf(d.Spec.Template.Spec.Containers[0], "LOCKSTEP_SPARK_IMAGE"), "ghcr.io/lockstep-dev/lockstep-spark:"+appVersion(t); got != want {
			t.Errorf("config/manager/manager.yaml: LOCKSTEP_SPARK_IMAGE = %q, want %s, the Spark image of the chart's release", got, want)
		}
	})

	t.Run("rbac", func(t *testing.T) {
		want := find[rbacv1.ClusterRole](t, readObjects(t, "config/rbac/role.yaml"), "ClusterRole", "controller")
		got := find[rbacv1.ClusterRole](t, objs, "ClusterRole", "-controller")
		if diff := cmp.Diff(grants(want.Rules), grants(got.Rules)); diff != "" {
			t.Errorf("chart's ClusterRole vs config/rbac/role.yaml (-config +chart):\n%s", diff)
		}
		if !slices.Contains(grants(got.Rules), "/events:create") {
			t.Errorf("the controller may not create core events: %v", grants(got.Rules))
		}
		// Tenants read stores: the same read-only role, bound to the same subjects, as config/rbac.
		configReader := readObjects(t, "config/rbac/checkpointstore_reader_role.yaml")
		configReader = append(configReader, readObjects(t, "config/rbac/checkpointstore_reader_role_binding.yaml")...)
		wantReader := find[rbacv1.ClusterRole](t, configReader, "ClusterRole", "checkpointstore-reader")
		gotReader := find[rbacv1.ClusterRole](t, objs, "ClusterRole", "-checkpointstore-reader")
		if diff := cmp.Diff(grants(wantReader.Rules), grants(gotReader.Rules)); diff != "" {
			t.Errorf("chart's store reader ClusterRole vs config/rbac (-config +chart):\n%s", diff)
		}
		if g := grants(gotReader.Rules); !cmp.Equal(g, []string{
			"streaming.lockstep.dev/checkpointstores:get", "streaming.lockstep.dev/checkpointstores:list", "streaming.lockstep.dev/checkpointstores:watch",
		}) {
			t.Errorf("store reader grants = %v, want get, list and watch of checkpointstores only", g)
		}
		wantBinding := find[rbacv1.ClusterRoleBinding](t, configReader, "ClusterRoleBinding", "checkpointstore-reader")
		gotBinding := find[rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding", "-checkpointstore-reader")
		if diff := cmp.Diff(wantBinding.Subjects, gotBinding.Subjects); diff != "" {
			t.Errorf("chart's store reader subjects vs config/rbac (-config +chart):\n%s", diff)
		}
		if gotBinding.RoleRef.Name != gotReader.Name {
			t.Errorf("store reader binding names ClusterRole %s, the chart's is %s", gotBinding.RoleRef.Name, gotReader.Name)
		}

		le := find[rbacv1.Role](t, objs, "Role", "-leader-election")
		if g := grants(le.Rules); !slices.Contains(g, "coordination.k8s.io/leases:update") || !slices.Contains(g, "/events:create") {
			t.Errorf("leader election grants = %v, want leases and core events", g)
		}
	})

	t.Run("webhooks", func(t *testing.T) {
		config := readObjects(t, "config/webhook/manifests.yaml")
		secret := find[corev1.Secret](t, objs, "Secret", "-webhook-server-cert")
		svc := find[corev1.Service](t, objs, "Service", "-webhook-service")
		for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
			type webhook struct {
				Name, Path string
				Rules      []admissionv1.RuleWithOperations
				CABundle   []byte
				Service    string
			}
			webhooks := func(objs []*unstructured.Unstructured) []webhook {
				var out []webhook
				if kind == "MutatingWebhookConfiguration" {
					for _, w := range find[admissionv1.MutatingWebhookConfiguration](t, objs, kind, "").Webhooks {
						out = append(out, webhook{w.Name, *w.ClientConfig.Service.Path, w.Rules, w.ClientConfig.CABundle, w.ClientConfig.Service.Name})
					}
				} else {
					for _, w := range find[admissionv1.ValidatingWebhookConfiguration](t, objs, kind, "").Webhooks {
						out = append(out, webhook{w.Name, *w.ClientConfig.Service.Path, w.Rules, w.ClientConfig.CABundle, w.ClientConfig.Service.Name})
					}
				}
				return out
			}
			want, got := webhooks(config), webhooks(objs)
			if len(want) != len(got) {
				t.Fatalf("%s: %d webhooks, config/webhook has %d", kind, len(got), len(want))
			}
			for i := range want {
				if want[i].Name != got[i].Name || want[i].Path != got[i].Path || !cmp.Equal(want[i].Rules, got[i].Rules) {
					t.Errorf("%s webhook %d = %+v, config/webhook has %+v", kind, i, got[i], want[i])
				}
				if got[i].Service != svc.Name {
					t.Errorf("%s calls Service %s, the chart's is %s", kind, got[i].Service, svc.Name)
				}
				verifies(t, got[i].CABundle, secret.Data["tls.crt"], svc.Name+"."+namespace+".svc")
			}
		}
	})

	t.Run("crds", func(t *testing.T) {
		bases, err := filepath.Glob(filepath.Join(root(t), "config", "crd", "bases", "*.yaml"))
		if err != nil || len(bases) == 0 {
			t.Fatalf("no CRDs in config/crd/bases (%v)", err)
		}
		for _, b := range bases {
			want, _ := os.ReadFile(b)
			got, err := os.ReadFile(filepath.Join(root(t), "charts", chart, "crds", filepath.Base(b)))
			if err != nil || !bytes.Equal(want, got) {
				t.Errorf("charts/%s/crds/%s differs from config/crd/bases (%v): run `make generate`", chart, filepath.Base(b), err)
			}
		}
	})
}

// verifies checks that the CA bundle signs the certificate for the DNS name.
func verifies(t *testing.T, caBundle, certPEM []byte, dnsName string) {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caBundle) {
		t.Fatalf("caBundle holds no certificate")
	}
	block, _ := pem.Decode(certPEM)
	if block == nil {
		t.Fatal("tls.crt holds no PEM block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: dnsName}); err != nil {
		t.Errorf("the webhook's certificate does not verify for %s with the caBundle: %v", dnsName, err)
	}
}

// TestChartAppliesToAPIServer sends every object the chart renders (CRDs included; with
// cert-manager and without) to a real API server with server-side dry-run. Only
// cert-manager's kinds, whose CRDs the test server lacks, may be unknown.
func TestChartAppliesToAPIServer(t *testing.T) {
	c := testenv.Client(t, testenv.ControlPlane(t))
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, set := range []string{"webhook.certManager.enabled=false", "webhook.certManager.enabled=true"} {
		t.Run(set, func(t *testing.T) {
			out, err := helm(t, "template", release, "charts/"+chart, "--namespace", namespace, "--include-crds", "--set", set)
			if err != nil {
				t.Fatal(err)
			}
			applyDryRun(t, c, decode(t, out))
		})
	}
}

func applyDryRun(t *testing.T, c client.Client, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, u := range objs {
		err := c.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("lockstep-test"), client.ForceOwnership, client.DryRunAll)
		if meta.IsNoMatchError(err) && u.GroupVersionKind().Group == "cert-manager.io" {
			continue
		}
		if err != nil {
			t.Errorf("server-side dry-run apply of %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

// TestInstallManifests renders what `make install.yaml` writes: config/default with the
// image pinned to the release, in the controller and for the engines, and the Spark image of
// the same release for spark queries; nowhere :latest.
func TestInstallManifests(t *testing.T) {
	kubectl := kubectlTool(t)
	image := "ghcr.io/lockstep-dev/lockstep:" + appVersion(t)
	out := render(t, kubectl, image)
	if bytes.Contains(out, []byte(":latest")) {
		t.Errorf("install manifests name a :latest image")
	}
	objs := decode(t, out)
	d := find[appsv1.Deployment](t, objs, "Deployment", "-controller")
	c := d.Spec.Template.Spec.Containers[0]
	if got := envOf(c, "LOCKSTEP_ENGINE_IMAGE"); got != image {
		t.Errorf("LOCKSTEP_ENGINE_IMAGE = %s, want %s", got, image)
	}
	if got, want := envOf(c, "LOCKSTEP_SPARK_IMAGE"), "ghcr.io/lockstep-dev/lockstep-spark:"+appVersion(t); got != want {
		t.Errorf("LOCKSTEP_SPARK_IMAGE = %s, want %s", got, want)
	}
	if c.Image != image {
		t.Errorf("controller image = %s, want %s", c.Image, image)
	}
	cr := find[rbacv1.ClusterRole](t, objs, "ClusterRole", "-controller")
	if !slices.Contains(grants(cr.Rules), "/events:create") {
		t.Errorf("the controller may not create core events: %v", grants(cr.Rules))
	}
	// Tenants read stores here too, as with the chart.
	reader := find[rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding", "-checkpointstore-reader")
	if reader.RoleRef.Name != find[rbacv1.ClusterRole](t, objs, "ClusterRole", "-checkpointstore-reader").Name ||
		len(reader.Subjects) != 1 || reader.Subjects[0].Name != "system:authenticated" {
		t.Errorf("install manifests' store reader binding = %+v, want the store reader role for system:authenticated", reader)
	}

	// The Spark image may be named apart (a mirror, a digest).
	out = render(t, kubectl, image, "mirror.example/lockstep-spark@sha256:"+strings.Repeat("a", 64))
	c = find[appsv1.Deployment](t, decode(t, out), "Deployment", "-controller").Spec.Template.Spec.Containers[0]
	if got := envOf(c, "LOCKSTEP_SPARK_IMAGE"); got != "mirror.example/lockstep-spark@sha256:"+strings.Repeat("a", 64) {
		t.Errorf("LOCKSTEP_SPARK_IMAGE with a Spark image given = %s", got)
	}

	// A moving tag is refused before anything is rendered, and so is a lockstep image pinned by
	// digest without a Spark image (its digest cannot be derived).
	for _, args := range [][]string{
		{"ghcr.io/lockstep-dev/lockstep:latest"},
		{image, "ghcr.io/lockstep-dev/lockstep-spark:latest"},
		{"ghcr.io/lockstep-dev/lockstep@sha256:" + strings.Repeat("b", 64)},
	} {
		bad := exec.Command(filepath.Join(root(t), "hack", "install-manifests.sh"), append([]string{"config/default"}, args...)...)
		bad.Dir = root(t)
		if out, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(out), "not latest") && !strings.Contains(string(out), "name the Spark image") {
			t.Errorf("install-manifests.sh %v = %v, %s; want a refusal", args, err, out)
		}
	}
}

// kubectlTool returns the kubectl whose kustomize renders the manifests: the tool cache's,
// else the one on PATH.
func kubectlTool(t *testing.T) string {
	t.Helper()
	kubectl := filepath.Join(testenv.ToolsDir(), "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		k, lerr := exec.LookPath("kubectl")
		if lerr != nil {
			t.Fatalf("kubectl (for kustomize) not in the tool cache nor on PATH: run `make tools`")
		}
		kubectl = k
	}
	return kubectl
}

// render runs hack/install-manifests.sh on config/default with args (the images).
func render(t *testing.T, kubectl string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(filepath.Join(root(t), "hack", "install-manifests.sh"), append([]string{"config/default"}, args...)...)
	cmd.Dir = root(t)
	cmd.Env = append(os.Environ(), "KUSTOMIZE="+kubectl+" kustomize")
	return testenv.Output(t, cmd)
}

// envOf returns the value of the container's variable name, "" when it has none.
func envOf(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}
