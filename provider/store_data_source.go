package provider

import (
	"cmp"
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
)

var _ datasource.DataSourceWithConfigure = (*storeDataSource)(nil)

// storeDataSource is the lockstep_checkpoint_store data source: a cluster-scoped
// CheckpointStore, and the checkpoint location it gives a query.
type storeDataSource struct{ dataSource }

func newStoreDataSourceFor(k *kinds) func() datasource.DataSource {
	return func() datasource.DataSource {
		return &storeDataSource{dataSource{kinds: k, typeName: "_checkpoint_store"}}
	}
}

// Attributes of lockstep_checkpoint_store besides the spec's.
const (
	attrQueryNamespace = "query_namespace"
	attrQueryName      = "query_name"
	attrLocation       = "location"
	attrReady          = "ready"
)

func (d *storeDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	meta := map[string]schema.Attribute{
		attrID: schema.StringAttribute{Computed: true, Description: "The store's name.", MarkdownDescription: "The store's name."},
		attrName: schema.StringAttribute{Required: true,
			Description: "Name of the CheckpointStore (cluster-scoped).", MarkdownDescription: "Name of the `CheckpointStore` (cluster-scoped)."},
		attrQueryNamespace: schema.StringAttribute{Optional: true,
			Description:         "Namespace of a query, for location. Omitted: the provider's namespace.",
			MarkdownDescription: "Namespace of a query, for `location`. Omitted: the provider's `namespace`."},
		attrQueryName: schema.StringAttribute{Optional: true,
			Description:         "Name of a query, for location.",
			MarkdownDescription: "Name of a query, for `location`."},
		attrLocation: schema.StringAttribute{Computed: true,
			Description: "The checkpoint location the store gives the query query_namespace/query_name " +
				"(s3://bucket/rendered template); null without query_name.",
			MarkdownDescription: "The checkpoint location the store gives the query `query_namespace`/`query_name` " +
				"(`s3://bucket/` and the rendered `location_template`); null without `query_name`."},
		attrReady: schema.BoolAttribute{Computed: true,
			Description:         "Whether the controller reports the store Ready: its probe, with the credentials of an allowed namespace, reached the bucket and saw it honour conditional writes. status.conditions says why not.",
			MarkdownDescription: "Whether the controller reports the store `Ready`: its probe, with the credentials of an allowed namespace, reached the bucket and saw it honour conditional writes. `status.conditions` says why not (`BucketMissing`, `CredentialsRejected`, `ConditionalWritesIgnored`, `Unreachable`, ...)."},
	}
	dataSourceSchema(d.kinds.err, d.kinds.store, d.kinds.storeStatus, meta,
		"Reads a Lockstep `CheckpointStore`: a bucket that a platform team offers to tenant "+
			"namespaces for their queries' checkpoints, who may use it, and where in it a query's checkpoint goes.", resp)
}

func (d *storeDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var name, queryNamespace, queryName types.String
	if !d.readConfig(ctx, req.Config, &resp.Diagnostics, map[string]*types.String{
		attrName: &name, attrQueryNamespace: &queryNamespace, attrQueryName: &queryName,
	}) {
		return
	}
	obj, err := d.cluster.stores().Get(ctx, name.ValueString(), metav1.GetOptions{})
	if readFailed(&resp.Diagnostics, err, "Checkpoint Store",
		fmt.Sprintf("There is no CheckpointStore named %s.", name.ValueString()),
		"CheckpointStore "+name.ValueString()) {
		return
	}
	var store v1.CheckpointStore
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &store); err != nil {
		resp.Diagnostics.AddError("Unexpected Checkpoint Store", err.Error())
		return
	}

	resp.State.Raw = req.Config.Raw.Copy()
	spec, _, _ := unstructured.NestedMap(obj.Object, "spec")
	resp.Diagnostics.Append(setSpec(ctx, &resp.State, d.kinds.store, spec, req.Config.Raw)...)
	set := func(name string, v any) { resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root(name), v)...) }
	set(attrID, obj.GetName())
	// The CheckpointStore reconciler reports condition Ready (type "Ready", status True)
	// once its probe has reached the store's bucket.
	set(attrReady, meta.IsStatusConditionTrue(store.Status.Conditions, v1.ConditionReady))
	if known(queryName) {
		ns := cmp.Or(queryNamespace.ValueString(), d.cluster.namespace)
		loc, err := store.Spec.Location(ns, queryName.ValueString())
		if err != nil {
			resp.Diagnostics.AddAttributeError(path.Root(attrQueryName), "No Location For The Query", err.Error())
			return
		}
		set(attrLocation, loc)
	} else {
		set(attrLocation, types.StringNull())
	}
	setDataSourceStatus(ctx, resp, d.kinds.storeStatus, obj)
}
