package controller

import (
	"context"
	"fmt"
	"maps"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
)

// The engine's workload is a Deployment for a query that runs until stopped, and a Job for
// one whose trigger ends by itself (once, availableNow): a Deployment's pod restarts whatever
// its exit code, so an engine that finished would run again. Both carry the pod of
// RenderPodTemplate under the name EngineName. A Job's pod template cannot change, so a new
// spec replaces the Job; a changed trigger replaces a Deployment by a Job or back. A
// replacement deletes the old workload and creates the new one only once no engine pod of the
// query is left, so that two engines never run on one checkpoint (the Recreate strategy's
// promise, kept across kinds).

// EventEngineReplaced is the event of a workload deleted to be replaced.
const EventEngineReplaced = "EngineReplaced"

// wantsJob reports whether the query's engine runs as a Job.
func wantsJob(s *v1.StreamingQuerySpec) bool { return endsByItself(s) }

// applyWorkload creates, updates or replaces the engine's Deployment or Job to run cm, and
// returns what it did. replicas is 0 when the engine should not run (completed).
func (r *QueryReconciler) applyWorkload(ctx context.Context, q *v1.StreamingQuery, o *observation, cm *corev1.ConfigMap, replicas int32) (applied, error) {
	log := logf.FromContext(ctx)
	a := applied{deployment: o.deployment, job: o.job}
	job := wantsJob(&q.Spec)
	// The other kind goes first.
	if job && o.deployment != nil {
		return a, r.replace(ctx, q, o.deployment, "the trigger now ends by itself: the engine runs as a Job")
	}
	if !job && o.job != nil {
		return a, r.replace(ctx, q, o.job, "the trigger no longer ends by itself: the engine runs as a Deployment")
	}
	if !job {
		return r.applyDeployment(ctx, q, o, cm, replicas)
	}

	want := RenderJob(q, o.store, cm, r.engine)
	want.Annotations = map[string]string{annotationTemplateHash: podTemplateHash(&want.Spec.Template)}
	if j := o.job; j != nil {
		if j.Annotations[annotationTemplateHash] != want.Annotations[annotationTemplateHash] {
			if o.completed {
				return a, nil // the finished Job stays, for its status and logs
			}
			return a, r.replace(ctx, q, j, fmt.Sprintf("generation %d changes the engine's pod, which a Job cannot change", q.Generation))
		}
		if suspended := j.Spec.Suspend != nil && *j.Spec.Suspend; suspended != q.Spec.Suspend && !o.completed {
			upd := j.DeepCopy()
			upd.Spec.Suspend = &q.Spec.Suspend
			if err := r.client.Patch(ctx, upd, client.MergeFrom(j)); err != nil {
				return a, fmt.Errorf("update Job %s: %w", j.Name, err)
			}
			log.Info("Updated Job", "job", client.ObjectKeyFromObject(j), "suspend", q.Spec.Suspend)
			a.job = upd
		}
		return a, nil
	}
	if o.completed || q.Spec.Suspend {
		return a, nil // nothing to run: a Job is created when there is
	}
	created, err := r.createWorkload(ctx, q, o, want, "Job", &a)
	if created {
		a.job = want
	}
	return a, err
}

// createWorkload creates want, the engine's Job or Deployment (kind names it), owned by q,
// once no engine pod of the query is left, and reports whether it did. A refusal of the API
// server is recorded in a.
func (r *QueryReconciler) createWorkload(ctx context.Context, q *v1.StreamingQuery, o *observation, want client.Object, kind string, a *applied) (bool, error) {
	log := logf.FromContext(ctx)
	if len(o.pods) > 0 {
		log.V(1).Info("Waiting for the old engine pods to stop before creating the "+kind, "pods", len(o.pods))
		return false, nil // the pods' deletion reconciles again
	}
	if err := controllerutil.SetControllerReference(q, want, r.scheme); err != nil {
		return false, err
	}
	if err := r.client.Create(ctx, want); err != nil {
		a.refusal, err = workloadRefusal("create "+kind, err)
		return false, err
	}
	log.Info("Created "+kind, strings.ToLower(kind), client.ObjectKeyFromObject(want))
	r.recorder.Eventf(q, want, corev1.EventTypeNormal, EventEngineCreated, "Create", "Created %s %s running generation %d", kind, want.GetName(), q.Generation)
	return true, nil
}

