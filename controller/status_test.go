package controller

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
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
	started := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
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
			engineState{restarts: 3, restart: exited(1, "boom"), crashed: exited(1, "boom")}},
		// The kubelet reports the first run's end (restart count 0) before it starts the
		// container again: down, not yet restarted.
		{"killed once", pod("h", corev1.ContainerStatus{State: corev1.ContainerState{Terminated: exited(137, "")}}),
			engineState{crashed: exited(137, "")}},
		{"killed again", pod("h", corev1.ContainerStatus{RestartCount: 1,
			State:                corev1.ContainerState{Terminated: exited(137, "boom")},
			LastTerminationState: corev1.ContainerState{Terminated: exited(1, "boom")}}),
			engineState{restarts: 1, restart: exited(1, "boom"), crashed: exited(137, "boom")}},
		{"never ran", pod("h", corev1.ContainerStatus{
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}),
			engineState{failing: true}},
		{"completed", pod("h", corev1.ContainerStatus{State: corev1.ContainerState{Terminated: exited(0, "completed: 3 batches")}}),
			engineState{completed: true}},
		{"restarted after completing", pod("h", corev1.ContainerStatus{RestartCount: 1,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: exited(0, "completed")}}),
			engineState{completed: true, restarts: 1}},
		{"restarted by its liveness probe", pod("h", corev1.ContainerStatus{RestartCount: 1, Ready: true,
			State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}},
			LastTerminationState: corev1.ContainerState{Terminated: exited(137, StuckMessage+"no trigger finished for 40s")}}),
			engineState{ready: true, restarts: 1, restart: exited(137, StuckMessage+"no trigger finished for 40s"), startedAt: started}},
		{"running", pod("h", corev1.ContainerStatus{Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}}),
			engineState{ready: true, startedAt: started}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := inspectPods([]corev1.Pod{tt.pod}, "h")
			failure := got.failure
			got.failure = nil
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(engineState{})); diff != "" {
				t.Errorf("inspectPods() (-want +got):\n%s", diff)
			}
			if c := tt.want.crashed; c != nil && c.Message != "" && (failure == nil || failure.Message != "boom") {
				t.Errorf("inspectPods().failure = %+v, want the termination message", failure)
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
	tests := []struct {
		name   string
		o      observation
		status metav1.ConditionStatus
		reason string
	}{
		{"checkpoint unreachable", observation{judgement: judgement{unreachable: &unreachableError{err: errors.New("store down")}}}, metav1.ConditionUnknown, v1.ReasonCheckpointUnreachable},
		{"spec refused", observation{judgement: judgement{refusal: &refusal{reason: v1.ReasonStoreRefused, err: errors.New("no store")}}}, metav1.ConditionUnknown, v1.ReasonStoreRefused},
		{"commit without a time", observation{judgement: judgement{verdict: &compat.Verdict{}, snap: snapshot{exists: true, meta: owned,
			head: checkpoint.Head{Committed: &checkpoint.Commit{BatchID: 5}}}}}, metav1.ConditionFalse, v1.ReasonIdle},
		{"old commit", observation{judgement: judgement{verdict: &compat.Verdict{}, snap: snapshot{exists: true, meta: owned,
			head: checkpoint.Head{Committed: &checkpoint.Commit{BatchID: 5, Progress: checkpoint.Progress{Timestamp: now.Add(-time.Hour)}}}}}},
			metav1.ConditionFalse, v1.ReasonIdle},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := r.status(q, old, &tt.o, applied{})
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

// TestEngineRestartStatus: an engine restarted after a failure reads Ready=False
// EngineRestarted at once, saying whether its liveness probe restarted it, until it commits a
// batch or runs for its liveness bound; a crash loop between two crashes stays Failed.
func TestEngineRestartStatus(t *testing.T) {
	set := newEngineStatusSetting(t)
	now, cm := set.now, set.cm
	stuck := &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error", Message: StuckMessage + "no trigger finished for 31s",
		FinishedAt: metav1.NewTime(now.Add(-12 * time.Second))}
	crashed := &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "read sasl password: no such file",
		FinishedAt: metav1.NewTime(now.Add(-12 * time.Second))}
	obs := func(restart *corev1.ContainerStateTerminated, started time.Time, committed *checkpoint.Commit) *observation {
		return &observation{desiredCM: cm,
			judgement: judgement{verdict: &compat.Verdict{}, snap: snapshot{exists: true, meta: owned, head: checkpoint.Head{Committed: committed}}},
			engine:    engineState{ready: true, restarts: 1, restart: restart, startedAt: started}}
	}
	commitAt := func(at time.Time) *checkpoint.Commit {
		return &checkpoint.Commit{BatchID: 3, Progress: checkpoint.Progress{Timestamp: at}}
	}
	running := &v1.StreamingQueryStatus{Phase: v1.PhaseRunning}
	tests := []engineStatusCase{
		{"liveness restart", running, obs(stuck, now.Add(-10*time.Second), commitAt(now.Add(-time.Minute))),
			v1.PhaseRunning, v1.ReasonEngineRestarted, "restarted by its liveness probe"},
		{"crash", running, obs(crashed, now.Add(-10*time.Second), nil),
			v1.PhaseRunning, v1.ReasonEngineRestarted, "exited with code 1"},
		{"committed since", running, obs(stuck, now.Add(-10*time.Second), commitAt(now.Add(-time.Second))),
			v1.PhaseRunning, v1.ReasonRunning, "runs generation 1"},
		{"ran past its liveness bound", running, obs(stuck, now.Add(-61*time.Second), nil),
			v1.PhaseRunning, v1.ReasonRunning, "runs generation 1"},
		{"a crash loop between crashes", &v1.StreamingQueryStatus{Phase: v1.PhaseFailed, LastFailure: &v1.Failure{Message: "boom"}},
			obs(crashed, now.Add(-10*time.Second), nil), v1.PhaseFailed, v1.ReasonEngineFailed, "The engine is failing: boom"},
	}
	set.check(t, tests, nil)
}

