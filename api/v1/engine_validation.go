package v1

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ReservedLabelPrefix marks the labels and annotations of engine objects that only the
// controller sets.
const ReservedLabelPrefix = "streaming.lockstep.dev/"

// reservedLabels are the engine labels the controller selects pods by; spec.engine.labels may
// not set them.
var reservedLabels = []string{"app.kubernetes.io/name", "app.kubernetes.io/component"}

// validate checks what can be checked of the pod settings without an API server: names,
// label and annotation syntax, the controller's reserved keys, the envFrom and toleration
// forms and the progress timeout. Affinity is left to the API server, which validates the pod
// template when the controller writes the engine's workload (the query's status says so).
func (e *EngineSpec) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if e.ServiceAccountName != "" {
		errs = append(errs, dnsSubdomain(p.Child("serviceAccountName"), e.ServiceAccountName)...)
	}
	if e.PriorityClassName != "" {
		errs = append(errs, dnsSubdomain(p.Child("priorityClassName"), e.PriorityClassName)...)
	}
	errs = append(errs, metav1validation.ValidateLabels(e.NodeSelector, p.Child("nodeSelector"))...)
	errs = append(errs, metav1validation.ValidateLabels(e.Labels, p.Child("labels"))...)
	for _, k := range slices.Sorted(maps.Keys(e.Labels)) {
		if strings.HasPrefix(k, ReservedLabelPrefix) || slices.Contains(reservedLabels, k) {
			errs = append(errs, field.Forbidden(p.Child("labels").Key(k), "the controller sets this label on engine pods and selects them by it"))
		}
	}
	errs = append(errs, apivalidation.ValidateAnnotations(e.Annotations, p.Child("annotations"))...)
	for _, k := range slices.Sorted(maps.Keys(e.Annotations)) {
		if strings.HasPrefix(k, ReservedLabelPrefix) {
			errs = append(errs, field.Forbidden(p.Child("annotations").Key(k), "annotations under "+ReservedLabelPrefix+" are the controller's"))
		}
	}
	for i, s := range e.ImagePullSecrets {
		np := p.Child("imagePullSecrets").Index(i).Child("name")
		if s.Name == "" {
			errs = append(errs, field.Required(np, "the name of a Secret in the query's namespace"))
		} else {
			errs = append(errs, dnsSubdomain(np, s.Name)...)
		}
	}
	for i := range e.EnvFrom {
		errs = append(errs, validateEnvFrom(p.Child("envFrom").Index(i), &e.EnvFrom[i])...)
	}
	for i := range e.Tolerations {
		errs = append(errs, validateToleration(p.Child("tolerations").Index(i), &e.Tolerations[i])...)
	}
	return append(errs, duration(p.Child("progressTimeout"), e.ProgressTimeout, false)...)
}

func validateEnvFrom(p *field.Path, e *corev1.EnvFromSource) field.ErrorList {
	var errs field.ErrorList
	var name string
	switch {
	case e.ConfigMapRef != nil && e.SecretRef != nil:
		return field.ErrorList{field.Invalid(p, "configMapRef, secretRef", "exactly one of configMapRef, secretRef must be set")}
	case e.ConfigMapRef != nil:
		name, p = e.ConfigMapRef.Name, p.Child("configMapRef", "name")
	case e.SecretRef != nil:
		name, p = e.SecretRef.Name, p.Child("secretRef", "name")
	default:
		return field.ErrorList{field.Required(p, "exactly one of configMapRef, secretRef must be set")}
	}
	if name == "" {
		return append(errs, field.Required(p, "a name in the query's namespace"))
	}
	return append(errs, dnsSubdomain(p, name)...)
}

func validateToleration(p *field.Path, t *corev1.Toleration) field.ErrorList {
	var errs field.ErrorList
	if t.Key != "" {
		for _, msg := range validation.IsQualifiedName(t.Key) {
			errs = append(errs, field.Invalid(p.Child("key"), t.Key, msg))
		}
	}
	switch t.Operator {
	case corev1.TolerationOpExists:
		if t.Value != "" {
			errs = append(errs, field.Invalid(p.Child("value"), t.Value, "must be empty when operator is Exists"))
		}
	case corev1.TolerationOpEqual, "":
		if t.Key == "" {
			errs = append(errs, field.Invalid(p.Child("operator"), t.Operator, "an empty key needs operator Exists (it tolerates every taint)"))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("operator"), t.Operator, []corev1.TolerationOperator{corev1.TolerationOpExists, corev1.TolerationOpEqual}))
	}
	errs = append(errs, supported(p.Child("effect"), t.Effect, corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute)...)
	if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
		errs = append(errs, field.Invalid(p.Child("tolerationSeconds"), *t.TolerationSeconds, "only with effect NoExecute"))
	}
	return errs
}
