package controller

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
)

// A query with spec.runtime.spark runs as a Spark application on Kubernetes (docs/spark.md,
// On Kubernetes): its driver is `lockstep engine` in the pod the controller already runs (a
// Deployment, or a Job for once and availableNow), with the Spark image; Spark's Kubernetes
// backend, in client mode, creates the executor pods in the query's namespace, owned by the
// driver pod (spark.kubernetes.driver.pod.name), so that they go when it goes. The driver's
// settings and the executors' pod template are in the engine's ConfigMap (SparkConfKey,
// ExecutorPodKey), so that a change of either rolls the driver; the driver's service account,
// Role and RoleBinding are the query's (sparkAccess), owned by it.

// Spark on Kubernetes: the master URL, the ports executors reach the driver on, the executors'
// container and component label.
const (
	sparkMasterInCluster = "k8s://https://kubernetes.default.svc"
	sparkDriverPort      = 7078
	sparkBlockPort       = 7079
	// ExecutorContainer is the name of a spark executor's container in its pod template.
	ExecutorContainer = "executor"
	// ComponentSparkExecutor is the LabelComponent of a spark query's executor pods.
	ComponentSparkExecutor = "spark-executor"
	// sparkExecutorRequestCores is the CPU an executor pod requests (Spark's default:
	// spark.executor.cores).
	sparkExecutorRequestCores = "spark.kubernetes.executor.request.cores"
	// sparkMinOverhead and sparkOverheadFactor are Spark's memory overhead of a JVM on
	// Kubernetes (spark.{driver,executor}.memoryOverhead's default): max(384Mi, 10% of the heap).
	sparkMinOverhead    = 384 << 20
	sparkOverheadFactor = 0.10
)

// sparkDriverClientTimeouts are the driver's Kubernetes client timeouts, in milliseconds.
var sparkDriverClientTimeouts = []string{"spark.kubernetes.driver.requestTimeout", "spark.kubernetes.driver.connectionTimeout"}

// isSpark reports whether the query runs on Spark.
func isSpark(q *v1.StreamingQuery) bool { return q.Spec.Runtime.Spark != nil }

// SparkAccountName returns the name of the service account, Role and RoleBinding of a spark
// query's driver.
func SparkAccountName(query string) string { return query + "-spark" }

// sparkAccountOf returns the service account the driver runs as: spec.engine's, else the
// query's own.
func sparkAccountOf(q *v1.StreamingQuery) string {
	return cmp.Or(q.Spec.Engine.ServiceAccountName, SparkAccountName(q.Name))
}

