package podrunner

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-dev/lockstep/controller"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// TestReportBeforeFirstExitIsRecorded reports an engine that exited before tend recorded its
// exit (an engine that ends before its first report): the pod's status carries the exit code
// and CrashLoopBackOff, where report used to dereference the nil last termination (issue 15
// #13).
func TestReportBeforeFirstExitIsRecorded(t *testing.T) {
	c := testenv.Client(t, testenv.ControlPlane(t))
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "podrunner-"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), ns) })
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: controller.EngineContainer, Image: "ghcr.io/lockstep-dev/lockstep:test"}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "engine-0", Namespace: ns.Name}, Spec: spec}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	close(done) // exited, with its exit not recorded by tend yet: last is nil
	p := &proc{pod: pod.Name, done: done, exitCode: 3, spec: spec}
	r := New(c, "", t.TempDir(), ns.Name)
	if err := r.report(ctx, ns.Name, p); err != nil {
		t.Fatalf("report: %v", err)
	}
	var got corev1.Pod
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns.Name, Name: pod.Name}, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.ContainerStatuses) != 1 {
		t.Fatalf("container statuses %+v, want the engine's", got.Status.ContainerStatuses)
	}
	cs := got.Status.ContainerStatuses[0]
	if term := cs.LastTerminationState.Terminated; term == nil || term.ExitCode != 3 {
		t.Errorf("last termination %+v, want exit code 3", term)
	}
	if cs.State.Waiting == nil || cs.State.Waiting.Reason != "CrashLoopBackOff" {
		t.Errorf("state %+v, want waiting in CrashLoopBackOff", cs.State)
	}
}
