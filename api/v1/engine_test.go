package v1_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
)

func TestValidateEngine(t *testing.T) {
	secs := int64(30)
	cases := []struct {
		name string
		e    v1.EngineSpec
		want []string // "type field"
	}{
		{name: "a production pod is valid", e: v1.EngineSpec{
			ServiceAccountName: "orders-engine", PriorityClassName: "streaming",
			NodeSelector: map[string]string{"kubernetes.io/os": "linux"},
			Tolerations: []corev1.Toleration{
				{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "streaming", Effect: corev1.TaintEffectNoSchedule},
				{Operator: corev1.TolerationOpExists},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs},
			},
			ImagePullSecrets: []corev1.LocalObjectReference{{Name: "registry"}},
			Labels:           map[string]string{"team": "payments"},
			Annotations:      map[string]string{"sidecar.istio.io/inject": "false"},
			EnvFrom: []corev1.EnvFromSource{
				{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}},
				{Prefix: "SRC_", SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "src"}}},
			},
			ProgressTimeout: "15m",
		}},
		{name: "reserved labels and annotations", e: v1.EngineSpec{
			Labels:      map[string]string{"app.kubernetes.io/component": "x", "streaming.lockstep.dev/query": "y"},
			Annotations: map[string]string{"streaming.lockstep.dev/spec-hash": "z"},
		}, want: []string{
			"FieldValueForbidden spec.engine.labels[app.kubernetes.io/component]",
			"FieldValueForbidden spec.engine.labels[streaming.lockstep.dev/query]",
			"FieldValueForbidden spec.engine.annotations[streaming.lockstep.dev/spec-hash]",
		}},
		{name: "bad names", e: v1.EngineSpec{
			ServiceAccountName: "Orders_Engine", ImagePullSecrets: []corev1.LocalObjectReference{{}},
			NodeSelector: map[string]string{"pool": "not a value"},
		}, want: []string{
			"FieldValueInvalid spec.engine.serviceAccountName",
			"FieldValueInvalid spec.engine.nodeSelector",
			"FieldValueRequired spec.engine.imagePullSecrets[0].name",
		}},
		{name: "envFrom needs one reference", e: v1.EngineSpec{EnvFrom: []corev1.EnvFromSource{{}, {
			ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "a"}},
			SecretRef:    &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "b"}},
		}}}, want: []string{"FieldValueRequired spec.engine.envFrom[0]", "FieldValueInvalid spec.engine.envFrom[1]"}},
		{name: "tolerations", e: v1.EngineSpec{Tolerations: []corev1.Toleration{
			{Key: "a", Operator: corev1.TolerationOpExists, Value: "v"},
			{Operator: corev1.TolerationOpEqual, Value: "v"},
			{Key: "a", Operator: "Maybe"},
			{Key: "a", Effect: "Sometimes"},
			{Key: "a", Effect: corev1.TaintEffectNoSchedule, TolerationSeconds: &secs},
		}}, want: []string{
			"FieldValueInvalid spec.engine.tolerations[0].value",
			"FieldValueInvalid spec.engine.tolerations[1].operator",
			"FieldValueNotSupported spec.engine.tolerations[2].operator",
			"FieldValueNotSupported spec.engine.tolerations[3].effect",
			"FieldValueInvalid spec.engine.tolerations[4].tolerationSeconds",
		}},
		{name: "progress timeout", e: v1.EngineSpec{ProgressTimeout: "soon"}, want: []string{"FieldValueInvalid spec.engine.progressTimeout"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkValidate(t, qt.Orders().Edit(func(s *v1.StreamingQuerySpec) { s.Engine = tc.e }).Obj(), tc.want)
		})
	}
}

func TestProgressTimeout(t *testing.T) {
	for _, tc := range []struct {
		name string
		q    *qt.Query
		want time.Duration
	}{
		{"default trigger", qt.Orders(), v1.MinProgressTimeout},
		{"short processing time", qt.Orders().ProcessingTime("30s"), v1.MinProgressTimeout},
		{"long processing time", qt.Orders().ProcessingTime("10m"), 30 * time.Minute},
		{"once", qt.Orders().Once(), v1.MinProgressTimeout},
		{"set", qt.Orders().ProcessingTime("10m").Edit(func(s *v1.StreamingQuerySpec) { s.Engine.ProgressTimeout = "90s" }), 90 * time.Second},
	} {
		spec := tc.q.Spec()
		if got := spec.ProgressTimeout(); got != tc.want {
			t.Errorf("%s: ProgressTimeout() = %s, want %s", tc.name, got, tc.want)
		}
	}
}