// sparkConfig returns the ConfigMap entries of a spark query: the driver's Spark settings
// (SparkConfKey) and the executors' pod template (ExecutorPodKey). Neither holds a secret:
// the template names Secrets by reference, as the engine pod does.
func sparkConfig(q *v1.StreamingQuery, store *v1.CheckpointStore, cm *corev1.ConfigMap, s EngineSettings) (map[string]string, error) {
	rt := q.Spec.Runtime.Spark
	conf := map[string]string{
		"spark.master":                                       sparkMasterInCluster,
		"spark.submit.deployMode":                            "client",
		"spark.kubernetes.namespace":                         q.Namespace,
		"spark.kubernetes.container.image":                   s.SparkImage,
		"spark.kubernetes.executor.podTemplateFile":          ConfigMountPath + "/" + ExecutorPodKey,
		"spark.kubernetes.executor.podTemplateContainerName": ExecutorContainer,
		"spark.kubernetes.executor.deleteOnTermination":      "true",
		"spark.executor.instances":                           strconv.Itoa(int(max(rt.Instances, v1.DefaultSparkInstances))),
		"spark.executor.cores":                               strconv.Itoa(int(rt.Executor.CoresOrDefault())),
		"spark.executor.memory":                              mebibytes(rt.Executor.MemoryOrDefault()),
		"spark.driver.bindAddress":                           "0.0.0.0",
		"spark.driver.port":                                  strconv.Itoa(sparkDriverPort),
		"spark.driver.blockManager.port":                     strconv.Itoa(sparkBlockPort),
		// S3A buffers the blocks it uploads in the heap, not on disk: the root file system is
		// read-only, and Hadoop's free-space check finds none in the pod's tmp volume.
		"spark.hadoop.fs.s3a.fast.upload.buffer": "array",
		"spark.hadoop.hadoop.tmp.dir":            tmpMountPath + "/hadoop",
	}
	if s.PullPolicy != "" {
		conf["spark.kubernetes.container.image.pullPolicy"] = string(s.PullPolicy)
	}
	if _, ok := cm.BinaryData[TrustStoreKey]; ok {
		// The executors' JVMs trust the store's CA bundle as the driver's does (engine/spark
		// gives the driver's JVM its own trust store); the spec's executor options follow, as
		// Spark would apply them.
		opts := append(s3.JavaTrustOptions(ConfigMountPath+"/"+TrustStoreKey), v1.JavaOptions(rt.Conf[v1.SparkExecutorJavaOptions])...)
		conf[v1.SparkExecutorJavaOptions] = strings.Join(opts, " ")
	}
	if _, set := rt.Conf[sparkExecutorRequestCores]; !set && rt.Executor.Cores == 0 {
		// Unsized executors ask for a fraction of a core, as the driver does (see
		// v1.SparkProcess.CPURequest), rather than Spark's spark.executor.cores whole cores.
		cpu := rt.Executor.CPURequest()
		conf[sparkExecutorRequestCores] = cpu.String()
	}
	for _, k := range sparkDriverClientTimeouts {
		// The driver's Kubernetes client: Spark gives a request 10 s, and SparkContext's start
		// (the driver's own pod, the executors' ConfigMap, the pod watch) fails the driver when
		// one takes longer, as an API server on a busy node can. A minute, unless the spec says.
		if _, set := rt.Conf[k]; !set {
			conf[k] = "60000"
		}
	}
	if len(q.Name) <= 40 {
		// Executor pods are named <prefix>-exec-<n>; Spark's default prefix is the app's
		// generated name, which says nothing of the query.
		conf["spark.kubernetes.executor.podNamePrefix"] = q.Name
	}
	confJSON, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("render the Spark settings of %s/%s: %w", q.Namespace, q.Name, err)
	}
	pod, err := yaml.Marshal(renderExecutorPod(q, store, cm))
	if err != nil {
		return nil, fmt.Errorf("render the executors' pod template of %s/%s: %w", q.Namespace, q.Name, err)
	}
	return map[string]string{SparkConfKey: string(confJSON), ExecutorPodKey: string(pod)}, nil
}

// renderExecutorPod returns the executors' pod template: spec.engine's placement, labels,
// annotations, image pull secrets and envFrom; the store's and the spec's Secrets by
// reference, as the engine gets them; the engine's security context, a writable /tmp and no
// API token. Spark sets the image, the command's argument, the resources (from the spark
// sizing) and the owner (the driver pod) on top of it.
func renderExecutorPod(q *v1.StreamingQuery, store *v1.CheckpointStore, cm *corev1.ConfigMap) *corev1.Pod {
	es := &q.Spec.Engine
	env, vols, mounts := engineEnv(q, store, cm)
	labels := map[string]string{LabelQuery: q.Name, LabelComponent: ComponentSparkExecutor, "app.kubernetes.io/name": "lockstep"}
	addAbsent(labels, es.Labels)
	if _, ok := cm.Data[CABundleKey]; ok {
		vols = append(vols, corev1.Volume{Name: "query", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name},
			Items:                configItems(cm),
		}}})
		mounts = append(mounts, corev1.VolumeMount{Name: "query", MountPath: ConfigMountPath, ReadOnly: true})
	}
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: maps.Clone(es.Annotations)},
		Spec: enginePodSpec(es, corev1.Container{
			Name:    ExecutorContainer,
			EnvFrom: slices.Clone(es.EnvFrom),
			Env:     env,
			VolumeMounts: append([]corev1.VolumeMount{
				{Name: "tmp", MountPath: tmpMountPath},
			}, mounts...),
			SecurityContext: engineContainerSecurity(),
		}, append([]corev1.Volume{tmpVolume()}, vols...)),
	}
}

