package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/controller"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

const testSparkImage = "ghcr.io/lockstep-dev/lockstep-spark:v0.0.0-test"

// sparkPlacement is a spec.engine that places, labels and pulls; driver and executors get it.
func sparkPlacement(s *v1.StreamingQuerySpec) {
	s.Runtime.Spark = &v1.SparkRuntime{
		Driver:    v1.SparkProcess{Cores: 1, Memory: ptr.To(resource.MustParse("768Mi"))},
		Executor:  v1.SparkProcess{Cores: 1, Memory: ptr.To(resource.MustParse("512Mi"))},
		Instances: 2,
	}
	s.Engine.NodeSelector = map[string]string{"pool": "spark"}
	s.Engine.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "spark", Effect: corev1.TaintEffectNoSchedule}}
	s.Engine.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}},
	}}}
	s.Engine.PriorityClassName = "streaming"
	s.Engine.Labels = map[string]string{"team": "payments"}
	s.Engine.Annotations = map[string]string{"cost-center": "42"}
	s.Engine.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry"}}
}

// TestRenderSparkQuery: a spark query's driver is the engine pod with the Spark image, the
// Spark settings, its own name and IP, the query's service account with a token, and requests
// from the driver's sizing; its executors' pod template carries spec.engine's placement and
// the same Secrets by reference; the ConfigMap holds no secret; the executor count and sizing
// roll the driver.
func TestRenderSparkQuery(t *testing.T) {
	q := securedQuery().Edit(sparkPlacement).Obj()
	s := controller.EngineSettings{Image: "ghcr.io/lockstep-dev/lockstep:v1.0.0", SparkImage: testSparkImage}
	cm, err := controller.RenderConfigMap(q, renderStore(), s)
	if err != nil {
		t.Fatal(err)
	}
	pod := controller.RenderPodTemplate(q, renderStore(), cm, s)

	c := pod.Spec.Containers[0]
	if c.Image != testSparkImage {
		t.Errorf("driver image = %s, want %s", c.Image, testSparkImage)
	}
	if !slices.Contains(c.Args, "--spark-conf="+controller.ConfigMountPath+"/"+controller.SparkConfKey) {
		t.Errorf("driver args = %v, want --spark-conf", c.Args)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if e := env[controller.EnvPodName]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("$%s = %+v, want the pod's name", controller.EnvPodName, e)
	}
	if e := env[controller.EnvPodIP]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "status.podIP" {
		t.Errorf("$%s = %+v, want the pod's IP", controller.EnvPodIP, e)
	}
	if pod.Spec.ServiceAccountName != controller.SparkAccountName(q.Name) || !ptr.Deref(pod.Spec.AutomountServiceAccountToken, false) {
		t.Errorf("driver account = %q (token %v), want %s with its token", pod.Spec.ServiceAccountName, pod.Spec.AutomountServiceAccountToken, controller.SparkAccountName(q.Name))
	}
	// 768Mi of heap and Spark's 384Mi overhead.
	if mem, cpu := c.Resources.Requests.Memory(), c.Resources.Requests.Cpu(); mem.Cmp(resource.MustParse("1152Mi")) != 0 || cpu.Cmp(resource.MustParse("1")) != 0 {
		t.Errorf("driver requests = %v, want cpu 1, memory 1152Mi", c.Resources.Requests)
	}

	var conf map[string]string
	if err := json.Unmarshal([]byte(cm.Data[controller.SparkConfKey]), &conf); err != nil {
		t.Fatalf("%s: %v", controller.SparkConfKey, err)
	}
	for k, want := range map[string]string{
		"spark.master":                              "k8s://https://kubernetes.default.svc",
		"spark.submit.deployMode":                   "client",
		"spark.kubernetes.namespace":                "payments",
		"spark.kubernetes.container.image":          testSparkImage,
		"spark.kubernetes.executor.podTemplateFile": controller.ConfigMountPath + "/" + controller.ExecutorPodKey,
		"spark.executor.instances":                  "2",
		"spark.executor.cores":                      "1",
		"spark.executor.memory":                     "512m",
		// A minute for the driver's API requests, not Spark's 10 s (a busy API server).
		"spark.kubernetes.driver.requestTimeout":    "60000",
		"spark.kubernetes.driver.connectionTimeout": "60000",
	} {
		if conf[k] != want {
			t.Errorf("Spark setting %s = %q, want %q", k, conf[k], want)
		}
	}

	var exec corev1.Pod
	if err := yaml.UnmarshalStrict([]byte(cm.Data[controller.ExecutorPodKey]), &exec); err != nil {
		t.Fatalf("%s: %v", controller.ExecutorPodKey, err)
	}
	es := exec.Spec
	if es.NodeSelector["pool"] != "spark" || len(es.Tolerations) != 1 || es.Affinity == nil || es.Affinity.NodeAffinity == nil ||
		es.PriorityClassName != "streaming" || len(es.ImagePullSecrets) != 1 || es.ImagePullSecrets[0].Name != "registry" {
		t.Errorf("executor placement = %+v, want spec.engine's", es)
	}
	if exec.Labels["team"] != "payments" || exec.Labels[controller.LabelQuery] != q.Name || exec.Labels[controller.LabelComponent] != controller.ComponentSparkExecutor || exec.Annotations["cost-center"] != "42" {
		t.Errorf("executor metadata = %v %v", exec.Labels, exec.Annotations)
	}
	if ptr.Deref(es.AutomountServiceAccountToken, true) {
		t.Error("executors mount the API token; only the driver talks to the API server")
	}
	if len(es.Containers) != 1 || es.Containers[0].Name != controller.ExecutorContainer {
		t.Fatalf("executor containers = %+v", es.Containers)
	}
	execEnv := map[string]corev1.EnvVar{}
	for _, e := range es.Containers[0].Env {
		execEnv[e.Name] = e
	}
	for _, name := range []string{controller.EnvAccessKeyID, controller.EnvSecretAccessKey, v1.DefaultKafkaUsernameEnv, v1.DefaultKafkaPasswordEnv} {
		e := execEnv[name]
		if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != env[name].ValueFrom.SecretKeyRef.Name {
			t.Errorf("executor $%s = %+v, want the driver's Secret reference %+v", name, e, env[name])
		}
	}
	if len(es.Containers[0].VolumeMounts) < 2 {
		t.Errorf("executor mounts = %v, want /tmp and the Kafka TLS Secrets", es.Containers[0].VolumeMounts)
	}

	// Only the driver's settings are in the ConfigMap: a rendering holds Secret names, and
	// the Secrets' values are nowhere (the test's Secrets have none; their names are all the
	// ConfigMap may say).
	for k, v := range cm.Data {
		if strings.Contains(v, "secretKeyRef") && k != controller.ExecutorPodKey {
			t.Errorf("ConfigMap key %s references Secrets", k)
		}
	}

	for what, edit := range map[string]func(*v1.SparkRuntime){
		"instances":       func(r *v1.SparkRuntime) { r.Instances = 3 },
		"executor memory": func(r *v1.SparkRuntime) { r.Executor.Memory = ptr.To(resource.MustParse("1Gi")) },
		"executor cores":  func(r *v1.SparkRuntime) { r.Executor.Cores = 2 },
	} {
		changed := q.DeepCopy()
		edit(changed.Spec.Runtime.Spark)
		cm2, err := controller.RenderConfigMap(changed, renderStore(), s)
		if err != nil {
			t.Fatal(err)
		}
		if controller.SpecHash(cm2) == controller.SpecHash(cm) {
			t.Errorf("changing the %s does not roll the driver", what)
		}
	}
}