// TestEngineCrashStatus: a container down after its crash (before the kubelet starts it
// again) reads as the restart it is about to be, announced with the same message as once it
// runs again; a crash of a run that was itself a restart and had not shown that it works is
// a crash loop: Failed. The message names how the engine ended.
func TestEngineCrashStatus(t *testing.T) {
	set := newEngineStatusSetting(t)
	now, cm := set.now, set.cm
	// The log's tail the kubelet gives for an engine killed before it wrote a message.
	tail := `{"time":"2026-07-01T11:59:00Z","level":"INFO","msg":"Garbage collector set","settings":"GC percent 200"}` + "\n" +
		`{"time":"2026-07-01T11:59:01Z","level":"INFO","msg":"Batch committed","batch":3}`
	killed := func(started, finished time.Time) *corev1.ContainerStateTerminated {
		return &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error", Message: tail,
			StartedAt: metav1.NewTime(started), FinishedAt: metav1.NewTime(finished)}
	}
	stuck := func(started, finished time.Time) *corev1.ContainerStateTerminated {
		return &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error", Message: StuckMessage + "no trigger finished for 31s",
			StartedAt: metav1.NewTime(started), FinishedAt: metav1.NewTime(finished)}
	}
	down := func(restarts int32, crashed *corev1.ContainerStateTerminated, committed time.Time) *observation {
		o := &observation{desiredCM: cm,
			judgement: judgement{verdict: &compat.Verdict{}, snap: snapshot{exists: true, meta: owned}},
			engine:    engineState{restarts: restarts, crashed: crashed, failure: &v1.Failure{Message: failureMessage(crashed)}}}
		if !committed.IsZero() {
			o.snap.head.Committed = &checkpoint.Commit{BatchID: 3, Progress: checkpoint.Progress{Timestamp: committed}}
		}
		return o
	}
	running := &v1.StreamingQueryStatus{Phase: v1.PhaseRunning}
	failed := &v1.StreamingQueryStatus{Phase: v1.PhaseFailed}
	tests := []engineStatusCase{
		{"killed once", running, down(0, killed(now.Add(-time.Hour), now.Add(-time.Second)), now.Add(-2*time.Second)),
			v1.PhaseRunning, v1.ReasonEngineRestarted, "The engine restarted after it was killed by signal SIGKILL (exit code 137) at 2026-07-01T11:59:59Z (restart 1); Ready again"},
		{"killed again before it showed it works", running, down(1, killed(now.Add(-10*time.Second), now.Add(-time.Second)), now.Add(-time.Hour)),
			v1.PhaseFailed, v1.ReasonEngineFailed, "The engine is failing: the engine was killed by signal SIGKILL (exit code 137) and logged no error"},
		{"killed again after it committed", running, down(1, killed(now.Add(-10*time.Second), now.Add(-time.Second)), now.Add(-5*time.Second)),
			v1.PhaseRunning, v1.ReasonEngineRestarted, "(restart 2)"},
		{"killed again after its liveness bound", running, down(3, killed(now.Add(-2*time.Minute), now.Add(-time.Second)), time.Time{}),
			v1.PhaseRunning, v1.ReasonEngineRestarted, "(restart 4)"},
		{"stuck again however long it ran", running, down(1, stuck(now.Add(-2*time.Minute), now.Add(-time.Second)), now.Add(-time.Hour)),
			v1.PhaseFailed, v1.ReasonEngineFailed, "The engine is failing: " + StuckMessage},
		{"seen running again after a second crash", running, &observation{desiredCM: cm,
			judgement: judgement{verdict: &compat.Verdict{}, snap: snapshot{exists: true, meta: owned}},
			engine: engineState{ready: true, restarts: 2, restart: killed(now.Add(-20*time.Second), now.Add(-10*time.Second)),
				startedAt: now.Add(-9 * time.Second), failure: &v1.Failure{Message: "boom"}}},
			v1.PhaseFailed, v1.ReasonEngineFailed, "The engine is failing: boom"},
		{"down again in a crash loop", failed, down(0, killed(now.Add(-time.Hour), now.Add(-time.Second)), time.Time{}),
			v1.PhaseFailed, v1.ReasonEngineFailed, "The engine is failing"},
	}
	set.check(t, tests, func(t *testing.T, c *metav1.Condition) {
		if c != nil && strings.Contains(c.Message, "Garbage collector") {
			t.Errorf("Ready says %q: an INFO line of the log is no reason", c.Message)
		}
	})
}