// sparkDriverPod turns the engine's pod template into a spark query's driver: the Spark
// image, the Spark settings, the pod's name and IP (the executors' owner and their way
// back), the driver's ports, the query's service account with its token (Spark's Kubernetes
// backend talks to the API server), and, where spec.resources sets none, requests and limits
// from the driver's sizing (v1.SparkProcess.CPURequest; memory limited to its request).
func sparkDriverPod(tmpl *corev1.PodTemplateSpec, q *v1.StreamingQuery, s EngineSettings) {
	spec := &tmpl.Spec
	spec.ServiceAccountName = sparkAccountOf(q)
	spec.AutomountServiceAccountToken = ptr.To(true)
	c := &spec.Containers[0]
	c.Image = cmp.Or(s.SparkImage, s.Image)
	c.Args = append(c.Args, "--spark-conf="+ConfigMountPath+"/"+SparkConfKey)
	c.Env = append(c.Env,
		corev1.EnvVar{Name: EnvPodName, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		corev1.EnvVar{Name: EnvPodIP, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
	)
	c.Ports = append(c.Ports,
		corev1.ContainerPort{Name: "spark-driver", ContainerPort: sparkDriverPort, Protocol: corev1.ProtocolTCP},
		corev1.ContainerPort{Name: "spark-blocks", ContainerPort: sparkBlockPort, Protocol: corev1.ProtocolTCP},
	)
	if len(q.Spec.Resources.Requests) == 0 && len(q.Spec.Resources.Limits) == 0 {
		d := q.Spec.Runtime.Spark.Driver
		mem := withOverhead(d.MemoryOrDefault())
		c.Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: d.CPURequest(), corev1.ResourceMemory: mem},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: mem},
		}
	}
}

// withOverhead returns a JVM heap plus Spark's memory overhead on Kubernetes, in MiB.
func withOverhead(heap resource.Quantity) resource.Quantity {
	h := heap.Value()
	total := h + max(int64(sparkMinOverhead), int64(float64(h)*sparkOverheadFactor))
	return *resource.NewQuantity((total+(1<<20)-1)>>20<<20, resource.BinarySI)
}

// mebibytes is a quantity as Spark's memory strings write it (512m).
func mebibytes(q resource.Quantity) string {
	return strconv.FormatInt(max(q.Value()>>20, 1), 10) + "m"
}

// sparkRole is the least privilege a spark query's driver needs, in its own namespace only:
// Spark's Kubernetes backend creates, watches and deletes its executor pods, their config
// map and, when the executors ask for them, services and persistent volume claims.
func sparkRole(q *v1.StreamingQuery) *rbacv1.Role {
	verbs := []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
	return &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: metav1.ObjectMeta{Name: SparkAccountName(q.Name), Namespace: q.Namespace, Labels: EngineLabels(q)},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""},
			Resources: []string{"pods", "services", "configmaps", "persistentvolumeclaims"},
			Verbs:     verbs,
		}},
	}
}

// sparkRoleBinding binds the driver's Role to the account it runs as.
func sparkRoleBinding(q *v1.StreamingQuery) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: SparkAccountName(q.Name), Namespace: q.Namespace, Labels: EngineLabels(q)},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: SparkAccountName(q.Name)},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sparkAccountOf(q), Namespace: q.Namespace}},
	}
}

