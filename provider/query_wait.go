package provider

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
)

// pollInterval is how often a wait reads the query's status.
const pollInterval = time.Second

// wait polls the query until its status says what waitFor asks for the spec just applied
// (status.observedGeneration has caught up with the object's generation), and returns the
// last object read. Phase Failed or Blocked ends the wait with an error that says why.
// before is the newest committed batch before the apply, for waitCommittedBatch.
func (r *queryResource) wait(ctx context.Context, obj *unstructured.Unstructured, waitFor string, before *int64, timeout time.Duration) (*unstructured.Unstructured, error) {
	namespace, name, generation := obj.GetNamespace(), obj.GetName(), obj.GetGeneration()
	suspended, _, _ := unstructured.NestedBool(obj.Object, "spec", "suspend")
	last := obj
	var st v1.StreamingQueryStatus
	var stop error
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		cur, err := r.cluster.getQuery(ctx, namespace, name)
		if err != nil {
			return false, nil // transient: try again until the timeout
		}
		last = cur
		if st, err = queryStatus(cur); err != nil || st.ObservedGeneration < generation {
			return false, nil
		}
		switch st.Phase {
		case v1.PhaseFailed:
			msg := "no message"
			if st.LastFailure != nil {
				msg = st.LastFailure.Message
			}
			stop = fmt.Errorf("StreamingQuery %s/%s failed: %s", namespace, name, msg)
			return true, nil
		case v1.PhaseBlocked:
			msg := "the controller blocked the new spec"
			if c := meta.FindStatusCondition(st.Conditions, v1.ConditionCompatible); c != nil && c.Message != "" {
				msg = c.Message
			}
			stop = fmt.Errorf("StreamingQuery %s/%s is blocked: %s", namespace, name, msg)
			return true, nil
		}
		if (waitFor == waitCommittedBatch || waitFor == waitCaughtUp) && st.Phase != v1.PhaseRunning && st.Phase != v1.PhaseCompleted {
			// A batch committed before the engine of this spec runs (the old engine's last,
			// finished during the roll) proves nothing of the new spec.
			if b := st.LatestCommittedBatch; b != nil && (before == nil || *b > *before) {
				before = b
			}
			return false, nil
		}
		switch waitFor {
		case waitRunning:
			return st.Phase == v1.PhaseRunning || st.Phase == v1.PhaseCompleted || suspended && st.Phase == v1.PhaseSuspended, nil
		case waitCommittedBatch:
			return committedSince(st, before), nil
		case waitCaughtUp:
			return st.Phase == v1.PhaseCompleted || committedSince(st, before) && st.Lag != nil && *st.Lag == 0, nil
		}
		return true, nil
	})
	if stop != nil {
		return last, stop
	}
	if err != nil {
		phase := string(st.Phase)
		if phase == "" {
			phase = "not reported yet"
		}
		if st.LatestCommittedBatch != nil {
			phase += fmt.Sprintf(", the newest committed batch %d", *st.LatestCommittedBatch)
		}
		if st.Lag != nil {
			phase += fmt.Sprintf(", the lag %d", *st.Lag)
		}
		return last, fmt.Errorf("StreamingQuery %s/%s: waited %s for wait_for = %q; the phase is %s (observed generation %d of %d). "+
			"The query was written; raise timeouts or check the controller (kubectl describe streamingquery -n %s %s)",
			namespace, name, timeout, waitFor, phase, st.ObservedGeneration, generation, namespace, name)
	}
	return last, nil
}

// waitGone polls until the query no longer exists: the controller's finalizer applies the
// checkpoint's retention policy before the object goes.
func (r *queryResource) waitGone(ctx context.Context, namespace, name string, timeout time.Duration) error {
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, pollInterval/4, timeout, true, func(ctx context.Context) (bool, error) {
		_, err := r.cluster.getQuery(ctx, namespace, name)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		// Keep the error of a read that failed on its own, not of one cut short because the
		// timeout was near (client-go's rate limiter refuses to wait past the deadline).
		if deadline, ok := ctx.Deadline(); err == nil || !ok || time.Until(deadline) > pollInterval {
			lastErr = err
		}
		return false, nil
	})
	if err != nil {
		if lastErr == nil {
			lastErr = errors.New("it still exists; its finalizer waits for the controller to apply checkpoint.retention " +
				"(check that the Lockstep controller is running)")
		}
		return fmt.Errorf("StreamingQuery %s/%s was deleted but is not gone after %s: %v", namespace, name, timeout, lastErr)
	}
	return nil
}

// committedSince reports whether the status shows a batch committed after before, the newest
// committed batch when the apply began (nil: none, as for a new query).
func committedSince(st v1.StreamingQueryStatus, before *int64) bool {
	b := st.LatestCommittedBatch
	return b != nil && (before == nil || *b > *before)
}
