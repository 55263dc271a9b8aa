package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/compat"
)

// annotationTemplateHash on the Deployment is the hash of the rendered Deployment spec, so
// that the controller writes it only when the rendering changed (the API server adds
// defaults that a comparison of the specs would keep seeing as a difference).
const annotationTemplateHash = "streaming.lockstep.dev/template-hash"

// minProgressWindow is how long after its last commit a query counts as progressing, at least.
const minProgressWindow = 2 * time.Minute

func templateHash(d *appsv1.Deployment) string {
	b, _ := json.Marshal(d.Spec) // plain data: cannot fail
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])[:16]
}

// engineState is what the engine pods of the current spec say.
type engineState struct {
	ready     bool // a pod of the current spec is ready
	completed bool // the engine of the current spec exited 0 (its trigger ended)
	// failing is set when the engine cannot run: its Job failed (nothing restarts it any
	// more), or the kubelet backs off starting a container that never ran. A crash loop of an
	// engine that ran is decided from crashed and the checkpoint (statusInput.crashLoop): one
	// crash is a restart.
	failing bool
	// restarts is the engine container's restart count in the current pod (of the current
	// spec, not being deleted): an old pod's restarts say nothing of the engine running now.
	restarts int32
	failure  *v1.Failure
	// restart is how the current pod's engine container last ended when it has restarted
	// after a failure (a non-zero exit: a crash, or the kill of its liveness probe); nil when
	// it has not.
	restart *corev1.ContainerStateTerminated
	// crashed is how the current pod's engine container ended when it is down after a
	// failure, until the kubelet starts it again (its state is terminated, or waiting with
	// that termination as its last); nil while it runs. Its run was a restart itself when
	// restarts > 0: the kubelet counts the runs of a container from 0.
	crashed *corev1.ContainerStateTerminated
	// startedAt is when the current pod's engine container started (again); zero while it
	// is not running.
	startedAt time.Time
	// unschedulable is the scheduler's reason why it cannot place a current pod, with the
	// pod's name; "" when it can.
	unschedulable string
}

// inspectPods reads the engine pods; hash is the spec hash in force ("" for none).
func inspectPods(pods []corev1.Pod, hash string) engineState {
	var st engineState
	for i := range pods {
		p := &pods[i]
		current := hash != "" && p.Annotations[AnnotationSpecHash] == hash
		if msg, ok := unschedulable(p); ok && current && p.DeletionTimestamp == nil {
			st.unschedulable = fmt.Sprintf("pod %s: %s", p.Name, msg)
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name != EngineContainer {
				continue
			}
			for _, term := range []*corev1.ContainerStateTerminated{cs.LastTerminationState.Terminated, cs.State.Terminated} {
				if term == nil {
					continue
				}
				if term.ExitCode != 0 {
					if st.failure == nil || st.failure.Time.Before(&term.FinishedAt) {
						st.failure = &v1.Failure{Time: term.FinishedAt, Message: failureMessage(term)}
					}
				} else if current && term == cs.State.Terminated || current && cs.State.Waiting != nil && term == cs.LastTerminationState.Terminated {
					st.completed = true
				}
			}
			if !current || p.DeletionTimestamp != nil {
				continue
			}
			if cs.RestartCount >= st.restarts {
				st.restarts = cs.RestartCount
				st.restart, st.crashed, st.startedAt = nil, nil, time.Time{}
				if t := cs.LastTerminationState.Terminated; cs.RestartCount > 0 && t != nil && t.ExitCode != 0 {
					st.restart = t
				}
				if r := cs.State.Running; r != nil {
					st.startedAt = r.StartedAt.Time
				}
				if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
					st.crashed = t
				}
				if t := cs.LastTerminationState.Terminated; cs.State.Waiting != nil && t != nil && t.ExitCode != 0 {
					st.crashed = t // CrashLoopBackOff, or being created again
				}
			}
			if cs.Ready {
				st.ready = true
			}
			if w := cs.State.Waiting; w != nil && (w.Reason == "CrashLoopBackOff" || w.Reason == "Error") && cs.LastTerminationState.Terminated == nil {
				st.failing = true
			}
		}
	}
	return st
}

