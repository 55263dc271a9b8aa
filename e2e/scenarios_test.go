//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/controller"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// filesQuery is a files → files query on the tenant's bucket: JSON orders under
// landing/orders, one file a batch, the rows with amount > filter to out/NAME as JSON.
func (tn *tenant) filesQuery(name, trigger string, filter float64) string {
	return fmt.Sprintf(`apiVersion: streaming.lockstep.dev/v1
kind: StreamingQuery
metadata: {name: %s}
spec:
  sources:
  - name: orders
    files: {path: %s, format: json, maxFilesPerTrigger: 1}
    schema: {columns: [{name: id, type: string}, {name: amount, type: double}]}
  transform:
  - filter: "amount > %.1f"
  sink:
    files: {path: %s, format: json}
  outputMode: append
  trigger: %s
  checkpoint: {store: %s}
`, name, tn.location("landing/orders"), filter, tn.location("out/"+name), trigger, tn.store)
}

// rateQuery is a rate → files query: value counts from 0 at rowsPerSecond, every row to
// out/NAME, a batch a second. filter is a CEL condition on value.
func (tn *tenant) rateQuery(name, filter string, suspend bool) string {
	return fmt.Sprintf(`apiVersion: streaming.lockstep.dev/v1
kind: StreamingQuery
metadata: {name: %s}
spec:
  sources:
  - name: ticks
    rate: {rowsPerSecond: 20}
  transform:
  - filter: %q
  sink:
    files: {path: %s, format: json}
  outputMode: append
  trigger: {processingTime: 1s}
  checkpoint: {store: %s}
  suspend: %t
`, name, filter, tn.location("out/"+name), tn.store, suspend)
}

// values returns the "value" column of the rows of a files sink, sorted.
func (tn *tenant) values(path string) []int64 {
	tn.t.Helper()
	cols, rows := tn.sinkRows(path)
	idx := -1
	for i, c := range cols {
		if c.Name == "value" {
			idx = i
		}
	}
	if idx < 0 {
		tn.t.Fatalf("sink %s has no value column: %v", path, cols)
	}
	var out []int64
	for _, r := range rows {
		switch v := r[idx].(type) {
		case int64:
			out = append(out, v)
		case float64:
			out = append(out, int64(v))
		case json.Number:
			n, err := v.Int64()
			if err != nil {
				tn.t.Fatal(err)
			}
			out = append(out, n)
		default:
			tn.t.Fatalf("value %v is a %T", r[idx], r[idx])
		}
	}
	slices.Sort(out)
	return out
}

// contiguous checks that values are exactly 0..len-1: no row lost, none written twice.
func contiguous(values []int64) error {
	for i, v := range values {
		if v != int64(i) {
			if i > 0 && v == values[i-1] {
				return fmt.Errorf("value %d written twice (%d rows)", v, len(values))
			}
			return fmt.Errorf("value %d missing: row %d is %d (%d rows)", i, i, v, len(values))
		}
	}
	return nil
}

