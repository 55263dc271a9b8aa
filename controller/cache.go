package controller

import (
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CacheOptions returns the manager cache options the reconciler expects: Pods, Deployments,
// Jobs and ConfigMaps are cached only when they carry the engine labels, so that the controller
// holds the engines' objects in memory and not the cluster's. Secrets and Namespaces are
// never cached (they are read with the API reader).
func CacheOptions() cache.Options {
	engine := labels.SelectorFromSet(labels.Set{LabelComponent: componentEngine, "app.kubernetes.io/name": "lockstep"})
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}:        {Label: engine},
		&appsv1.Deployment{}: {Label: engine},
		&batchv1.Job{}:       {Label: engine},
		&corev1.ConfigMap{}:  {Label: engine},
	}}
}
