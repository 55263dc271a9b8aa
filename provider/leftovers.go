package provider

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-go/tftypes"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
)

// Server-side apply removes a field that an apply leaves out only when no other field
// manager owns it. A field that someone set with kubectl (drift) therefore survives the
// provider's apply, although the configuration leaves it unset: the next plan would show the
// same drift again, and the apply would report an inconsistent result. leftovers finds such
// fields, and writeQuery writes the query in one request that leaves them out, so that
// Terraform's configuration is the whole spec and the engine restarts once per apply.

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

// writeQuery writes desired, the planned query, in one request, so that an apply changes the
// query's generation (and restarts its engine) at most once. cur is the query as read before
// the write; nil creates it.
//
// The request is a server-side apply under FieldManager, forcing ownership, when that alone
// makes the spec the configuration: no field of cur's spec is a leftover, or none is left
// after the apply (the provider alone owned them, so the apply removes them). Otherwise it is
// an update of the apply's result, as a server-side dry run computes it, without the
// leftovers, conditional on the resource version that the dry run read; a conflict (another
// writer, the controller's status) starts over from the dry run.
//
// The update records the fields it changed under FieldManager with operation Update; the
// next apply takes them over, and leftovers finds any it leaves out, so that the
// configuration stays the whole spec either way.
func (c *cluster) writeQuery(ctx context.Context, spec *field, plan tftypes.Value, desired, cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if cur == nil {
		return c.applyQuery(ctx, desired, false)
	}
	ptrs, err := leftovers(spec, plan, objectSpec(cur))
	if err != nil {
		return nil, fmt.Errorf("find fields set outside Terraform: %w", err)
	}
	if len(ptrs) == 0 {
		return c.applyQuery(ctx, desired, false)
	}
	var obj *unstructured.Unstructured
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		// The dry run's warnings are the write's: keep them out of the caller's collector.
		dctx, _ := withWarnings(ctx)
		applied, err := c.applyQuery(dctx, desired, true)
		if err != nil {
			return err
		}
		ptrs, err := leftovers(spec, plan, objectSpec(applied))
		if err != nil {
			return fmt.Errorf("find fields set outside Terraform: %w", err)
		}
		if len(ptrs) == 0 {
			obj, err = c.applyQuery(ctx, desired, false)
			return err
		}
		if err := removeFields(applied.Object, ptrs); err != nil {
			return fmt.Errorf("leave out fields set outside Terraform: %w", err)
		}
		applied.SetManagedFields(nil) // the API server keeps the object's own
		obj, err = c.queries(applied.GetNamespace()).Update(ctx, applied, metav1.UpdateOptions{FieldManager: FieldManager})
		return err
	})
	return obj, err
}

// removeFields removes the fields at JSON pointers from obj. Pointers into one list must come
// from its last element to its first, as leftovers returns them, so that earlier indexes stay
// valid; deeper fields are removed first, so that a parent's removal never precedes its
// child's.
func removeFields(obj map[string]any, pointers []string) error {
	pointers = slices.Clone(pointers)
	slices.SortStableFunc(pointers, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	for _, p := range pointers {
		tokens := strings.Split(strings.TrimPrefix(p, "/"), "/")
		for i, t := range tokens {
			tokens[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
		}
		if _, err := removeAt(obj, tokens); err != nil {
			return fmt.Errorf("remove %s: %w", p, err)
		}
	}
	return nil
}

// removeAt removes the field at the path tokens from x, a map or list of decoded JSON, and
// returns x (a list shrinks, so its parent must store the result).
func removeAt(x any, tokens []string) (any, error) {
	switch v := x.(type) {
	case map[string]any:
		child, ok := v[tokens[0]]
		if !ok {
			return nil, fmt.Errorf("no field %q", tokens[0])
		}
		if len(tokens) == 1 {
			delete(v, tokens[0])
			return v, nil
		}
		child, err := removeAt(child, tokens[1:])
		if err != nil {
			return nil, err
		}
		v[tokens[0]] = child
		return v, nil
	case []any:
		i, err := strconv.Atoi(tokens[0])
		if err != nil || i < 0 || i >= len(v) {
			return nil, fmt.Errorf("no element %q in a list of %d", tokens[0], len(v))
		}
		if len(tokens) == 1 {
			return slices.Delete(v, i, i+1), nil
		}
		child, err := removeAt(v[i], tokens[1:])
		if err != nil {
			return nil, err
		}
		v[i] = child
		return v, nil
	}
	return nil, fmt.Errorf("%q is inside a %T, not an object or a list", tokens[0], x)
}