// TestQueryRunsInPod: a query applied with kubectl runs as an engine pod on the node; its
// status shows the committed batches, the lag and the guarantee, and the sink holds each
// input row once. Its memory limit becomes the engine's soft memory limit.
func TestQueryRunsInPod(t *testing.T) {
	t.Parallel()
	tn := newTenant(t)
	for i := range 3 {
		tn.putOrders(fmt.Sprintf("%04d.json", i), 4*i, 4)
	}
	tn.apply(tn.filesQuery("orders", "{processingTime: 1s}", 0) + "  resources: {limits: {memory: 512Mi}}\n")
	q := tn.committed("orders", 2)
	tn.eventually("the query is Ready, with no lag left", func() error {
		q = tn.query("orders")
		if q.Status.Phase != v1.PhaseRunning || q.Status.Lag == nil || *q.Status.Lag != 0 {
			return fmt.Errorf("phase %s, lag %s; conditions %s", q.Status.Phase, ptrString(q.Status.Lag), conditions(q))
		}
		return nil
	})
	if q.Status.Guarantee != v1.GuaranteeExactlyOnce || q.Status.GuaranteeReason == "" {
		t.Errorf("guarantee %q (%q), want exactly-once with its reason", q.Status.Guarantee, q.Status.GuaranteeReason)
	}
	if q.Status.QueryID == "" || q.Status.LastProgress == nil || len(q.Status.Sources) != 1 {
		t.Errorf("status = %+v, want the query id, the last progress and the source's offsets", q.Status)
	}
	pod := tn.readyPod("orders")
	if pod.Spec.NodeName != tn.in.node.Name {
		t.Errorf("engine pod on node %q, want %q", pod.Spec.NodeName, tn.in.node.Name)
	}
	// The engine read the container's cgroup limit (internal/gctune): 90% of 512 MiB.
	if logs := string(tn.kubectl(nil, "-n", tn.ns, "logs", pod.Name, "-c", controller.EngineContainer)); !strings.Contains(logs,
		"GC percent 200, memory limit 460 MiB (90% of the container's 512 MiB)") {
		t.Errorf("the engine did not set its memory limit from the container's; its log:\n%s", logs)
	}
	// What a user reads: the printer columns.
	out := string(tn.kubectl(nil, "-n", tn.ns, "get", "sq", "orders"))
	for _, want := range []string{"Running", "exactly-once"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get sq:\n%s\nwant %q", out, want)
		}
	}
	_, rows := tn.sinkRows("out/orders")
	if len(rows) != 12 {
		t.Errorf("sink rows = %d, want the 12 orders", len(rows))
	}
}

// TestDeletedPodResumes: `kubectl delete pod` of a running engine → the Deployment's new
// pod resumes from the checkpoint: the same query id, and the sink's values are 0..n-1
// with no gap and no duplicate.
func TestDeletedPodResumes(t *testing.T) {
	t.Parallel()
	tn := newTenant(t)
	tn.apply(tn.rateQuery("ticks", "value >= 0", false))
	q := tn.committed("ticks", 2)
	id := q.Status.QueryID
	old := tn.readyPod("ticks")
	tn.kubectl(nil, "-n", tn.ns, "delete", "pod", old.Name)
	var pod *corev1.Pod
	tn.eventually("a new engine pod runs", func() error {
		p, err := tn.runningPod("ticks")
		if err != nil {
			return err
		}
		if p.UID == old.UID {
			return fmt.Errorf("pod %s is still the deleted one", p.Name)
		}
		pod = p
		return nil
	})
	q = tn.commitsMore("ticks", 2)
	if q.Status.QueryID != id {
		t.Errorf("query id %s after the restart, want %s: the new pod started a new checkpoint", q.Status.QueryID, id)
	}
	if p, err := tn.runningPod("ticks"); err != nil || p.UID != pod.UID {
		t.Errorf("the new pod did not keep running: %v", err)
	}
	if err := contiguous(tn.values("out/ticks")); err != nil {
		t.Error(err)
	}
}

// TestAllowedChangeRollsPod: a change the checkpoint allows (a new filter) replaces the
// engine pod; the new one continues the same checkpoint.
func TestAllowedChangeRollsPod(t *testing.T) {
	t.Parallel()
	tn := newTenant(t)
	tn.apply(tn.rateQuery("ticks", "value >= 0", false))
	q := tn.committed("ticks", 1)
	id, gen := q.Status.QueryID, q.Generation
	old := tn.readyPod("ticks")
	tn.apply(tn.rateQuery("ticks", "value % 2 == 0", false))
	tn.rolled("ticks", gen, old)
	if q := tn.commitsMore("ticks", 1); q.Status.QueryID != id {
		t.Errorf("query id %s after the change, want %s", q.Status.QueryID, id)
	}
}

// rolled waits until the query's spec is newer than generation gen and runs in a ready pod
// other than old, and returns that pod.
func (tn *tenant) rolled(name string, gen int64, old *corev1.Pod) *corev1.Pod {
	tn.t.Helper()
	var pod *corev1.Pod
	tn.eventually("the changed spec of "+name+" runs in a new pod", func() error {
		q := tn.query(name)
		if q.Generation == gen {
			return fmt.Errorf("generation still %d", gen)
		}
		ready := metaCondition(q, v1.ConditionReady)
		if ready == nil || ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != q.Generation {
			return fmt.Errorf("Ready %+v at generation %d", ready, q.Generation)
		}
		p, err := tn.runningPod(name)
		if err != nil {
			return err
		}
		if p.UID == old.UID {
			return fmt.Errorf("pod %s is still the old one", p.Name)
		}
		pod = p
		return nil
	})
	return pod
}

