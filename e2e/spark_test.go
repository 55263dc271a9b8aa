//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/controller"
	"github.com/lockstep-dev/lockstep/engine/delta/deltatest"
	"github.com/lockstep-dev/lockstep/engine/spark/sparkimage"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// sparkImage is Lockstep's Spark image, built from the checkout and the tools cache and
// imported into the node's containerd once per test binary.
var sparkImage struct {
	once sync.Once
	err  error
}

// sparkTurns lets at most two Spark queries run on the node at once. Each is two or three
// JVMs (a driver, its executors) that start, plan and compile for a CPU-minute or more; five
// at once on a busy 2-core node shared the CPU so thinly that a query's first batch took
// minutes and a test ran out of its time while waiting for the others, not for its own
// query. A test's clocks start when it has its turn.
var sparkTurns = make(chan struct{}, 2)

// useSpark readies the node for a Spark query: it imports the Spark image (once per test
// binary), then waits for a turn, which the test keeps until it ends.
func useSpark(t *testing.T, in *install) {
	t.Helper()
	sparkImage.once.Do(func() {
		start := time.Now()
		dir, err := os.MkdirTemp("", "lockstep-spark-image-")
		if err != nil {
			sparkImage.err = err
			return
		}
		defer os.RemoveAll(dir)
		out := filepath.Join(dir, "lockstep-spark.tar")
		ctx, cancel := context.WithTimeout(context.Background(), installTimeout)
		defer cancel()
		if _, err := sparkimage.Write(ctx, sparkimage.Options{Root: repoRoot(), Ref: sparkImageRef, Version: version, Out: out}); err != nil {
			sparkImage.err = err
			return
		}
		sparkImage.err = in.node.ImportImage(out)
		t.Logf("e2e: Spark image %s built and imported in %s", sparkImageRef, time.Since(start).Round(time.Second))
	})
	if sparkImage.err != nil {
		t.Fatal(sparkImage.err)
	}
	start := time.Now()
	sparkTurns <- struct{}{}
	t.Cleanup(func() { <-sparkTurns })
	if waited := time.Since(start); waited > time.Second {
		t.Logf("e2e: waited %s for a turn to run a Spark query", waited.Round(time.Second))
	}
}

// sparkPods returns the query's pods of a component (the driver's "engine", or
// controller.ComponentSparkExecutor) that are running and ready, and a description of all.
func (tn *tenant) sparkPods(name, component string) ([]corev1.Pod, string) {
	tn.t.Helper()
	var list corev1.PodList
	if err := tn.in.c.List(context.Background(), &list, client.InNamespace(tn.ns),
		client.MatchingLabels{controller.LabelQuery: name, controller.LabelComponent: component}); err != nil {
		tn.t.Fatal(err)
	}
	var ready []corev1.Pod
	var seen []string
	for _, p := range list.Items {
		seen = append(seen, fmt.Sprintf("%s %s", p.Name, p.Status.Phase))
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && podReady(&p) {
			ready = append(ready, p)
		}
	}
	return ready, strings.Join(seen, ", ")
}

