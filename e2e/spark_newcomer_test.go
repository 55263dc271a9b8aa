//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/controller"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// sparkStartTimeout bounds a spark query's start on the loaded 2-core node: the driver's JVM,
// its executors' pods and JVMs, and the first batch (4 to 7 minutes were seen).
const sparkStartTimeout = 15 * time.Minute

// sparkKafkaQuery is a spark query, Kafka (the topic orders of broker) → Delta on the
// tenant's bucket (tables/NAME) as TestSparkOnKubernetes runs, sized by sizing: lines under
// spec.runtime.spark, "" for the defaults. Its JVMs run with the tests' options, which cost a
// short query less CPU.
func (tn *tenant) sparkKafkaQuery(name, broker, sizing string) string {
	return fmt.Sprintf(`apiVersion: streaming.lockstep.dev/v1
kind: StreamingQuery
metadata: {name: %s}
spec:
  runtime:
    spark:
%s      conf:
        spark.driver.extraJavaOptions: "`+testenv.TestJavaOptions+`"
        spark.executor.extraJavaOptions: "`+testenv.TestJavaOptions+`"
`+testenv.TestSparkConf("        %s: %q\n")+`  sources:
  - name: orders
    kafka: {bootstrapServers: [%q], topics: [orders], startingOffsets: earliest, format: json}
    schema: {columns: [{name: id, type: long}]}
  sink:
    delta: {path: %s}
  outputMode: append
  trigger: {processingTime: 2s}
  checkpoint: {store: %s}
  engine: {progressTimeout: 15m}
`, name, sizing, broker, tn.location("tables/"+name), tn.store)
}

// ordersBroker starts the test's Kafka broker on the node's address, with the topic orders
// (two partitions), and returns its address and a function that produces n more records.
func (tn *tenant) ordersBroker() (string, func(n int)) {
	tn.t.Helper()
	ctx := context.Background()
	broker := testenv.KafkaProcessAt(tn.t, tn.in.node.IP).Addr
	kc, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.DefaultProduceTopic("orders"))
	if err != nil {
		tn.t.Fatal(err)
	}
	tn.t.Cleanup(kc.Close)
	if _, err := kadm.NewClient(kc).CreateTopic(ctx, 2, 1, nil, "orders"); err != nil {
		tn.t.Fatal(err)
	}
	produced := 0
	return broker, func(n int) {
		tn.t.Helper()
		var recs []*kgo.Record
		for i := produced; i < produced+n; i++ {
			recs = append(recs, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: fmt.Appendf(nil, `{"id":%d}`, i)})
		}
		if err := kc.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			tn.t.Fatal(err)
		}
		produced += n
	}
}

// unschedulable returns nil when the query is Pending because the scheduler cannot place
// its pods, with the scheduler's reason and says in the Ready condition's message.
func (tn *tenant) unschedulable(name, says string) error {
	q := tn.query(name)
	c := meta.FindStatusCondition(q.Status.Conditions, v1.ConditionReady)
	if q.Status.Phase != v1.PhasePending || c == nil || c.Reason != v1.ReasonUnschedulable ||
		!strings.Contains(c.Message, says) || !strings.Contains(c.Message, "Insufficient cpu") {
		return fmt.Errorf("phase %s; conditions %s", q.Status.Phase, conditions(q))
	}
	return nil
}

// TestSparkSizesOnASmallNode: a spark query that sizes nothing schedules on the 2-core node
// (its driver and executor request a quarter of a core each) and commits batches; one whose
// driver, or whose executors, ask for more than the node has reads Pending, its Ready
// condition Unschedulable with the scheduler's reason.
func TestSparkSizesOnASmallNode(t *testing.T) {
	t.Parallel()
	tn := newTenant(t)
	useSpark(t, tn.in)
	broker, produce := tn.ordersBroker()
	produce(10)
	tn.apply(tn.sparkKafkaQuery("fits", broker, ""))
	tn.apply(tn.sparkKafkaQuery("big-driver", broker, "      driver: {cores: 64}\n"))
	tn.apply(tn.sparkKafkaQuery("big-executors", broker, "      executor: {cores: 64}\n"))

	tn.eventually("the query whose driver asks for 64 cores reads Pending with the scheduler's reason", func() error {
		return tn.unschedulable("big-driver", "The engine cannot be scheduled: pod big-driver-")
	})
	tn.kubectl(nil, "-n", tn.ns, "delete", "sq", "big-driver", "--wait=false")

	tn.eventuallyWithin(sparkStartTimeout, "the query with the default sizes runs its driver and executor", func() error {
		d, seenD := tn.sparkPods("fits", "engine")
		e, seenE := tn.sparkPods("fits", controller.ComponentSparkExecutor)
		if len(d) != 1 || len(e) != 1 {
			return fmt.Errorf("driver pods: %s; executor pods: %s; conditions %s", seenD, seenE, conditions(tn.query("fits")))
		}
		for _, p := range []corev1.Pod{d[0], e[0]} {
			if cpu := p.Spec.Containers[0].Resources.Requests.Cpu(); cpu.Cmp(resource.MustParse("250m")) != 0 {
				t.Errorf("pod %s requests %s cpu, want the default 250m", p.Name, cpu)
			}
		}
		return nil
	})
	tn.eventuallyWithin(sparkStartTimeout, "the query with the default sizes commits a batch", func() error {
		q := tn.query("fits")
		if q.Status.LatestCommittedBatch == nil || q.Status.Phase != v1.PhaseRunning {
			return fmt.Errorf("latest committed batch %s; phase %s; conditions %s", ptrString(q.Status.LatestCommittedBatch), q.Status.Phase, conditions(q))
		}
		return nil
	})
	tn.kubectl(nil, "-n", tn.ns, "delete", "sq", "fits", "--wait=false")

	tn.eventuallyWithin(sparkStartTimeout, "the query whose executors ask for 64 cores reads Pending with the scheduler's reason", func() error {
		return tn.unschedulable("big-executors", "No executor can be scheduled, so no batch runs: executor pod big-executors-exec-")
	})
}