func TestAnnouncements(t *testing.T) {
	restarted := func(msg string) *v1.StreamingQueryStatus {
		return &v1.StreamingQueryStatus{Phase: v1.PhaseRunning, Conditions: []metav1.Condition{
			{Type: v1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1.ReasonEngineRestarted, Message: msg}}}
	}
	ready := &v1.StreamingQueryStatus{Phase: v1.PhaseRunning, Conditions: []metav1.Condition{
		{Type: v1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1.ReasonRunning}}}
	tests := []struct {
		name     string
		old, now *v1.StreamingQueryStatus
		want     []string // reasons
	}{
		{"restarted", ready, restarted("restart 1"), []string{v1.ReasonEngineRestarted}},
		{"still the same restart", restarted("restart 1"), restarted("restart 1"), nil},
		{"restarted again", restarted("restart 1"), restarted("restart 2"), []string{v1.ReasonEngineRestarted}},
		{"resumed", &v1.StreamingQueryStatus{Phase: v1.PhaseSuspended}, &v1.StreamingQueryStatus{Phase: v1.PhasePending}, []string{EventResumed}},
		{"nothing changed", ready, ready, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, e := range announcements(1, tt.old, tt.now) {
				got = append(got, e.reason)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("announcements() = %v, want %v", got, tt.want)
			}
		})
	}
}

// conditionCase is one case of a condition function's table: the input, and the condition
// it must decide (its message must contain says).
type conditionCase struct {
	name   string
	in     statusInput
	status metav1.ConditionStatus
	reason string
	says   string
}

func (c conditionCase) check(t *testing.T, fn string, got condition) {
	t.Helper()
	if got.status != c.status || got.reason != c.reason || !strings.Contains(got.message, c.says) {
		t.Errorf("%s() = %+v, want %s/%s saying %q", fn, got, c.status, c.reason, c.says)
	}
}

