package controller

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/internal/storeconn"
)

// Environment variables of the engine container. The S3 ones are checkpoint/s3's, which
// every Lockstep command reads (DESIGN.md §3).
const (
	EnvAccessKeyID       = s3.EnvAccessKey
	EnvSecretAccessKey   = s3.EnvSecretKey
	EnvRegion            = s3.EnvRegion
	EnvS3Endpoint        = s3.EnvEndpoint
	EnvS3InsecureSkipTLS = s3.EnvInsecureSkipVerify
	EnvCABundle          = s3.EnvCABundle
	defaultGracePeriod   = 2 * time.Minute
	// EngineImageRepository is the repository of released engine images; the default image
	// is its tag of the controller's own version.
	EngineImageRepository = "ghcr.io/lockstep-dev/lockstep"
	engineBinary          = "/lockstep"
	tmpMountPath          = "/tmp"
	engineUID             = 65532
	livenessFailures      = 3
	readinessPeriod       = 5
	livenessPeriodSeconds = 10
	probeTimeoutSeconds   = 5
	// livenessGraceSeconds is the grace period of a container the liveness probe restarts,
	// instead of the pod's (--engine-grace-period, for a batch to finish): an engine that
	// failed the probe has finished no trigger within its progress timeout, so it will not
	// reach the batch boundary SIGTERM waits for, and its batch is replayed anyway.
	livenessGraceSeconds = 10
)

// EngineSettings are the cluster-wide settings of engine pods, from the controller's flags.
type EngineSettings struct {
	// Image runs `lockstep engine`; required. The controller's command sets it to
	// --engine-image, $LOCKSTEP_ENGINE_IMAGE or DefaultEngineImage of its own version, never a
	// moving tag: an engine must run the code its controller judged the spec with. Without
	// it the API server refuses the workload, and the query's status says so.
	Image string
	// PullPolicy of the image. Default: Kubernetes' (IfNotPresent unless the tag is latest).
	PullPolicy corev1.PullPolicy
	// SparkImage runs a spark query's driver and executors (Lockstep's Spark image,
	// `make image-spark`): the controller's command sets it to --spark-image,
	// $LOCKSTEP_SPARK_IMAGE or DefaultSparkImage of its own version. Default: Image.
	SparkImage string
	// ServiceAccountName of engine pods. Default: the namespace's default account (the engine
	// does not talk to the API server; its token is not mounted).
	ServiceAccountName string
	// GracePeriod is how long a stopping engine may take to finish its batch. Default 2m.
	GracePeriod time.Duration
}

// SparkImageRepository is the repository of released Spark images (engine/spark/sparkimage).
const SparkImageRepository = "ghcr.io/lockstep-dev/lockstep-spark"

// DefaultSparkImage returns the released Spark image of a controller version
// (ghcr.io/lockstep-dev/lockstep-spark:v1.2.3), or an error for a version that has none.
func DefaultSparkImage(version string) (string, error) {
	img, err := DefaultEngineImage(version)
	if err != nil {
		return "", fmt.Errorf("%w (for spark queries: --spark-image or $LOCKSTEP_SPARK_IMAGE)", err)
	}
	return SparkImageRepository + strings.TrimPrefix(img, EngineImageRepository), nil
}

// DefaultEngineImage returns the released engine image of a controller version
// (ghcr.io/lockstep-dev/lockstep:v1.2.3), or an error for a version that has no image: a
// development build must be told its engine image.
func DefaultEngineImage(version string) (string, error) {
	if !releaseVersion.MatchString(version) || pseudoVersion.MatchString(version) {
		return "", fmt.Errorf("version %q has no released engine image: set the engine image (--engine-image or $LOCKSTEP_ENGINE_IMAGE)", version)
	}
	return EngineImageRepository + ":" + version, nil
}

// releaseVersion matches the versions released images are tagged with: v1.2.3, v1.2.3-rc.1.
// Go's pseudo-versions of untagged commits (v0.0.0-20260726120000-1a347cf4f2a1) match it too,
// and have none.
var (
	releaseVersion = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)
	pseudoVersion  = regexp.MustCompile(`[0-9]{14}-[0-9a-f]{12}$`)
)

func (s EngineSettings) withDefaults() EngineSettings {
	if s.GracePeriod <= 0 {
		s.GracePeriod = defaultGracePeriod
	}
	return s
}

