package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CacheOptions returns the manager cache options the reconciler expects: Pods, Deployments,
// Jobs, ConfigMaps, and a spark query's ServiceAccount, Role and RoleBinding are cached only
// when they carry the engine labels (a pod also when it is a spark query's executor), so that the controller
// holds the engines' objects in memory and not the cluster's. Secrets are cached as metadata
// only, without their managed fields (the reconcilers watch them to notice a credentials
// Secret created, changed or deleted); their data is read with the API reader, and never
// held. Namespaces are never cached.
func CacheOptions() cache.Options {
	engine := labels.SelectorFromSet(labels.Set{LabelComponent: componentEngine, "app.kubernetes.io/name": "lockstep"})
	// A spark query's executor pods are cached beside its driver's.
	pods := labels.NewSelector()
	for _, r := range []struct {
		key string
		op  selection.Operator
		val []string
	}{
		{LabelComponent, selection.In, []string{componentEngine, ComponentSparkExecutor}},
		{"app.kubernetes.io/name", selection.Equals, []string{"lockstep"}},
	} {
		req, err := labels.NewRequirement(r.key, r.op, r.val)
		if err != nil {
			panic(err) // constant keys and values
		}
		pods = pods.Add(*req)
	}
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}: {Label: pods},
		// A spark query's driver access (sparkAccess).
		&corev1.ServiceAccount{}: {Label: engine},
		&rbacv1.Role{}:           {Label: engine},
		&rbacv1.RoleBinding{}:    {Label: engine},
		&appsv1.Deployment{}:     {Label: engine},
		&batchv1.Job{}:           {Label: engine},
		&corev1.ConfigMap{}:      {Label: engine},
		&corev1.Secret{}:         {Transform: cache.TransformStripManagedFields()},
	}}
}

// secretMeta is the metadata of a Secret, as the cache holds it.
func secretMeta() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	return m
}

// secretVersion returns the resourceVersion of Secret namespace/name from the cache of
// Secrets' metadata c, "" when it does not exist: a reader that remembers what it read of
// a Secret reads it again only when its version changed.
func secretVersion(ctx context.Context, c client.Reader, namespace, name string) (string, error) {
	m := secretMeta()
	err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, m)
	switch {
	case apierrors.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("get the metadata of Secret %s/%s: %w", namespace, name, err)
	}
	return m.ResourceVersion, nil
}
