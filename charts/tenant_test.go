package charts_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// Waits of the tenant test, named once.
const (
	// rbacSettle bounds how long the API server's authorizer takes to see a new binding.
	rbacSettle = 10 * time.Second
	// aggregated bounds the start of kube-controller-manager and its first aggregation of
	// the built-in edit role.
	aggregated = 90 * time.Second
)

// TestTenantReadsStores: a tenant whose only right is the built-in edit role in its own
// namespace (a RoleBinding, as platform teams give; kube-controller-manager aggregates the
// role, the chart's StreamingQuery editor included) reads CheckpointStores once the chart's
// RBAC is applied (get, list, watch: `kubectl get ckpts`, the Terraform data source) and may
// not create, change or delete one. With rbac.storeReaders.enabled=false the chart grants
// nothing, and the tenant is refused at the cluster scope, as before.
func TestTenantReadsStores(t *testing.T) {
	cfg := testenv.ControlPlane(t)
	scheme := testenv.Scheme()
	admin, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	suffix := fmt.Sprint(time.Now().UnixNano() % 100000)
	team, system := "team-"+suffix, "tenants-system-"+suffix
	for _, ns := range []string{team, system} {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	user := "alice-" + suffix
	edit := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "alice-edit", Namespace: team},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if err := admin.Create(ctx, edit); err != nil {
		t.Fatal(err)
	}
	store := &v1.CheckpointStore{
		ObjectMeta: metav1.ObjectMeta{Name: "team-s3-" + suffix},
		Spec: v1.CheckpointStoreSpec{
			S3:                    v1.S3Store{Endpoint: "https://minio.storage:9000", Bucket: "checkpoints"},
			CredentialsSecretName: "lockstep-s3",
			AllowedNamespaces:     []string{team},
		},
	}
	if err := admin.Create(ctx, store); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), store) })

	// The tenant, as the API server sees a user its authenticator let in: the user name and
	// the group system:authenticated, which impersonation adds.
	tenantCfg := rest.CopyConfig(cfg)
	tenantCfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	tenant, err := client.NewWithWatch(tenantCfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	// The built-in edit role gets its rules by aggregation, which kube-controller-manager
	// does: the tenant edits its namespace, and nothing more.
	testenv.KubeControllerManager(t, testenv.WriteKubeconfig(t, cfg), "clusterrole-aggregation")
	waitAllowed(t, aggregated, "create a ConfigMap in "+team, func() error {
		return tenant.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: team}})
	})

	const release = "tenants"
	t.Run("storeReaders disabled", func(t *testing.T) {
		objs := decode(t, helmRBAC(t, release, system, "rbac.storeReaders.enabled=false"))
		for _, o := range objs {
			if strings.Contains(o.GetName(), "checkpointstore-reader") {
				t.Errorf("the chart renders %s %s with rbac.storeReaders.enabled=false", o.GetKind(), o.GetName())
			}
		}
		apply(t, admin, objs)
		var got v1.CheckpointStore
		if err := tenant.Get(ctx, client.ObjectKeyFromObject(store), &got); !apierrors.IsForbidden(err) {
			t.Errorf("tenant get CheckpointStore without storeReaders = %v, want Forbidden", err)
		}
	})

	t.Run("storeReaders enabled", func(t *testing.T) {
		apply(t, admin, decode(t, helmRBAC(t, release, system, "rbac.storeReaders.enabled=true")))
		var got v1.CheckpointStore
		waitAllowed(t, rbacSettle, "get CheckpointStore "+store.Name, func() error {
			return tenant.Get(ctx, client.ObjectKeyFromObject(store), &got)
		})
		if got.Spec.S3.Bucket != store.Spec.S3.Bucket || !strings.Contains(strings.Join(got.Spec.AllowedNamespaces, ","), team) {
			t.Errorf("tenant read %+v, want the store's spec", got.Spec)
		}
		// The chart's editor role, aggregated into edit, lets the tenant manage its queries.
		waitAllowed(t, aggregated, "list StreamingQueries in "+team, func() error {
			return tenant.List(ctx, &v1.StreamingQueryList{}, client.InNamespace(team))
		})
		var list v1.CheckpointStoreList
		if err := tenant.List(ctx, &list); err != nil {
			t.Errorf("tenant list CheckpointStores (kubectl get ckpts): %v", err)
		}
		w, err := tenant.Watch(ctx, &v1.CheckpointStoreList{})
		if err != nil {
			t.Errorf("tenant watch CheckpointStores: %v", err)
		} else {
			w.Stop()
		}

		// Reading is all.
		other := store.DeepCopy()
		other.ObjectMeta = metav1.ObjectMeta{Name: "tenant-made-" + suffix}
		changed := got.DeepCopy()
		changed.Spec.AllowedNamespaces = append(changed.Spec.AllowedNamespaces, "someone-else")
		status := got.DeepCopy()
		status.Status.Queries = 7
		for _, w := range []struct {
			verb string
			do   func() error
		}{
			{"create", func() error { return tenant.Create(ctx, other) }},
			{"update", func() error { return tenant.Update(ctx, changed) }},
			{"patch", func() error {
				return tenant.Patch(ctx, &got, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"allowedNamespaces":["someone-else"]}}`)))
			}},
			{"update status", func() error { return tenant.Status().Update(ctx, status) }},
			{"delete", func() error { return tenant.Delete(ctx, &got) }},
			{"deletecollection", func() error { return tenant.DeleteAllOf(ctx, &v1.CheckpointStore{}) }},
		} {
			if err := w.do(); !apierrors.IsForbidden(err) {
				t.Errorf("tenant %s CheckpointStore = %v, want Forbidden", w.verb, err)
			}
		}
	})
}

// helmRBAC renders the chart as release in namespace with one --set, and returns its RBAC
// objects.
func helmRBAC(t *testing.T, release, namespace, set string) []byte {
	t.Helper()
	out, err := helm(t, "template", release, "charts/"+chart, "--namespace", namespace, "--set", set, "--show-only", "templates/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// apply server-side applies objs for real, and deletes them when the test ends.
func apply(t *testing.T, c client.Client, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, u := range objs {
		if err := c.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("lockstep-test"), client.ForceOwnership); err != nil {
			t.Fatalf("server-side apply of %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), u) })
	}
}

// waitAllowed retries do until the authorizer lets it through (a new binding takes a moment
// to reach it) and fails the test with the last error after within.
func waitAllowed(t *testing.T, within time.Duration, what string, do func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := do()
		if err == nil {
			return
		}
		if !apierrors.IsForbidden(err) || time.Now().After(deadline) {
			t.Fatalf("tenant %s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
