package provider

import (
	"cmp"
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-dev/lockstep/compat"
)

var _ datasource.DataSourceWithConfigure = (*queryDataSource)(nil)

// queryDataSource is the lockstep_streaming_query data source: a query and its status, read
// from the cluster.
type queryDataSource struct{ dataSource }

func newQueryDataSourceFor(k *kinds) func() datasource.DataSource {
	return func() datasource.DataSource {
		return &queryDataSource{dataSource{kinds: k, typeName: "_streaming_query"}}
	}
}

func (d *queryDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	str := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, Description: desc, MarkdownDescription: desc}
	}
	meta := map[string]schema.Attribute{
		attrID: str("The query's `namespace/name`."),
		attrNamespace: schema.StringAttribute{Optional: true, Computed: true,
			Description:         "Namespace of the query. Omitted: the provider's namespace.",
			MarkdownDescription: "Namespace of the query. Omitted: the provider's `namespace`."},
		attrName: schema.StringAttribute{Required: true,
			Description: "Name of the query.", MarkdownDescription: "Name of the query."},
		attrUID:                     str("The Kubernetes UID of the StreamingQuery object."),
		attrQueryID:                 str("The query id recorded in the checkpoint's metadata."),
		attrPhase:                   str("The query's phase: Pending, Running, Rebuilding, Suspended, Failed, Blocked or Completed."),
		attrCheckpointLocation:      str("The checkpoint location in force."),
		attrDeliveryGuarantee:       str("The query's delivery guarantee: exactly-once, at-least-once or none."),
		attrDeliveryGuaranteeReason: str("Why the query has its delivery guarantee."),
		attrLatestCommittedBatch: schema.Int64Attribute{Computed: true,
			Description:         "The newest batch in the checkpoint's commit log.",
			MarkdownDescription: "The newest batch in the checkpoint's commit log."},
	}
	dataSourceSchema(d.kinds.err, d.kinds.query, d.kinds.queryStatus, meta,
		"Reads a Lockstep `StreamingQuery`, its spec and the status the controller reports "+
			"(phase, query id, progress of the newest committed batch, per-source lag, conditions).", resp)
}

func (d *queryDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var namespace, name types.String
	if !d.readConfig(ctx, req.Config, &resp.Diagnostics, map[string]*types.String{attrNamespace: &namespace, attrName: &name}) {
		return
	}
	ns := cmp.Or(namespace.ValueString(), d.cluster.namespace)
	obj, err := d.cluster.getQuery(ctx, ns, name.ValueString())
	if readFailed(&resp.Diagnostics, err, "Streaming Query",
		fmt.Sprintf("There is no StreamingQuery %s in namespace %s.", name.ValueString(), ns),
		fmt.Sprintf("StreamingQuery %s/%s", ns, name.ValueString())) {
		return
	}
	resp.State.Raw = req.Config.Raw.Copy()
	resp.Diagnostics.Append(setSpec(ctx, &resp.State, d.kinds.query, objectSpec(obj), req.Config.Raw)...)

	st, err := queryStatus(obj)
	if err != nil {
		resp.Diagnostics.AddError("Unexpected Status", err.Error())
		return
	}
	set := func(name string, v any) { resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root(name), v)...) }
	set(attrID, ns+"/"+obj.GetName())
	set(attrNamespace, ns)
	set(attrUID, string(obj.GetUID()))
	set(attrQueryID, stringOrNull(st.QueryID))
	set(attrPhase, stringOrNull(string(st.Phase)))
	loc, _, _ := unstructured.NestedString(obj.Object, "spec", "checkpoint", "location")
	set(attrCheckpointLocation, stringOrNull(cmp.Or(loc, st.CheckpointLocation)))
	set(attrLatestCommittedBatch, types.Int64PointerValue(st.LatestCommittedBatch))
	if spec, err := typedSpec(objectSpec(obj)); err == nil {
		g, reason := compat.GuaranteeOf(spec)
		set(attrDeliveryGuarantee, string(g))
		set(attrDeliveryGuaranteeReason, reason)
	}
	setDataSourceStatus(ctx, resp, d.kinds.queryStatus, obj)
}
