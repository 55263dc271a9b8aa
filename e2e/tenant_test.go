//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/controller"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/sink"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// waitTimeout bounds every wait of a scenario: generous, because the node shares two
// cores with other suites; a healthy run takes seconds.
const waitTimeout = 4 * time.Minute

// tenant is one test's team: a namespace, the S3 credentials Secret in it, a bucket on the
// node-reachable S3 server and a CheckpointStore that lets the namespace use the bucket.
type tenant struct {
	t     *testing.T
	in    *install
	ns    string
	s3    *testenv.S3Server
	store string
}

var nonName = regexp.MustCompile(`[^a-z0-9-]+`)

// newTenant creates the test's namespace, Secret and CheckpointStore as the platform
// team would (docs/kubernetes.md), with kubectl; they are deleted when the test ends.
func newTenant(t *testing.T) *tenant {
	t.Helper()
	in := lockstep(t)
	ns := strings.Trim(nonName.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(ns) > 50 {
		ns = strings.TrimRight(ns[:50], "-")
	}
	ns = "e2e-" + ns
	tn := &tenant{t: t, in: in, ns: ns, store: ns, s3: testenv.S3At(t, "versitygw", in.node.IP)}
	tn.kubectl(nil, "create", "namespace", ns)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("diagnostics:\n%s", tn.diagnose())
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = in.node.Kubectl(ctx, nil, "delete", "namespace", ns, "--wait=false")
		_, _ = in.node.Kubectl(ctx, nil, "delete", "checkpointstore", tn.store, "--wait=false")
	})
	tn.kubectl(nil, "-n", ns, "create", "secret", "generic", "lockstep-s3",
		"--from-literal=AWS_ACCESS_KEY_ID="+tn.s3.AccessKey, "--from-literal=AWS_SECRET_ACCESS_KEY="+tn.s3.SecretKey)
	tn.apply(fmt.Sprintf(`apiVersion: streaming.lockstep.dev/v1
kind: CheckpointStore
metadata: {name: %s}
spec:
  s3: {endpoint: %q, bucket: %s, region: %s}
  credentialsSecretName: lockstep-s3
  allowedNamespaces: [%s]
`, tn.store, tn.s3.URL, tn.s3.Bucket, tn.s3.Region, ns))
	return tn
}

// kubectl runs kubectl and fails the test on an error.
func (tn *tenant) kubectl(stdin []byte, args ...string) []byte {
	tn.t.Helper()
	out, err := tn.tryKubectl(stdin, args...)
	if err != nil {
		tn.t.Fatal(err)
	}
	return out
}

func (tn *tenant) tryKubectl(stdin []byte, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return tn.in.node.Kubectl(ctx, stdin, args...)
}

// apply is `kubectl apply -f -` of manifest in the tenant's namespace.
func (tn *tenant) apply(manifest string) {
	tn.t.Helper()
	tn.kubectl([]byte(manifest), "-n", tn.ns, "apply", "-f", "-")
}

// tryApply is apply returning kubectl's error (with its standard error) instead of failing.
func (tn *tenant) tryApply(manifest string) error {
	_, err := tn.tryKubectl([]byte(manifest), "-n", tn.ns, "apply", "-f", "-")
	return err
}

// tryRefusedApply is tryApply of a manifest the checkpoint forbids: the API server's refusal,
// or nil if it admitted the change. The webhook judges a change within a budget (3 s); when it
// cannot read the checkpoint within it, as on a machine so loaded that the API server takes
// seconds to return a Secret, it admits the change with a warning that it did not judge it,
// and the controller refuses it before the engine runs it (docs/kubernetes.md, "When the
// store is slow"). So the manifest first goes as a server-side dry run, which changes nothing,
// until the webhook judged it (untilJudged); then it is applied.
func (tn *tenant) tryRefusedApply(manifest string) error {
	tn.t.Helper()
	tn.untilJudged("kubectl apply --dry-run=server", func() (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := tn.in.node.KubectlCommand(ctx, "-n", tn.ns, "apply", "--dry-run=server", "-f", "-")
		cmd.Stdin = strings.NewReader(manifest)
		out, err := cmd.CombinedOutput()
		return string(out), err
	})
	return tn.tryApply(manifest)
}