// TestReconcileSparkQuery runs a spark query through the reconciler on a real API server:
// the driver's Deployment runs the Spark image as the query's own service account, whose
// Role grants pods, services, config maps and claims in the namespace only and which, with
// its RoleBinding, is owned by the query; the status counts the executors ready of wanted,
// and a Warning event says when one cannot be scheduled.
func TestReconcileSparkQuery(t *testing.T) {
	f := newFixture(t, testenv.ControlPlane(t))
	f.startManager(nil, controller.WithEngine(controller.EngineSettings{Image: testEngineImage, SparkImage: testSparkImage}))
	q := f.query("orders").Edit(sparkPlacement).Edit(func(s *v1.StreamingQuerySpec) {
		s.Engine.PriorityClassName = "" // the API server refuses pods of a class it does not have
	}).Obj()
	f.create(q)
	q = f.get("orders")

	cm, d := f.engine("orders")
	if cm.Data[controller.SparkConfKey] == "" || cm.Data[controller.ExecutorPodKey] == "" {
		t.Fatalf("ConfigMap keys = %v, want the Spark settings and the executors' pod template", keys(cm.Data))
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; img != testSparkImage {
		t.Errorf("driver image = %s, want %s", img, testSparkImage)
	}
	ctx := context.Background()
	name := controller.SparkAccountName("orders")
	var sa corev1.ServiceAccount
	var role rbacv1.Role
	var binding rbacv1.RoleBinding
	eventually(t, "the driver's service account, Role and RoleBinding", func() error {
		for _, obj := range []client.Object{&sa, &role, &binding} {
			if err := f.c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, obj); err != nil {
				return err
			}
		}
		return nil
	})
	for _, obj := range []client.Object{&sa, &role, &binding} {
		refs := obj.GetOwnerReferences()
		if len(refs) != 1 || refs[0].UID != q.UID || !ptr.Deref(refs[0].Controller, false) {
			t.Errorf("%T %s owners = %+v, want the query", obj, obj.GetName(), refs)
		}
	}
	if len(role.Rules) != 1 || !slices.Equal(role.Rules[0].Resources, []string{"pods", "services", "configmaps", "persistentvolumeclaims"}) || !slices.Equal(role.Rules[0].APIGroups, []string{""}) {
		t.Errorf("Role rules = %+v, want pods, services, config maps and claims of the core group only", role.Rules)
	}
	if binding.RoleRef.Name != name || len(binding.Subjects) != 1 || binding.Subjects[0].Name != name || binding.Subjects[0].Namespace != f.ns {
		t.Errorf("RoleBinding = %+v %+v", binding.RoleRef, binding.Subjects)
	}
	if d.Spec.Template.Spec.ServiceAccountName != name {
		t.Errorf("driver account = %s, want %s", d.Spec.Template.Spec.ServiceAccountName, name)
	}

	// The status reads the spark runtime's records (in _lockstep, beside Spark's files).
	f.writeCheckpoint(q, 3, 2, time.Now())
	eventually(t, "the status shows the batches the records hold", func() error {
		st := f.get("orders").Status
		if st.LatestCommittedBatch == nil || *st.LatestCommittedBatch != 2 || st.QueryID == "" {
			return fmt.Errorf("latest committed batch %v, query id %q", st.LatestCommittedBatch, st.QueryID)
		}
		return nil
	})

	driver := f.runPod(d)
	executor := func(n int, ready bool) {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("orders-exec-%d", n), Namespace: f.ns, Labels: map[string]string{
				controller.LabelQuery: "orders", controller.LabelComponent: controller.ComponentSparkExecutor, "app.kubernetes.io/name": "lockstep",
			}, OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: driver.Name, UID: driver.UID}}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: controller.ExecutorContainer, Image: testSparkImage}}},
		}
		f.create(p)
		if ready {
			p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		} else {
			p.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
				Reason: corev1.PodReasonUnschedulable, Message: "0/1 nodes are available: 1 Insufficient cpu."}}}
		}
		if err := f.c.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	executor(1, true)
	executor(2, false)
	eventually(t, "the executors in the status", func() error {
		e := f.get("orders").Status.Executors
		if e == nil || e.Ready != 1 || e.Wanted != 2 || e.Summary != "1/2" || e.Unschedulable != 1 {
			return fmt.Errorf("status.executors = %+v, want 1/2 with 1 unschedulable", e)
		}
		return nil
	})
	ev := f.event("orders", controller.EventExecutorsUnschedulable)
	if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Note, "Insufficient cpu") {
		t.Errorf("event = %s %q, want a Warning with the scheduler's reason", ev.Type, ev.Note)
	}

	// More executors is an allowed change: it rolls the driver.
	before := d.Spec.Template.Annotations[controller.AnnotationSpecHash]
	if err := f.update("orders", func(q *v1.StreamingQuery) { q.Spec.Runtime.Spark.Instances = 3 }); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the driver rolled to 3 executors", func() error {
		_, d := f.engine("orders")
		if d.Spec.Template.Annotations[controller.AnnotationSpecHash] == before {
			return fmt.Errorf("the driver's pod template still runs the old spec")
		}
		return nil
	})
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestWebhookJudgesASparkCheckpoint: a spark query pointed at a checkpoint that a Spark job
// Lockstep did not start wrote (Spark's files, no records; its sources named, listed by
// position as Spark 4.2 does) is judged against what Spark's files record, as `lockstep plan --checkpoint` and the engine before it adopts it judge it:
// a query with fewer sources than Spark's positional offsets is refused, the matching one (its
// state partitions as Spark pinned them) is admitted, and nothing is written to the checkpoint.
func TestWebhookJudgesASparkCheckpoint(t *testing.T) {
	f, _ := webhookFixture(t)
	ctx := context.Background()
	st := f.openCheckpoint("orders")
	for key, data := range map[string]string{
		"metadata":  `{"id":"7f1c2b9e-3c0a-4d57-9f4e-0d6b8f1e2a33"}` + "\n",
		"offsets/0": "v1\n" + `{"batchWatermarkMs":0,"batchTimestampMs":1767607200000,"conf":{"spark.sql.shuffle.partitions":"3","spark.sql.streaming.queryEvolution.enableSourceEvolution":"true"}}` + "\n" + `{"logOffset":0}` + "\n" + `{"logOffset":0}`,
		"commits/0": "v1\n" + `{"nextBatchWatermarkMs":0}`,
	} {
		if err := st.Put(ctx, key, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	before, err := checkpoint.ListKeys(ctx, st, "")
	if err != nil {
		t.Fatal(err)
	}
	one := f.query("orders").Edit(func(s *v1.StreamingQuerySpec) { s.Runtime.Spark = &v1.SparkRuntime{} })
	err = f.c.Create(ctx, one.Obj())
	if causes := statusCauses(err); !apierrors.IsInvalid(err) || !strings.Contains(causes, "spark-source-positions") {
		t.Errorf("Create of a one-source query on a two-source Spark checkpoint = %v, causes:\n%s\nwant Invalid naming spark-source-positions", err, causes)
	}
	two := one.FilesSource("more", "s3://"+f.s3.Bucket+"/landing/more", v1.FormatJSON,
		querytest.Col("id", v1.TypeString), querytest.Col("amount", v1.TypeDouble)).
		Edit(func(s *v1.StreamingQuerySpec) { s.StateStore.Partitions = 3 }) // as Spark pinned them
	if err := f.c.Create(ctx, two.Obj(), client.DryRunAll); err != nil {
		t.Errorf("Create of the matching query = %v, want it admitted (the engine adopts the checkpoint)", err)
	}
	if after, err := checkpoint.ListKeys(ctx, st, ""); err != nil || !slices.Equal(before, after) {
		t.Errorf("the checkpoint's keys after judging = %v (%v), want %v", after, err, before)
	}
}
