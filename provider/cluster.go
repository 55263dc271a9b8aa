package provider

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
)

// FieldManager is the server-side apply field manager under which the provider writes
// StreamingQueries.
const FieldManager = "terraform-provider-lockstep"

// GroupVersionResources of the kinds the provider reads and writes.
var (
	queriesResource = v1.GroupVersion.WithResource("streamingqueries")
	storesResource  = v1.GroupVersion.WithResource("checkpointstores")
	// secretsResource is read only for the credentials of a query's store, so that a plan
	// can read the query's checkpoint (checkpoint_read.go).
	secretsResource = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
)

// connection is how the provider reaches the API server, from the provider's configuration.
// Empty fields are not set.
type connection struct {
	KubeconfigPath    string
	KubeconfigContext string
	Host              string
	Token             string
	CACertificate     string // PEM
	ClientCertificate string // PEM
	ClientKey         string // PEM
	Insecure          bool
	Namespace         string
}

// inClusterNamespaceFile holds the pod's namespace when the provider runs in a cluster.
const inClusterNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// restConfig resolves a connection to a rest.Config and the default namespace, in this order:
// host (with token, CA and client certificate); kubeconfig_path; the files named by
// KUBECONFIG; ~/.kube/config; the in-cluster service account. The namespace is the
// connection's, else the kubeconfig context's, else the pod's (in cluster), else "default".
func (c connection) restConfig() (*rest.Config, string, error) {
	ns := c.Namespace
	if c.Host != "" {
		cfg := &rest.Config{
			Host:        c.Host,
			BearerToken: c.Token,
			TLSClientConfig: rest.TLSClientConfig{
				Insecure: c.Insecure,
				CAData:   []byte(c.CACertificate),
				CertData: []byte(c.ClientCertificate),
				KeyData:  []byte(c.ClientKey),
			},
		}
		return cfg, cmp.Or(ns, v1.DefaultNamespace), nil
	}

	rules := clientcmd.NewDefaultClientConfigLoadingRules() // KUBECONFIG, then ~/.kube/config
	if c.KubeconfigPath != "" {
		rules.ExplicitPath = expandHome(c.KubeconfigPath)
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: c.KubeconfigContext}
	if c.Insecure {
		overrides.ClusterInfo.InsecureSkipTLSVerify = true
	}
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := loader.ClientConfig()
	switch {
	case err == nil:
		if ns == "" {
			if kns, _, err := loader.Namespace(); err == nil {
				ns = kns
			}
		}
		return cfg, cmp.Or(ns, v1.DefaultNamespace), nil
	case c.KubeconfigPath != "" || c.KubeconfigContext != "" || !clientcmd.IsEmptyConfig(err):
		return nil, "", fmt.Errorf("load kubeconfig: %w", err)
	}

	cfg, err = rest.InClusterConfig()
	if errors.Is(err, rest.ErrNotInCluster) {
		return nil, "", errors.New("no connection settings: set host or kubeconfig_path in the provider block, " +
			"set KUBECONFIG, create ~/.kube/config, or run in a Kubernetes pod")
	}
	if err != nil {
		return nil, "", fmt.Errorf("in-cluster configuration: %w", err)
	}
	if ns == "" {
		if b, err := os.ReadFile(inClusterNamespaceFile); err == nil {
			ns = strings.TrimSpace(string(b))
		}
	}
	return cfg, cmp.Or(ns, v1.DefaultNamespace), nil
}

func expandHome(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return home + "/" + rest
		}
	}
	return p
}

// cluster is the provider's client of one API server. It is safe for concurrent use.
type cluster struct {
	dyn       dynamic.Interface
	namespace string // the default namespace
	// managed holds the UIDs of the queries that resources of Terraform's state read or wrote
	// in this run of the provider (one plan or apply): the query that a replacement's create
	// half finds is one of them.
	managed sync.Map
}

// noteManaged records that a resource in Terraform's state holds the query with uid.
func (c *cluster) noteManaged(uid types.UID) {
	if uid != "" {
		c.managed.Store(uid, struct{}{})
	}
}

// isManaged reports whether noteManaged recorded uid in this run.
func (c *cluster) isManaged(uid types.UID) bool {
	_, ok := c.managed.Load(uid)
	return ok
}

// Default client rate limits (provider settings client_qps and client_burst). client-go's
// own, 5 and 10, queue the requests of a plan that changes tens of queries for seconds; these
// let a plan of 50 changed queries (about 100 requests) through at once, and keep a runaway
// loop to what a kubectl would do. See docs/benchmarks.md.
const (
	defaultClientQPS   = 50
	defaultClientBurst = 100
)

// clientLimits is the client-side rate limit of the provider's requests.
type clientLimits struct {
	QPS   float32
	Burst int
}

// newCluster returns a client for cfg with the rate limit limits. The API server's warnings
// on each request are handed to the collector in the request's context (see withWarnings).
func newCluster(cfg *rest.Config, namespace string, limits clientLimits) (*cluster, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = limits.QPS, limits.Burst
	cfg.UserAgent = FieldManager
	cfg.WarningHandler = nil
	cfg.WarningHandlerWithContext = warningRouter{}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	return &cluster{dyn: dyn, namespace: namespace}, nil
}

func (c *cluster) queries(namespace string) dynamic.ResourceInterface {
	return c.dyn.Resource(queriesResource).Namespace(namespace)
}

func (c *cluster) stores() dynamic.ResourceInterface {
	return c.dyn.Resource(storesResource)
}

// getQuery reads a StreamingQuery.
func (c *cluster) getQuery(ctx context.Context, namespace, name string) (*unstructured.Unstructured, error) {
	return c.queries(namespace).Get(ctx, name, metav1.GetOptions{})
}

// applyQuery writes obj with server-side apply under FieldManager, taking over fields that
// another manager changed (Terraform's configuration wins). With dryRun the API server runs
// defaulting, validation and the admission webhooks, and stores nothing.
func (c *cluster) applyQuery(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) (*unstructured.Unstructured, error) {
	opts := metav1.ApplyOptions{FieldManager: FieldManager, Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return c.queries(obj.GetNamespace()).Apply(ctx, obj.GetName(), obj, opts)
}

// deleteQuery deletes a StreamingQuery, only if it still has uid. The engine's objects go
// with it in the background (the garbage collector follows their owner references); the
// controller's finalizer applies the checkpoint's retention policy first.
func (c *cluster) deleteQuery(ctx context.Context, namespace, name string, uid types.UID) error {
	policy := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &policy}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	return c.queries(namespace).Delete(ctx, name, opts)
}

// warningRouter hands each API server warning to the collector in the request's context, if
// any, so that concurrent requests keep their warnings apart.
type warningRouter struct{}

func (warningRouter) HandleWarningHeaderWithContext(ctx context.Context, code int, _ string, text string) {
	if w, ok := ctx.Value(warningsKey{}).(*warnings); ok && code == 299 && text != "" {
		w.add(text)
	}
}

type warningsKey struct{}

// warnings collects the warnings of the requests made with its context.
type warnings struct {
	mu    sync.Mutex
	texts []string
}

// withWarnings returns a context whose requests' warnings are collected in the result.
func withWarnings(ctx context.Context) (context.Context, *warnings) {
	w := &warnings{}
	return context.WithValue(ctx, warningsKey{}, w), w
}

func (w *warnings) add(text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.texts = append(w.texts, text)
}

func (w *warnings) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.texts...)
}
