//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/controller"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// How a query reads after its engine crashed (docs/kubernetes.md, Liveness): one crash is a
// restart (phase Running, Ready=False EngineRestarted, one Warning Event), two in a row a
// crash loop (Failed, one EngineFailed Event), and each says why the engine ended — the
// signal or exit code, OOMKilled, the last error line of its log — never an INFO line of
// the log's tail that the kubelet gives for a killed engine.

// queryEvents returns the notes of the query's Events with the reason.
func (tn *tenant) queryEvents(name, reason string) []string {
	tn.t.Helper()
	var list corev1.EventList
	if err := tn.in.c.List(context.Background(), &list, client.InNamespace(tn.ns)); err != nil {
		tn.t.Fatal(err)
	}
	var notes []string
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "StreamingQuery" && e.InvolvedObject.Name == name && e.Reason == reason {
			notes = append(notes, fmt.Sprintf("%s %q", e.Type, e.Message))
		}
	}
	return notes
}

// quotesInfoLine reports whether s quotes a log line that no reason may quote: an INFO
// line of Spark's log4j layout or of the engine's JSON log.
func quotesInfoLine(s string) bool {
	return strings.Contains(s, " INFO ") || strings.Contains(s, `"level":"INFO"`) || strings.Contains(s, "Garbage collector set")
}

// killEngine kills the engine process of pod with SIGKILL, as the OOM killer or
// `crictl stop --timeout 0` would: it writes no termination message.
func (tn *tenant) killEngine(pod *corev1.Pod) {
	tn.t.Helper()
	var pid int
	tn.eventually("the engine process of "+pod.Name+" runs", func() (err error) {
		pid, err = enginePID(pod)
		return err
	})
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		tn.t.Fatalf("kill the engine (pid %d): %v", pid, err)
	}
}

// TestEngineKilledOnceIsARestart: the built-in engine's container is SIGKILLed once: the
// query reads Running with EngineRestarted naming the signal, one Warning Event, and no
// EngineFailed Event. Killed again before the restarted engine committed a batch, it reads
// Failed with one EngineFailed Event naming the signal; once the engine commits again it is
// Running and Ready.
func TestEngineKilledOnceIsARestart(t *testing.T) {
	t.Parallel()
	tn := newTenant(t)
	tn.putOrders("0000.json", 0, 4)
	tn.putOrders("0001.json", 4, 4)
	tn.apply(tn.filesQuery("orders", "{processingTime: 1s}", 0))
	tn.committed("orders", 1)
	pod := tn.readyPod("orders")

	// One kill. The restarted engine finds no new file and commits nothing: it has not shown
	// that it works yet, so the query keeps reading EngineRestarted.
	tn.killEngine(pod)
	var q *v1.StreamingQuery
	tn.eventuallyWithin(2*time.Minute, "the status says the engine was killed and restarted", func() error {
		q = tn.query("orders")
		c := metaCondition(q, v1.ConditionReady)
		if c == nil || c.Reason != v1.ReasonEngineRestarted || !strings.Contains(c.Message, "killed by signal SIGKILL (exit code 137)") {
			return fmt.Errorf("phase %s; conditions %s", q.Status.Phase, conditions(q))
		}
		return nil
	})
	if c := metaCondition(q, v1.ConditionReady); q.Status.Phase != v1.PhaseRunning || c.Status != metav1.ConditionFalse || quotesInfoLine(c.Message) {
		t.Errorf("after one kill: phase %s, Ready %s %q; want Running, False, naming the signal and no INFO line", q.Status.Phase, c.Status, c.Message)
	}
	tn.eventually("the engine container runs again", func() error {
		var p corev1.Pod
		if err := tn.in.c.Get(context.Background(), client.ObjectKeyFromObject(pod), &p); err != nil {
			return err
		}
		if restarts(&p) != 1 || !podReady(&p) {
			return fmt.Errorf("restarts %d, ready %t", restarts(&p), podReady(&p))
		}
		return nil
	})
	tn.eventually("one EngineRestarted Event naming the signal", func() error {
		evs := tn.queryEvents("orders", v1.ReasonEngineRestarted)
		if len(evs) != 1 || !strings.Contains(evs[0], "Warning") || !strings.Contains(evs[0], "SIGKILL") || quotesInfoLine(evs[0]) {
			return fmt.Errorf("EngineRestarted Events: %v", evs)
		}
		return nil
	})
	if evs := tn.queryEvents("orders", v1.ReasonEngineFailed); len(evs) > 0 {
		t.Errorf("one kill made the query fail: EngineFailed Events %v", evs)
	}
	if q := tn.query("orders"); q.Status.Phase != v1.PhaseRunning || q.Status.Restarts != 1 || q.Status.LastFailure == nil ||
		!strings.Contains(q.Status.LastFailure.Message, "SIGKILL") || quotesInfoLine(q.Status.LastFailure.Message) {
		t.Errorf("phase %s, restarts %d, lastFailure %+v; want Running, 1, naming the signal", q.Status.Phase, q.Status.Restarts, q.Status.LastFailure)
	}

	// A second kill before the restarted engine committed anything: a crash loop.
	tn.killEngine(pod)
	tn.eventuallyWithin(2*time.Minute, "the status says the engine crash-loops", func() error {
		q = tn.query("orders")
		if c := metaCondition(q, v1.ConditionReady); q.Status.Phase != v1.PhaseFailed || c == nil || c.Reason != v1.ReasonEngineFailed {
			return fmt.Errorf("phase %s; conditions %s", q.Status.Phase, conditions(q))
		}
		return nil
	})
	tn.eventually("one EngineFailed Event naming the signal", func() error {
		evs := tn.queryEvents("orders", v1.ReasonEngineFailed)
		if len(evs) != 1 || !strings.Contains(evs[0], "Warning") || !strings.Contains(evs[0], "killed by signal SIGKILL (exit code 137)") || quotesInfoLine(evs[0]) {
			return fmt.Errorf("EngineFailed Events: %v", evs)
		}
		return nil
	})

	// It works again: a new file, committed by the restarted engine.
	tn.putOrders("0002.json", 8, 4)
	tn.committed("orders", 2)
	tn.eventually("the query is Running and Ready again", func() error {
		q := tn.query("orders")
		if c := metaCondition(q, v1.ConditionReady); q.Status.Phase != v1.PhaseRunning || c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("phase %s; conditions %s", q.Status.Phase, conditions(q))
		}
		return nil
	})
	if _, rows := tn.sinkRows("out/orders"); len(rows) != 12 {
		t.Errorf("sink rows = %d, want the 12 orders once each", len(rows))
	}
}

