package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	dschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
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