// statusFixture returns the pieces of the condition functions' inputs: a query of generation
// 2, a clock, and an observation that read an owned checkpoint and judged the spec
// compatible, its engine ready on the ConfigMap in force.
func statusFixture(t *testing.T) (in func(edit func(*statusInput)) statusInput, now time.Time) {
	t.Helper()
	now = time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	q := querytest.Make("q", "ns").RateSource("ticks", 5).ConsoleSink().Checkpoint("s3://b/ns/q").Obj()
	q.Generation = 2
	cm, err := RenderConfigMap(q, nil, EngineSettings{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Annotations[AnnotationGeneration] = "2"
	deployment := runningConfigMap(cm)
	return func(edit func(*statusInput)) statusInput {
		in := statusInput{
			q:   q.DeepCopy(),
			old: &v1.StreamingQueryStatus{},
			o: &observation{
				judgement: judgement{placement: placement{location: "s3://b/ns/q"}, verdict: &compat.Verdict{Severity: compat.Allowed},
					snap: snapshot{exists: true, meta: owned}},
				desiredCM: cm,
				engine:    engineState{ready: true},
			},
			a:   applied{deployment: deployment},
			now: now,
		}
		if edit != nil {
			edit(&in)
		}
		return in
	}, now
}

func TestCheckpointReachable(t *testing.T) {
	in, _ := statusFixture(t)
	tests := []conditionCase{
		{"read", in(nil), metav1.ConditionTrue, v1.ReasonCheckpointRead, "Read checkpoint s3://b/ns/q (query id id)"},
		{"no checkpoint", in(func(in *statusInput) { in.o.snap = snapshot{} }),
			metav1.ConditionTrue, v1.ReasonNoCheckpoint, "No checkpoint at s3://b/ns/q yet"},
		{"over budget", in(func(in *statusInput) {
			in.o.unreachable = &unreachableError{budget: 2 * time.Second, err: errors.New("dial: timeout")}
		}), metav1.ConditionFalse, v1.ReasonCheckpointUnreachable, "Cannot read the checkpoint: the store did not answer within 2s: dial: timeout"},
		{"store refused", in(func(in *statusInput) {
			in.o.refusal = &refusal{reason: v1.ReasonStoreRefused, err: errors.New("namespace not allowed")}
		}), metav1.ConditionUnknown, v1.ReasonStoreRefused, "namespace not allowed"},
		{"workload refused", in(func(in *statusInput) {
			in.a.refusal = &refusal{reason: v1.ReasonInvalidSpec, err: errors.New("bad toleration")}
		}), metav1.ConditionUnknown, v1.ReasonInvalidSpec, "bad toleration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.check(t, "checkpointReachable", checkpointReachable(tt.in)) })
	}
}

func TestCompatible(t *testing.T) {
	in, _ := statusFixture(t)
	warned := func(gen int64) *v1.StreamingQueryStatus {
		return &v1.StreamingQueryStatus{Conditions: []metav1.Condition{{Type: v1.ConditionCompatible, Status: metav1.ConditionTrue,
			Reason: v1.ReasonCompatibleChange, Message: headWithWarnings + "\nthe warning", ObservedGeneration: gen}}}
	}
	rejected := &compat.Verdict{Severity: compat.Rejected, Findings: []compat.Finding{
		{Rule: "source-removed", Severity: compat.Rejected, Path: "spec.sources", Old: "ticks", Message: "a source was removed"}}}
	tests := []conditionCase{
		{"compatible", in(nil), metav1.ConditionTrue, v1.ReasonCompatibleChange, "Compatible with the checkpoint"},
		{"fresh", in(func(in *statusInput) { in.o.verdict = &compat.Verdict{Fresh: true} }),
			metav1.ConditionTrue, v1.ReasonNoCheckpoint, "No shape recorded"},
		{"rejected", in(func(in *statusInput) { in.o.verdict = rejected }),
			metav1.ConditionFalse, v1.ReasonIncompatibleChange, "The checkpoint refuses this spec (1 rejected)"},
		{"another query's", in(func(in *statusInput) {
			in.o.snap.meta.Owner = checkpoint.Owner{Namespace: "other", Name: "q"}
			in.o.foreign = &field.Error{}
		}), metav1.ConditionFalse, v1.ReasonCheckpointOwnedElsewhere, "Checkpoint s3://b/ns/q belongs to other/q"},
		{"unreachable", in(func(in *statusInput) { in.o.unreachable = &unreachableError{err: errors.New("boom")} }),
			metav1.ConditionUnknown, v1.ReasonCheckpointUnreachable, "the running spec is kept"},
		{"secret missing", in(func(in *statusInput) {
			in.o.refusal = &refusal{reason: v1.ReasonSecretMissing, err: errors.New("Secret ns/s3 does not exist")}
		}), metav1.ConditionUnknown, v1.ReasonSecretMissing, "once the Secret the Ready condition names exists"},
		{"spec refused", in(func(in *statusInput) { in.o.refusal = &refusal{reason: v1.ReasonInvalidSpec, err: errors.New("bad")} }),
			metav1.ConditionUnknown, v1.ReasonInvalidSpec, "the spec or its store is refused"},
		{"warnings of this generation kept", in(func(in *statusInput) { in.old = warned(2) }),
			metav1.ConditionTrue, v1.ReasonCompatibleChange, "the warning"},
		{"warnings kept by a generation the engine does not see", in(func(in *statusInput) {
			in.old, in.o.engineSpecKept = warned(1), true
		}), metav1.ConditionTrue, v1.ReasonCompatibleChange, "the warning"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.check(t, "compatible", compatible(tt.in)) })
	}
	// A new generation the engine runs is a new change: the old warnings go.
	if got := compatible(in(func(in *statusInput) { in.old = warned(1) })); got.message != "Compatible with the checkpoint" {
		t.Errorf("compatible() after a change the engine sees = %+v, want the old warnings dropped", got)
	}
}

func TestReadiness(t *testing.T) {
	in, now := statusFixture(t)
	tests := []struct {
		conditionCase
		phase v1.Phase
	}{
		{conditionCase{"running", in(nil), metav1.ConditionTrue, v1.ReasonRunning, "The engine runs generation 2"}, v1.PhaseRunning},
		{conditionCase{"suspended", in(func(in *statusInput) { in.q.Spec.Suspend = true }),
			metav1.ConditionFalse, v1.ReasonSuspended, "spec.suspend is true"}, v1.PhaseSuspended},
		{conditionCase{"waiting for a Secret", in(func(in *statusInput) {
			in.o.refusal = &refusal{reason: v1.ReasonSecretMissing, err: errors.New("Secret ns/s3 does not exist")}
		}), metav1.ConditionFalse, v1.ReasonSecretMissing, "Secret ns/s3 does not exist"}, v1.PhasePending},
		{conditionCase{"store refused", in(func(in *statusInput) {
			in.o.refusal = &refusal{reason: v1.ReasonStoreRefused, err: errors.New("store gone"), revoked: true}
		}), metav1.ConditionFalse, v1.ReasonStoreRefused, "store gone"}, v1.PhaseBlocked},
		{conditionCase{"blocked by the checkpoint", in(func(in *statusInput) { in.o.blocked = true }),
			metav1.ConditionFalse, v1.ReasonIncompatibleChange, "Generation 2 is refused by the checkpoint; generation 2 keeps running"}, v1.PhaseBlocked},
		{conditionCase{"completed", in(func(in *statusInput) { in.o.completed = true }),
			metav1.ConditionTrue, v1.ReasonCompleted, "The trigger ended"}, v1.PhaseCompleted},
		{conditionCase{"failing", in(func(in *statusInput) { in.o.engine = engineState{failing: true} }),
			metav1.ConditionFalse, v1.ReasonEngineFailed, "The engine is failing: boom"}, v1.PhaseFailed},
		{conditionCase{"unreachable before the first run", in(func(in *statusInput) {
			in.o.unreachable, in.o.desiredCM = &unreachableError{err: errors.New("boom")}, nil
		}), metav1.ConditionFalse, v1.ReasonCheckpointUnreachable, "Waiting to read the checkpoint"}, v1.PhasePending},
		{conditionCase{"rolling", in(func(in *statusInput) { in.a.deployment = &appsv1.Deployment{} }),
			metav1.ConditionFalse, v1.ReasonEngineStarting, "The engine of generation 2 is starting"}, v1.PhaseRunning},
		{conditionCase{"a commit since the engine started", in(func(in *statusInput) {
			in.o.engine = engineState{startedAt: now.Add(-time.Minute)}
			in.o.snap.head.Committed = &checkpoint.Commit{BatchID: 1, Progress: checkpoint.Progress{Timestamp: now}}
		}), metav1.ConditionTrue, v1.ReasonRunning, "The engine runs generation 2"}, v1.PhaseRunning},
		{conditionCase{"not ready", in(func(in *statusInput) { in.o.engine = engineState{} }),
			metav1.ConditionFalse, v1.ReasonEngineStarting, "not ready yet"}, v1.PhasePending},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			phase, got := readiness(tt.in, &v1.Failure{Message: "boom"})
			if phase != tt.phase {
				t.Errorf("readiness() phase = %s, want %s", phase, tt.phase)
			}
			tt.check(t, "readiness", got)
		})
	}
}