// EngineQuery returns the query as the engine reads it: its identity (name, namespace, uid;
// not the generation, which the ConfigMap's annotation carries, so that a change the engine
// does not see does not roll it) and its spec with defaults and the checkpoint location filled
// in, and the file fields of the Secrets it names (tls.caFile, certFile, keyFile) pointing
// where the pod mounts them. What only the controller acts on is left out, so that changing it
// does not restart the engine: suspend (the workload stops the engine) and
// checkpoint.retention (the controller applies it when the query is deleted). It holds Secret
// names, never their values.
func EngineQuery(q *v1.StreamingQuery) *v1.StreamingQuery {
	out := &v1.StreamingQuery{
		TypeMeta: metav1.TypeMeta{APIVersion: v1.GroupVersion.String(), Kind: v1.KindStreamingQuery},
		ObjectMeta: metav1.ObjectMeta{
			Name: q.Name, Namespace: q.Namespace, UID: q.UID,
		},
		Spec: *q.Spec.DeepCopy(),
	}
	out.Spec.Default()
	secretUses(&out.Spec)
	// The workload stops a suspended engine (replicas 0, a suspended Job); the engine itself
	// always runs, and suspending does not change the spec it runs (nor roll it).
	out.Spec.Suspend = false
	// Retention is a deletion policy the controller applies; the engine never reads it.
	out.Spec.Checkpoint.Retention = ""
	return out
}

// RenderConfigMap returns the ConfigMap that holds the query manifest the engine runs
// (QueryKey), the store's CA bundle (CABundleKey) when it has one and, for a spark query,
// the driver's Spark settings (SparkConfKey), the executors' pod template (ExecutorPodKey)
// and, with a CA bundle, the executors' trust store (TrustStoreKey, binary data).
func RenderConfigMap(q *v1.StreamingQuery, store *v1.CheckpointStore, s EngineSettings) (*corev1.ConfigMap, error) {
	manifest, err := yaml.Marshal(EngineQuery(q))
	if err != nil {
		return nil, fmt.Errorf("render query %s/%s: %w", q.Namespace, q.Name, err)
	}
	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name: EngineName(q.Name), Namespace: q.Namespace, Labels: EngineLabels(q),
			Annotations: map[string]string{AnnotationGeneration: strconv.FormatInt(q.Generation, 10)},
		},
		Data: map[string]string{QueryKey: string(manifest)},
	}
	if store != nil && len(store.Spec.S3.CABundle) > 0 {
		cm.Data[CABundleKey] = string(store.Spec.S3.CABundle)
		if isSpark(q) {
			ts, err := storeconn.Connection(storeconn.From{Store: store}).TrustStore()
			if err != nil {
				return nil, fmt.Errorf("render the executors' trust store of %s/%s: %w", q.Namespace, q.Name, err)
			}
			cm.BinaryData = map[string][]byte{TrustStoreKey: ts}
		}
	}
	if isSpark(q) && store != nil {
		data, err := sparkConfig(q, store, cm, s)
		if err != nil {
			return nil, err
		}
		maps.Copy(cm.Data, data)
	}
	return cm, nil
}

// SpecHash returns a short hash of a ConfigMap's data: the pod template carries it so that
// a new spec rolls the engine.
func SpecHash(cm *corev1.ConfigMap) string {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(cm.Data)) {
		fmt.Fprintf(h, "%s\x00%s\x00", k, cm.Data[k])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Defaults of the engine pod that a spec may override.
var (
	// defaultRequests are the requests of a resource that spec.resources neither requests nor
	// limits: enough for the scheduler to place the engine honestly, no limit that would kill
	// a batch.
	defaultRequests = corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("100m"),
		corev1.ResourceMemory: resource.MustParse("256Mi"),
	}
)

// jobBackoffLimit is how often a once or availableNow engine is restarted after a failure
// before its Job fails (Kubernetes' default); the query's status then says Failed.
const jobBackoffLimit = 6

// RenderDeployment returns the engine Deployment of a query that runs until stopped, running
// the spec in cm: one replica (none when suspended or replicas is 0), Recreate so that two
// engines never run on one checkpoint, and the pod of RenderPodTemplate.
func RenderDeployment(q *v1.StreamingQuery, store *v1.CheckpointStore, cm *corev1.ConfigMap, replicas int32, s EngineSettings) *appsv1.Deployment {
	if q.Spec.Suspend {
		replicas = 0
	}
	return &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{
			Name: EngineName(q.Name), Namespace: q.Namespace, Labels: EngineLabels(q),
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: engineSelector(q)},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: RenderPodTemplate(q, store, cm, s),
		},
	}
}

