package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework-validators/float64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// Name is the provider's type name: resources are named lockstep_….
const Name = "lockstep"

var _ provider.Provider = (*lockstepProvider)(nil)

// New returns a function that makes the Lockstep provider, as providerserver.NewProtocol6
// wants it. version is the provider's version, "dev" for a local build.
// The schemas come from the CRDs embedded in the binary, read once here.
func New(version string) func() provider.Provider {
	k := loadKinds()
	return func() provider.Provider { return &lockstepProvider{version: version, kinds: k} }
}

type lockstepProvider struct {
	version string
	kinds   *kinds
}

// providerModel is the provider block.
type providerModel struct {
	KubeconfigPath       types.String  `tfsdk:"kubeconfig_path"`
	KubeconfigContext    types.String  `tfsdk:"kubeconfig_context"`
	Host                 types.String  `tfsdk:"host"`
	Token                types.String  `tfsdk:"token"`
	ClusterCACertificate types.String  `tfsdk:"cluster_ca_certificate"`
	ClientCertificate    types.String  `tfsdk:"client_certificate"`
	ClientKey            types.String  `tfsdk:"client_key"`
	Insecure             types.Bool    `tfsdk:"insecure"`
	Namespace            types.String  `tfsdk:"namespace"`
	ClientQPS            types.Float64 `tfsdk:"client_qps"`
	ClientBurst          types.Int64   `tfsdk:"client_burst"`
}

func (p *lockstepProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = Name
	resp.Version = p.version
}

func (p *lockstepProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	str := func(desc string, sensitive bool) schema.StringAttribute {
		return schema.StringAttribute{Optional: true, Sensitive: sensitive, Description: desc, MarkdownDescription: desc}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Manages Lockstep streaming queries on Kubernetes. Every `terraform plan` asks the " +
			"cluster, with a server-side dry run, whether a change can restart from the query's existing " +
			"checkpoint, and shows the delivery guarantee the query will have.\n\n" +
			"The provider connects with, in this order: `host` (with `token`, `cluster_ca_certificate`, " +
			"`client_certificate` and `client_key`); `kubeconfig_path`; the files named by `KUBECONFIG`; " +
			"`~/.kube/config`; the service account of the pod it runs in.",
		Attributes: map[string]schema.Attribute{
			"kubeconfig_path": str("Path of a kubeconfig file. Omitted: the files named by `KUBECONFIG`, "+
				"then `~/.kube/config`, then the in-cluster service account.", false),
			"kubeconfig_context": str("Context of the kubeconfig to use. Omitted: its current context.", false),
			"host": str("Address of the API server, such as `https://10.0.0.1:6443`. When set, the kubeconfig "+
				"is not read and `token` or `client_certificate` authenticate.", false),
			"token":                  str("Bearer token, with `host`.", true),
			"cluster_ca_certificate": str("PEM bundle of the CAs that sign the API server's certificate, with `host`.", false),
			"client_certificate":     str("PEM client certificate, with `host` and `client_key`.", false),
			"client_key":             str("PEM private key of `client_certificate`.", true),
			"insecure": schema.BoolAttribute{Optional: true,
				Description:         "Skip verifying the API server's certificate. For tests only.",
				MarkdownDescription: "Skip verifying the API server's certificate. For tests only."},
			"namespace": str("Namespace of queries that name none. Omitted: the kubeconfig context's "+
				"namespace, else the pod's namespace in a cluster, else `default`.", false),
			"client_qps": schema.Float64Attribute{Optional: true,
				Description: fmt.Sprintf("Requests per second the provider makes to the API server, on average (client-go's "+
					"rate limit). Omitted: %d. A plan makes about two requests per changed query (a read and the "+
					"dry run), so client-go's own default, 5, makes a plan of 50 changed queries wait seconds.", defaultClientQPS),
				MarkdownDescription: fmt.Sprintf("Requests per second the provider makes to the API server, on average (client-go's "+
					"rate limit). Omitted: `%d`. A plan makes about two requests per changed query (a read and the "+
					"dry run), so client-go's own default, 5, makes a plan of 50 changed queries wait seconds.", defaultClientQPS),
				Validators: []validator.Float64{float64validator.AtLeast(1)}},
			"client_burst": schema.Int64Attribute{Optional: true,
				Description:         fmt.Sprintf("Requests the provider may make at once above client_qps. Omitted: %d.", defaultClientBurst),
				MarkdownDescription: fmt.Sprintf("Requests the provider may make at once above `client_qps`. Omitted: `%d`.", defaultClientBurst),
				Validators:          []validator.Int64{int64validator.AtLeast(1)}},
		},
	}
}

func (p *lockstepProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var m providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	for _, v := range []types.String{m.KubeconfigPath, m.KubeconfigContext, m.Host, m.Token,
		m.ClusterCACertificate, m.ClientCertificate, m.ClientKey, m.Namespace} {
		if v.IsUnknown() {
			// Known only after apply (a cluster made in the same run): resources plan without
			// asking the cluster and connect when they are applied, with the known values.
			resp.ResourceData, resp.DataSourceData = (*cluster)(nil), (*cluster)(nil)
			return
		}
	}
	if m.Insecure.IsUnknown() || m.ClientQPS.IsUnknown() || m.ClientBurst.IsUnknown() {
		resp.ResourceData, resp.DataSourceData = (*cluster)(nil), (*cluster)(nil)
		return
	}
	conn := connection{
		KubeconfigPath:    m.KubeconfigPath.ValueString(),
		KubeconfigContext: m.KubeconfigContext.ValueString(),
		Host:              m.Host.ValueString(),
		Token:             m.Token.ValueString(),
		CACertificate:     m.ClusterCACertificate.ValueString(),
		ClientCertificate: m.ClientCertificate.ValueString(),
		ClientKey:         m.ClientKey.ValueString(),
		Insecure:          m.Insecure.ValueBool(),
		Namespace:         m.Namespace.ValueString(),
	}
	cfg, ns, err := conn.restConfig()
	if err != nil {
		resp.Diagnostics.AddError("Cannot Connect To Kubernetes", "The provider could not build its connection to the API server: "+err.Error()+".")
		return
	}
	limits := clientLimits{QPS: defaultClientQPS, Burst: defaultClientBurst}
	if !m.ClientQPS.IsNull() {
		limits.QPS = float32(m.ClientQPS.ValueFloat64())
	}
	if !m.ClientBurst.IsNull() {
		limits.Burst = int(m.ClientBurst.ValueInt64())
	}
	c, err := newCluster(cfg, ns, limits)
	if err != nil {
		resp.Diagnostics.AddError("Cannot Connect To Kubernetes", err.Error()+".")
		return
	}
	resp.ResourceData, resp.DataSourceData = c, c
}

func (p *lockstepProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{newQueryResourceFor(p.kinds)}
}

func (p *lockstepProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{newQueryDataSourceFor(p.kinds), newStoreDataSourceFor(p.kinds)}
}