// status computes the query's status from what the reconcile observed and what its apply
// did; old is the status it had, kept where nothing newer was observed. Each condition is
// decided by a function of its own (below).
func (r *QueryReconciler) status(q *v1.StreamingQuery, old *v1.StreamingQueryStatus, o *observation, a applied) v1.StreamingQueryStatus {
	in := statusInput{q: q, old: old, o: o, a: a, now: r.clock.Now()}
	refused := in.refusal() != nil
	st := *old.DeepCopy()
	gen := q.Generation
	st.ObservedGeneration = gen
	if !refused {
		// A refused spec's reconcile does not look at the pods: keep what was seen.
		st.Restarts = o.engine.restarts
	}
	if isSpark(q) {
		st.Executors = executorsStatus(q, o.executors, !q.Spec.Suspend && !o.completed)
	} else {
		st.Executors = nil
	}
	if o.engine.failure != nil {
		st.LastFailure = o.engine.failure
	}
	if v := o.verdict; v != nil {
		st.Guarantee, st.GuaranteeReason = v.Guarantee, v.GuaranteeReason
	}
	if !refused && o.unreachable == nil {
		// The location, the query id and the progress come from one read of one checkpoint
		// and are written together: a status never shows a mix of two. Until the checkpoint
		// can be read, they all stay as last read.
		st.CheckpointLocation = o.location
		fromCheckpoint(&st, &o.snap)
	}
	if q.Spec.Suspend {
		// The engine measures lag at each batch; a suspended one measures nothing, and the
		// lag of its last batch only grows stale.
		st.Lag, st.LagSeconds = nil, nil
		for i := range st.Sources {
			st.Sources[i].Lag, st.Sources[i].LagSeconds = nil, nil
		}
	}
	set := func(typ string, c condition) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: typ, Status: c.status, Reason: c.reason, Message: c.message,
			ObservedGeneration: gen, LastTransitionTime: metav1.NewTime(in.now),
		})
	}
	set(v1.ConditionCheckpointReachable, checkpointReachable(in))
	set(v1.ConditionCompatible, compatible(in))
	var ready condition
	st.Phase, ready = readiness(in, st.LastFailure)
	set(v1.ConditionReady, ready)
	set(v1.ConditionProgressing, progressing(in, st.Phase, st.LastProgress))
	return st
}

// statusInput is what a status is computed from.
type statusInput struct {
	q *v1.StreamingQuery
	// old is the status before the reconcile.
	old *v1.StreamingQueryStatus
	o   *observation
	a   applied
	now time.Time
}

// refusal is why the query cannot run as specified: the judge's refusal, or the API
// server's refusal of the workload apply rendered; nil when neither refused it.
func (in statusInput) refusal() *refusal {
	if in.a.refusal != nil {
		return in.a.refusal
	}
	return in.o.refusal
}

// A condition is one of a query's conditions as a reconcile decides it, before it is
// stamped with its type, the generation and the time.
type condition struct {
	status  metav1.ConditionStatus
	reason  string
	message string
}

// checkpointReachable decides CheckpointReachable: whether the checkpoint could be read.
func checkpointReachable(in statusInput) condition {
	o := in.o
	switch ref := in.refusal(); {
	case ref != nil:
		return condition{metav1.ConditionUnknown, ref.reason, ref.err.Error()}
	case o.unreachable != nil:
		return condition{metav1.ConditionFalse, v1.ReasonCheckpointUnreachable, fmt.Sprintf("Cannot read the checkpoint: %v", o.unreachable)}
	case !o.snap.exists:
		return condition{metav1.ConditionTrue, v1.ReasonNoCheckpoint,
			fmt.Sprintf("No checkpoint at %s yet: the engine creates it at its first batch", o.location)}
	default:
		return condition{metav1.ConditionTrue, v1.ReasonCheckpointRead, fmt.Sprintf("Read checkpoint %s (query id %s)", o.location, o.snap.meta.ID)}
	}
}

