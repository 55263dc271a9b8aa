package controller

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/checkpoint"
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

// TestProgressingNeverShowsZeroTime: a status whose last progress is known from before, in a
// reconcile that cannot read its commit time, never prints the zero time.
func TestProgressingNeverShowsZeroTime(t *testing.T) {
	now := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	r := &QueryReconciler{clock: clocktesting.NewFakePassiveClock(now)}
	q := querytest.Make("q", "ns").RateSource("ticks", 5).ConsoleSink().Checkpoint("s3://b/ns/q").Obj()
	q.Generation = 2
	old := &v1.StreamingQueryStatus{LastProgress: &v1.BatchProgress{Batch: 5}, LatestCommittedBatch: ptr.To(int64(5))}
	owned := checkpoint.Metadata{ID: "id", Owner: checkpoint.Owner{Namespace: "ns", Name: "q"}}
	tests := []struct {
		name   string
		o      observation
		status metav1.ConditionStatus
		reason string
	}{
		{"checkpoint unreachable", observation{unreachable: errors.New("store down")}, metav1.ConditionUnknown, v1.ReasonCheckpointUnreachable},
		{"spec refused", observation{refused: errors.New("no store"), refusedReason: v1.ReasonStoreRefused}, metav1.ConditionUnknown, v1.ReasonStoreRefused},
		{"commit without a time", observation{verdict: &compat.Verdict{}, snap: snapshot{exists: true, meta: owned,
			head: checkpoint.Head{Committed: &checkpoint.Commit{BatchID: 5}}}}, metav1.ConditionFalse, v1.ReasonIdle},
		{"old commit", observation{verdict: &compat.Verdict{}, snap: snapshot{exists: true, meta: owned,
			head: checkpoint.Head{Committed: &checkpoint.Commit{BatchID: 5, Progress: checkpoint.Progress{Timestamp: now.Add(-time.Hour)}}}}},
			metav1.ConditionFalse, v1.ReasonIdle},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := r.status(q, old, &tt.o)
			c := meta.FindStatusCondition(st.Conditions, v1.ConditionProgressing)
			if c == nil || c.Status != tt.status || c.Reason != tt.reason || strings.Contains(c.Message, "0001-01-01") {
				t.Errorf("Progressing = %+v, want %s/%s without the zero time", c, tt.status, tt.reason)
			}
		})
	}
}

func TestPhaseEvent(t *testing.T) {
	failed := &v1.StreamingQueryStatus{Phase: v1.PhaseFailed, LastFailure: &v1.Failure{Message: "boom"}}
	tests := []struct {
		name     string
		old, now *v1.StreamingQueryStatus
		want     *event
	}{
		{"suspended", &v1.StreamingQueryStatus{Phase: v1.PhaseRunning}, &v1.StreamingQueryStatus{Phase: v1.PhaseSuspended},
			&event{corev1.EventTypeNormal, v1.ReasonSuspended, "Suspend", "Suspended: the engine stops at a batch boundary; the checkpoint stays"}},
		{"resumed", &v1.StreamingQueryStatus{Phase: v1.PhaseSuspended}, &v1.StreamingQueryStatus{Phase: v1.PhasePending},
			&event{corev1.EventTypeNormal, EventResumed, "Resume", "Resumed: the engine starts again from the checkpoint"}},
		{"failing", &v1.StreamingQueryStatus{Phase: v1.PhaseRunning}, failed,
			&event{corev1.EventTypeWarning, v1.ReasonEngineFailed, "Run", "The engine failed: boom"}},
		{"still failing", failed, failed, nil},
		{"running", &v1.StreamingQueryStatus{Phase: v1.PhasePending}, &v1.StreamingQueryStatus{Phase: v1.PhaseRunning}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := phaseEvent(tt.old, tt.now); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("phaseEvent() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestInspectPodsCountsTheCurrentPodsRestarts(t *testing.T) {
	pod := func(hash string, restarts int32, deleting bool) corev1.Pod {
		p := corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationSpecHash: hash}},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: EngineContainer, RestartCount: restarts,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}},
		}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{}
		}
		return p
	}
	pods := []corev1.Pod{pod("old", 7, false), pod("h", 4, true), pod("h", 2, false)}
	if got := inspectPods(pods, "h").restarts; got != 2 {
		t.Errorf("inspectPods().restarts = %d, want 2 (the current pod's, not the old or deleted pods')", got)
	}
}
