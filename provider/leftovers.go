package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-go/tftypes"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// Server-side apply removes a field that an apply leaves out only when no other field
// manager owns it. A field that someone set with kubectl (drift) therefore survives the
// provider's apply, although the configuration leaves it unset: the next plan would show the
// same drift again, and the apply would report an inconsistent result. leftovers finds such
// fields, and removeLeftovers removes them with a JSON patch, so that Terraform's
// configuration is the whole spec.

// leftovers returns the JSON pointers of the fields in the API server's spec that the plan
// leaves unset, deepest last within each list: fields set by other managers that the
// provider's apply could not remove. Fields the API server fills (defaults, serverSet) and
// fields the plan does not know yet are never leftovers.
func leftovers(spec *field, plan tftypes.Value, apiSpec map[string]any) ([]string, error) {
	attrs, err := rootAttributes(plan)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range spec.Fields {
		v, ok := attrs[c.TF]
		if !ok {
			continue
		}
		out = append(out, leftoversOf(c, c.JSON, "/spec/"+pointerEscape(c.JSON), v, apiSpec[c.JSON])...)
	}
	return out, nil
}

func leftoversOf(f *field, at, pointer string, plan tftypes.Value, got any) []string {
	if !plan.IsKnown() || got == nil || f.Default != nil || serverSet[at] {
		return nil
	}
	if plan.IsNull() {
		if isZeroAPI(got) {
			return nil
		}
		return []string{pointer}
	}
	switch f.Type {
	case typeObject:
		var attrs map[string]tftypes.Value
		obj, ok := got.(map[string]any)
		if plan.As(&attrs) != nil || !ok {
			return nil
		}
		var out []string
		for _, c := range f.Fields {
			out = append(out, leftoversOf(c, at+"."+c.JSON, pointer+"/"+pointerEscape(c.JSON), attrs[c.TF], obj[c.JSON])...)
		}
		return out
	case typeMap:
		var elems map[string]tftypes.Value
		m, ok := got.(map[string]any)
		if plan.As(&elems) != nil || !ok {
			return nil
		}
		var out []string
		for _, k := range sortedKeys(m) {
			if _, planned := elems[k]; !planned {
				out = append(out, pointer+"/"+pointerEscape(k))
			}
		}
		return out
	case typeList:
		var elems []tftypes.Value
		list, ok := got.([]any)
		if plan.As(&elems) != nil || !ok || len(f.ListMapKeys) == 0 {
			return nil // atomic lists are replaced whole by the apply
		}
		planned := map[string]int{}
		for i, e := range elems {
			x, _, err := toAPI(f.Elem, e)
			if err != nil {
				return nil
			}
			planned[listKey(f, x)] = i
		}
		var out []string
		for i := len(list) - 1; i >= 0; i-- { // from the end, so earlier indexes stay valid
			p := pointer + "/" + strconv.Itoa(i)
			if j, ok := planned[listKey(f, list[i])]; ok {
				out = append(out, leftoversOf(f.Elem, at+"[]", p, elems[j], list[i])...)
			} else {
				out = append(out, p)
			}
		}
		return out
	}
	return nil
}

// listKey returns the merge key of an element of a map-list.
func listKey(f *field, elem any) string {
	obj, _ := elem.(map[string]any)
	parts := make([]string, len(f.ListMapKeys))
	for i, k := range f.ListMapKeys {
		parts[i] = fmt.Sprint(obj[k])
	}
	return strings.Join(parts, "\x00")
}

// isZeroAPI reports whether x is a value the API would leave out: false, 0, "", empty.
func isZeroAPI(x any) bool {
	switch v := x.(type) {
	case nil:
		return true
	case bool:
		return !v
	case string:
		return v == ""
	case int64:
		return v == 0
	case float64:
		return v == 0
	case []any:
		return len(v) == 0
	case map[string]any:
		for _, e := range v {
			if !isZeroAPI(e) {
				return false
			}
		}
		return true
	}
	return false
}

func pointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// removeLeftovers removes the fields at pointers from the query obj with a JSON patch that
// applies only to the version read (a test of resourceVersion), under FieldManager.
func (c *cluster) removeLeftovers(ctx context.Context, obj *unstructured.Unstructured, pointers []string) (*unstructured.Unstructured, error) {
	ops := []map[string]any{{"op": "test", "path": "/metadata/resourceVersion", "value": obj.GetResourceVersion()}}
	// Remove deeper fields first, so that a parent's removal never precedes its child's.
	pointers = slices.Clone(pointers)
	slices.SortStableFunc(pointers, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	for _, p := range pointers {
		ops = append(ops, map[string]any{"op": "remove", "path": p})
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return nil, err
	}
	return c.queries(obj.GetNamespace()).Patch(ctx, obj.GetName(), types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
}