// untilJudged runs try (a dry run of a change: kubectl's, terraform plan) again, 15 s apart
// and at most five times in all, while it succeeds with the webhook's warning that it admitted
// the change without judging it against the checkpoint, and returns the last run's output.
func (tn *tenant) untilJudged(what string, try func() (string, error)) (string, error) {
	tn.t.Helper()
	unjudged := func(out string) bool { // Terraform wraps a warning's lines
		return strings.Contains(strings.Join(strings.Fields(out), " "), "without being judged")
	}
	out, err := try()
	for n := 1; n < 5 && err == nil && unjudged(out); n++ {
		tn.t.Logf("%s was not judged against the checkpoint (try %d), again in 15 s:\n%s", what, n, out)
		time.Sleep(15 * time.Second)
		out, err = try()
	}
	return out, err
}

// query returns the query named name.
func (tn *tenant) query(name string) *v1.StreamingQuery {
	tn.t.Helper()
	var q v1.StreamingQuery
	if err := tn.in.c.Get(context.Background(), client.ObjectKey{Namespace: tn.ns, Name: name}, &q); err != nil {
		tn.t.Fatal(err)
	}
	return &q
}

// pods returns the engine pods of the query named name, oldest first.
func (tn *tenant) pods(name string) []corev1.Pod {
	tn.t.Helper()
	var list corev1.PodList
	if err := tn.in.c.List(context.Background(), &list, client.InNamespace(tn.ns), client.MatchingLabels{controller.LabelQuery: name}); err != nil {
		tn.t.Fatal(err)
	}
	sort.Slice(list.Items, func(i, j int) bool {
		return list.Items[i].CreationTimestamp.Before(&list.Items[j].CreationTimestamp)
	})
	return list.Items
}

// runningPod returns the query's one running engine pod whose engine container is ready,
// or an error saying what there is instead.
func (tn *tenant) runningPod(name string) (*corev1.Pod, error) {
	var running []corev1.Pod
	var seen []string
	for _, p := range tn.pods(name) {
		seen = append(seen, fmt.Sprintf("%s %s", p.Name, p.Status.Phase))
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && podReady(&p) {
			running = append(running, p)
		}
	}
	if len(running) != 1 {
		return nil, fmt.Errorf("%d ready engine pods, want 1 (pods: %v)", len(running), seen)
	}
	return &running[0], nil
}

// readyPod waits for the query's one ready engine pod and returns it. The status may show a
// committed batch before the kubelet has reported the pod ready.
func (tn *tenant) readyPod(name string) *corev1.Pod {
	tn.t.Helper()
	var pod *corev1.Pod
	tn.eventually("the engine pod of "+name+" is ready", func() (err error) {
		pod, err = tn.runningPod(name)
		return err
	})
	return pod
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// restarts is the number of container restarts of the engine in pod p.
func restarts(p *corev1.Pod) int32 {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == controller.EngineContainer {
			return cs.RestartCount
		}
	}
	return 0
}

// eventually polls check every second until it returns nil, failing the test with the
// last error after waitTimeout.
func (tn *tenant) eventually(what string, check func() error) {
	tn.t.Helper()
	tn.eventuallyWithin(waitTimeout, what, check)
}

func (tn *tenant) eventuallyWithin(timeout time.Duration, what string, check func() error) {
	tn.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tn.t.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
		time.Sleep(time.Second)
	}
}

// committed waits until the query's status shows batch `batch` (or a later one) committed,
// and returns the query.
func (tn *tenant) committed(name string, batch int64) *v1.StreamingQuery {
	tn.t.Helper()
	return tn.committedWithin(waitTimeout, name, batch)
}

// commitsMore waits until the query commits n batches after its latest committed one, and
// returns it as it then reads.
func (tn *tenant) commitsMore(name string, n int64) *v1.StreamingQuery {
	tn.t.Helper()
	return tn.committed(name, *tn.query(name).Status.LatestCommittedBatch+n)
}

// committedWithin is committed with its own bound (a spark query's first batch needs
// sparkStartTimeout on the loaded node).
func (tn *tenant) committedWithin(timeout time.Duration, name string, batch int64) *v1.StreamingQuery {
	tn.t.Helper()
	var q *v1.StreamingQuery
	tn.eventuallyWithin(timeout, fmt.Sprintf("query %s commits batch %d", name, batch), func() error {
		q = tn.query(name)
		if b := q.Status.LatestCommittedBatch; b == nil || *b < batch {
			return fmt.Errorf("latest committed batch %v; phase %s; conditions %s", ptrString(b), q.Status.Phase, conditions(q))
		}
		return nil
	})
	return q
}

func ptrString(p *int64) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprint(*p)
}

// conditions prints a query's conditions on one line.
func conditions(q *v1.StreamingQuery) string {
	var parts []string
	for _, c := range q.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s/%s(%q)", c.Type, c.Status, c.Reason, c.Message))
	}
	return strings.Join(parts, " ")
}