// RenderJob returns the engine Job of a query whose trigger ends by itself (once,
// availableNow): an engine that exits 0 has finished and is not started again, one that fails
// is restarted in its pod (restartPolicy OnFailure, as a Deployment's would be) up to
// jobBackoffLimit times. Suspend maps to the Job's suspend, which stops its pod.
func RenderJob(q *v1.StreamingQuery, store *v1.CheckpointStore, cm *corev1.ConfigMap, s EngineSettings) *batchv1.Job {
	tmpl := RenderPodTemplate(q, store, cm, s)
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	return &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name: EngineName(q.Name), Namespace: q.Namespace, Labels: EngineLabels(q),
		},
		Spec: batchv1.JobSpec{
			Parallelism:  ptr.To(int32(1)),
			Completions:  ptr.To(int32(1)),
			BackoffLimit: ptr.To(int32(jobBackoffLimit)),
			Suspend:      ptr.To(q.Spec.Suspend),
			Template:     tmpl,
		},
	}
}

// RenderPodTemplate returns the engine pod: the `lockstep engine` container running the spec
// in cm with the store's credentials and every Secret the spec names (secretUses), from the
// query's namespace; the spec's resources (defaultRequests where it sets none) and
// spec.engine's scheduling, identity, metadata and envFrom; a liveness probe that fails when
// no trigger finished within the spec's ProgressTimeout, a readiness probe, a termination
// message; a non-root, read-only container without the API token.
func RenderPodTemplate(q *v1.StreamingQuery, store *v1.CheckpointStore, cm *corev1.ConfigMap, s EngineSettings) corev1.PodTemplateSpec {
	s = s.withDefaults()
	es := &q.Spec.Engine
	env, secretVols, secretMounts := engineEnv(q, store, cm)
	health := intstr.FromString(EnginePortName)
	probe := func(path string, period, failures int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: health}},
			PeriodSeconds:    period,
			TimeoutSeconds:   probeTimeoutSeconds,
			FailureThreshold: failures,
		}
	}
	liveness := probe("/healthz", livenessPeriodSeconds, livenessFailures)
	liveness.TerminationGracePeriodSeconds = ptr.To(int64(livenessGraceSeconds))
	container := corev1.Container{
		Name:    EngineContainer,
		Image:   s.Image,
		Command: []string{engineBinary, "engine"},
		Args: []string{
			"--query=" + ConfigMountPath + "/" + QueryKey,
			fmt.Sprintf("--health-addr=:%d", HealthPort),
			"--termination-message-path=" + TerminationMessagePath,
			"--webhook-headers-dir=" + WebhookHeadersDir,
		},
		// envFrom first: variables of env win over it, so a ConfigMap cannot redirect the
		// checkpoint's credentials.
		EnvFrom:   slices.Clone(es.EnvFrom),
		Env:       env,
		Ports:     []corev1.ContainerPort{{Name: EnginePortName, ContainerPort: HealthPort, Protocol: corev1.ProtocolTCP}},
		Resources: resources(q.Spec.Resources),
		// /healthz itself judges progress against the spec's bound; a few failed probes
		// in a row only absorb a slow answer.
		LivenessProbe:            liveness,
		ReadinessProbe:           probe("/readyz", readinessPeriod, 3),
		TerminationMessagePath:   TerminationMessagePath,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		ImagePullPolicy:          s.PullPolicy,
		VolumeMounts: append([]corev1.VolumeMount{
			{Name: "query", MountPath: ConfigMountPath, ReadOnly: true},
			{Name: "tmp", MountPath: tmpMountPath},
		}, secretMounts...),
		SecurityContext: engineContainerSecurity(),
	}
	labels := EngineLabels(q)
	annotations := map[string]string{AnnotationSpecHash: SpecHash(cm)}
	// The controller's labels and annotations win: the workload selects its pods by them.
	addAbsent(labels, es.Labels)
	addAbsent(annotations, es.Annotations)
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
		Spec: enginePodSpec(es, container, append([]corev1.Volume{
			{Name: "query", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name},
			}}},
			tmpVolume(),
		}, secretVols...)),
	}
	tmpl.Spec.ServiceAccountName = cmp.Or(es.ServiceAccountName, s.ServiceAccountName)
	tmpl.Spec.TerminationGracePeriodSeconds = ptr.To(int64(s.GracePeriod / time.Second))
	if isSpark(q) {
		sparkDriverPod(&tmpl, q, s)
	}
	return tmpl
}

