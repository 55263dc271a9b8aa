package provider

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// TestConnectionRestConfig checks the order in which the provider finds its cluster and its
// default namespace.
func TestConnectionRestConfig(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := func(name, server, namespace string) string {
		kc := clientcmdapi.NewConfig()
		kc.Clusters["c"] = &clientcmdapi.Cluster{Server: server}
		kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "t"}
		kc.Contexts["main"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u", Namespace: namespace}
		kc.Contexts["other"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u", Namespace: "other-ns"}
		kc.CurrentContext = "main"
		p := filepath.Join(dir, name)
		if err := clientcmd.WriteToFile(*kc, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	explicit := kubeconfig("explicit", "https://explicit:6443", "team-a")
	fromEnv := kubeconfig("env", "https://from-env:6443", "")

	tests := []struct {
		name          string
		conn          connection
		env           string // KUBECONFIG
		wantHost      string
		wantNamespace string
		wantErr       string
	}{
		{name: "host wins", conn: connection{Host: "https://host:6443", KubeconfigPath: explicit}, env: fromEnv,
			wantHost: "https://host:6443", wantNamespace: "default"},
		{name: "kubeconfig_path with its context's namespace", conn: connection{KubeconfigPath: explicit}, env: fromEnv,
			wantHost: "https://explicit:6443", wantNamespace: "team-a"},
		{name: "kubeconfig_context", conn: connection{KubeconfigPath: explicit, KubeconfigContext: "other"},
			wantHost: "https://explicit:6443", wantNamespace: "other-ns"},
		{name: "namespace attribute wins", conn: connection{KubeconfigPath: explicit, Namespace: "mine"},
			wantHost: "https://explicit:6443", wantNamespace: "mine"},
		{name: "KUBECONFIG", env: fromEnv, wantHost: "https://from-env:6443", wantNamespace: "default"},
		{name: "missing kubeconfig_path", conn: connection{KubeconfigPath: filepath.Join(dir, "missing")},
			wantErr: "load kubeconfig"},
		{name: "unknown context", conn: connection{KubeconfigPath: explicit, KubeconfigContext: "nope"},
			wantErr: `context "nope" does not exist`},
		{name: "nothing", env: filepath.Join(dir, "none"), wantErr: "no connection settings"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tc.env)
			t.Setenv("HOME", dir) // no ~/.kube/config
			t.Setenv("KUBERNETES_SERVICE_HOST", "")
			cfg, ns, err := tc.conn.restConfig()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("restConfig() error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("restConfig() error = %v", err)
			}
			if cfg.Host != tc.wantHost || ns != tc.wantNamespace {
				t.Errorf("restConfig() = host %s, namespace %s; want %s, %s", cfg.Host, ns, tc.wantHost, tc.wantNamespace)
			}
		})
	}
}

// TestAccProvider_hostAndCertificates connects with host, CA and client certificate
// attributes instead of a kubeconfig, and uses the provider's namespace.
func TestAccProvider_hostAndCertificates(t *testing.T) {
	c := newTestCluster(t, testenv.ControlPlane(t))
	q := baseQuery()
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		Steps: []resource.TestStep{{
			Config: hostProvider(c.cfg, c.namespace) + q.hcl(),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(address, tfjsonpath.New("namespace"), knownvalue.StringExact(c.namespace)),
			},
		}},
	})
}

func hostProvider(cfg *rest.Config, namespace string) string {
	return fmt.Sprintf(`provider "lockstep" {
  host                   = %q
  cluster_ca_certificate = %q
  client_certificate     = %q
  client_key             = %q
  token                  = %q
  namespace              = %q
}
`, cfg.Host, cfg.CAData, cfg.CertData, cfg.KeyData, cfg.BearerToken, namespace)
}