func TestProgressing(t *testing.T) {
	in, now := statusFixture(t)
	committedAt := func(at time.Time) func(*statusInput) {
		return func(in *statusInput) {
			in.o.snap.head.Committed = &checkpoint.Commit{BatchID: 4, Progress: checkpoint.Progress{Timestamp: at}}
		}
	}
	last := &v1.BatchProgress{Batch: 4}
	tests := []struct {
		conditionCase
		phase v1.Phase
		last  *v1.BatchProgress
	}{
		{conditionCase{"committing", in(committedAt(now.Add(-time.Minute))), metav1.ConditionTrue, v1.ReasonBatchesCommitting,
			"Batch 4 committed at 2026-07-01T11:59:00Z"}, v1.PhaseRunning, last},
		{conditionCase{"idle", in(committedAt(now.Add(-time.Hour))), metav1.ConditionFalse, v1.ReasonIdle,
			"No batch committed within 2m0s (the last, 4, at 2026-07-01T11:00:00Z)"}, v1.PhaseRunning, last},
		{conditionCase{"no batch yet", in(nil), metav1.ConditionFalse, v1.ReasonIdle, "No batch has committed yet"}, v1.PhaseRunning, nil},
		{conditionCase{"suspended", in(nil), metav1.ConditionFalse, v1.ReasonSuspended, "Suspended"}, v1.PhaseSuspended, last},
		{conditionCase{"completed", in(nil), metav1.ConditionFalse, v1.ReasonCompleted, "The trigger ended"}, v1.PhaseCompleted, last},
		{conditionCase{"refused", in(func(in *statusInput) { in.o.refusal = &refusal{reason: v1.ReasonStoreRefused, err: errors.New("no")} }),
			metav1.ConditionUnknown, v1.ReasonStoreRefused, "Not known"}, v1.PhaseBlocked, last},
		{conditionCase{"unreachable", in(func(in *statusInput) { in.o.unreachable = &unreachableError{err: errors.New("boom")} }),
			metav1.ConditionUnknown, v1.ReasonCheckpointUnreachable, "Not known: the checkpoint cannot be read"}, v1.PhaseRunning, last},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.check(t, "progressing", progressing(tt.in, tt.phase, tt.last)) })
	}
}