// enginePodSpec is the pod spec the engine's and the Spark executors' pods share: c in
// spec.engine's placement, with its image pull secrets, the engine's pod security context,
// no API token, and vols.
func enginePodSpec(es *v1.EngineSpec, c corev1.Container, vols []corev1.Volume) corev1.PodSpec {
	return corev1.PodSpec{
		Containers:                   []corev1.Container{c},
		AutomountServiceAccountToken: ptr.To(false),
		NodeSelector:                 maps.Clone(es.NodeSelector),
		Tolerations:                  slices.Clone(es.Tolerations),
		Affinity:                     es.Affinity.DeepCopy(),
		PriorityClassName:            es.PriorityClassName,
		ImagePullSecrets:             slices.Clone(es.ImagePullSecrets),
		SecurityContext:              enginePodSecurity(),
		Volumes:                      vols,
	}
}

// tmpVolume is the engine's and the executors' writable /tmp (their root is read-only).
func tmpVolume() corev1.Volume {
	return corev1.Volume{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
}

// addAbsent copies into dst the entries of src whose keys dst does not have: dst's win.
func addAbsent(dst, src map[string]string) {
	for k, v := range src {
		if _, ours := dst[k]; !ours {
			dst[k] = v
		}
	}
}

// engineContainerSecurity is the security context of the engine's and executors' containers:
// no privilege, a read-only root (the tmp volume is writable), no capability.
func engineContainerSecurity() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

// enginePodSecurity is the security context of the engine's and executors' pods.
func enginePodSecurity() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot: ptr.To(true),
		RunAsUser:    ptr.To(int64(engineUID)),
		// The group of the Secret files (mode 0440) and of the tmp volume.
		RunAsGroup:     ptr.To(int64(engineUID)),
		FSGroup:        ptr.To(int64(engineUID)),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// engineEnv returns the environment of the engine's container, and of a spark query's
// executors: the store's credentials and every Secret the spec names (secretUses) as
// references, never values, and the store's S3 settings (s3.Settings.Env: the one
// translation of the settings into variables); and the volumes and mounts of the
// Secrets whose files are mounted.
func engineEnv(q *v1.StreamingQuery, store *v1.CheckpointStore, cm *corev1.ConfigMap) ([]corev1.EnvVar, []corev1.Volume, []corev1.VolumeMount) {
	uses := append([]secretUse{storeSecretUse(store)}, secretUses(q.Spec.DeepCopy())...)
	env := secretEnvVars(uses)
	st := storeconn.Connection(storeconn.From{Store: store})
	st.CABundle = nil // the pod reads it from the ConfigMap's file
	if _, ok := cm.Data[CABundleKey]; ok {
		st.CAFile = ConfigMountPath + "/" + CABundleKey
	}
	for _, e := range st.Env() {
		env = append(env, corev1.EnvVar{Name: e.Name, Value: e.Value})
	}
	vols, mounts := secretVolumes(uses)
	return env, vols, mounts
}

// engineSelector selects a query's engine pods.
func engineSelector(q *v1.StreamingQuery) map[string]string {
	return map[string]string{LabelQuery: q.Name, LabelComponent: componentEngine}
}

func secretKey(secret, key string) *corev1.EnvVarSource {
	return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key,
	}}
}

// resources converts the spec's resources and requests defaultRequests of cpu and memory
// where the spec neither requests nor limits them (with only a limit, Kubernetes requests
// the limit).
func resources(r v1.ResourceRequirements) corev1.ResourceRequirements {
	conv := func(m map[string]resource.Quantity) corev1.ResourceList {
		if len(m) == 0 {
			return nil
		}
		out := make(corev1.ResourceList, len(m))
		for k, v := range m {
			out[corev1.ResourceName(k)] = v.DeepCopy()
		}
		return out
	}
	out := corev1.ResourceRequirements{Requests: conv(r.Requests), Limits: conv(r.Limits)}
	for name, q := range defaultRequests {
		_, requested := out.Requests[name]
		_, limited := out.Limits[name]
		if requested || limited {
			continue
		}
		if out.Requests == nil {
			out.Requests = corev1.ResourceList{}
		}
		out.Requests[name] = q.DeepCopy()
	}
	return out
}
