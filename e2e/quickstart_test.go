//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/internal/gobuild"
	"github.com/lockstep-dev/lockstep/internal/ociimage"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// TestReadmeQuickstart runs the README's Kubernetes quickstart, command by command as it is
// written, on the real node: `helm install` of charts/lockstep (the chart's own self-signed
// webhook certificate), the examples/kubernetes manifests with store.yaml and secret.yaml
// edited as the README says (this test's S3 server and keys), then its uninstall commands,
// which must finish without a finalizer left waiting. The image is the chart's release
// (ghcr.io/lockstep-dev/lockstep:<appVersion>) built from the checkout and imported into
// containerd, where a registry would have it.
//
// It installs Lockstep in lockstep-system itself, so it runs before the suite's own
// installation (it is not parallel, and holds the installation's lock) and leaves the node
// without Lockstep.
func TestReadmeQuickstart(t *testing.T) {
	node := testenv.RealNode(t)
	installed.mu.Lock()
	defer installed.mu.Unlock()
	if installed.in != nil {
		t.Fatal("the suite's installation is already there: TestReadmeQuickstart must run first (keep it serial and the tests before it free of lockstep(t))")
	}
	ctx := context.Background()
	root := repoRoot()
	release := chartAppVersion(t, root)

	// The release's image, where the node finds it.
	dir := t.TempDir()
	bin := filepath.Join(dir, "lockstep")
	if err := gobuild.Static(ctx, root, "./cmd/lockstep", bin, "-X main.version="+release); err != nil {
		t.Fatal(err)
	}
	tarball := filepath.Join(dir, "lockstep.tar")
	if _, err := ociimage.Write(ociimage.Spec{Ref: "ghcr.io/lockstep-dev/lockstep:" + release, Binary: bin, Entrypoint: "/lockstep",
		Labels: map[string]string{"org.opencontainers.image.version": release}}, tarball); err != nil {
		t.Fatal(err)
	}
	if err := node.ImportImage(tarball); err != nil {
		t.Fatal(err)
	}

	// The user's checkout, with the two files the README says to edit.
	work := filepath.Join(dir, "checkout")
	for _, d := range []string{"charts", "examples"} {
		if err := os.CopyFS(filepath.Join(work, d), os.DirFS(filepath.Join(root, d))); err != nil {
			t.Fatal(err)
		}
	}
	s3 := testenv.S3At(t, "versitygw", node.IP)
	edit(t, filepath.Join(work, "examples", "kubernetes", "store.yaml"), map[string]string{
		"endpoint: http://minio.storage:9000": "endpoint: " + s3.URL,
		"bucket: checkpoints":                 "bucket: " + s3.Bucket,
		"region: us-east-1":                   "region: " + s3.Region,
	})
	edit(t, filepath.Join(work, "examples", "kubernetes", "secret.yaml"), map[string]string{
		"AWS_ACCESS_KEY_ID: lockstep-demo":            "AWS_ACCESS_KEY_ID: " + s3.AccessKey,
		"AWS_SECRET_ACCESS_KEY: lockstep-demo-secret": "AWS_SECRET_ACCESS_KEY: " + s3.SecretKey,
	})

	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := shellBlocks(t, string(readme), "### Kubernetes\n")
	if len(blocks) < 2 {
		t.Fatalf("README's Kubernetes quickstart has %d sh blocks, want the quickstart and the uninstall", len(blocks))
	}
	c := quickstartClient(t, node)
	sh := &shell{t: t, dir: work, env: append(append(os.Environ(),
		"KUBECONFIG="+node.Kubeconfig,
		"PATH="+testenv.ToolsDir()+":"+os.Getenv("PATH"),
	), testenv.HelmHome(filepath.Join(dir, "helm"))...)}
	uninstalled := false
	t.Cleanup(func() {
		if uninstalled {
			return
		}
		if t.Failed() {
			t.Logf("diagnostics:\n%s", quickstartDiagnose(node))
		}
		forceUninstall(t, node, c)
	})

	for _, line := range blocks[0] {
		switch {
		case strings.Contains(line, "# refused"):
			out, err := sh.run(line, 2*time.Minute)
			if err == nil || !strings.Contains(out, "[rejected]") {
				t.Errorf("%s: err %v, output:\n%s\nwant a refusal naming the rejected finding", line, err, out)
			}
		default:
			if out, err := sh.run(line, 10*time.Minute); err != nil {
				t.Fatalf("%s: %v\n%s", line, err, out)
			}
		}
		// What a user sees between the commands; the README says what to expect.
		switch {
		case strings.Contains(line, "examples/kubernetes/query.yaml"):
			waitCommitted(t, c, 1)
			waitStoreReady(t, c, "team-s3")
		case strings.Contains(line, "apply -f examples/kubernetes/changed-query.yaml"):
			before := getQuery(t, c)
			waitFor(t, "the changed query runs and commits", func() error {
				q := getQuery(t, c)
				if q.Status.ObservedGeneration != q.Generation || q.Status.Phase != v1.PhaseRunning {
					return fmt.Errorf("phase %s, observed %d of %d", q.Status.Phase, q.Status.ObservedGeneration, q.Generation)
				}
				if b := q.Status.LatestCommittedBatch; b == nil || before.Status.LatestCommittedBatch == nil || *b <= *before.Status.LatestCommittedBatch+1 {
					return fmt.Errorf("committed %v, before the change %v", q.Status.LatestCommittedBatch, before.Status.LatestCommittedBatch)
				}
				if q.Status.QueryID != before.Status.QueryID {
					return fmt.Errorf("query id %s, before the change %s: the checkpoint was not resumed", q.Status.QueryID, before.Status.QueryID)
				}
				return nil
			})
		}
	}

	// A tenant with only the built-in edit role in payments reads the store it is told to
	// use and its queries (issue 23 #2), and may not change the store.
	const tenantUser = "e2e-tenant"
	if _, err := node.Kubectl(ctx, []byte(`apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: e2e-tenant-edit, namespace: payments}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: `+tenantUser+`}]
`), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"get", "checkpointstores"}, {"get", "checkpointstore", "team-s3"}, {"-n", "payments", "get", "streamingqueries"}} {
		waitFor(t, "kubectl --as "+tenantUser+" "+strings.Join(args, " "), func() error {
			_, err := node.Kubectl(ctx, nil, append([]string{"--as", tenantUser}, args...)...)
			return err
		})
	}
	if out, err := node.Kubectl(ctx, nil, "--as", tenantUser, "delete", "checkpointstore", "team-s3", "--dry-run=server"); err == nil || !strings.Contains(strings.ToLower(err.Error()+string(out)), "forbidden") {
		t.Errorf("kubectl --as %s delete checkpointstore team-s3 = %v, %s; want Forbidden", tenantUser, err, out)
	}

	// The leader Lease belongs to the controller's ServiceAccount, so that the uninstall
	// takes it too (issue 23 #9): a later install leads at once.
	const serviceAccount = "lockstep-controller" // the chart's, for release lockstep
	leaseKey := client.ObjectKey{Namespace: controllerNamespace, Name: "controller.streaming.lockstep.dev"}
	var lease coordinationv1.Lease
	if err := c.Get(ctx, leaseKey, &lease); err != nil {
		t.Errorf("the leader Lease: %v", err)
	} else if refs := lease.OwnerReferences; len(refs) != 1 || refs[0].Kind != "ServiceAccount" || refs[0].Name != serviceAccount {
		t.Errorf("the leader Lease's owners = %+v, want the controller's ServiceAccount %s", refs, serviceAccount)
	}

	// The uninstall, as written: each command finishes (none waits on a finalizer).
	for _, line := range blocks[1] {
		if out, err := sh.run(line, 5*time.Minute); err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
	}
	for _, crd := range []string{"streamingqueries.streaming.lockstep.dev", "checkpointstores.streaming.lockstep.dev"} {
		if out, err := node.Kubectl(ctx, nil, "get", "crd", crd, "--ignore-not-found", "-o", "name"); err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Errorf("after the uninstall, kubectl get crd %s = %q, %v; want it gone", crd, out, err)
		}
	}
	waitFor(t, "the garbage collector deletes the leader Lease with the controller's ServiceAccount", func() error {
		err := c.Get(ctx, leaseKey, &coordinationv1.Lease{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("the Lease is still there (%v)", err)
	})
	uninstalled = true
	cleanupNamespaces(t, node)
}

// shell runs README lines with bash in the user's checkout.
type shell struct {
	t   *testing.T
	dir string
	env []string
}

// run runs one line; a call of the webhooks that the API server cannot make yet (the
// controller was just rolled out) is retried, as a user would retry it.
func (s *shell) run(line string, timeout time.Duration) (string, error) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", line)
		cmd.Dir, cmd.Env = s.dir, s.env
		out, err := cmd.CombinedOutput()
		cancel()
		s.t.Logf("$ %s\n%s", line, out)
		if err != nil && strings.Contains(string(out), "failed calling webhook") && time.Now().Before(deadline) {
			time.Sleep(2 * time.Second)
			continue
		}
		return string(out), err
	}
}