// engineStatusCase is a case of the status computed after the engine restarted or crashed:
// from the old status and the observation, the phase and the Ready condition's reason, whose
// message holds says.
type engineStatusCase struct {
	name   string
	old    *v1.StreamingQueryStatus
	o      *observation
	phase  v1.Phase
	reason string
	says   string
}

// engineStatusSetting is the setting of the engine status tests: a reconciler whose clock
// stands at now, a query of generation 1 whose liveness bound is 1m (progressTimeout 30s),
// and its ConfigMap.
type engineStatusSetting struct {
	now time.Time
	r   *QueryReconciler
	q   *v1.StreamingQuery
	cm  *corev1.ConfigMap
}

func newEngineStatusSetting(t *testing.T) engineStatusSetting {
	t.Helper()
	now := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	q := querytest.Make("q", "ns").RateSource("ticks", 5).ConsoleSink().Checkpoint("s3://b/ns/q").Obj()
	q.Spec.Engine.ProgressTimeout = "30s"
	q.Generation = 1
	cm, err := RenderConfigMap(q, nil, EngineSettings{})
	if err != nil {
		t.Fatal(err)
	}
	return engineStatusSetting{now: now, r: &QueryReconciler{clock: clocktesting.NewFakePassiveClock(now)}, q: q, cm: cm}
}

// check computes the status of each case, the engine's Deployment running the ConfigMap in
// force, and checks its phase and Ready condition (checkReady); more, when set, checks that
// condition further.
func (s engineStatusSetting) check(t *testing.T, tests []engineStatusCase, more func(*testing.T, *metav1.Condition)) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := s.r.status(s.q, tt.old, tt.o, applied{deployment: runningConfigMap(s.cm)})
			c := checkReady(t, &st, tt.phase, tt.reason, tt.says)
			if more != nil {
				more(t, c)
			}
		})
	}
}

// owned is the metadata of a checkpoint that the query ns/q owns.
var owned = checkpoint.Metadata{ID: "id", Owner: checkpoint.Owner{Namespace: "ns", Name: "q"}}

// runningConfigMap is the engine's Deployment running the ConfigMap cm: its pod template
// carries cm's spec hash.
func runningConfigMap(cm *corev1.ConfigMap) *appsv1.Deployment {
	return &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationSpecHash: SpecHash(cm)}}}}}
}

// checkReady checks that st has phase and a Ready condition of reason whose message holds
// says, and returns that condition (nil when there is none).
func checkReady(t *testing.T, st *v1.StreamingQueryStatus, phase v1.Phase, reason, says string) *metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(st.Conditions, v1.ConditionReady)
	if st.Phase != phase || c == nil || c.Reason != reason || !strings.Contains(c.Message, says) {
		t.Errorf("phase %s, Ready %+v; want %s, %s saying %q", st.Phase, c, phase, reason, says)
	}
	return c
}