// TestSparkOnKubernetes runs a spark query with two executors, Kafka (a real broker) →
// Delta on versitygw: the driver and both executors run as pods; the status shows committed
// batches and the executors; the engine port serves Lockstep's and Spark's metrics; a
// deleted executor is replaced and nothing is lost; a deleted driver takes its executors
// with it and its successor resumes with the same query id; an allowed change (the executor
// count) rolls the driver; a refused one (the state partitions the checkpoint pins) is
// refused by kubectl apply and by terraform plan; suspend removes the driver and its
// executors and resume reads on with the same query id; deleted and created again over its
// retained checkpoint it reads on with the same query id; the Delta table, read by DuckDB,
// holds every record once; deleting the query leaves no pod, service, role or account
// behind.
func TestSparkOnKubernetes(t *testing.T) {
	t.Parallel()
	tn := newTenant(t)
	useSpark(t, tn.in)
	ctx := context.Background()

	broker := testenv.KafkaProcessAt(t, tn.in.node.IP).Addr
	kc, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.DefaultProduceTopic("orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	if _, err := kadm.NewClient(kc).CreateTopic(ctx, 2, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	produced := 0
	produce := func(n int) {
		t.Helper()
		var recs []*kgo.Record
		for i := produced; i < produced+n; i++ {
			recs = append(recs, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: fmt.Appendf(nil, `{"id":%d}`, i)})
		}
		if err := kc.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		produced += n
	}
	caughtUp := func(what string) {
		t.Helper()
		tn.eventuallyWithin(10*time.Minute, what, func() error {
			q := tn.query("orders")
			if q.Status.Lag == nil || *q.Status.Lag != 0 || q.Status.LastProgress == nil {
				return fmt.Errorf("lag %s, batch %s; phase %s; conditions %s", ptrString(q.Status.Lag), ptrString(q.Status.LatestCommittedBatch), q.Status.Phase, conditions(q))
			}
			var read int64
			for _, s := range q.Status.Sources {
				read += sumOffsets(s.Offsets)
			}
			if read != int64(produced) {
				return fmt.Errorf("the status's end offsets add up to %d records, want %d", read, produced)
			}
			return nil
		})
	}

	// manifest is the query with its executor count, state partitions and suspend. Its
	// progress timeout counts the driver's start (a JVM, executor pods) and first batch,
	// which take more than the default 5 minutes on a 2-core machine loaded by other tests.
	manifest := func(instances, partitions int, suspend bool) string {
		return fmt.Sprintf(`apiVersion: streaming.lockstep.dev/v1
kind: StreamingQuery
metadata: {name: orders}
spec:
%s  sources:
  - name: orders
    kafka: {bootstrapServers: [%q], topics: [orders], startingOffsets: earliest, format: json}
    schema: {columns: [{name: id, type: long}]}
  sink:
    delta: {path: %s}
  outputMode: append
  trigger: {processingTime: 2s}
  stateStore: {partitions: %d}
  suspend: %t
  checkpoint: {store: %s}
  resources: {requests: {cpu: 100m, memory: 1280Mi}, limits: {memory: 1280Mi}}
  engine: {progressTimeout: 15m}
`, sparkOnASmallNode(instances), broker, tn.location("tables/orders"), partitions, suspend, tn.store)
	}

	produce(40)
	tn.apply(manifest(2, 8, false))

	var driver corev1.Pod
	var executors []corev1.Pod
	tn.eventuallyWithin(10*time.Minute, "the driver and both executors run", func() error {
		d, seenD := tn.sparkPods("orders", "engine")
		e, seenE := tn.sparkPods("orders", controller.ComponentSparkExecutor)
		if len(d) != 1 || len(e) != 2 {
			return fmt.Errorf("driver pods: %s; executor pods: %s", seenD, seenE)
		}
		driver, executors = d[0], e
		return nil
	})
	for _, e := range executors {
		if owner := metav1OwnerName(e); owner != driver.Name {
			t.Errorf("executor %s is owned by %q, want the driver pod %s", e.Name, owner, driver.Name)
		}
		// spark.executor.extraJavaOptions (the tests' JVM options, which cost a short query much
		// less CPU) reaches the executor's JVM as SPARK_JAVA_OPT_n, one option each.
		for _, o := range v1.JavaOptions(testenv.TestJavaOptions) {
			if !slices.ContainsFunc(e.Spec.Containers[0].Env, func(v corev1.EnvVar) bool {
				return strings.HasPrefix(v.Name, "SPARK_JAVA_OPT_") && v.Value == o
			}) {
				t.Errorf("executor %s's environment lacks %s of spark.executor.extraJavaOptions: %v", e.Name, o, e.Spec.Containers[0].Env)
			}
		}
	}
	// The driver's first job on the loaded node: JVMs, executors registering, the first batch.
	q := tn.committedWithin(sparkStartTimeout, "orders", 0)
	id := q.Status.QueryID
	tn.eventually("the status counts 2 of 2 executors", func() error {
		if e := tn.query("orders").Status.Executors; e == nil || e.Summary != "2/2" {
			return fmt.Errorf("status.executors = %+v", e)
		}
		return nil
	})
	if out := string(tn.kubectl(nil, "-n", tn.ns, "get", "sq", "orders")); !strings.Contains(out, "2/2") {
		t.Errorf("kubectl get sq:\n%s\nwant the Executors column at 2/2", out)
	}
	caughtUp("the first records are read")

	// The engine port (the PodMonitor's) serves the query's metrics and Spark's: the
	// driver's, and each executor's as its heartbeats report them.
	tn.eventually("the driver's /metrics holds Lockstep's and Spark's metrics", func() error {
		out, err := tn.tryKubectl(nil, "get", "--raw", fmt.Sprintf("/api/v1/namespaces/%s/pods/%s:%d/proxy/metrics", tn.ns, driver.Name, controller.HealthPort))
		if err != nil {
			return err
		}
		for _, want := range []string{
			`lockstep_batches_committed_total{namespace="` + tn.ns + `",query="orders"}`,
			`lockstep_source_lag_records{namespace="` + tn.ns + `",query="orders",source="orders"} 0`,
			`lockstep_spark_metrics_up{namespace="` + tn.ns + `",query="orders"} 1`,
			"metrics_spark_driver_BlockManager_memory_",
			`executor_id="1"`, `executor_id="2"`,
		} {
			if !strings.Contains(string(out), want) {
				return fmt.Errorf("/metrics lacks %s", want)
			}
		}
		return nil
	})

	// An executor lost: Spark asks for another and reruns its tasks.
	tn.kubectl(nil, "-n", tn.ns, "delete", "pod", executors[0].Name, "--wait=false")
	produce(40)
	tn.eventuallyWithin(10*time.Minute, "a new executor replaces the deleted one", func() error {
		e, seen := tn.sparkPods("orders", controller.ComponentSparkExecutor)
		if len(e) != 2 || slices.ContainsFunc(e, func(p corev1.Pod) bool { return p.UID == executors[0].UID }) {
			return fmt.Errorf("executor pods: %s", seen)
		}
		return nil
	})
	caughtUp("the records produced after an executor was lost are read")

	// The driver lost: its executors go with it; a new driver resumes the checkpoint.
	tn.kubectl(nil, "-n", tn.ns, "delete", "pod", driver.Name, "--wait=false")
	produce(40)
	tn.eventuallyWithin(10*time.Minute, "a new driver with new executors", func() error {
		d, seenD := tn.sparkPods("orders", "engine")
		e, seenE := tn.sparkPods("orders", controller.ComponentSparkExecutor)
		if len(d) != 1 || d[0].UID == driver.UID || len(e) != 2 {
			return fmt.Errorf("driver pods: %s; executor pods: %s", seenD, seenE)
		}
		for _, p := range e {
			if metav1OwnerName(p) != d[0].Name {
				return fmt.Errorf("executor %s still belongs to %s", p.Name, metav1OwnerName(p))
			}
		}
		driver = d[0]
		return nil
	})
	caughtUp("the new driver reads on")
	if got := tn.query("orders").Status.QueryID; got != id {
		t.Errorf("query id %s after the driver was replaced, want %s", got, id)
	}

	// An allowed change (the executor count) rolls the driver: a new driver with one
	// executor resumes the checkpoint.
	tn.apply(manifest(1, 8, false))
	produce(40)
	tn.eventuallyWithin(10*time.Minute, "the change of executors rolls the driver", func() error {
		d, seenD := tn.sparkPods("orders", "engine")
		e, seenE := tn.sparkPods("orders", controller.ComponentSparkExecutor)
		if len(d) != 1 || d[0].UID == driver.UID || len(e) != 1 || metav1OwnerName(e[0]) != d[0].Name {
			return fmt.Errorf("driver pods: %s; executor pods: %s", seenD, seenE)
		}
		return nil
	})
	tn.eventually("the status counts 1 of 1 executor", func() error {
		if e := tn.query("orders").Status.Executors; e == nil || e.Summary != "1/1" {
			return fmt.Errorf("status.executors = %+v", e)
		}
		return nil
	})
	caughtUp("the rolled driver reads on")

	// A refused change (the state partitions the checkpoint pins): kubectl apply and
	// terraform plan refuse it, naming the rule.
	if err := tn.tryRefusedApply(manifest(1, 16, false)); err == nil || !strings.Contains(err.Error(), "spec.stateStore.partitions") {
		t.Errorf("kubectl apply of other state partitions: %v, want a refusal naming spec.stateStore.partitions", err)
	}
	if p := tn.query("orders").Spec.StateStore.Partitions; p != 8 {
		t.Errorf("state partitions after the refused apply = %d, want 8", p)
	}
	tf := newTerraform(t, tn.in.node.Kubeconfig, tn.ns)
	tfQuery := func(partitions int) string {
		return fmt.Sprintf(`
resource "lockstep_streaming_query" "orders" {
  name = "orders"
  runtime = {
    spark = {
      driver    = { cores = 1, memory = "640Mi" }
      executor  = { cores = 1, memory = "512Mi" }
      instances = 1
      conf = {
        "spark.kubernetes.executor.request.cores" = "100m"
        "spark.driver.extraJavaOptions"           = "`+testenv.TestJavaOptions+`"
        "spark.executor.extraJavaOptions"         = "`+testenv.TestJavaOptions+`"
`+testenv.TestSparkConf("        %q = %q\n")+`      }
    }
  }
  sources = [{
    name   = "orders"
    kafka  = { bootstrap_servers = [%q], topics = ["orders"], starting_offsets = "earliest", format = "json" }
    schema = { columns = [{ name = "id", type = "long" }] }
  }]
  sink        = { delta = { path = %q } }
  output_mode = "append"
  trigger     = { processing_time = "2s" }
  state_store = { partitions = %d }
  checkpoint  = { store = %q }
  resources   = { requests = { cpu = "100m", memory = "1280Mi" }, limits = { memory = "1280Mi" } }
  engine      = { progress_timeout = "15m" }
}
`, broker, tn.location("tables/orders"), partitions, tn.store)
	}
	tf.write(tfQuery(8))
	tf.Must("init", "-input=false")
	tf.Must("import", "-input=false", "-lock=false", "lockstep_streaming_query.orders", tn.ns+"/orders")
	tf.write(tfQuery(16))
	// The plan's dry run, like kubectl's (tryRefusedApply), is admitted unjudged when the
	// webhook cannot read the checkpoint in time; the plan then warns so, and is tried again.
	out, err := tn.untilJudged("terraform plan", func() (string, error) { return tf.Run("plan", "-input=false", "-lock=false") })
	if err == nil || !strings.Contains(out, "state-partitions") {
		t.Errorf("terraform plan of other state partitions: %v, want a refusal naming the rule state-partitions:\n%s", err, out)
	}
	tf.Must("state", "rm", "-lock=false", "lockstep_streaming_query.orders") // the query stays kubectl's

	// Suspend: the driver and its executors go; resume: a new driver reads what was
	// produced meanwhile, with the same query id.
	tn.apply(manifest(1, 8, true))
	tn.eventuallyWithin(5*time.Minute, "the suspended query has no pod", func() error {
		q := tn.query("orders")
		var pods corev1.PodList
		if err := tn.in.c.List(ctx, &pods, client.InNamespace(tn.ns), client.MatchingLabels{controller.LabelQuery: "orders"}); err != nil {
			return err
		}
		if q.Status.Phase != v1.PhaseSuspended || len(pods.Items) > 0 {
			return fmt.Errorf("phase %s, %d pods", q.Status.Phase, len(pods.Items))
		}
		return nil
	})
	produce(40)
	tn.apply(manifest(1, 8, false))
	tn.eventuallyWithin(10*time.Minute, "the resumed query runs a driver and its executor", func() error {
		d, seenD := tn.sparkPods("orders", "engine")
		e, seenE := tn.sparkPods("orders", controller.ComponentSparkExecutor)
		if len(d) != 1 || len(e) != 1 {
			return fmt.Errorf("driver pods: %s; executor pods: %s", seenD, seenE)
		}
		return nil
	})
	caughtUp("the resumed query reads what was produced while it was suspended")
	if got := tn.query("orders").Status.QueryID; got != id {
		t.Errorf("query id %s after suspend and resume, want %s", got, id)
	}

	// Deleted with its checkpoint retained and created again (a new UID): the same query,
	// by the one ownership rule of both runtimes, so the new driver continues the checkpoint.
	tn.recreate("orders", manifest(1, 8, false))
	produce(40)
	caughtUp("the query created again reads on")
	if got := tn.query("orders").Status.QueryID; got != id {
		t.Errorf("query id %s after the query was created again, want %s", got, id)
	}

	// The table, read by DuckDB: every record once.
	ids := tn.deltaIDs("tables/orders")
	want := make([]int64, produced)
	for i := range want {
		want[i] = int64(i)
	}
	if !slices.Equal(ids, want) {
		t.Errorf("the Delta table holds %d rows, want ids 0..%d once each; got %v", len(ids), produced-1, ids)
	}

	// Uninstall: the query goes, and everything it made with it.
	tn.kubectl(nil, "-n", tn.ns, "delete", "sq", "orders", "--timeout=5m")
	tn.eventuallyWithin(5*time.Minute, "nothing of the query is left", func() error {
		var pods corev1.PodList
		if err := tn.in.c.List(ctx, &pods, client.InNamespace(tn.ns), client.MatchingLabels{controller.LabelQuery: "orders"}); err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("%d pods left", len(pods.Items))
		}
		var svcs corev1.ServiceList
		if err := tn.in.c.List(ctx, &svcs, client.InNamespace(tn.ns)); err != nil {
			return err
		}
		if len(svcs.Items) > 0 {
			return fmt.Errorf("%d services left", len(svcs.Items))
		}
		key := client.ObjectKey{Namespace: tn.ns, Name: controller.SparkAccountName("orders")}
		for _, obj := range []client.Object{&corev1.ServiceAccount{}, &rbacv1.Role{}, &rbacv1.RoleBinding{}} {
			if err := tn.in.c.Get(ctx, key, obj); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%T %s is left (%v)", obj, key.Name, err)
			}
		}
		return nil
	})
}