// TestChangesAppliedTwiceBeforeTheNextBatch: two allowed changes (trigger 2s → 3s → 4s) on
// a query waiting for data each roll the engine pod, and each new engine records its shape
// for the next batch over the one the engine before it recorded, since no batch ran under
// it; the next file then commits batch 1 under the last spec with no engine restart. Before,
// the second change crash-looped the engine ("another writer owns this checkpoint").
func TestChangesAppliedTwiceBeforeTheNextBatch(t *testing.T) {
	t.Parallel()
	tn := newTenant(t)
	tn.putOrders("0000.json", 0, 4)
	tn.apply(tn.filesQuery("orders", "{processingTime: 2s}", 0))
	q := tn.committed("orders", 0)
	id := q.Status.QueryID
	pod := tn.readyPod("orders")
	for _, trigger := range []string{"{processingTime: 3s}", "{processingTime: 4s}"} {
		gen := tn.query("orders").Generation
		tn.apply(tn.filesQuery("orders", trigger, 0))
		pod = tn.rolled("orders", gen, pod)
	}
	tn.putOrders("0001.json", 4, 4)
	q = tn.committed("orders", 1)
	if q.Status.QueryID != id {
		t.Errorf("query id %s after the changes, want %s", q.Status.QueryID, id)
	}
	if q.Status.Restarts != 0 || restarts(tn.readyPod("orders")) != 0 {
		t.Errorf("the engine restarted (status.restarts %d); conditions %s", q.Status.Restarts, conditions(q))
	}
	if _, rows := tn.sinkRows("out/orders"); len(rows) != 8 {
		t.Errorf("sink rows = %d, want the 8 orders", len(rows))
	}
}

// TestRefusedChangeLeavesPodUntouched: a change the checkpoint forbids (the source's kind
// under the same name) is refused by the API server, naming the field; the running pod
// and the query's generation stay as they were.
func TestRefusedChangeLeavesPodUntouched(t *testing.T) {
	t.Parallel()
	tn := newTenant(t)
	tn.apply(tn.rateQuery("ticks", "value >= 0", false))
	q := tn.committed("ticks", 1)
	gen := q.Generation
	old := tn.readyPod("ticks")
	changed := strings.Replace(tn.rateQuery("ticks", "value >= 0", false), "    rate: {rowsPerSecond: 20}",
		fmt.Sprintf("    files: {path: %s, format: json}\n    schema: {columns: [{name: value, type: long}]}", tn.location("landing/ticks")), 1)
	err := tn.tryRefusedApply(changed)
	if err == nil {
		t.Fatal("kubectl apply of a changed source kind succeeded, want it refused at admission")
	}
	if msg := err.Error(); !strings.Contains(msg, "spec.sources[0]") || !strings.Contains(msg, "rejected") {
		t.Errorf("refusal = %v, want the rejected finding on spec.sources[0]", err)
	}
	if q := tn.query("ticks"); q.Generation != gen {
		t.Errorf("generation %d after the refused change, want %d", q.Generation, gen)
	}
	tn.commitsMore("ticks", 1)
	p := tn.readyPod("ticks")
	if p.UID != old.UID || restarts(p) != restarts(old) {
		t.Errorf("engine pod %s (restarts %d) after the refused change, want %s untouched (restarts %d)", p.Name, restarts(p), old.Name, restarts(old))
	}
}