// TestSparkDriverRestartCleansExecutors: when the driver's container is killed and restarts
// in the same pod, the new application asks for executors of its own; the dead
// application's, which Spark leaves behind (owned by the driver pod, Completed), are deleted
// by the controller once the new application runs, and the query reads on.
func TestSparkDriverRestartCleansExecutors(t *testing.T) {
	t.Parallel()
	tn := newTenant(t)
	useSpark(t, tn.in)
	ctx := context.Background()
	broker, produce := tn.ordersBroker()
	produce(10)
	tn.apply(tn.sparkKafkaQuery("orders", broker, "      instances: 2\n"))

	var driver corev1.Pod
	var old []corev1.Pod
	tn.eventuallyWithin(sparkStartTimeout, "the driver and both executors run", func() error {
		d, seenD := tn.sparkPods("orders", "engine")
		e, seenE := tn.sparkPods("orders", controller.ComponentSparkExecutor)
		if len(d) != 1 || len(e) != 2 {
			return fmt.Errorf("driver pods: %s; executor pods: %s; conditions %s", seenD, seenE, conditions(tn.query("orders")))
		}
		driver, old = d[0], e
		return nil
	})
	var before int64
	tn.eventuallyWithin(sparkStartTimeout, "the query commits a batch", func() error {
		q := tn.query("orders")
		if q.Status.LatestCommittedBatch == nil {
			return fmt.Errorf("no batch committed; phase %s; conditions %s", q.Status.Phase, conditions(q))
		}
		before = *q.Status.LatestCommittedBatch
		return nil
	})
	deadApp := old[0].Labels["spark-app-selector"]
	if deadApp == "" {
		t.Fatalf("executor %s has no spark-app-selector label: %v", old[0].Name, old[0].Labels)
	}

	// The driver's container killed, as a crash would: the pod stays and the kubelet
	// restarts the container in it, a new JVM and so a new Spark application.
	kill, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := tn.in.node.KillContainer(kill, tn.ns, driver.Name, controller.EngineContainer); err != nil {
		t.Fatal(err)
	}
	produce(10)
	tn.eventuallyWithin(sparkStartTimeout, "the new application runs two executors, and the dead one's are gone", func() error {
		var p corev1.Pod
		if err := tn.in.c.Get(ctx, client.ObjectKey{Namespace: tn.ns, Name: driver.Name}, &p); err != nil {
			return fmt.Errorf("the driver pod: %w", err)
		}
		if p.UID != driver.UID || restarts(&p) == 0 {
			return fmt.Errorf("driver pod %s restarted its container %d times, want it restarted in the same pod", p.Name, restarts(&p))
		}
		var all corev1.PodList
		if err := tn.in.c.List(ctx, &all, client.InNamespace(tn.ns),
			client.MatchingLabels{controller.LabelQuery: "orders", controller.LabelComponent: controller.ComponentSparkExecutor}); err != nil {
			return err
		}
		var seen []string
		left, running := 0, 0
		for _, e := range all.Items {
			seen = append(seen, fmt.Sprintf("%s %s app %s", e.Name, e.Status.Phase, e.Labels["spark-app-selector"]))
			if slices.ContainsFunc(old, func(o corev1.Pod) bool { return o.UID == e.UID }) {
				left++
			} else if e.Labels["spark-app-selector"] != deadApp && e.Status.Phase == corev1.PodRunning && podReady(&e) {
				running++
			}
		}
		if left > 0 || running != 2 {
			return fmt.Errorf("%d of the dead application's executors left, %d of the new one's running: %s", left, running, strings.Join(seen, ", "))
		}
		return nil
	})
	tn.eventuallyWithin(sparkStartTimeout, "the restarted driver commits a batch of the records produced since", func() error {
		q := tn.query("orders")
		if b := q.Status.LatestCommittedBatch; b == nil || *b <= before {
			return fmt.Errorf("latest committed batch %s, want one after %d; phase %s; conditions %s", ptrString(b), before, q.Status.Phase, conditions(q))
		}
		return nil
	})
}