// sparkOnASmallNode is the spec.runtime of a spark query sized for a loaded 2-core node (as
// TestSparkOnKubernetes's): a small driver, instances small executors, the tests' JVM options,
// which cost a short query less CPU. Its lines are indented to stand under spec:.
func sparkOnASmallNode(instances int) string {
	return fmt.Sprintf(`  runtime:
    spark:
      driver: {cores: 1, memory: 640Mi}
      executor: {cores: 1, memory: 512Mi}
      instances: %d
      conf:
        spark.kubernetes.executor.request.cores: 100m
        spark.driver.extraJavaOptions: "`+testenv.TestJavaOptions+`"
        spark.executor.extraJavaOptions: "`+testenv.TestJavaOptions+`"
`+testenv.TestSparkConf("        %s: %q\n"), instances)
}

// sparkFilesQuery is a spark query with two executors, JSON files → files, sized as
// TestSparkOnKubernetes's query is for a loaded 2-core node.
func (tn *tenant) sparkFilesQuery(name string) string {
	return fmt.Sprintf(`apiVersion: streaming.lockstep.dev/v1
kind: StreamingQuery
metadata: {name: %s}
spec:
%s  sources:
  - name: orders
    files: {path: %s, format: json, maxFilesPerTrigger: 1}
    schema: {columns: [{name: id, type: string}, {name: amount, type: double}]}
  sink:
    files: {path: %s, format: json}
  outputMode: append
  trigger: {processingTime: 2s}
  checkpoint: {store: %s}
  resources: {requests: {cpu: 100m, memory: 1280Mi}, limits: {memory: 1280Mi}}
  engine: {progressTimeout: 15m}
`, name, sparkOnASmallNode(2), tn.location("landing/orders"), tn.location("out/"+name), tn.store)
}

// driverLogs returns the log of the driver pod's engine container, and of its run before
// when it restarted.
func (tn *tenant) driverLogs(pod *corev1.Pod) string {
	tn.t.Helper()
	logs := string(tn.kubectl(nil, "-n", tn.ns, "logs", pod.Name, "-c", controller.EngineContainer))
	if restarts(pod) > 0 {
		prev, _ := tn.tryKubectl(nil, "-n", tn.ns, "logs", pod.Name, "-c", controller.EngineContainer, "--previous")
		logs = string(prev) + logs
	}
	return logs
}

// noCannotRunProgram fails the test when a driver's log holds `Cannot run program`: the
// Spark image lacks a program Spark runs (rm, which JavaUtils.deleteRecursively runs).
func (tn *tenant) noCannotRunProgram(pod *corev1.Pod) {
	tn.t.Helper()
	for line := range strings.SplitSeq(tn.driverLogs(pod), "\n") {
		if strings.Contains(line, "Cannot run program") {
			tn.t.Errorf("driver %s logged: %s", pod.Name, line)
			return
		}
	}
}

