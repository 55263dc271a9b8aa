package provider

import (
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"
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