// shellBlocks returns the lines of the ```sh blocks of the README section that starts with
// heading, up to the next heading of the same or a higher level.
func shellBlocks(t *testing.T, readme, heading string) [][]string {
	t.Helper()
	i := strings.Index(readme, heading)
	if i < 0 {
		t.Fatalf("README has no %q", strings.TrimSpace(heading))
	}
	section := readme[i+len(heading):]
	if j := strings.Index(section, "\n### "); j >= 0 {
		section = section[:j]
	}
	if j := strings.Index(section, "\n## "); j >= 0 {
		section = section[:j]
	}
	var blocks [][]string
	for {
		start := strings.Index(section, "```sh\n")
		if start < 0 {
			return blocks
		}
		section = section[start+len("```sh\n"):]
		end := strings.Index(section, "```")
		if end < 0 {
			t.Fatal("README: an unclosed ```sh block")
		}
		var lines []string
		for _, l := range strings.Split(section[:end], "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				lines = append(lines, l)
			}
		}
		blocks = append(blocks, lines)
		section = section[end+3:]
	}
}

// edit replaces each old text of the file with its new one, failing when one is missing.
func edit(t *testing.T, path string, replace map[string]string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	for old, repl := range replace {
		if !strings.Contains(s, old) {
			t.Fatalf("%s lacks %q, which the quickstart edits", path, old)
		}
		s = strings.ReplaceAll(s, old, repl)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func chartAppVersion(t *testing.T, root string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "charts", "lockstep", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(data, &c); err != nil || c.AppVersion == "" {
		t.Fatalf("charts/lockstep/Chart.yaml: appVersion %q, %v", c.AppVersion, err)
	}
	return c.AppVersion
}

func quickstartClient(t *testing.T, node *testenv.Node) client.Client {
	t.Helper()
	c, err := nodeClient(node)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The quickstart's query, as examples/kubernetes/query.yaml names it.
var quickstartQuery = client.ObjectKey{Namespace: "payments", Name: "ticks"}

func getQuery(t *testing.T, c client.Client) *v1.StreamingQuery {
	t.Helper()
	var q v1.StreamingQuery
	if err := c.Get(context.Background(), quickstartQuery, &q); err != nil {
		t.Fatal(err)
	}
	return &q
}

func waitFor(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, waitTimeout, err)
		}
		time.Sleep(time.Second)
	}
}