// TestSparkDriverAndExecutorLoss: a spark query with two executors. A deleted executor is
// replaced and the query stays Running with no restart and no Warning about its engine; a
// force-deleted driver (`kubectl delete pod --grace-period=0 --force`) is replaced, never
// reads Failed, and a restart of the new driver, if it has one, reads EngineRestarted with
// its reason, not an INFO line of Spark's log. No driver logs `Cannot run program`.
func TestSparkDriverAndExecutorLoss(t *testing.T) {
	t.Parallel()
	tn := newTenant(t)
	useSpark(t, tn.in)
	tn.putOrders("0000.json", 0, 4)
	tn.apply(tn.sparkFilesQuery("orders"))

	var driver corev1.Pod
	var executors []corev1.Pod
	running := func(what string, old *corev1.Pod) {
		t.Helper()
		tn.eventuallyWithin(10*time.Minute, what, func() error {
			d, seenD := tn.sparkPods("orders", "engine")
			e, seenE := tn.sparkPods("orders", controller.ComponentSparkExecutor)
			if len(d) != 1 || old != nil && d[0].UID == old.UID || len(e) != 2 {
				return fmt.Errorf("driver pods: %s; executor pods: %s", seenD, seenE)
			}
			for _, p := range e {
				if metav1OwnerName(p) != d[0].Name {
					return fmt.Errorf("executor %s belongs to %s", p.Name, metav1OwnerName(p))
				}
			}
			driver, executors = d[0], e
			return nil
		})
	}
	running("the driver and both executors run", nil)
	q := tn.committed("orders", 0)
	id := q.Status.QueryID
	tn.noCannotRunProgram(&driver)
	quiet := func(when string) {
		t.Helper()
		for _, reason := range []string{v1.ReasonEngineFailed, v1.ReasonEngineRestarted} {
			if evs := tn.queryEvents("orders", reason); len(evs) > 0 {
				t.Errorf("%s: %s Events %v", when, reason, evs)
			}
		}
	}
	quiet("the first batch")

	// An executor lost: Spark asks for another; the driver runs on.
	lost := executors[0]
	tn.kubectl(nil, "-n", tn.ns, "delete", "pod", lost.Name, "--wait=false")
	tn.putOrders("0001.json", 4, 4)
	tn.eventuallyWithin(10*time.Minute, "a new executor replaces the deleted one", func() error {
		e, seen := tn.sparkPods("orders", controller.ComponentSparkExecutor)
		for _, p := range e {
			if p.UID == lost.UID {
				return fmt.Errorf("executor pods: %s", seen)
			}
		}
		if len(e) != 2 {
			return fmt.Errorf("executor pods: %s", seen)
		}
		return nil
	})
	tn.committed("orders", 1)
	tn.eventually("2/2 executors", func() error {
		q := tn.query("orders")
		if e := q.Status.Executors; e == nil || e.Summary != "2/2" {
			return fmt.Errorf("status.executors = %+v", e)
		}
		return nil
	})
	if q := tn.query("orders"); q.Status.Phase != v1.PhaseRunning || q.Status.Restarts != 0 {
		t.Errorf("after an executor was lost: phase %s, restarts %d; want Running, 0; conditions %s", q.Status.Phase, q.Status.Restarts, conditions(q))
	}
	quiet("after an executor was lost")

	// The driver force-deleted: the Deployment's new driver resumes the checkpoint. Its
	// phase is watched all along: never Failed.
	old := driver
	tn.kubectl(nil, "-n", tn.ns, "delete", "pod", old.Name, "--grace-period=0", "--force")
	tn.putOrders("0002.json", 8, 4)
	stop := make(chan struct{})
	phases := make(chan []v1.Phase, 1)
	go func() {
		var seen []v1.Phase
		defer func() { phases <- seen }()
		for {
			var q v1.StreamingQuery
			if err := tn.in.c.Get(context.Background(), client.ObjectKey{Namespace: tn.ns, Name: "orders"}, &q); err == nil &&
				(len(seen) == 0 || seen[len(seen)-1] != q.Status.Phase) {
				seen = append(seen, q.Status.Phase)
			}
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	running("a new driver with two executors", &old)
	q = tn.committed("orders", 2)
	close(stop)
	seen := <-phases
	if q.Status.QueryID != id {
		t.Errorf("query id %s after the driver was replaced, want %s", q.Status.QueryID, id)
	}
	for _, p := range seen {
		if p == v1.PhaseFailed {
			t.Errorf("the query read Failed after its driver was force-deleted once: phases %v", seen)
		}
	}
	if evs := tn.queryEvents("orders", v1.ReasonEngineFailed); len(evs) > 0 {
		t.Errorf("a force-deleted driver made the query fail: EngineFailed Events %v", evs)
	}
	var now corev1.Pod
	if err := tn.in.c.Get(context.Background(), client.ObjectKeyFromObject(&driver), &now); err != nil {
		t.Fatal(err)
	}
	if restarts(&now) > 0 {
		// The new driver's engine restarted (the old one may have held the checkpoint a
		// moment): one restart, read as one, with its reason.
		for _, e := range tn.queryEvents("orders", v1.ReasonEngineRestarted) {
			if quotesInfoLine(e) || !strings.Contains(e, "The engine restarted after it") {
				t.Errorf("EngineRestarted Event %s: want how the engine ended and its error, not an INFO line", e)
			}
		}
		t.Logf("the new driver restarted %d time(s); last termination %+v", restarts(&now), lastTermination(&now))
	}
	tn.noCannotRunProgram(&now)
}