// compatible decides Compatible: whether the checkpoint accepts the spec, with the verdict's
// findings. The warnings of a change the engine has run are kept until the next change.
func compatible(in statusInput) condition {
	o := in.o
	switch ref := in.refusal(); {
	case ref != nil && ref.reason == v1.ReasonSecretMissing:
		return condition{metav1.ConditionUnknown, ref.reason, "Not judged: the checkpoint is read once the Secret the Ready condition names exists"}
	case ref != nil:
		return condition{metav1.ConditionUnknown, ref.reason, "Not judged: the spec or its store is refused"}
	case o.unreachable != nil:
		return condition{metav1.ConditionUnknown, v1.ReasonCheckpointUnreachable, "Not judged: the checkpoint cannot be read; the running spec is kept until it can"}
	case o.foreign != nil:
		return condition{metav1.ConditionFalse, v1.ReasonCheckpointOwnedElsewhere,
			fmt.Sprintf("Checkpoint %s belongs to %s: give this query its own location", o.location, o.snap.meta.Owner)}
	case o.verdict.Severity == compat.Rejected:
		return condition{metav1.ConditionFalse, v1.ReasonIncompatibleChange, verdictMessage(o.verdict)}
	case o.verdict.Fresh || !o.snap.exists:
		return condition{metav1.ConditionTrue, v1.ReasonNoCheckpoint, "No shape recorded in the checkpoint yet: every spec is compatible"}
	}
	msg := verdictMessage(o.verdict)
	if p := meta.FindStatusCondition(in.old.Conditions, v1.ConditionCompatible); o.verdict.Severity == compat.Allowed && p != nil &&
		(p.ObservedGeneration == in.q.Generation || o.engineSpecKept) && p.Reason == v1.ReasonCompatibleChange && strings.HasPrefix(p.Message, headWithWarnings) {
		// The engine has run the change and recorded its shape, which the spec now
		// matches; the warnings of that change still hold until the next one. A new
		// generation that the engine does not see (a suspend, a resume, a retention) is
		// not a change.
		msg = p.Message
	}
	return condition{metav1.ConditionTrue, v1.ReasonCompatibleChange, msg}
}

