package provider

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"k8s.io/apimachinery/pkg/api/resource"
)

// attrType returns the framework type of a field's values.
func attrType(f *field) attr.Type {
	switch f.Type {
	case typeInt:
		return types.Int64Type
	case typeBool:
		return types.BoolType
	case typeObject:
		return types.ObjectType{AttrTypes: attrTypes(f)}
	case typeList:
		return types.ListType{ElemType: attrType(f.Elem)}
	case typeMap:
		return types.MapType{ElemType: attrType(f.Elem)}
	}
	return types.StringType
}

// attrTypes returns the framework types of an object's attributes, by Terraform name.
func attrTypes(f *field) map[string]attr.Type { return byTF(f, attrType) }

// tfType returns the Terraform type of a field's values.
func tfType(f *field) tftypes.Type {
	return attrType(f).TerraformType(context.Background())
}

// toAPI converts a Terraform value of field f to its API form (what encoding/json would make
// of the Go field: map[string]any, []any, string, int64, bool), or nil for null. known is false
// when the value holds an unknown anywhere; the result then lacks those parts.
func toAPI(f *field, v tftypes.Value) (out any, known bool, err error) {
	if !v.IsKnown() {
		return nil, false, nil
	}
	if v.IsNull() {
		return nil, true, nil
	}
	switch f.Type {
	case typeString, typeQuantity:
		var s string
		if err := v.As(&s); err != nil {
			return nil, false, err
		}
		if f.Bytes {
			return base64.StdEncoding.EncodeToString([]byte(s)), true, nil
		}
		return s, true, nil
	case typeInt:
		var n big.Float
		if err := v.As(&n); err != nil {
			return nil, false, err
		}
		i, acc := n.Int64()
		if acc != big.Exact {
			return nil, false, fmt.Errorf("%s: %s is not a 64-bit integer", f.JSON, n.String())
		}
		return i, true, nil
	case typeBool:
		var b bool
		if err := v.As(&b); err != nil {
			return nil, false, err
		}
		return b, true, nil
	case typeObject, typeList, typeMap:
		return compositeToAPI(f, v)
	}
	return nil, false, fmt.Errorf("%s: unknown field type %d", f.JSON, f.Type)
}

// compositeToAPI is toAPI of a known, non-null object, list or map.
func compositeToAPI(f *field, v tftypes.Value) (out any, known bool, err error) {
	known = true
	switch f.Type {
	case typeObject:
		var attrs map[string]tftypes.Value
		if err := v.As(&attrs); err != nil {
			return nil, false, err
		}
		obj := map[string]any{}
		for _, c := range f.Fields {
			x, ok, err := toAPI(c, attrs[c.TF])
			if err != nil {
				return nil, false, err
			}
			known = known && ok
			if x != nil {
				obj[c.JSON] = x
			}
		}
		return obj, known, nil
	case typeList:
		var elems []tftypes.Value
		if err := v.As(&elems); err != nil {
			return nil, false, err
		}
		list := make([]any, 0, len(elems))
		for _, e := range elems {
			x, ok, err := toAPI(f.Elem, e)
			if err != nil {
				return nil, false, err
			}
			known = known && ok
			list = append(list, x)
		}
		return list, known, nil
	case typeMap:
		var elems map[string]tftypes.Value
		if err := v.As(&elems); err != nil {
			return nil, false, err
		}
		m := make(map[string]any, len(elems))
		for k, e := range elems {
			x, ok, err := toAPI(f.Elem, e)
			if err != nil {
				return nil, false, err
			}
			known = known && ok
			m[k] = x
		}
		return m, known, nil
	}
	return nil, false, fmt.Errorf("%s: unknown field type %d", f.JSON, f.Type)
}

// fromAPI converts the API form of field f (decoded JSON or unstructured content) to a
// Terraform value; nil is null.
func fromAPI(f *field, x any) (tftypes.Value, error) {
	typ := tfType(f)
	if x == nil {
		return tftypes.NewValue(typ, nil), nil
	}
	switch f.Type {
	case typeString:
		s, ok := x.(string)
		if !ok {
			return tftypes.Value{}, fmt.Errorf("%s: want a string, got %T", f.JSON, x)
		}
		if f.Bytes {
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				return tftypes.Value{}, fmt.Errorf("%s: %w", f.JSON, err)
			}
			s = string(b)
		}
		return tftypes.NewValue(typ, s), nil
	case typeQuantity:
		switch q := x.(type) {
		case string:
			return tftypes.NewValue(typ, q), nil
		case int64, float64, json.Number, int:
			return tftypes.NewValue(typ, fmt.Sprint(q)), nil
		}
		return tftypes.Value{}, fmt.Errorf("%s: want a quantity, got %T", f.JSON, x)
	case typeInt:
		var n big.Float
		switch i := x.(type) {
		case int64:
			n.SetInt64(i)
		case int:
			n.SetInt64(int64(i))
		case int32:
			n.SetInt64(int64(i))
		case float64:
			n.SetFloat64(i)
		case json.Number:
			if _, ok := n.SetString(i.String()); !ok {
				return tftypes.Value{}, fmt.Errorf("%s: %q is not a number", f.JSON, i)
			}
		default:
			return tftypes.Value{}, fmt.Errorf("%s: want an integer, got %T", f.JSON, x)
		}
		return tftypes.NewValue(typ, &n), nil
	case typeBool:
		b, ok := x.(bool)
		if !ok {
			return tftypes.Value{}, fmt.Errorf("%s: want a boolean, got %T", f.JSON, x)
		}
		return tftypes.NewValue(typ, b), nil
	case typeObject, typeList, typeMap:
		return compositeFromAPI(f, typ, x)
	}
	return tftypes.Value{}, fmt.Errorf("%s: unknown field type %d", f.JSON, f.Type)
}

