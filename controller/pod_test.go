package controller_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/controller"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// Values of the test's Secrets: none may appear outside the Secrets. (The store's S3
// credentials are the test server's; a session token the server would refuse.)
var secretValues = []string{"kafka-pa55word", "Bearer hook-t0ken", "ca-pem-s3cr3t"}

// createSecrets creates the Secrets a secured query names.
func (f *fixture) createSecrets() {
	f.t.Helper()
	for name, data := range map[string]map[string]string{
		"kafka-user": {controller.KeySASLUsername: "orders-reader", controller.KeySASLPassword: secretValues[0]},
		"hook-auth":  {"Authorization": secretValues[1]},
		"kafka-ca":   {controller.KeyCA: secretValues[2]},
	} {
		f.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns}, StringData: data})
	}
}

// securedQuery reads Kafka with SASL and a CA from Secrets and writes to a webhook whose
// headers come from a Secret.
func (f *fixture) securedQuery(name string) *querytest.Query {
	return querytest.Make(name, f.ns).
		KafkaSource("orders", "kafka:9093", "orders", querytest.Col("id", v1.TypeString)).
		EditSource("orders", func(s *v1.Source) {
			s.Kafka.SASL = &v1.KafkaSASL{Mechanism: v1.SASLScramSHA512, SecretName: "kafka-user"}
			s.Kafka.TLS = &v1.KafkaTLS{CASecretName: "kafka-ca"}
		}).
		WebhookSink("https://hooks.example.com/orders").
		Edit(func(s *v1.StreamingQuerySpec) { s.Sink.Webhook.HeadersSecretName = "hook-auth" }).
		CheckpointStore(f.store.Name)
}

// TestSecretsReachTheEngineByReference: the engine's Deployment fills the SASL credentials and
// the S3 session token from their Secrets and mounts the CA and the webhook headers, and no
// Secret's value appears in the ConfigMap, the query (status included) or an event.
func TestSecretsReachTheEngineByReference(t *testing.T) {
	f, _ := webhookFixture(t)
	f.createSecrets()
	f.create(f.securedQuery("orders").Obj())
	cm, d := f.engine("orders")
	f.eventuallyCondition("orders", v1.ConditionCompatible, metav1.ConditionTrue, v1.ReasonNoCheckpoint)

	c := d.Spec.Template.Spec.Containers[0]
	refs := secretRefs(c)
	for name, want := range map[string]string{
		v1.DefaultKafkaUsernameEnv: "kafka-user/username",
		v1.DefaultKafkaPasswordEnv: "kafka-user/password",
		controller.EnvSessionToken: "s3-credentials/AWS_SESSION_TOKEN",
	} {
		if refs[name] != want {
			t.Errorf("$%s from %q, want %q", name, refs[name], want)
		}
	}
	mounted := map[string]bool{}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			mounted[v.Secret.SecretName] = true
		}
	}
	if !mounted["kafka-ca"] || !mounted["hook-auth"] {
		t.Errorf("mounted Secrets %v, want kafka-ca and hook-auth", mounted)
	}
	if !strings.Contains(cm.Data[controller.QueryKey], "caFile: "+controller.SecretsMountPath+"/kafka-ca/ca.crt") {
		t.Errorf("the engine's query does not point caFile at the mounted Secret:\n%s", cm.Data[controller.QueryKey])
	}

	q := f.get("orders")
	qj, err := json.Marshal(q)
	if err != nil {
		t.Fatal(err)
	}
	var evs eventsv1.EventList
	if err := f.c.List(context.Background(), &evs, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	ej, err := json.Marshal(evs)
	if err != nil {
		t.Fatal(err)
	}
	cj, err := json.Marshal(cm)
	if err != nil {
		t.Fatal(err)
	}
	dj, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	for what, text := range map[string]string{"ConfigMap": string(cj), "StreamingQuery": string(qj), "events": string(ej), "Deployment": string(dj)} {
		for _, v := range secretValues {
			if strings.Contains(text, v) {
				t.Errorf("the %s holds the Secret value %q", what, v)
			}
		}
	}
}

// TestAdmissionRefusesUnwirableSecrets: a reference the controller cannot wire is refused at
// admission, on the field that names it.
func TestAdmissionRefusesUnwirableSecrets(t *testing.T) {
	f, _ := webhookFixture(t)
	for _, tc := range []struct {
		name  string
		q     *v1.StreamingQuery
		field string
	}{
		{"caFile and caSecretName", f.securedQuery("ca").EditSource("orders", func(s *v1.Source) { s.Kafka.TLS.CAFile = "/etc/ca.pem" }).Obj(),
			"spec.sources[0].kafka.tls.caSecretName"},
		{"one variable from two Secrets", f.securedQuery("two").
			KafkaSource("refunds", "kafka:9093", "refunds", querytest.Col("id", v1.TypeString)).
			EditSource("refunds", func(s *v1.Source) { s.Kafka.SASL = &v1.KafkaSASL{Mechanism: v1.SASLPlain, SecretName: "other-user"} }).Obj(),
			"spec.sources[1].kafka.sasl.secretName"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := f.c.Create(context.Background(), tc.q)
			if !apierrors.IsInvalid(err) || !strings.Contains(statusCauses(err), tc.field+":") {
				t.Errorf("create = %v (causes %q), want Invalid on %s", err, statusCauses(err), tc.field)
			}
		})
	}
}

func (f *fixture) job(name string) *batchv1.Job {
	f.t.Helper()
	var j batchv1.Job
	eventually(f.t, "the engine's Job", func() error {
		return f.c.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: controller.EngineName(name)}, &j)
	})
	return &j
}