// sumOffsets adds up the partition offsets of Spark's Kafka offsets ({"orders":{"0":12,"1":9}}).
func sumOffsets(raw string) int64 {
	var total int64
	for _, part := range strings.Split(raw, ",") {
		if i := strings.LastIndex(part, ":"); i >= 0 {
			n, err := strconv.ParseInt(strings.Trim(part[i+1:], "}{ \n"), 10, 64)
			if err == nil {
				total += n
			}
		}
	}
	return total
}

func metav1OwnerName(p corev1.Pod) string {
	for _, o := range p.OwnerReferences {
		if o.Kind == "Pod" {
			return o.Name
		}
	}
	return ""
}

// deltaIDs downloads the Delta table at path in the tenant's bucket and reads its id column
// with DuckDB, sorted.
func (tn *tenant) deltaIDs(path string) []int64 {
	tn.t.Helper()
	dir := tn.t.TempDir()
	c := tn.s3.Client(tn.t)
	ctx := context.Background()
	for obj := range c.ListObjects(ctx, tn.s3.Bucket, minio.ListObjectsOptions{Prefix: path + "/", Recursive: true}) {
		if obj.Err != nil {
			tn.t.Fatal(obj.Err)
		}
		local := filepath.Join(dir, strings.TrimPrefix(obj.Key, path+"/"))
		if err := c.FGetObject(ctx, tn.s3.Bucket, obj.Key, local, minio.GetObjectOptions{}); err != nil {
			tn.t.Fatal(err)
		}
	}
	view := deltatest.ReadWithDuckDB(tn.t, dir)
	col := slices.IndexFunc(view.Columns, func(c struct {
		Name string `json:"name"`
		Type string `json:"type"`
	}) bool {
		return c.Name == "id"
	})
	if col < 0 {
		tn.t.Fatalf("the Delta table has no id column: %+v", view.Columns)
	}
	var ids []int64
	for _, r := range view.Rows {
		if r[col] == nil {
			tn.t.Fatalf("a row with a null id: %v", r)
		}
		n, err := strconv.ParseInt(*r[col], 10, 64)
		if err != nil {
			tn.t.Fatal(err)
		}
		ids = append(ids, n)
	}
	slices.Sort(ids)
	return ids
}
