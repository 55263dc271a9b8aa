package provider

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// TestAccCheckpointStoreDataSource_tenant reads a CheckpointStore with the data source as a
// tenant: a user whose only right is the built-in edit role in its namespace (a RoleBinding).
// Without the chart's store reader binding the read is refused at the cluster scope; with it
// (the chart's rendered RBAC, applied) the tenant gets the store and its query's location.
func TestAccCheckpointStoreDataSource_tenant(t *testing.T) {
	c := newTestCluster(t, testenv.ControlPlane(t))
	store := c.namespace + "-store"
	c.createStore(t, store, map[string]any{
		"s3":                    map[string]any{"endpoint": "http://127.0.0.1:9000", "bucket": "checkpoints"},
		"credentialsSecretName": "lockstep-s3",
		"allowedNamespaces":     []any{c.namespace},
	})
	user := "tenant-" + c.namespace
	edit := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant-edit", Namespace: c.namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if _, err := c.kube.RbacV1().RoleBindings(c.namespace).Create(context.Background(), edit, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tenantKubeconfig := impersonatingKubeconfig(t, c.kubeconfig, user)
	tenantCfg := rest.CopyConfig(c.cfg)
	tenantCfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	tenant, err := dynamic.NewForConfig(tenantCfg)
	if err != nil {
		t.Fatal(err)
	}

	config := fmt.Sprintf("provider %q {\n  kubeconfig_path = %q\n}\n", Name, tenantKubeconfig) + fmt.Sprintf(`
data "lockstep_checkpoint_store" "s" {
  name       = %q
  query_name = "orders"
}
`, store)
	const data = "data.lockstep_checkpoint_store.s"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		Steps: []resource.TestStep{{
			Config:      config,
			ExpectError: regexp.MustCompile(`(?s)Cannot\s+Read\s+Checkpoint\s+Store.*forbidden`),
		}, {
			PreConfig: func() {
				applyStoreReaders(t, c)
				waitTenantReads(t, tenant, store)
			},
			Config: config,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(data, tfjsonpath.New("s3").AtMapKey("bucket"), knownvalue.StringExact("checkpoints")),
				statecheck.ExpectKnownValue(data, tfjsonpath.New("location"), knownvalue.StringExact("s3://checkpoints/"+c.namespace+"/orders")),
			},
		}},
	})
}

// impersonatingKubeconfig copies kubeconfig with its user acting as user (kubectl --as).
func impersonatingKubeconfig(t *testing.T, kubeconfig, user string) string {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range kc.AuthInfos {
		a.Impersonate = user
	}
	path := kubeconfig + "-" + user
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// applyStoreReaders renders the chart's RBAC with the cached helm and creates its store
// reader ClusterRole and ClusterRoleBinding, deleted when the test ends.
func applyStoreReaders(t *testing.T, c *testCluster) {
	t.Helper()
	release := fmt.Sprintf("tenant%d", time.Now().UnixNano()%100000)
	cmd := exec.Command(testenv.Tool(t, "helm"), "template", release, "../charts/lockstep", "--show-only", "templates/rbac.yaml")
	cmd.Env = append(os.Environ(), testenv.HelmHome(t.TempDir())...)
	ctx := context.Background()
	found := 0
	for _, u := range testenv.DecodeManifests(t, testenv.Output(t, cmd)) {
		if !strings.HasSuffix(u.GetName(), "-checkpointstore-reader") {
			continue
		}
		found++
		switch u.GetKind() {
		case "ClusterRole":
			var r rbacv1.ClusterRole
			convert(t, u, &r)
			if _, err := c.kube.RbacV1().ClusterRoles().Create(ctx, &r, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = c.kube.RbacV1().ClusterRoles().Delete(context.Background(), r.Name, metav1.DeleteOptions{})
			})
		case "ClusterRoleBinding":
			var b rbacv1.ClusterRoleBinding
			convert(t, u, &b)
			if _, err := c.kube.RbacV1().ClusterRoleBindings().Create(ctx, &b, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = c.kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), b.Name, metav1.DeleteOptions{})
			})
		}
	}
	if found != 2 {
		t.Fatalf("the chart renders %d store reader objects, want a ClusterRole and its ClusterRoleBinding", found)
	}
}

func convert(t *testing.T, u *unstructured.Unstructured, out any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		t.Fatal(err)
	}
}

// waitTenantReads waits until the API server's authorizer lets the tenant read the store (a
// new binding takes a moment to reach it).
func waitTenantReads(t *testing.T, tenant dynamic.Interface, store string) {
	t.Helper()
	deadline := time.Now().Add(eventually)
	for {
		_, err := tenant.Resource(storesResource).Get(context.Background(), store, metav1.GetOptions{})
		if err == nil {
			return
		}
		if !apierrors.IsForbidden(err) || time.Now().After(deadline) {
			t.Fatalf("tenant get CheckpointStore %s: %v", store, err)
		}
		time.Sleep(tick)
	}
}