// finishPod creates an engine pod of the Job's template whose engine exited 0, as the Job
// controller and kubelet would leave it.
func (f *fixture) finishPod(j *batchv1.Job) *corev1.Pod {
	f.t.Helper()
	return f.templatePod(j, &j.Spec.Template, corev1.PodSucceeded, false, corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", Message: "completed: 1 batches this run, last committed batch 0"},
	})
}

// templatePod creates an engine pod of owner's pod template tmpl, as its controller would,
// and gives it the status a kubelet would report: phase, with the engine container ready or
// not, in state.
func (f *fixture) templatePod(owner metav1.Object, tmpl *corev1.PodTemplateSpec, phase corev1.PodPhase, ready bool, state corev1.ContainerState) *corev1.Pod {
	f.t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: owner.GetName() + "-" + tmpl.Annotations[controller.AnnotationSpecHash][:8], Namespace: owner.GetNamespace(),
			Labels: tmpl.Labels, Annotations: tmpl.Annotations,
		},
		Spec: tmpl.Spec,
	}
	f.create(pod)
	pod.Status = corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{
		Name: controller.EngineContainer, Ready: ready, Image: tmpl.Spec.Containers[0].Image, State: state,
	}}}
	if err := f.c.Status().Update(context.Background(), pod); err != nil {
		f.t.Fatal(err)
	}
	return pod
}

func (f *fixture) gone(obj client.Object) error {
	err := f.c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("%T %s still there", obj, obj.GetName())
}

// TestTriggerThatEndsRunsAsJob: a query whose trigger ends runs as a Job (a pod that exited 0
// is not started again) and reads Completed once its engine finished; a new generation
// replaces the Job once the old pod is gone; a processingTime trigger replaces the Job by a
// Deployment, and once back by a Job; suspend suspends the Job.
func TestTriggerThatEndsRunsAsJob(t *testing.T) {
	f := newFixture(t, testenv.ControlPlane(t))
	f.startManager(nil)
	f.create(f.query("orders").Once().Obj())
	j := f.job("orders")
	if rp := j.Spec.Template.Spec.RestartPolicy; rp != corev1.RestartPolicyOnFailure {
		t.Errorf("restartPolicy = %s, want OnFailure", rp)
	}
	if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: controller.EngineName("orders")}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("get pod = %v", err)
	}

	pod := f.finishPod(j)
	q := f.eventuallyCondition("orders", v1.ConditionReady, metav1.ConditionTrue, v1.ReasonCompleted)
	if q.Status.Phase != v1.PhaseCompleted {
		t.Errorf("phase = %s, want Completed", q.Status.Phase)
	}

	// A new generation replaces the Job, once the old pod is gone.
	if err := f.update("orders", func(q *v1.StreamingQuery) { q.Spec.Transform[0].Filter = "amount > 2.0" }); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the old Job is deleted", func() error { return f.gone(j.DeepCopy()) })
	if err := f.c.Delete(context.Background(), pod); err != nil { // the garbage collector's part
		t.Fatal(err)
	}
	eventually(t, "a Job of generation 2", func() error {
		var nj batchv1.Job
		if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(j), &nj); err != nil {
			return err
		}
		if nj.UID == j.UID || nj.Spec.Template.Annotations[controller.AnnotationSpecHash] == j.Spec.Template.Annotations[controller.AnnotationSpecHash] {
			return errors.New("still the old Job")
		}
		return nil
	})
	q = f.get("orders")
	if q.Status.Phase == v1.PhaseCompleted {
		t.Errorf("phase = Completed for generation %d, which has not run", q.Generation)
	}

	// Suspend suspends the Job.
	if err := f.update("orders", func(q *v1.StreamingQuery) { q.Spec.Suspend = true }); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Job is suspended", func() error {
		if j := f.job("orders"); !ptr.Deref(j.Spec.Suspend, false) {
			return errors.New("not suspended")
		}
		return nil
	})

	// processingTime: a Deployment instead.
	if err := f.update("orders", func(q *v1.StreamingQuery) {
		q.Spec.Suspend = false
		q.Spec.Trigger = v1.Trigger{ProcessingTime: "1m"}
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Job is replaced by a Deployment", func() error {
		if err := f.gone(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: controller.EngineName("orders")}}); err != nil {
			return err
		}
		_, d := f.engine("orders")
		if ptr.Deref(d.Spec.Replicas, 0) != 1 {
			return fmt.Errorf("replicas %v", d.Spec.Replicas)
		}
		return nil
	})
	eventually(t, "an EngineReplaced event per replacement", func() error {
		var evs eventsv1.EventList
		if err := f.c.List(context.Background(), &evs, client.InNamespace(f.ns)); err != nil {
			return err
		}
		replaced := 0
		for _, e := range evs.Items {
			if e.Reason == controller.EventEngineReplaced {
				replaced++
			}
		}
		if replaced < 2 {
			return fmt.Errorf("%d %s events, want 2", replaced, controller.EventEngineReplaced)
		}
		return nil
	})
}

// TestInvalidPodTemplateBlocksTheQuery: a pod template the API server refuses (an affinity
// that admission's checks let pass) is reported in the status, not retried silently.
func TestInvalidPodTemplateBlocksTheQuery(t *testing.T) {
	f := newFixture(t, testenv.ControlPlane(t))
	f.startManager(nil)
	q := f.query("orders").Obj()
	q.Spec.Engine.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: "Near"}}}},
	}}}
	f.create(q)
	q = f.eventuallyCondition("orders", v1.ConditionReady, metav1.ConditionFalse, v1.ReasonInvalidSpec)
	if msg := condition(q, v1.ConditionReady).Message; q.Status.Phase != v1.PhaseBlocked || !strings.Contains(msg, "affinity") {
		t.Errorf("status = %s: %s, want Blocked naming the affinity", q.Status.Phase, msg)
	}
}
