package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
)

// Environment variables of the engine container. The S3 ones are those every Lockstep
// command reads (DESIGN.md §3).
const (
	EnvAccessKeyID        = "AWS_ACCESS_KEY_ID"
	EnvSecretAccessKey    = "AWS_SECRET_ACCESS_KEY"
	EnvRegion             = "AWS_REGION"
	EnvS3Endpoint         = "LOCKSTEP_S3_ENDPOINT"
	EnvS3InsecureSkipTLS  = "LOCKSTEP_S3_INSECURE_SKIP_VERIFY"
	EnvCABundle           = "AWS_CA_BUNDLE"
	defaultRegion         = "us-east-1"
	defaultGracePeriod    = 2 * time.Minute
	defaultEngineImage    = "ghcr.io/lockstep-dev/lockstep:latest"
	engineBinary          = "/lockstep"
	tmpMountPath          = "/tmp"
	engineUID             = 65532
	livenessFailures      = 6
	readinessPeriod       = 5
	livenessPeriodSeconds = 10
)

// EngineSettings are the cluster-wide settings of engine pods, from the controller's flags.
type EngineSettings struct {
	// Image runs `lockstep engine`. Default ghcr.io/lockstep-dev/lockstep:latest; the
	// manager's Deployment sets it to its own image.
	Image string
	// PullPolicy of the image. Default: Kubernetes' (IfNotPresent unless the tag is latest).
	PullPolicy corev1.PullPolicy
	// ServiceAccountName of engine pods. Default: the namespace's default account (the engine
	// does not talk to the API server; its token is not mounted).
	ServiceAccountName string
	// GracePeriod is how long a stopping engine may take to finish its batch. Default 2m.
	GracePeriod time.Duration
}

func (s EngineSettings) withDefaults() EngineSettings {
	if s.Image == "" {
		s.Image = defaultEngineImage
	}
	if s.GracePeriod <= 0 {
		s.GracePeriod = defaultGracePeriod
	}
	return s
}

// EngineQuery returns the query as the engine reads it: its identity (name, namespace, uid,
// generation) and its spec with defaults and the checkpoint location filled in.
func EngineQuery(q *v1.StreamingQuery) *v1.StreamingQuery {
	out := &v1.StreamingQuery{
		TypeMeta: metav1.TypeMeta{APIVersion: v1.GroupVersion.String(), Kind: v1.KindStreamingQuery},
		ObjectMeta: metav1.ObjectMeta{
			Name: q.Name, Namespace: q.Namespace, UID: q.UID, Generation: q.Generation,
		},
		Spec: *q.Spec.DeepCopy(),
	}
	out.Spec.Default()
	return out
}

// RenderConfigMap returns the ConfigMap that holds the query manifest the engine runs
// (QueryKey) and the store's CA bundle (CABundleKey) when it has one.
func RenderConfigMap(q *v1.StreamingQuery, store *v1.CheckpointStore) (*corev1.ConfigMap, error) {
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

// RenderDeployment returns the engine Deployment of a query running the spec in cm: one
// replica (none when suspended or replicas is 0), Recreate so that two engines never run on
// one checkpoint, the store's credentials from the query's namespace, the spec's resources,
// health probes and a termination message.
func RenderDeployment(q *v1.StreamingQuery, store *v1.CheckpointStore, cm *corev1.ConfigMap, replicas int32, s EngineSettings) *appsv1.Deployment {
	s = s.withDefaults()
	labels := EngineLabels(q)
	if q.Spec.Suspend {
		replicas = 0
	}
	env := []corev1.EnvVar{
		{Name: EnvAccessKeyID, ValueFrom: secretKey(store.Spec.CredentialsSecretName, EnvAccessKeyID)},
		{Name: EnvSecretAccessKey, ValueFrom: secretKey(store.Spec.CredentialsSecretName, EnvSecretAccessKey)},
		{Name: EnvRegion, Value: orDefault(store.Spec.S3.Region, defaultRegion)},
	}
	if e := store.Spec.S3.Endpoint; e != "" {
		env = append(env, corev1.EnvVar{Name: EnvS3Endpoint, Value: e})
	}
	if _, ok := cm.Data[CABundleKey]; ok {
		env = append(env, corev1.EnvVar{Name: EnvCABundle, Value: ConfigMountPath + "/" + CABundleKey})
	}
	if store.Spec.S3.InsecureSkipVerify {
		env = append(env, corev1.EnvVar{Name: EnvS3InsecureSkipTLS, Value: "true"})
	}
	health := intstr.FromString("health")
	probe := func(path string, period, failures int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: health}},
			PeriodSeconds:    period,
			FailureThreshold: failures,
		}
	}
	container := corev1.Container{
		Name:    EngineContainer,
		Image:   s.Image,
		Command: []string{engineBinary, "engine"},
		Args: []string{
			"--query=" + ConfigMountPath + "/" + QueryKey,
			fmt.Sprintf("--health-addr=:%d", HealthPort),
			"--termination-message-path=" + TerminationMessagePath,
		},
		Env:                      env,
		Ports:                    []corev1.ContainerPort{{Name: "health", ContainerPort: HealthPort, Protocol: corev1.ProtocolTCP}},
		Resources:                resources(q.Spec.Resources),
		LivenessProbe:            probe("/healthz", livenessPeriodSeconds, livenessFailures),
		ReadinessProbe:           probe("/readyz", readinessPeriod, 3),
		TerminationMessagePath:   TerminationMessagePath,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		ImagePullPolicy:          s.PullPolicy,
		VolumeMounts: []corev1.VolumeMount{
			{Name: "query", MountPath: ConfigMountPath, ReadOnly: true},
			{Name: "tmp", MountPath: tmpMountPath},
		},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
	return &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{
			Name: EngineName(q.Name), Namespace: q.Namespace, Labels: labels,
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelQuery: q.Name, LabelComponent: componentEngine}},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      labels,
					Annotations: map[string]string{AnnotationSpecHash: SpecHash(cm)},
				},
				Spec: corev1.PodSpec{
					Containers:                    []corev1.Container{container},
					ServiceAccountName:            s.ServiceAccountName,
					AutomountServiceAccountToken:  ptr.To(false),
					TerminationGracePeriodSeconds: ptr.To(int64(s.GracePeriod / time.Second)),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						RunAsUser:      ptr.To(int64(engineUID)),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Volumes: []corev1.Volume{
						{Name: "query", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name},
						}}},
						{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					},
				},
			},
		},
	}
}

func secretKey(secret, key string) *corev1.EnvVarSource {
	return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key,
	}}
}

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
	return corev1.ResourceRequirements{Requests: conv(r.Requests), Limits: conv(r.Limits)}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
