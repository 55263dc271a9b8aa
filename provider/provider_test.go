package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/lockstep-dev/lockstep/internal/testenv"
	"github.com/lockstep-dev/lockstep/provider/providertest"
)

// TestMain runs the acceptance tests with `go test` alone: it sets TF_ACC and points
// terraform-plugin-testing at the Terraform CLI in the tool cache (make tools).
func TestMain(m *testing.M) {
	if os.Getenv(standInEnv) == standInKubernetes && os.Getenv("TF_PLUGIN_MAGIC_COOKIE") != "" {
		// Terraform started this binary from a provider mirror as hashicorp/kubernetes (see
		// packKubernetesStandIn): serve the stand-in, run no tests.
		if err := serveKubernetesStandIn(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if os.Getenv("TF_ACC") == "" {
		os.Setenv("TF_ACC", "1")
	}
	if os.Getenv("TF_ACC_TERRAFORM_PATH") == "" {
		if p, err := testenv.LookupTool("terraform"); err == nil {
			os.Setenv("TF_ACC_TERRAFORM_PATH", p)
		}
	}
	providertest.QuietSDKLogs() // the provider runs inside the test binary for the CLI tests
	testenv.Main(m)
}

// providers serves the provider in the test binary; Terraform reattaches to it.
var providers = map[string]func() (tfprotov6.ProviderServer, error){
	Name: providerserver.NewProtocol6WithError(New("test")()),
}

// Waits in tests, named once.
const (
	eventually = 30 * time.Second
	tick       = 100 * time.Millisecond
)

// cluster is a test's view of a control plane: a namespace of its own, a kubeconfig file
// that points at it, and a client that talks to the API server directly.
type testCluster struct {
	cfg        *rest.Config
	namespace  string
	kubeconfig string
	dyn        dynamic.Interface
	kube       kubernetes.Interface
}

// newTestCluster makes a namespace for t on the control plane cfg, named after the test.
func newTestCluster(t testing.TB, cfg *rest.Config) *testCluster {
	t.Helper()
	testenv.Terraform(t) // fails with the command that installs it when it is missing
	c := &testCluster{cfg: cfg, namespace: namespaceName(t.Name())}
	var err error
	if c.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if c.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.namespace}}
	if _, err := c.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", c.namespace, err)
	}
	c.kubeconfig = writeKubeconfig(t, cfg, c.namespace)
	return c
}

var nonLabel = regexp.MustCompile(`[^a-z0-9-]+`)

func namespaceName(test string) string {
	n := strings.Trim(nonLabel.ReplaceAllString(strings.ToLower(test), "-"), "-")
	if len(n) > 50 {
		n = strings.TrimRight(n[:50], "-")
	}
	return fmt.Sprintf("%s-%d", n, time.Now().UnixNano()%100000)
}

// writeKubeconfig writes a kubeconfig for cfg with one context, "test", whose namespace is
// namespace.
func writeKubeconfig(t testing.TB, cfg *rest.Config, namespace string) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin", Namespace: namespace}
	kc.CurrentContext = "test"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// provider returns the provider block that connects to the test's cluster through its
// kubeconfig, with the test's namespace as the kubeconfig context's.
func (c *testCluster) provider() string {
	return fmt.Sprintf("provider %q {\n  kubeconfig_path = %q\n}\n", Name, c.kubeconfig)
}

// get reads a StreamingQuery of the test's namespace.
func (c *testCluster) get(t testing.TB, name string) (*unstructured.Unstructured, error) {
	t.Helper()
	return c.dyn.Resource(queriesResource).Namespace(c.namespace).Get(context.Background(), name, metav1.GetOptions{})
}