// location is an s3:// URL in the tenant's bucket.
func (tn *tenant) location(path string) string { return "s3://" + tn.s3.Bucket + "/" + path }

// put uploads an object to the tenant's bucket.
func (tn *tenant) put(key string, data []byte) {
	tn.t.Helper()
	_, err := tn.s3.Client(tn.t).PutObject(context.Background(), tn.s3.Bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{})
	if err != nil {
		tn.t.Fatal(err)
	}
}

// putOrders uploads a JSON-lines file of n orders o<first>..o<first+n-1> under landing/orders/.
func (tn *tenant) putOrders(file string, first, n int) {
	tn.t.Helper()
	var b bytes.Buffer
	for i := first; i < first+n; i++ {
		fmt.Fprintf(&b, `{"id":"o%d","amount":%d.5}`+"\n", i, i+1)
	}
	tn.put("landing/orders/"+file, b.Bytes())
}

// sinkRows reads the files sink at path (in the tenant's bucket) as readers must: through
// its manifest, so only committed batches count.
func (tn *tenant) sinkRows(path string) (v1.Columns, []engine.Row) {
	tn.t.Helper()
	folder, err := s3.OpenFolder("s3://"+tn.s3.Bucket+"/"+path, tn.s3.Options()...)
	if err != nil {
		tn.t.Fatal(err)
	}
	cols, rows, err := sink.ReadRows(context.Background(), folder)
	if err != nil {
		tn.t.Fatal(err)
	}
	return cols, rows
}

// diagnose is what explains a failure: the tenant's objects, pods, engine logs and events,
// and the controller's.
func (tn *tenant) diagnose() string {
	var b strings.Builder
	for _, args := range [][]string{
		{"-n", tn.ns, "get", "streamingqueries,deployments,jobs,pods", "-o", "wide"},
		{"-n", tn.ns, "get", "streamingqueries", "-o", "yaml"},
		{"-n", tn.ns, "describe", "pods"},
		{"-n", tn.ns, "logs", "-l", controller.LabelQuery, "--tail=30", "--prefix", "--all-containers"},
		{"-n", tn.ns, "get", "events", "--sort-by=.lastTimestamp"},
		{"-n", controllerNamespace, "logs", "deployment/" + controllerDeployment, "--tail=30"},
	} {
		out, err := tn.tryKubectl(nil, args...)
		fmt.Fprintf(&b, "--- kubectl %s\n%s", strings.Join(args, " "), out)
		if err != nil {
			fmt.Fprintf(&b, "(%v)\n", err)
		}
	}
	return b.String()
}

// TestTenantReadsTheStores: a tenant with the built-in edit role in its namespace, and nothing
// cluster-wide, reads the CheckpointStores it is told to use (`kubectl get ckpts`), as the
// installation grants every authenticated user, and cannot change them; it runs a query on one.
func TestTenantReadsTheStores(t *testing.T) {
	t.Parallel()
	tn := newTenant(t)
	user := "tenant-of-" + tn.ns
	tn.kubectl(nil, "-n", tn.ns, "create", "rolebinding", "team-edit", "--clusterrole=edit", "--user="+user)
	as := "--as=" + user
	if out, err := tn.tryKubectl(nil, as, "get", "ckpts", tn.store, "-o", "name"); err != nil || !strings.Contains(string(out), tn.store) {
		t.Errorf("kubectl %s get ckpts %s = %q, %v; want the store", as, tn.store, out, err)
	}
	if out, err := tn.tryKubectl(nil, as, "get", "ckpts"); err != nil {
		t.Errorf("kubectl %s get ckpts = %q, %v; want the list", as, out, err)
	}
	for _, verb := range [][]string{
		{"delete", "ckpts", tn.store, "--dry-run=server"},
		{"label", "ckpts", tn.store, "team=mine", "--dry-run=server"},
	} {
		out, err := tn.tryKubectl(nil, append([]string{as}, verb...)...)
		if err == nil || !strings.Contains(string(out)+err.Error(), "forbidden") {
			t.Errorf("kubectl %s %v = %q, %v; want forbidden", as, verb, out, err)
		}
	}
	tn.putOrders("0000.json", 0, 2)
	q := strings.Replace(tn.filesQuery("orders", "{availableNow: true}", 0), "metadata: {name: orders}", "metadata: {name: orders, namespace: "+tn.ns+"}", 1)
	if _, err := tn.tryKubectl([]byte(q), as, "apply", "-f", "-"); err != nil {
		t.Fatalf("the tenant's kubectl apply of a query on the store: %v", err)
	}
	tn.committed("orders", 0)
}
