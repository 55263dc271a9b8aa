package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	pschema "github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// examplesDir holds the examples that docs/terraform shows and users copy.
var examplesDir = filepath.Join("..", "examples", "terraform")

// exampleRoots are the folders of examplesDir that are Terraform root modules.
func exampleRoots(t testing.TB) []string {
	t.Helper()
	var roots []string
	err := filepath.WalkDir(examplesDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "modules" {
			return fs.SkipDir // used through their root
		}
		if !d.IsDir() {
			return nil
		}
		if tf, _ := filepath.Glob(filepath.Join(p, "*.tf")); len(tf) > 0 {
			roots = append(roots, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return roots
}

// TestExamplesValidate runs terraform init and terraform validate in every example, with the
// provider served by this test binary.
//
// The platform example also uses hashicorp/kubernetes, which cannot be downloaded here: a
// stand-in that declares the schema of the three kubernetes resources the example uses
// (kubernetes_namespace_v1, kubernetes_secret_v1, kubernetes_manifest) takes its place, so
// that everything the example says about the lockstep provider is validated for real.
func TestExamplesValidate(t *testing.T) {
	roots := exampleRoots(t)
	for _, want := range []string{"provider", "quickstart", "platform", filepath.Join("resources", "lockstep_streaming_query"),
		filepath.Join("data-sources", "lockstep_streaming_query"), filepath.Join("data-sources", "lockstep_checkpoint_store")} {
		found := false
		for _, r := range roots {
			found = found || r == filepath.Join(examplesDir, want)
		}
		if !found {
			t.Errorf("example %s is missing", want)
		}
	}
	for _, root := range roots {
		rel, _ := filepath.Rel(examplesDir, root)
		t.Run(rel, func(t *testing.T) {
			dir := copyExample(t, root)
			tf := newTerraformCLI(t, dir)
			tf.Must("init", "-input=false", "-backend=false")
			tf.Must("validate")
			out := tf.Must("fmt", "-check", "-diff", "-recursive")
			if strings.TrimSpace(out) != "" {
				t.Errorf("terraform fmt would change %s:\n%s", rel, out)
			}
		})
	}
}

// copyExample copies an example folder (and the modules next to it) to a temporary folder,
// so that init writes nothing into the source tree.
func copyExample(t testing.TB, root string) string {
	t.Helper()
	dir := t.TempDir()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			if d.Name() == ".terraform" {
				return fs.SkipDir
			}
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		if strings.HasPrefix(d.Name(), ".terraform") || strings.HasSuffix(d.Name(), ".tfstate") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestExampleQuickstartApplies applies the quickstart, unchanged, to a cluster with the real
// webhook and controller, plans it again (nothing to do), and destroys it.
func TestExampleQuickstartApplies(t *testing.T) {
	c := newLockstepCluster(t)
	dir := copyExample(t, filepath.Join(examplesDir, "quickstart"))
	tf := newTerraformCLI(t, dir)
	tf.Env = append(tf.Env, "TF_VAR_kubeconfig="+c.kubeconfig, "TF_VAR_namespace="+c.namespace, "TF_VAR_checkpoint_store="+c.store)
	tf.Must("init", "-input=false")
	tf.Must("apply", "-auto-approve", "-input=false")

	var outputs map[string]struct {
		Value any `json:"value"`
	}
	if err := json.Unmarshal([]byte(tf.Must("output", "-json")), &outputs); err != nil {
		t.Fatal(err)
	}
	if got, want := outputs["checkpoint_location"].Value, c.location("quickstart"); got != want {
		t.Errorf("output checkpoint_location = %v, want %v", got, want)
	}
	if got := outputs["delivery_guarantee"].Value; !strings.HasPrefix(got.(string), "none: ") {
		t.Errorf("output delivery_guarantee = %v, want none with its reason", got)
	}
	if _, err := c.get(t, "quickstart"); err != nil {
		t.Errorf("the quickstart query is not in the cluster: %v", err)
	}
	if out, err := tf.Run("plan", "-detailed-exitcode", "-input=false"); err != nil {
		t.Errorf("plan after apply is not empty (%v):\n%s", err, out)
	}
	tf.Must("destroy", "-auto-approve", "-input=false")
	if _, err := c.get(t, "quickstart"); err == nil {
		t.Error("the quickstart query is still in the cluster after destroy")
	}
}

var stringType = types.StringType

// standInEnv, set to standInKubernetes in Terraform's environment, makes this test binary
// serve kubernetesStandIn when Terraform starts it as a provider plugin: the binary is the
// stand-in that packKubernetesStandIn puts in a provider mirror.
const (
	standInEnv        = "LOCKSTEP_TEST_SERVE_PROVIDER"
	standInKubernetes = "kubernetes"
)

// serveKubernetesStandIn serves kubernetesStandIn as a provider plugin until Terraform stops
// it.
func serveKubernetesStandIn() error {
	return providerserver.Serve(context.Background(), func() provider.Provider { return kubernetesStandIn{} },
		providerserver.ServeOpts{Address: "registry.terraform.io/hashicorp/kubernetes"})
}

// kubernetesStandIn declares the schema of the hashicorp/kubernetes resources the platform
// example uses, for terraform validate. It cannot create anything.
type kubernetesStandIn struct{}

func (kubernetesStandIn) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "kubernetes"
}

func (kubernetesStandIn) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = pschema.Schema{Attributes: map[string]pschema.Attribute{
		"config_path":    pschema.StringAttribute{Optional: true},
		"config_context": pschema.StringAttribute{Optional: true},
	}}
}

func (kubernetesStandIn) Configure(context.Context, provider.ConfigureRequest, *provider.ConfigureResponse) {
}

func (kubernetesStandIn) DataSources(context.Context) []func() datasource.DataSource { return nil }

func (kubernetesStandIn) Resources(context.Context) []func() resource.Resource {
	metadata := func(namespaced bool) schema.Block {
		attrs := map[string]schema.Attribute{
			"name":          schema.StringAttribute{Optional: true, Computed: true},
			"generate_name": schema.StringAttribute{Optional: true},
			"labels":        schema.MapAttribute{Optional: true, ElementType: stringType},
			"annotations":   schema.MapAttribute{Optional: true, ElementType: stringType},
		}
		if namespaced {
			attrs["namespace"] = schema.StringAttribute{Optional: true}
		}
		return schema.ListNestedBlock{NestedObject: schema.NestedBlockObject{Attributes: attrs}}
	}
	id := schema.StringAttribute{Computed: true}
	return []func() resource.Resource{
		func() resource.Resource {
			return standInResource{name: "namespace_v1", schema: schema.Schema{
				Attributes: map[string]schema.Attribute{"id": id},
				Blocks:     map[string]schema.Block{"metadata": metadata(false)},
			}}
		},
		func() resource.Resource {
			return standInResource{name: "secret_v1", schema: schema.Schema{
				Attributes: map[string]schema.Attribute{"id": id,
					"data": schema.MapAttribute{Optional: true, Sensitive: true, ElementType: stringType},
					"type": schema.StringAttribute{Optional: true},
				},
				Blocks: map[string]schema.Block{"metadata": metadata(true)},
			}}
		},
		func() resource.Resource {
			return standInResource{name: "manifest", schema: schema.Schema{Attributes: map[string]schema.Attribute{
				"manifest": schema.DynamicAttribute{Required: true},
				"object":   schema.DynamicAttribute{Optional: true, Computed: true},
			}}}
		},
	}
}

type standInResource struct {
	name   string
	schema schema.Schema
}

func (r standInResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_" + r.name
}

func (r standInResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = r.schema
}

func (standInResource) Create(_ context.Context, _ resource.CreateRequest, resp *resource.CreateResponse) {
	resp.Diagnostics.AddError("Stand-In", "the kubernetes stand-in only validates")
}

func (standInResource) Read(context.Context, resource.ReadRequest, *resource.ReadResponse) {}

func (standInResource) Update(_ context.Context, _ resource.UpdateRequest, resp *resource.UpdateResponse) {
	resp.Diagnostics.AddError("Stand-In", "the kubernetes stand-in only validates")
}

func (standInResource) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {}

// TestExamplePlatformQueriesApply plans and applies the platform example's team-queries
// module, unchanged (with a provider block beside it), as a root module against a cluster with the real webhook and
// controller: the namespace and CheckpointStore that the team module would make with the
// kubernetes provider are the test's. Then it plans again (nothing to do) and destroys.
func TestExamplePlatformQueriesApply(t *testing.T) {
	c := newLockstepCluster(t)
	dir := copyExample(t, filepath.Join(examplesDir, "platform", "modules", "team-queries"))
	// The root that calls the module configures the provider; here, a file next to it.
	if err := os.WriteFile(filepath.Join(dir, "provider_test.tf"), []byte(c.provider()), 0o644); err != nil {
		t.Fatal(err)
	}
	tf := newTerraformCLI(t, dir)
	tf.Env = append(tf.Env,
		"TF_VAR_namespace="+c.namespace, "TF_VAR_checkpoint_store="+c.store,
		"TF_VAR_landing="+strings.TrimSuffix(c.path("landing"), "/"), "TF_VAR_lake="+strings.TrimSuffix(c.path("lake"), "/"),
		"TF_VAR_alerts_url=https://alerts.example.com/hooks/big-orders")
	tf.Must("init", "-input=false")
	w := &workspace{t: t, c: c, dir: dir, tf: tf, names: strings.NewReplacer(c.s3.Bucket, "BUCKET", c.namespace, "NAMESPACE")}
	golden(t, "plan-platform-queries.golden", w.mustPlan())
	tf.Must("apply", "-auto-approve", "-input=false")

	var outputs map[string]struct {
		Value map[string]map[string]string `json:"value"`
	}
	if err := json.Unmarshal([]byte(tf.Must("output", "-json")), &outputs); err != nil {
		t.Fatal(err)
	}
	queries := outputs["queries"].Value
	if got, want := queries["orders-clean"]["checkpoint"], c.location("orders-clean"); got != want {
		t.Errorf("orders-clean checkpoint = %q, want %q", got, want)
	}
	if got := queries["big-orders"]["guarantee"]; got != "at-least-once" {
		t.Errorf("big-orders guarantee = %q, want at-least-once", got)
	}
	if out, err := tf.Run("plan", "-detailed-exitcode", "-input=false"); err != nil {
		t.Errorf("plan after apply is not empty (%v):\n%s", err, out)
	}
	tf.Must("destroy", "-auto-approve", "-input=false")
}

// TestExamplePlatformPlansTwoTeams plans the platform example, unchanged, with the two teams
// of its terraform.tfvars, against a control plane: each team gets its namespace, its
// credentials Secret and its CheckpointStore, and its two queries in its namespace with its
// store and its folders. (The namespaces do not exist, so the queries' plan cannot ask the
// cluster about them, as in a first apply.)
func TestExamplePlatformPlansTwoTeams(t *testing.T) {
	c := newTestCluster(t, testenv.ControlPlane(t))
	dir := copyExample(t, filepath.Join(examplesDir, "platform"))
	tf := newTerraformCLI(t, dir)
	tf.Env = append(tf.Env, "TF_VAR_kubeconfig="+c.kubeconfig, "TF_VAR_s3_access_key_id=key", "TF_VAR_s3_secret_access_key=secret")
	tf.Must("init", "-input=false")
	out := filepath.Join(t.TempDir(), "plan")
	tf.Must("plan", "-input=false", "-lock=false", "-out="+out)
	var plan struct {
		ResourceChanges []struct {
			Address string `json:"address"`
			Change  struct {
				Actions []string       `json:"actions"`
				After   map[string]any `json:"after"`
			} `json:"change"`
		} `json:"resource_changes"`
	}
	if err := json.Unmarshal([]byte(tf.Must("show", "-json", out)), &plan); err != nil {
		t.Fatal(err)
	}
	var want, got []string
	for _, team := range []string{"payments", "shipping"} {
		for _, r := range []string{"kubernetes_manifest.store", "kubernetes_namespace_v1.team", "kubernetes_secret_v1.s3"} {
			want = append(want, fmt.Sprintf("module.team[%q].%s: create", team, r))
		}
		for _, q := range []string{"big_orders", "orders_clean"} {
			want = append(want, fmt.Sprintf("module.queries[%q].lockstep_streaming_query.%s: create in %s, store %s-checkpoints, reading s3://landing/%s/orders/",
				team, q, team, team, team))
		}
	}
	for _, rc := range plan.ResourceChanges {
		line := rc.Address + ": " + strings.Join(rc.Change.Actions, ",")
		if strings.Contains(rc.Address, "lockstep_streaming_query") {
			store, _ := rc.Change.After["checkpoint"].(map[string]any)
			sources, _ := rc.Change.After["sources"].([]any)
			var path any
			if len(sources) > 0 {
				files, _ := sources[0].(map[string]any)["files"].(map[string]any)
				path = files["path"]
			}
			line += fmt.Sprintf(" in %v, store %v, reading %v", rc.Change.After["namespace"], store["store"], path)
		}
		got = append(got, line)
	}
	sort.Strings(want)
	sort.Strings(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("planned changes of the platform example with two teams (-want +got):\n%s", diff)
	}
}

// TestPlatformProvidersMatch keeps the version constraint on hashicorp/kubernetes that the
// install guide's mirror command downloads (install/platform-providers) equal to the
// constraints of the platform example, so that the mirror holds a version the example accepts.
func TestPlatformProvidersMatch(t *testing.T) {
	constraint := regexp.MustCompile(`source\s*=\s*"hashicorp/kubernetes"\s*\n\s*version\s*=\s*"([^"]*)"`)
	files := []string{
		filepath.Join(installDir, "platform-providers", "versions.tf"),
		filepath.Join(examplesDir, "platform", "main.tf"),
		filepath.Join(examplesDir, "platform", "modules", "team", "versions.tf"),
	}
	var first string
	for i, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m := constraint.FindSubmatch(b)
		if m == nil {
			t.Fatalf("%s requires no version of hashicorp/kubernetes", f)
		}
		if i == 0 {
			first = string(m[1])
		} else if string(m[1]) != first {
			t.Errorf("%s requires hashicorp/kubernetes %q, but %s mirrors %q", f, m[1], files[0], first)
		}
	}
}