// readiness decides the phase and Ready. lastFailure is the status's last failure of the
// engine. A batch committed since the current engine started proves that it runs, before
// the kubelet reports it ready.
func readiness(in statusInput, lastFailure *v1.Failure) (v1.Phase, condition) {
	q, o, gen := in.q, in.o, in.q.Generation
	recovering := in.recovering()
	down := o.engine.crashed != nil
	running := o.engine.ready || o.committedSinceStart()
	runningGen := generationOf(o.desiredCM)
	// A spark query whose executors none can be scheduled runs no batch.
	var stuck *v1.ExecutorsStatus
	if isSpark(q) && !o.committedSinceStart() {
		if ex := executorsStatus(q, o.executors, true); ex.Ready == 0 && ex.Unschedulable > 0 {
			stuck = ex
		}
	}
	switch ref := in.refusal(); {
	case q.Spec.Suspend:
		return v1.PhaseSuspended, condition{metav1.ConditionFalse, v1.ReasonSuspended, "spec.suspend is true: the engine stopped at a batch boundary"}
	case ref != nil && ref.reason == v1.ReasonSecretMissing:
		return v1.PhasePending, condition{metav1.ConditionFalse, ref.reason, ref.err.Error()}
	case ref != nil:
		return v1.PhaseBlocked, condition{metav1.ConditionFalse, ref.reason, ref.err.Error()}
	case o.blocked:
		msg := fmt.Sprintf("Generation %d is refused by the checkpoint", gen)
		if runningGen > 0 {
			msg += fmt.Sprintf("; generation %d keeps running", runningGen)
		}
		return v1.PhaseBlocked, condition{metav1.ConditionFalse, v1.ReasonIncompatibleChange, msg + ": see the Compatible condition"}
	case o.completed:
		return v1.PhaseCompleted, condition{metav1.ConditionTrue, v1.ReasonCompleted, "The trigger ended and every batch committed"}
	case o.engine.failing, in.crashLoop(), (recovering || down) && in.old.Phase == v1.PhaseFailed:
		// A crash loop runs the engine between its crashes: until it shows that it works
		// again, it is still failing (and its failure is announced once).
		msg := "The engine is failing"
		if lastFailure != nil {
			msg += ": " + lastFailure.Message
		}
		return v1.PhaseFailed, condition{metav1.ConditionFalse, v1.ReasonEngineFailed, msg}
	case recovering, down:
		// One crash is a restart, from the moment the container is down (the kubelet starts
		// it again at once) until the restarted engine shows that it works; the message
		// is the same throughout, so that the restart is announced once.
		return v1.PhaseRunning, condition{metav1.ConditionFalse, v1.ReasonEngineRestarted,
			fmt.Sprintf("%s; Ready again once a batch commits, or once it has run %s without another restart",
				in.restartNote(), livenessBound(&q.Spec))}
	case o.unreachable != nil && o.desiredCM == nil:
		return v1.PhasePending, condition{metav1.ConditionFalse, v1.ReasonCheckpointUnreachable, "Waiting to read the checkpoint before the engine starts"}
	case !running && o.engine.unschedulable != "":
		sizes := "spec.resources"
		if isSpark(q) {
			sizes = "spec.runtime.spark.driver, or spec.resources"
		}
		return v1.PhasePending, condition{metav1.ConditionFalse, v1.ReasonUnschedulable,
			fmt.Sprintf("The engine cannot be scheduled: %s (lower its requests, %s, or give the cluster room)", o.engine.unschedulable, sizes)}
	case stuck != nil:
		return v1.PhasePending, condition{metav1.ConditionFalse, v1.ReasonUnschedulable,
			fmt.Sprintf("No executor can be scheduled, so no batch runs: %s (lower spec.runtime.spark.executor, or give the cluster room)", stuck.Message)}
	case o.verdict != nil && o.verdict.Rebuild:
		// Accepted by rebuilding: until the checkpoint switches to the rebuilt generation, the
		// change is still judged against the old one.
		msg := fmt.Sprintf("The engine of generation %d rebuilds the state from the retained input before it runs on", gen)
		if r := o.snap.rebuild; r != nil {
			msg += fmt.Sprintf(": %d of %d batches replayed", r.Done, r.Total)
		}
		return v1.PhaseRebuilding, condition{metav1.ConditionFalse, v1.ReasonRebuilding, msg}
	case running && in.a.current(o.desiredCM) && runningGen == gen:
		return v1.PhaseRunning, condition{metav1.ConditionTrue, v1.ReasonRunning, fmt.Sprintf("The engine runs generation %d", gen)}
	case running:
		return v1.PhaseRunning, condition{metav1.ConditionFalse, v1.ReasonEngineStarting, fmt.Sprintf("The engine of generation %d is starting", gen)}
	default:
		return v1.PhasePending, condition{metav1.ConditionFalse, v1.ReasonEngineStarting, "The engine pod is not ready yet"}
	}
}

// progressing decides Progressing from the phase just decided and the status's last
// progress: whether batches commit within three trigger intervals (at least
// minProgressWindow).
func progressing(in statusInput, phase v1.Phase, last *v1.BatchProgress) condition {
	switch ref := in.refusal(); {
	case phase == v1.PhaseSuspended:
		return condition{metav1.ConditionFalse, v1.ReasonSuspended, "Suspended"}
	case phase == v1.PhaseCompleted:
		return condition{metav1.ConditionFalse, v1.ReasonCompleted, "The trigger ended"}
	case ref != nil:
		return condition{metav1.ConditionUnknown, ref.reason, "Not known: the spec or its store is refused"}
	case in.o.unreachable != nil:
		return condition{metav1.ConditionUnknown, v1.ReasonCheckpointUnreachable, "Not known: the checkpoint cannot be read"}
	case last == nil:
		return condition{metav1.ConditionFalse, v1.ReasonIdle, "No batch has committed yet"}
	}
	at := in.o.committedAt()
	window := max(minProgressWindow, 3*in.q.Spec.Trigger.Interval())
	switch {
	case !at.IsZero() && in.now.Sub(at) <= window:
		return condition{metav1.ConditionTrue, v1.ReasonBatchesCommitting,
			fmt.Sprintf("Batch %d committed at %s", last.Batch, at.UTC().Format(time.RFC3339))}
	case at.IsZero():
		// A commit without a timestamp: say so rather than print the zero time.
		return condition{metav1.ConditionFalse, v1.ReasonIdle, fmt.Sprintf("Batch %d is the newest committed; its commit recorded no time", last.Batch)}
	default:
		return condition{metav1.ConditionFalse, v1.ReasonIdle,
			fmt.Sprintf("No batch committed within %s (the last, %d, at %s)", window, last.Batch, at.UTC().Format(time.RFC3339))}
	}
}