// TestSuspendResume: suspend: true stops the engine pod and the phase is Suspended;
// suspend: false starts one that continues the checkpoint.
func TestSuspendResume(t *testing.T) {
	t.Parallel()
	tn := newTenant(t)
	tn.apply(tn.rateQuery("ticks", "value >= 0", false))
	q := tn.committed("ticks", 1)
	id := q.Status.QueryID
	tn.apply(tn.rateQuery("ticks", "value >= 0", true))
	tn.eventually("the query is suspended and its pod gone", func() error {
		q := tn.query("ticks")
		if q.Status.Phase != v1.PhaseSuspended {
			return fmt.Errorf("phase %s; conditions %s", q.Status.Phase, conditions(q))
		}
		if pods := tn.pods("ticks"); len(pods) != 0 {
			return fmt.Errorf("%d engine pods left", len(pods))
		}
		return nil
	})
	suspendedAt := *tn.query("ticks").Status.LatestCommittedBatch
	tn.apply(tn.rateQuery("ticks", "value >= 0", false))
	q = tn.committed("ticks", suspendedAt+2)
	if q.Status.QueryID != id || q.Status.Phase != v1.PhaseRunning {
		t.Errorf("after resume: query id %s (want %s), phase %s", q.Status.QueryID, id, q.Status.Phase)
	}
	if err := contiguous(tn.values("out/ticks")); err != nil {
		t.Error(err)
	}
}

