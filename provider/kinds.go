package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
)

// kinds are the field trees of the Lockstep kinds, read once per provider from the embedded
// CRDs.
type kinds struct {
	query, queryStatus *field
	store, storeStatus *field
	err                error
}

func loadKinds() *kinds {
	k := &kinds{}
	if k.query, k.queryStatus, k.err = kindFields(queryCRD); k.err != nil {
		return k
	}
	k.store, k.storeStatus, k.err = kindFields(storeCRD)
	return k
}

// attributeGetter and attributeSetter are what tfsdk.Config, Plan and State offer.
type attributeGetter interface {
	GetAttribute(ctx context.Context, p path.Path, target any) diag.Diagnostics
}

type attributeSetter interface {
	SetAttribute(ctx context.Context, p path.Path, val any) diag.Diagnostics
}

// rootAttributes returns the top-level attributes of a resource's raw value (plan, state or
// config).
func rootAttributes(raw tftypes.Value) (map[string]tftypes.Value, error) {
	var attrs map[string]tftypes.Value
	if raw.IsNull() || !raw.IsKnown() {
		return map[string]tftypes.Value{}, nil
	}
	if err := raw.As(&attrs); err != nil {
		return nil, fmt.Errorf("read attributes: %w", err)
	}
	return attrs, nil
}

// specOf returns the API form of the spec attributes in a raw value: the fields of spec by
// their JSON names, with null and unknown attributes left out. known is false when some
// attribute holds an unknown value.
func specOf(spec *field, raw tftypes.Value) (out map[string]any, known bool, err error) {
	attrs, err := rootAttributes(raw)
	if err != nil {
		return nil, false, err
	}
	out = map[string]any{}
	known = true
	for _, c := range spec.Fields {
		x, ok, err := toAPI(c, attrs[c.TF])
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", c.TF, err)
		}
		known = known && ok
		if x != nil {
			out[c.JSON] = x
		}
	}
	return out, known, nil
}

// setSpec writes the spec read from the API server into the top-level attributes of a plan or
// state, in the form of want where both mean the same (see reconcile). A null want (the first
// read after terraform import, when the state holds nothing to compare with) writes every
// value the API object holds as it is, zero values included: an empty console sink or an
// explicit false is what the object says, and what a configuration that matches it says.
func setSpec(ctx context.Context, dst attributeSetter, spec *field, apiSpec map[string]any, want tftypes.Value) diag.Diagnostics {
	var diags diag.Diagnostics
	wantAttrs, err := rootAttributes(want)
	if err != nil {
		diags.AddError("Internal Error", err.Error())
		return diags
	}
	for _, c := range spec.Fields {
		got, err := fromAPI(c, apiSpec[c.JSON])
		if err != nil {
			diags.AddAttributeError(path.Root(c.TF), "Unexpected Value From The API Server", err.Error())
			continue
		}
		if w, ok := wantAttrs[c.TF]; ok {
			got = reconcile(c, w, got)
		}
		v, err := attrValue(ctx, c, got)
		if err != nil {
			diags.AddAttributeError(path.Root(c.TF), "Internal Error", err.Error())
			continue
		}
		diags.Append(dst.SetAttribute(ctx, path.Root(c.TF), v)...)
	}
	return diags
}

// typedSpec decodes the API form of a spec into the Go type, strictly: a field the type does
// not know is an error, which would be a bug in the field tree.
func typedSpec(apiSpec map[string]any) (*v1.StreamingQuerySpec, error) {
	b, err := json.Marshal(apiSpec)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	var s v1.StreamingQuerySpec
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("decode spec: %w", err)
	}
	return &s, nil
}

// queryObject returns the StreamingQuery to apply: identity and spec, nothing else, so that
// server-side apply makes the provider own exactly the fields its configuration sets.
func queryObject(namespace, name string, apiSpec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1.GroupVersion.String(),
		"kind":       v1.KindStreamingQuery,
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		"spec":       apiSpec,
	}}
	return u
}

// objectSpec returns the spec of an object read from the API server.
func objectSpec(u *unstructured.Unstructured) map[string]any {
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	if spec == nil {
		spec = map[string]any{}
	}
	return spec
}

// queryStatus returns the status of a StreamingQuery read from the API server.
func queryStatus(u *unstructured.Unstructured) (v1.StreamingQueryStatus, error) {
	var st v1.StreamingQueryStatus
	m, ok, err := unstructured.NestedMap(u.Object, "status")
	if err != nil || !ok {
		return st, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &st); err != nil {
		return st, fmt.Errorf("read status of StreamingQuery %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return st, nil
}

// objectValue converts a whole object part (spec or status) to a framework value, for data
// sources.
func objectValue(ctx context.Context, f *field, x map[string]any) (attr.Value, error) {
	var in any
	if x != nil {
		in = x
	}
	v, err := fromAPI(f, in)
	if err != nil {
		return nil, err
	}
	return attrValue(ctx, f, v)
}