// recovering reports whether the engine of the current spec restarted after a failure and
// has not shown since that it works: no batch committed since it started again, and it has
// run for less than its liveness bound (an engine that runs that long without its liveness
// probe restarting it finishes triggers).
func (in statusInput) recovering() bool {
	e := &in.o.engine
	if e.restart == nil || e.startedAt.IsZero() || in.o.committedSinceStart() {
		return false
	}
	return in.now.Sub(e.startedAt) < livenessBound(&in.q.Spec)
}

// committedSinceStart reports whether the newest commit the reconcile read is younger than
// the current engine container: that engine committed it (an older engine stopped before it
// started).
func (o *observation) committedSinceStart() bool {
	at, started := o.committedAt(), o.engine.startedAt
	return !at.IsZero() && !started.IsZero() && !at.Before(started)
}

// livenessBound is how long an engine runs at most while no trigger finishes before its
// liveness probe restarts it: the progress timeout, then the probe's failures in a row.
func livenessBound(s *v1.StreamingQuerySpec) time.Duration {
	return s.ProgressTimeout() + livenessFailures*livenessPeriodSeconds*time.Second
}

// crashLoop reports whether the engine of the current spec crash-loops: its last run failed,
// and was itself a restart (the kubelet counts runs from 0) that had not shown that it works.
// One crash is a restart; two in a row are a crash loop. The last run is the one that
// crashed while the container is down; once the kubelet runs it again, the one before,
// until the new run shows that it works: so a reconcile that sees only the container
// running again after its second crash still sees the loop.
func (in statusInput) crashLoop() bool {
	e := &in.o.engine
	if e.crashed != nil {
		return e.restarts > 0 && !in.proved(e.crashed)
	}
	return e.restarts > 1 && in.recovering() && !in.proved(e.restart)
}

// proved reports whether the engine run that ended as t had shown that it works: it
// committed the newest batch, or it ran for its liveness bound (an engine that runs that
// long finishes triggers), unless its liveness probe stopped it as stuck (a batch longer
// than the progress timeout is restarted again and again: a crash loop). A run whose start
// is not known proved nothing.
func (in statusInput) proved(t *corev1.ContainerStateTerminated) bool {
	start := t.StartedAt.Time
	if start.IsZero() {
		return false
	}
	if at := in.o.committedAt(); !at.IsZero() && !at.Before(start) {
		return true // the container is down: a commit since it started is its own
	}
	return !strings.HasPrefix(t.Message, StuckMessage) && !t.FinishedAt.IsZero() && t.FinishedAt.Sub(start) >= livenessBound(&in.q.Spec)
}

// restartNote says how the engine container last ended before its restart: killed by its
// liveness probe (the engine's StuckMessage says so), or how it ended otherwise (see
// endingOf) with its error. A container down after its crash is about to be restarted: the
// note is the one its restart will have.
func (in statusInput) restartNote() string {
	e := &in.o.engine
	t, restarts := e.restart, e.restarts
	if e.crashed != nil {
		t, restarts = e.crashed, e.restarts+1
	}
	at := t.FinishedAt.UTC().Format(time.RFC3339)
	end := endingOf(t)
	if strings.HasPrefix(end.message, StuckMessage) {
		return fmt.Sprintf("The engine was restarted by its liveness probe at %s (restart %d): %s; it replays the interrupted batch from the checkpoint",
			at, restarts, end.message)
	}
	note := fmt.Sprintf("The engine restarted after it %s at %s (restart %d)", end.how, at, restarts)
	switch {
	case end.message != "":
		note += ": " + end.message
	case end.logged != "":
		note += "; the last error in its log: " + end.logged
	}
	return note
}

