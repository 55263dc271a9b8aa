package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-dev/lockstep/compat"
)

func TestInspectPods(t *testing.T) {
	pod := func(hash string, cs corev1.ContainerStatus) corev1.Pod {
		cs.Name = EngineContainer
		return corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationSpecHash: hash}},
			Status:     corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{cs}},
		}
	}
	exited := func(code int32, msg string) *corev1.ContainerStateTerminated {
		return &corev1.ContainerStateTerminated{ExitCode: code, Message: msg}
	}
	tests := []struct {
		name string
		pod  corev1.Pod
		want engineState
	}{
		{"ready", pod("h", corev1.ContainerStatus{Ready: true}), engineState{ready: true}},
		{"old spec ready", pod("old", corev1.ContainerStatus{Ready: true}), engineState{}},
		{"crash looping", pod("h", corev1.ContainerStatus{RestartCount: 3,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: exited(1, "boom")}}),
			engineState{failing: true, restarts: 3}},
		{"completed", pod("h", corev1.ContainerStatus{State: corev1.ContainerState{Terminated: exited(0, "completed: 3 batches")}}),
			engineState{completed: true}},
		{"restarted after completing", pod("h", corev1.ContainerStatus{RestartCount: 1,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: exited(0, "completed")}}),
			engineState{completed: true, restarts: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := inspectPods([]corev1.Pod{tt.pod}, "h")
			failure := got.failure
			got.failure = nil
			if got != tt.want {
				t.Errorf("inspectPods() = %+v, want %+v", got, tt.want)
			}
			if tt.want.failing && (failure == nil || failure.Message != "boom") {
				t.Errorf("inspectPods().failure = %+v, want the termination message", failure)
			}
		})
	}
}

func TestFindingText(t *testing.T) {
	tests := []struct {
		name string
		f    compat.Finding
		want string
	}{
		{"changed", compat.Finding{Rule: "files-path", Severity: compat.Rejected, Path: "spec.sources[0].files.path", Old: "a", New: "b", Message: "Moved.", Remedy: "Revert."},
			`[rejected] files-path at spec.sources[0].files.path: "a" → "b": Moved. Remedy: Revert.`},
		{"added", compat.Finding{Rule: "source-added", Severity: compat.Allowed, Path: "spec.sources", New: "orders", Message: "Added."},
			`[allowed] source-added at spec.sources: "" → "orders": Added.`},
		{"no values", compat.Finding{Rule: "guarantee", Severity: compat.Warning, Path: "spec", Message: "Weaker."},
			`[warning] guarantee at spec: Weaker.`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FindingText(tt.f); got != tt.want {
				t.Errorf("FindingText() = %q, want %q", got, tt.want)
			}
		})
	}
}