// sparkServiceAccount is the driver's own account, when spec.engine names none.
func sparkServiceAccount(q *v1.StreamingQuery) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: metav1.ObjectMeta{Name: SparkAccountName(q.Name), Namespace: q.Namespace, Labels: EngineLabels(q)},
		// The token is mounted by the driver pod only; executors do not mount it.
		AutomountServiceAccountToken: ptr.To(false),
	}
}

// applySparkAccess creates, or brings back to what it should be, the service account (unless
// spec.engine names one), Role and RoleBinding of a spark query's driver, each owned by the
// query so that they go with it.
func (r *QueryReconciler) applySparkAccess(ctx context.Context, q *v1.StreamingQuery) error {
	log := logf.FromContext(ctx)
	ensure := func(want client.Object, same func(have client.Object) bool, have client.Object) error {
		if err := controllerutil.SetControllerReference(q, want, r.scheme); err != nil {
			return err
		}
		err := r.client.Get(ctx, client.ObjectKeyFromObject(want), have)
		switch {
		case apierrors.IsNotFound(err):
			if err := r.client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create %T %s: %w", want, want.GetName(), err)
			}
			log.Info("Created the Spark driver's access", "kind", fmt.Sprintf("%T", want), "name", want.GetName())
			return nil
		case err != nil:
			return fmt.Errorf("get %T %s: %w", want, want.GetName(), err)
		case same(have):
			return nil
		}
		want.SetResourceVersion(have.GetResourceVersion())
		if err := r.client.Update(ctx, want); err != nil {
			return fmt.Errorf("update %T %s: %w", want, want.GetName(), err)
		}
		return nil
	}
	if q.Spec.Engine.ServiceAccountName == "" {
		if err := ensure(sparkServiceAccount(q), func(client.Object) bool { return true }, &corev1.ServiceAccount{}); err != nil {
			return err
		}
	}
	role := sparkRole(q)
	if err := ensure(role, func(h client.Object) bool {
		return equality.Semantic.DeepEqual(h.(*rbacv1.Role).Rules, role.Rules)
	}, &rbacv1.Role{}); err != nil {
		return err
	}
	binding := sparkRoleBinding(q)
	var have rbacv1.RoleBinding
	if err := r.client.Get(ctx, client.ObjectKeyFromObject(binding), &have); err == nil && have.RoleRef != binding.RoleRef {
		// The role a binding refers to cannot change: replace the binding.
		if err := r.client.Delete(ctx, &have); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("replace RoleBinding %s: %w", have.Name, err)
		}
	}
	return ensure(binding, func(h client.Object) bool {
		return equality.Semantic.DeepEqual(h.(*rbacv1.RoleBinding).Subjects, binding.Subjects)
	}, &rbacv1.RoleBinding{})
}

// EventExecutorsUnschedulable is the Warning event of a spark query whose executor pods the
// scheduler cannot place.
const EventExecutorsUnschedulable = "ExecutorsUnschedulable"

// executorsStatus counts a spark query's executor pods: ready ones, of the spec's instances
// while the query runs (0 while it is stopped), and the ones the scheduler cannot place, with
// the scheduler's reason for one of them.
func executorsStatus(q *v1.StreamingQuery, pods []corev1.Pod, running bool) *v1.ExecutorsStatus {
	st := &v1.ExecutorsStatus{}
	if running {
		st.Wanted = max(q.Spec.Runtime.Spark.Instances, v1.DefaultSparkInstances)
	}
	for i := range pods {
		p := &pods[i]
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.Status.Phase == corev1.PodRunning {
				st.Ready++
			}
		}
		if msg, ok := unschedulable(p); ok {
			st.Unschedulable++
			if st.Message == "" {
				st.Message = fmt.Sprintf("executor pod %s: %s", p.Name, msg)
			}
		}
	}
	st.Summary = fmt.Sprintf("%d/%d", st.Ready, st.Wanted)
	return st
}