// fromCheckpoint sets the checkpoint's identity and progress in the status: all of them from
// s, none left from an earlier read (a location without a checkpoint, or without a batch,
// has none).
func fromCheckpoint(st *v1.StreamingQueryStatus, s *snapshot) {
	st.QueryID, st.LatestPlannedBatch, st.LatestCommittedBatch, st.LastProgress = "", nil, nil, nil
	st.Sources, st.Lag, st.LagSeconds = nil, nil, nil
	if !s.exists {
		return
	}
	st.QueryID = s.meta.ID
	if p := s.head.Planned; p != nil {
		st.LatestPlannedBatch = &p.BatchID
	}
	c := s.head.Committed
	if c == nil {
		return
	}
	st.LatestCommittedBatch = &c.BatchID
	pr := &v1.BatchProgress{
		Batch:      c.BatchID,
		InputRows:  c.Progress.NumInputRows,
		OutputRows: c.Progress.NumOutputRows,
		DurationMs: c.Progress.DurationMs,
		Timestamp:  metav1.NewTime(c.Progress.Timestamp),
	}
	if o := s.committedOffsets; o != nil {
		pr.Timestamp = metav1.NewTime(time.UnixMilli(o.BatchTimestampMs).UTC())
		if o.BatchWatermarkMs > 0 {
			w := metav1.NewTime(time.UnixMilli(o.BatchWatermarkMs).UTC())
			pr.Watermark = &w
		}
	}
	if ms := c.Progress.DurationMs[checkpoint.DurationTotal]; ms > 0 {
		pr.ProcessedRowsPerSecond = c.Progress.NumInputRows * 1000 / ms
	}
	st.LastProgress = pr
	for _, sp := range c.Progress.Sources {
		ss := v1.SourceStatus{Name: sp.Source, Offsets: string(sp.EndOffset), Lag: sp.Lag}
		if sp.LagMs != nil {
			ss.LagSeconds = new(*sp.LagMs / 1000)
			if st.LagSeconds == nil || *ss.LagSeconds > *st.LagSeconds {
				st.LagSeconds = ss.LagSeconds
			}
		}
		st.Sources = append(st.Sources, ss)
	}
	st.Lag = sumLag(c.Progress.Sources)
}

// announcements returns the Events that announce what changed from the status old to now:
// a refusal by the checkpoint, a change of phase, an engine restart, a credentials Secret
// missing. Each follows from a change of the status, which so records what was announced:
// emitted once the status write succeeded, a transition is announced once however often it
// is observed.
func announcements(gen int64, old, now *v1.StreamingQueryStatus) []event {
	var evs []event
	if c := compatibilityEvent(old.Conditions, now.Conditions); c != nil {
		evs = append(evs, event{corev1.EventTypeWarning, c.Reason, "Check", fmt.Sprintf("Refused generation %d: %s", gen, c.Message)})
	}
	if e := phaseEvent(old, now); e != nil {
		evs = append(evs, *e)
	}
	if c := newReason(old.Conditions, now.Conditions, v1.ConditionReady, v1.ReasonEngineRestarted); c != nil {
		evs = append(evs, event{corev1.EventTypeWarning, v1.ReasonEngineRestarted, "Run", c.Message})
	}
	if c := newReason(old.Conditions, now.Conditions, v1.ConditionReady, v1.ReasonSecretMissing); c != nil {
		evs = append(evs, event{corev1.EventTypeWarning, v1.ReasonSecretMissing, "Open", c.Message})
	}
	if e := executorsEvent(old.Executors, now.Executors); e != nil {
		evs = append(evs, *e)
	}
	return evs
}

// newReason returns the condition of type typ in now when it has the reason and old's did
// not say the same (reason and message), or nil.
func newReason(old, now []metav1.Condition, typ, reason string) *metav1.Condition {
	c := meta.FindStatusCondition(now, typ)
	if c == nil || c.Reason != reason {
		return nil
	}
	if p := meta.FindStatusCondition(old, typ); p != nil && p.Reason == c.Reason && p.Message == c.Message {
		return nil
	}
	return c
}

