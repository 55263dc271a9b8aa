package provider

import (
	"cmp"
	"context"
	"encoding/json"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// AnnotationSettings on a StreamingQuery records the resource's attributes that are not part
// of the Kubernetes object — wait_for and timeouts — as the provider's last apply set them.
// terraform import reads them back, so that the first plan after an import shows no change
// for a configuration that sets them. A query that Terraform never wrote has no such
// annotation: import then takes the schema's defaults.
const AnnotationSettings = "terraform.lockstep.dev/settings"

// settings is the value of AnnotationSettings, as JSON.
type settings struct {
	WaitFor  string            `json:"wait_for,omitempty"`
	Timeouts map[string]string `json:"timeouts,omitempty"` // create, update, delete: Go durations
}

// timeoutNames are the attributes of the timeouts block.
var timeoutNames = []string{"create", "update", "delete"}

// settingsOf returns the settings of a planned resource.
func settingsOf(m queryMeta) settings {
	s := settings{WaitFor: m.WaitFor.ValueString()}
	if m.Timeouts.IsNull() || m.Timeouts.IsUnknown() {
		return s
	}
	attrs := m.Timeouts.Attributes()
	for _, name := range timeoutNames {
		if v, ok := attrs[name].(types.String); ok && known(v) {
			if s.Timeouts == nil {
				s.Timeouts = map[string]string{}
			}
			s.Timeouts[name] = v.ValueString()
		}
	}
	return s
}

// annotate records s on obj, which the provider is about to apply.
func (s settings) annotate(obj *unstructured.Unstructured) error {
	data, err := json.Marshal(s)
	if err != nil {
		return err
	}
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[AnnotationSettings] = string(data)
	obj.SetAnnotations(a)
	return nil
}

// restoreSettings fills the attributes of m that the state does not hold (after an import)
// from obj's AnnotationSettings. Without the annotation wait_for takes its default and
// timeouts stay null.
func restoreSettings(ctx context.Context, m *queryMeta, obj *unstructured.Unstructured) diag.Diagnostics {
	var diags diag.Diagnostics
	if !m.WaitFor.IsNull() && !m.Timeouts.IsNull() {
		return diags
	}
	var s settings
	if raw, ok := obj.GetAnnotations()[AnnotationSettings]; ok {
		if err := json.Unmarshal([]byte(raw), &s); err != nil {
			diags.AddWarning("Unreadable Terraform Settings",
				"The annotation "+AnnotationSettings+" of StreamingQuery "+obj.GetNamespace()+"/"+obj.GetName()+
					" is not the JSON this provider writes ("+err.Error()+"), so wait_for and timeouts take their defaults. The next apply rewrites it.")
			s = settings{}
		}
	}
	if m.WaitFor.IsNull() {
		m.WaitFor = types.StringValue(cmp.Or(s.WaitFor, waitNothing))
	}
	if m.Timeouts.IsNull() && len(s.Timeouts) > 0 {
		vals := make(map[string]attr.Value, len(timeoutNames))
		for _, name := range timeoutNames {
			vals[name] = types.StringNull()
			if d, ok := s.Timeouts[name]; ok {
				vals[name] = types.StringValue(d)
			}
		}
		v, d := types.ObjectValue(m.Timeouts.AttributeTypes(ctx), vals)
		diags.Append(d...)
		if !d.HasError() {
			m.Timeouts.Object = v
		}
	}
	return diags
}