func waitCommitted(t *testing.T, c client.Client, batch int64) {
	t.Helper()
	waitFor(t, fmt.Sprintf("the quickstart query commits batch %d", batch), func() error {
		q := getQuery(t, c)
		if b := q.Status.LatestCommittedBatch; b == nil || *b < batch || q.Status.Phase != v1.PhaseRunning {
			return fmt.Errorf("phase %s, committed %v; conditions %s", q.Status.Phase, q.Status.LatestCommittedBatch, conditions(q))
		}
		return nil
	})
}

func waitStoreReady(t *testing.T, c client.Client, name string) {
	t.Helper()
	waitFor(t, "CheckpointStore "+name+" is Ready", func() error {
		var st v1.CheckpointStore
		if err := c.Get(context.Background(), client.ObjectKey{Name: name}, &st); err != nil {
			return err
		}
		r := meta.FindStatusCondition(st.Status.Conditions, v1.ConditionReady)
		if r == nil || r.Status != metav1.ConditionTrue || st.Status.Queries != 1 {
			return fmt.Errorf("Ready %+v, queries %d", r, st.Status.Queries)
		}
		return nil
	})
}

func quickstartDiagnose(node *testenv.Node) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var b strings.Builder
	for _, args := range [][]string{
		{"get", "pods", "-A", "-o", "wide"},
		{"get", "checkpointstores,streamingqueries", "-A", "-o", "yaml"},
		{"-n", controllerNamespace, "logs", "deployment/" + controllerDeployment, "--tail=40"},
		{"-n", "payments", "logs", "deployment/ticks-engine", "--tail=20"},
		{"get", "events", "-A", "--sort-by=.lastTimestamp"},
	} {
		out, err := node.Kubectl(ctx, nil, args...)
		fmt.Fprintf(&b, "--- kubectl %s\n%s", strings.Join(args, " "), out)
		if err != nil {
			fmt.Fprintf(&b, "(%v)\n", err)
		}
	}
	return b.String()
}

// forceUninstall removes what a failed quickstart left, finalizers included, so that the
// suite's installation finds a clean node.
func forceUninstall(t *testing.T, node *testenv.Node, c client.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var queries v1.StreamingQueryList
	if err := c.List(ctx, &queries); err == nil {
		for i := range queries.Items {
			q := &queries.Items[i]
			_ = c.Patch(ctx, q, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`)))
		}
	}
	var stores v1.CheckpointStoreList
	if err := c.List(ctx, &stores); err == nil {
		for i := range stores.Items {
			_ = c.Patch(ctx, &stores.Items[i], client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`)))
		}
	}
	helmBin := filepath.Join(testenv.ToolsDir(), "helm")
	cmd := exec.CommandContext(ctx, helmBin, "uninstall", "lockstep", "--namespace", controllerNamespace, "--ignore-not-found", "--wait")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+node.Kubeconfig)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Logf("helm uninstall: %v\n%s", err, out)
	}
	_, _ = node.Kubectl(ctx, nil, "delete", "crd", "streamingqueries.streaming.lockstep.dev", "checkpointstores.streaming.lockstep.dev", "--ignore-not-found")
	cleanupNamespaces(t, node)
}

// cleanupNamespaces deletes the quickstart's namespaces and waits for them to go, so that the
// suite's installation (into lockstep-system) does not meet a terminating namespace.
func cleanupNamespaces(t *testing.T, node *testenv.Node) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if out, err := node.Kubectl(ctx, nil, "delete", "namespace", "payments", controllerNamespace, "--ignore-not-found", "--wait"); err != nil {
		t.Logf("delete the quickstart's namespaces: %v\n%s", err, out)
	}
}