// compositeFromAPI is fromAPI of a non-nil object, list or map, whose Terraform type is typ.
func compositeFromAPI(f *field, typ tftypes.Type, x any) (tftypes.Value, error) {
	switch f.Type {
	case typeObject:
		obj, ok := x.(map[string]any)
		if !ok {
			return tftypes.Value{}, fmt.Errorf("%s: want an object, got %T", f.JSON, x)
		}
		attrs := make(map[string]tftypes.Value, len(f.Fields))
		for _, c := range f.Fields {
			v, err := fromAPI(c, obj[c.JSON])
			if err != nil {
				return tftypes.Value{}, fmt.Errorf("%s.%w", f.JSON, err)
			}
			attrs[c.TF] = v
		}
		return tftypes.NewValue(typ, attrs), nil
	case typeList:
		list, ok := x.([]any)
		if !ok {
			return tftypes.Value{}, fmt.Errorf("%s: want a list, got %T", f.JSON, x)
		}
		elems := make([]tftypes.Value, 0, len(list))
		for i, e := range list {
			v, err := fromAPI(f.Elem, e)
			if err != nil {
				return tftypes.Value{}, fmt.Errorf("[%d]: %w", i, err)
			}
			elems = append(elems, v)
		}
		return tftypes.NewValue(typ, elems), nil
	case typeMap:
		m, ok := x.(map[string]any)
		if !ok {
			return tftypes.Value{}, fmt.Errorf("%s: want a map, got %T", f.JSON, x)
		}
		elems := make(map[string]tftypes.Value, len(m))
		for k, e := range m {
			v, err := fromAPI(f.Elem, e)
			if err != nil {
				return tftypes.Value{}, fmt.Errorf("%s[%s]: %w", f.JSON, k, err)
			}
			elems[k] = v
		}
		return tftypes.NewValue(typ, elems), nil
	}
	return tftypes.Value{}, fmt.Errorf("%s: unknown field type %d", f.JSON, f.Type)
}

// reconcile returns the value read from the API server, got, in the form the user wrote,
// want (the plan after an apply, the prior state on a refresh), where the two mean the same:
//
//   - The API drops zero values (omitempty): false, 0, "", empty lists, maps and objects
//     read back as absent. A zero in want and a null in got are the same, and so are a null
//     in want and a zero in got.
//   - Quantities are canonicalized (0.5 → 500m): an equal quantity keeps want's spelling.
//
// Everything else comes from got, so a change made outside Terraform shows in the next plan.
func reconcile(f *field, want, got tftypes.Value) tftypes.Value {
	if !want.IsKnown() {
		return got
	}
	if got.IsNull() || want.IsNull() {
		if isZero(f, want) && isZero(f, got) {
			return want
		}
		return got
	}
	switch f.Type {
	case typeQuantity:
		var w, g string
		if want.As(&w) != nil || got.As(&g) != nil {
			return got
		}
		qw, errW := resource.ParseQuantity(w)
		qg, errG := resource.ParseQuantity(g)
		if errW == nil && errG == nil && qw.Cmp(qg) == 0 {
			return want
		}
	case typeObject:
		var w, g map[string]tftypes.Value
		if want.As(&w) != nil || got.As(&g) != nil {
			return got
		}
		out := make(map[string]tftypes.Value, len(g))
		for _, c := range f.Fields {
			out[c.TF] = reconcile(c, w[c.TF], g[c.TF])
		}
		return tftypes.NewValue(got.Type(), out)
	case typeList:
		var w, g []tftypes.Value
		if want.As(&w) != nil || got.As(&g) != nil || len(w) != len(g) {
			return got
		}
		out := make([]tftypes.Value, len(g))
		for i := range g {
			out[i] = reconcile(f.Elem, w[i], g[i])
		}
		return tftypes.NewValue(got.Type(), out)
	case typeMap:
		var w, g map[string]tftypes.Value
		if want.As(&w) != nil || got.As(&g) != nil {
			return got
		}
		out := make(map[string]tftypes.Value, len(g))
		for k, v := range g {
			if wv, ok := w[k]; ok {
				v = reconcile(f.Elem, wv, v)
			}
			out[k] = v
		}
		return tftypes.NewValue(got.Type(), out)
	}
	return got
}

// isZero reports whether v is null or the zero value that the API leaves out: false, 0, "",
// an empty list or map, or an object whose attributes are all zero.
func isZero(f *field, v tftypes.Value) bool {
	if !v.IsKnown() {
		return false
	}
	if v.IsNull() {
		return true
	}
	switch f.Type {
	case typeString, typeQuantity:
		var s string
		return v.As(&s) == nil && s == ""
	case typeInt:
		var n big.Float
		return v.As(&n) == nil && n.Sign() == 0
	case typeBool:
		var b bool
		return v.As(&b) == nil && !b
	case typeObject:
		var attrs map[string]tftypes.Value
		if v.As(&attrs) != nil {
			return false
		}
		for _, c := range f.Fields {
			if !isZero(c, attrs[c.TF]) {
				return false
			}
		}
		return true
	case typeList:
		var elems []tftypes.Value
		return v.As(&elems) == nil && len(elems) == 0
	case typeMap:
		var elems map[string]tftypes.Value
		return v.As(&elems) == nil && len(elems) == 0
	}
	return false
}

// attrValue converts a Terraform value of field f to a framework value.
func attrValue(ctx context.Context, f *field, v tftypes.Value) (attr.Value, error) {
	return attrType(f).ValueFromTerraform(ctx, v)
}