// compatibilityEvent returns the Compatible condition when it newly became False (a new
// refusal to announce with an Event), or nil.
func compatibilityEvent(old, now []metav1.Condition) *metav1.Condition {
	c := meta.FindStatusCondition(now, v1.ConditionCompatible)
	if c == nil || c.Status != metav1.ConditionFalse {
		return nil
	}
	if p := meta.FindStatusCondition(old, v1.ConditionCompatible); p != nil && p.Status == c.Status && p.Message == c.Message {
		return nil
	}
	return c
}

// Event reasons of phase changes (besides v1.ReasonSuspended and v1.ReasonEngineFailed).
const (
	EventResumed = "Resumed"
	EventRebuilt = "Rebuilt"
)

// event is an Event to record about a query.
type event struct {
	typ, reason, action, note string
}

// phaseEvent returns the Event that announces a change of phase from old to now, or nil:
// a suspend, a resume, and an engine that started failing (a crash loop, a failed Job). A
// crash loop stays Failed between its crashes (see status), so it is announced once.
func phaseEvent(old, now *v1.StreamingQueryStatus) *event {
	switch {
	case now.Phase == old.Phase:
		return nil
	case now.Phase == v1.PhaseSuspended:
		return &event{corev1.EventTypeNormal, v1.ReasonSuspended, "Suspend", "Suspended: the engine stops at a batch boundary; the checkpoint stays"}
	case old.Phase == v1.PhaseSuspended:
		return &event{corev1.EventTypeNormal, EventResumed, "Resume", "Resumed: the engine starts again from the checkpoint"}
	case now.Phase == v1.PhaseRebuilding:
		return &event{corev1.EventTypeNormal, v1.ReasonRebuilding, "Rebuild", "Rebuilding the state for the new spec from the retained input (spec.onIncompatibleChange: rebuild); output resumes once it is done"}
	case old.Phase == v1.PhaseRebuilding && now.Phase == v1.PhaseRunning:
		return &event{corev1.EventTypeNormal, EventRebuilt, "Rebuild", "Rebuilt the state: the checkpoint switched to the rebuilt generation and the engine runs the new spec"}
	case now.Phase == v1.PhaseFailed:
		note := "The engine failed"
		if f := now.LastFailure; f != nil {
			note += ": " + f.Message
		}
		return &event{corev1.EventTypeWarning, v1.ReasonEngineFailed, "Run", note}
	}
	return nil
}

// commitSeen is the newest commit the reconcile read, for the trend Events; false when it
// read none.
func (o *observation) commitSeen() (commitSeen, bool) {
	if o.refusal != nil || o.unreachable != nil {
		return commitSeen{}, false
	}
	c := o.snap.head.Committed
	if c == nil {
		return commitSeen{}, false
	}
	return commitSeen{batch: c.BatchID, duration: time.Duration(c.Progress.DurationMs[checkpoint.DurationTotal]) * time.Millisecond,
		lag: sumLag(c.Progress.Sources)}, true
}

// committedAt is when the newest batch committed; zero when none did.
func (o *observation) committedAt() time.Time {
	if c := o.snap.head.Committed; c != nil {
		return c.Progress.Timestamp
	}
	return time.Time{}
}

// headWithWarnings starts the Compatible message of a change allowed with warnings.
const headWithWarnings = "Compatible with the checkpoint, with warnings"

// verdictMessage renders a verdict's findings for a condition message: one line per finding
// that is not plainly allowed, each with its rule, path, values, reason and remedy.
func verdictMessage(v *compat.Verdict) string {
	var b strings.Builder
	switch v.Severity {
	case compat.Rejected:
		fmt.Fprintf(&b, "The checkpoint refuses this spec (%d rejected)", len(v.Rejected()))
	case compat.Warning:
		b.WriteString(headWithWarnings)
	default:
		b.WriteString("Compatible with the checkpoint")
	}
	for _, f := range v.Findings {
		if f.Severity == compat.Allowed {
			continue
		}
		b.WriteString("\n" + compat.FindingText(f))
	}
	return b.String()
}

// sumLag is the total of the sources' lag at a commit, nil when no source can tell.
func sumLag(sources []checkpoint.SourceProgress) *int64 {
	var total int64
	known := false
	for _, s := range sources {
		if s.Lag != nil {
			total += *s.Lag
			known = true
		}
	}
	if !known {
		return nil
	}
	return &total
}