// testRunsToCompletion: a query whose trigger ends (once, availableNow) runs to the end,
// its phase is Completed, and its engine is not started again: no container restart, no
// pod left running.
func testRunsToCompletion(t *testing.T, trigger string, lastBatch int64) {
	tn := newTenant(t)
	for i := range 3 {
		tn.putOrders(fmt.Sprintf("%04d.json", i), 4*i, 4)
	}
	// Record every engine pod's restarts while the query runs: a pod restarted after exit 0
	// may be gone by the end.
	ctx, cancel := context.WithCancel(context.Background())
	maxRestarts := make(chan int32, 1)
	go func() {
		var most int32
		defer func() { maxRestarts <- most }()
		for ctx.Err() == nil {
			var list corev1.PodList
			if err := tn.in.c.List(ctx, &list, client.InNamespace(tn.ns)); err == nil {
				for i := range list.Items {
					most = max(most, restarts(&list.Items[i]))
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	tn.apply(tn.filesQuery("orders", trigger, 0))
	tn.eventually("the query completes", func() error {
		q := tn.query("orders")
		if q.Status.Phase != v1.PhaseCompleted {
			return fmt.Errorf("phase %s; conditions %s", q.Status.Phase, conditions(q))
		}
		return nil
	})
	tn.eventually("no engine pod runs", func() error {
		pods := tn.pods("orders")
		if len(pods) == 0 {
			// The finished Job keeps its pod (for kubectl logs), under the query's label.
			return fmt.Errorf("no pod labelled %s=orders", controller.LabelQuery)
		}
		for _, p := range pods {
			if p.Status.Phase != corev1.PodSucceeded {
				return fmt.Errorf("pod %s is %s", p.Name, p.Status.Phase)
			}
		}
		return nil
	})
	if jobs := tn.kubectl(nil, "-n", tn.ns, "get", "jobs", "-l", controller.LabelQuery+"=orders", "-o", "name"); !strings.Contains(string(jobs), "job.batch/") {
		t.Errorf("no Job runs the query's engine: kubectl get jobs = %q", jobs)
	}
	cancel()
	if n := <-maxRestarts; n > 0 {
		t.Errorf("an engine container was restarted %d times after it exited: a query whose trigger ends must not be run again", n)
	}
	if q := tn.query("orders"); q.Status.Restarts != 0 {
		t.Errorf("status.restarts = %d, want 0", q.Status.Restarts)
	}
	if q := tn.query("orders"); q.Status.LatestCommittedBatch == nil || *q.Status.LatestCommittedBatch != lastBatch {
		t.Errorf("latest committed batch %s, want %d", ptrString(q.Status.LatestCommittedBatch), lastBatch)
	}
	if _, rows := tn.sinkRows("out/orders"); len(rows) != 12 {
		t.Errorf("sink rows = %d, want the 12 orders", len(rows))
	}
}

// TestTriggerOnceRunsToCompletion: trigger once runs one batch of everything there is
// (maxFilesPerTrigger is lifted, as in Spark) and is done.
func TestTriggerOnceRunsToCompletion(t *testing.T) {
	t.Parallel()
	testRunsToCompletion(t, "{once: true}", 0)
}

// TestTriggerAvailableNowRunsToCompletion: availableNow reads every file there is, one a
// batch, and is done.
func TestTriggerAvailableNowRunsToCompletion(t *testing.T) {
	t.Parallel()
	testRunsToCompletion(t, "{availableNow: true}", 2)
}

// TestEngineHangRestartedByLiveness: the Kafka broker hangs (its process is stopped with
// its connections open), so the engine's batch blocks without an error; the liveness
// probe restarts the engine container, which continues once the broker is back. The query
// sets spec.engine.progressTimeout to 30s, as a user whose batches take a second would: the
// default bound (5 min at least) is longer than the Kafka client's own 2 min timeout, which
// would end the hung batch with an error first.
func TestEngineHangRestartedByLiveness(t *testing.T) {
	t.Parallel()
	tn := newTenant(t)
	broker := testenv.KafkaProcessAt(t, tn.in.node.IP)
	kc, err := kgo.NewClient(kgo.SeedBrokers(broker.Addr), kgo.DefaultProduceTopic("clicks"))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	ctx := context.Background()
	if _, err := kadm.NewClient(kc).CreateTopic(ctx, 1, 1, nil, "clicks"); err != nil {
		t.Fatal(err)
	}
	produce := func(first, n int) {
		t.Helper()
		var recs []*kgo.Record
		for i := first; i < first+n; i++ {
			recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, `{"id":"c%d"}`, i)})
		}
		if err := kc.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, 10)
	tn.apply(fmt.Sprintf(`apiVersion: streaming.lockstep.dev/v1
kind: StreamingQuery
metadata: {name: clicks}
spec:
  sources:
  - name: clicks
    kafka: {bootstrapServers: [%q], topics: [clicks], startingOffsets: earliest, format: json}
    schema: {columns: [{name: id, type: string}]}
  sink:
    files: {path: %s, format: json}
  outputMode: append
  trigger: {processingTime: 1s}
  checkpoint: {store: %s}
  engine: {progressTimeout: 30s}
`, broker.Addr, tn.location("out/clicks"), tn.store))
	tn.committed("clicks", 0)
	pod := tn.readyPod("clicks")
	broker.Freeze()
	defer broker.Thaw()
	var restarted corev1.Pod
	tn.eventually("the liveness probe restarts the hung engine", func() error {
		if err := tn.in.c.Get(ctx, client.ObjectKeyFromObject(pod), &restarted); err != nil {
			return err
		}
		if restarts(&restarted) <= restarts(pod) {
			return fmt.Errorf("engine container of %s not restarted (restarts %d)", restarted.Name, restarts(&restarted))
		}
		// The kubelet may publish the new restart count before the old container's
		// termination: wait for both.
		if lastTermination(&restarted) == nil {
			return fmt.Errorf("engine container of %s restarted, its last termination not reported yet", restarted.Name)
		}
		return nil
	})
	events := string(tn.kubectl(nil, "-n", tn.ns, "get", "events", "--field-selector", "involvedObject.name="+pod.Name))
	if !strings.Contains(events, "Liveness probe failed") {
		t.Errorf("the engine was restarted, but not by its liveness probe; events:\n%s", events)
	}
	// The probe, not the Kafka client giving up, ended the hung engine, and its termination
	// message says why.
	if last := lastTermination(&restarted); last == nil || !strings.Contains(last.Message, controller.StuckMessage+"no trigger finished") {
		t.Errorf("the engine's last termination %+v: want it stopped by the probe as stuck, not failed by the Kafka client's timeout", last)
	}
	// The query's status says so at once (the pod's change reconciles it), rather than
	// Running and Ready until a second restart makes it Failed: the restarted engine has not
	// shown that it works.
	tn.eventuallyWithin(15*time.Second, "the status says the liveness probe restarted the engine", func() error {
		q := tn.query("clicks")
		c := metaCondition(q, v1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1.ReasonEngineRestarted ||
			!strings.Contains(c.Message, "restarted by its liveness probe") || !strings.Contains(c.Message, controller.StuckMessage) {
			return fmt.Errorf("phase %s, restarts %d; conditions %s", q.Status.Phase, q.Status.Restarts, conditions(q))
		}
		if q.Status.Restarts < 1 {
			return fmt.Errorf("status.restarts %d, want the restart counted", q.Status.Restarts)
		}
		return nil
	})
	queryEvents := string(tn.kubectl(nil, "-n", tn.ns, "get", "events", "--field-selector", "involvedObject.name=clicks,type=Warning"))
	if !strings.Contains(queryEvents, v1.ReasonEngineRestarted) || !strings.Contains(queryEvents, "liveness probe") {
		t.Errorf("no Warning %s event naming the liveness probe on the query; its Warning events:\n%s", v1.ReasonEngineRestarted, queryEvents)
	}
	broker.Thaw()
	produce(10, 10)
	tn.eventually("the restarted engine reads the new records", func() error {
		if _, rows := tn.sinkRows("out/clicks"); len(rows) != 20 {
			return fmt.Errorf("sink rows = %d, want 20", len(rows))
		}
		return nil
	})
	tn.eventually("the query is Ready again: its restarted engine committed a batch", func() error {
		q := tn.query("clicks")
		if c := metaCondition(q, v1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("phase %s; conditions %s", q.Status.Phase, conditions(q))
		}
		return nil
	})
	// Caught up: the Kafka source tells its lag in records and in time.
	tn.eventually("the status says the query is caught up", func() error {
		st := tn.query("clicks").Status
		if st.Lag == nil || *st.Lag != 0 || st.LagSeconds == nil || *st.LagSeconds != 0 {
			return fmt.Errorf("lag %s records, %s s; want 0 and 0", ptrString(st.Lag), ptrString(st.LagSeconds))
		}
		return nil
	})
}

// TestEngineFrozenRestartedByLiveness: the engine process stops answering altogether (it
// is frozen with SIGSTOP, as a process stuck in the kernel or in a deadlock would be); the
// kubelet's liveness probe fails and the engine container is restarted, and the new
// process continues the checkpoint.
func TestEngineFrozenRestartedByLiveness(t *testing.T) {
	t.Parallel()
	tn := newTenant(t)
	tn.apply(tn.rateQuery("ticks", "value >= 0", false))
	tn.committed("ticks", 1)
	pod := tn.readyPod("ticks")
	pid, err := enginePID(pod)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("freeze the engine (pid %d): %v", pid, err)
	}
	tn.eventually("the liveness probe restarts the frozen engine", func() error {
		var p corev1.Pod
		if err := tn.in.c.Get(context.Background(), client.ObjectKeyFromObject(pod), &p); err != nil {
			return err
		}
		if restarts(&p) > restarts(pod) && podReady(&p) {
			return nil
		}
		return fmt.Errorf("engine container of %s: restarts %d, ready %t", p.Name, restarts(&p), podReady(&p))
	})
	events := string(tn.kubectl(nil, "-n", tn.ns, "get", "events", "--field-selector", "involvedObject.name="+pod.Name))
	if !strings.Contains(events, "Liveness probe failed") {
		t.Errorf("the engine was restarted, but not by its liveness probe; events:\n%s", events)
	}
	tn.commitsMore("ticks", 1)
	if err := contiguous(tn.values("out/ticks")); err != nil {
		t.Error(err)
	}
}

// enginePID finds the engine process of pod on this machine: the `lockstep engine`
// process in the pod's cgroup (the kubelet's cgroupfs driver names it pod<UID>).
func enginePID(pod *corev1.Pod) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.HasPrefix(string(cmdline), "/lockstep\x00engine") {
			continue
		}
		cgroup, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if err == nil && strings.Contains(string(cgroup), "pod"+string(pod.UID)) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no lockstep engine process in the cgroup of pod %s (%s)", pod.Name, pod.UID)
}

// lastTermination is how the engine container of pod p last ended, or nil.
func lastTermination(p *corev1.Pod) *corev1.ContainerStateTerminated {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == controller.EngineContainer {
			return cs.LastTerminationState.Terminated
		}
	}
	return nil
}

// metaCondition returns the query's condition of type typ, or nil.
func metaCondition(q *v1.StreamingQuery, typ string) *metav1.Condition {
	for i := range q.Status.Conditions {
		if q.Status.Conditions[i].Type == typ {
			return &q.Status.Conditions[i]
		}
	}
	return nil
}