// applyDeployment creates or updates the engine Deployment, and returns what it did.
func (r *QueryReconciler) applyDeployment(ctx context.Context, q *v1.StreamingQuery, o *observation, cm *corev1.ConfigMap, replicas int32) (applied, error) {
	log := logf.FromContext(ctx)
	a := applied{deployment: o.deployment, job: o.job}
	want := RenderDeployment(q, o.store, cm, replicas, r.engine)
	want.Annotations = map[string]string{annotationTemplateHash: templateHash(want)}
	if o.deployment == nil {
		created, err := r.createWorkload(ctx, q, o, want, "Deployment", &a)
		if created {
			a.deployment = want
		}
		return a, err
	}
	d := o.deployment
	if d.Annotations[annotationTemplateHash] == want.Annotations[annotationTemplateHash] {
		return a, nil
	}
	rolled := d.Spec.Template.Annotations[AnnotationSpecHash] != want.Spec.Template.Annotations[AnnotationSpecHash]
	upd := d.DeepCopy()
	if upd.Annotations == nil {
		upd.Annotations = map[string]string{}
	}
	maps.Copy(upd.Annotations, want.Annotations)
	upd.Labels = want.Labels
	upd.Spec.Replicas = want.Spec.Replicas
	upd.Spec.Strategy = want.Spec.Strategy
	upd.Spec.Template = want.Spec.Template
	// An Update, not a merge patch: it replaces the rendered pod template whole, where a
	// patch from a stale cached copy could leave a field the new rendering dropped.
	if err := r.client.Update(ctx, upd); err != nil {
		a.refusal, err = workloadRefusal("update Deployment", err)
		return a, err
	}
	log.Info("Updated Deployment", "deployment", client.ObjectKeyFromObject(upd), "replicas", *want.Spec.Replicas)
	if rolled {
		r.recorder.Eventf(q, upd, corev1.EventTypeNormal, EventEngineRolled, "Roll", "Rolled the engine to generation %d: the old engine stops at a batch boundary, then the new one starts from the checkpoint", q.Generation)
	}
	a.deployment = upd
	return a, nil
}

// replace deletes the engine's workload obj (its pods go with it, each stopping at a batch
// boundary); a later reconcile creates the new one once they are gone.
func (r *QueryReconciler) replace(ctx context.Context, q *v1.StreamingQuery, obj client.Object, why string) error {
	if !obj.GetDeletionTimestamp().IsZero() {
		return nil
	}
	kind := fmt.Sprintf("%T", obj)
	switch obj.(type) {
	case *appsv1.Deployment:
		kind = "Deployment"
	case *batchv1.Job:
		kind = "Job"
	}
	err := r.client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete %s %s: %w", kind, obj.GetName(), err)
	}
	logf.FromContext(ctx).Info("Deleted "+kind+" to replace it", kind, client.ObjectKeyFromObject(obj), "reason", why)
	r.recorder.Eventf(q, obj, corev1.EventTypeNormal, EventEngineReplaced, "Replace", "Deleted %s %s: %s; the new engine starts once its pod has stopped", kind, obj.GetName(), why)
	return nil
}

// workloadRefusal turns the API server's refusal of the rendered workload (a pod template it
// finds invalid: an affinity or a toleration that admission's checks let pass) into a
// refused spec the status reports; other errors are returned, to be retried.
func workloadRefusal(what string, err error) (*refusal, error) {
	if apierrors.IsInvalid(err) {
		return &refusal{reason: v1.ReasonInvalidSpec, err: fmt.Errorf("the API server refused the engine's workload (check spec.engine): %w", err)}, nil
	}
	return nil, fmt.Errorf("%s: %w", what, err)
}

// podTemplateHash is the hash of a rendered pod template, which tells whether a Job, whose
// template cannot change, must be replaced.
func podTemplateHash(t *corev1.PodTemplateSpec) string {
	return templateHash(&appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: *t}})
}

// jobState adds what the engine's Job says to what its pods say: a Job that completed ran
// the spec to its end (its pod may be gone), one that failed has given up restarting it.
func jobState(st engineState, j *batchv1.Job, hash string) engineState {
	if j == nil || hash == "" || j.Spec.Template.Annotations[AnnotationSpecHash] != hash {
		return st
	}
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			st.completed = true
		case batchv1.JobFailed:
			st.failing = true
			if st.failure == nil {
				st.failure = &v1.Failure{Time: c.LastTransitionTime, Message: fmt.Sprintf("the engine's Job failed (%s): %s", c.Reason, c.Message)}
			}
		}
	}
	return st
}

// current reports whether the engine's workload runs the ConfigMap cm (nil: none).
func (a applied) current(cm *corev1.ConfigMap) bool {
	if cm == nil {
		return false
	}
	hash := SpecHash(cm)
	switch {
	case a.deployment != nil:
		return a.deployment.Spec.Template.Annotations[AnnotationSpecHash] == hash
	case a.job != nil:
		return a.job.Spec.Template.Annotations[AnnotationSpecHash] == hash
	}
	return false
}