// unschedulable returns the scheduler's reason why it cannot place a pod (its PodScheduled
// condition's message), and whether it cannot.
func unschedulable(p *corev1.Pod) (string, bool) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c.Message, true
		}
	}
	return "", false
}

// executorsEvent returns the Warning event of executors that became unschedulable, or nil.
func executorsEvent(old, now *v1.ExecutorsStatus) *event {
	if now == nil || now.Unschedulable == 0 || old != nil && old.Unschedulable > 0 {
		return nil
	}
	return &event{corev1.EventTypeWarning, EventExecutorsUnschedulable, "Schedule",
		fmt.Sprintf("%d executor pod(s) cannot be scheduled; the query runs on the executors it has (%s)", now.Unschedulable, now.Message)}
}

// sparkAppSelector is the label Spark's Kubernetes backend puts on an application's executor
// pods: the application id (spark.app.id), new at each start of the driver's JVM.
const sparkAppSelector = "spark-app-selector"

// staleExecutors returns the executor pods that a dead application left behind its driver's
// pod. When the driver's container restarts in the same pod (a crash, a kill), the new JVM is
// a new application with executors of its own, and Spark does not look at the dead one's:
// they stay, Completed or failed, for as long as the driver pod lives. An executor is stale
// when its driver's container started after the executor was made and the application that
// runs now (that of the executors made since) has another id. Nothing is stale until the new
// application has made an executor.
func staleExecutors(drivers, executors []corev1.Pod) []corev1.Pod {
	var stale []corev1.Pod
	for i := range drivers {
		d := &drivers[i]
		started := containerStarted(d, EngineContainer)
		if started.IsZero() || d.DeletionTimestamp != nil {
			continue
		}
		running := map[string]bool{}
		var mine []corev1.Pod
		for _, e := range executors {
			if !ownedBy(&e, d) {
				continue
			}
			mine = append(mine, e)
			if !e.CreationTimestamp.Time.Before(started) {
				running[e.Labels[sparkAppSelector]] = true
			}
		}
		if len(running) == 0 {
			continue
		}
		for _, e := range mine {
			if e.DeletionTimestamp == nil && e.CreationTimestamp.Time.Before(started) && !running[e.Labels[sparkAppSelector]] {
				stale = append(stale, e)
			}
		}
	}
	return stale
}

// ownedBy reports whether a pod has owner among its owners.
func ownedBy(p *corev1.Pod, owner *corev1.Pod) bool {
	return slices.ContainsFunc(p.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == owner.UID })
}

// containerStarted is when a pod's container started (again); zero when it does not run.
func containerStarted(p *corev1.Pod, container string) time.Time {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == container && cs.State.Running != nil {
			return cs.State.Running.StartedAt.Time
		}
	}
	return time.Time{}
}

// deleteStaleExecutors deletes the executor pods that dead applications left behind their
// driver's pod (staleExecutors).
func (r *QueryReconciler) deleteStaleExecutors(ctx context.Context, o *observation) error {
	for _, e := range staleExecutors(o.pods, o.executors) {
		err := r.client.Delete(ctx, &e, client.Preconditions{UID: &e.UID})
		if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete executor pod %s of a dead Spark application: %w", e.Name, err)
		}
		logf.FromContext(ctx).Info("Deleted the executor pod of a dead Spark application", "pod", client.ObjectKeyFromObject(&e),
			"application", e.Labels[sparkAppSelector], "phase", e.Status.Phase)
	}
	return nil
}

// configItems are the ConfigMap's keys an executor mounts: the CA bundle and, when there is
// one, the trust store made of it.
func configItems(cm *corev1.ConfigMap) []corev1.KeyToPath {
	items := []corev1.KeyToPath{{Key: CABundleKey, Path: CABundleKey}}
	if _, ok := cm.BinaryData[TrustStoreKey]; ok {
		items = append(items, corev1.KeyToPath{Key: TrustStoreKey, Path: TrustStoreKey})
	}
	return items
}
