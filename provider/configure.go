package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	dschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// clusterFrom is the Configure step shared by the resource and the data
// sources: ProviderData is the provider's *cluster, or nil while the provider
// is not configured yet (Terraform calls Configure early during validation).
func clusterFrom(data any, diags *diag.Diagnostics) *cluster {
	if data == nil {
		return nil
	}
	c, ok := data.(*cluster)
	if !ok {
		diags.AddError("Unexpected Provider Data",
			fmt.Sprintf("Expected *provider.cluster, got %T. This is a bug in the provider; please report it.", data))
		return nil
	}
	return c
}

// configured reports on diags when c is nil: the provider has no connection.
func configured(c *cluster, diags *diag.Diagnostics) bool {
	if c == nil {
		diags.AddError("Provider Not Configured", "The lockstep provider has no connection to a cluster: its connection settings were not known.")
		return false
	}
	return true
}

// dataSource is what the data sources share: the provider's kinds, the cluster once
// configured, and the Metadata and Configure steps. typeName follows the provider's type
// name in the data source's (_streaming_query).
type dataSource struct {
	kinds    *kinds
	cluster  *cluster
	typeName string
}

func (d *dataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + d.typeName
}

func (d *dataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.cluster = clusterFrom(req.ProviderData, &resp.Diagnostics)
}

// readConfig is the start of a data source's Read: it reads the string attributes of the
// configuration into targets, by attribute name. It reports false, with the reason on diags,
// when the provider is not configured or an attribute cannot be read.
func (d *dataSource) readConfig(ctx context.Context, config tfsdk.Config, diags *diag.Diagnostics, targets map[string]*types.String) bool {
	if !configured(d.cluster, diags) {
		return false
	}
	for name, target := range targets {
		diags.Append(config.GetAttribute(ctx, path.Root(name), target)...)
	}
	return !diags.HasError()
}

// readFailed reports whether err, from reading the object a data source names, is an error,
// and adds it to diags: on attribute name when there is no such object (notFound says so),
// else as a read failure of the object ref. title is the kind in words ("Streaming Query").
func readFailed(diags *diag.Diagnostics, err error, title, notFound, ref string) bool {
	switch {
	case apierrors.IsNotFound(err):
		diags.AddAttributeError(path.Root(attrName), title+" Not Found", notFound)
	case err != nil:
		diags.AddError("Cannot Read "+title, fmt.Sprintf("Read %s: %v.", ref, err))
	default:
		return false
	}
	return true
}

// mergeAttributes adds the object attributes (name, status, …) to the spec
// attributes derived from the CRD, refusing a name both define.
func mergeAttributes[A any](spec, object map[string]A, diags *diag.Diagnostics) bool {
	for name, a := range object {
		if _, clash := spec[name]; clash {
			diags.AddError("Invalid Provider Schema", fmt.Sprintf("spec field %s clashes with the attribute of that name", name))
			return false
		}
		spec[name] = a
	}
	return true
}

// dataSourceSchema is the Schema step shared by the data sources: the attributes of an
// object's spec (all computed), the object's own attributes meta, and its status, unless the
// provider's kinds failed to load (kindsErr).
func dataSourceSchema(kindsErr error, spec, status *field, meta map[string]dschema.Attribute, description string, resp *datasource.SchemaResponse) {
	if kindsErr != nil {
		resp.Diagnostics.AddError("Invalid Provider Schema", kindsErr.Error())
		return
	}
	attrs := dataSourceAttributes(spec)
	meta["status"] = dataSourceAttribute(status)
	if !mergeAttributes(attrs, meta, &resp.Diagnostics) {
		return
	}
	resp.Schema = dschema.Schema{MarkdownDescription: description, Attributes: attrs}
}

// setDataSourceStatus is the last Read step shared by the data sources: the status
// attribute, of the kind status, from obj's.
func setDataSourceStatus(ctx context.Context, resp *datasource.ReadResponse, status *field, obj *unstructured.Unstructured) {
	st, _, _ := unstructured.NestedMap(obj.Object, "status")
	v, err := objectValue(ctx, status, st)
	if err != nil {
		resp.Diagnostics.AddError("Unexpected Status", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("status"), v)...)
}
