package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	dschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// serverSet lists the spec fields (JSON paths from spec) that the API server fills when the
// user leaves them out, beyond the CRD's defaults: the admission webhook derives the
// checkpoint location from the CheckpointStore's template. They are optional and computed.
var serverSet = map[string]bool{"checkpoint.location": true}

// resourceAttributes returns the resource attributes of an object's fields, by Terraform
// name. at is the object's JSON path from spec ("" for spec itself).
func resourceAttributes(f *field, at string) (map[string]rschema.Attribute, error) {
	attrs := make(map[string]rschema.Attribute, len(f.Fields))
	for _, c := range f.Fields {
		a, err := resourceAttribute(c, join(at, c.JSON))
		if err != nil {
			return nil, err
		}
		attrs[c.TF] = a
	}
	return attrs, nil
}

func join(at, name string) string {
	if at == "" {
		return name
	}
	return at + "." + name
}

// resourceAttribute returns the resource attribute of field f at JSON path at: required as
// the CRD says, else optional; computed when the API server fills it (a CRD default, which
// the plan shows, or serverSet); validated as the CRD validates it.
func resourceAttribute(f *field, at string) (rschema.Attribute, error) {
	desc := f.Description
	required := f.Required
	optional := !required
	computed := f.Default != nil || serverSet[at]
	var def attr.Value
	if f.Default != nil {
		v, err := fromAPI(f, withDefaults(f, f.Default))
		if err != nil {
			return nil, fmt.Errorf("%s: default: %w", at, err)
		}
		if def, err = attrValue(context.Background(), f, v); err != nil {
			return nil, fmt.Errorf("%s: default: %w", at, err)
		}
	}
	switch f.Type {
	case typeString, typeQuantity:
		a := rschema.StringAttribute{Required: required, Optional: optional, Computed: computed,
			Description: desc, MarkdownDescription: desc, Validators: stringValidators(f)}
		if def != nil {
			a.Default = stringdefault.StaticString(def.(types.String).ValueString())
		}
		return a, nil
	case typeInt:
		a := rschema.Int64Attribute{Required: required, Optional: optional, Computed: computed,
			Description: desc, MarkdownDescription: desc, Validators: int64Validators(f)}
		if def != nil {
			a.Default = int64default.StaticInt64(def.(types.Int64).ValueInt64())
		}
		return a, nil
	case typeBool:
		a := rschema.BoolAttribute{Required: required, Optional: optional, Computed: computed,
			Description: desc, MarkdownDescription: desc}
		if def != nil {
			a.Default = booldefault.StaticBool(def.(types.Bool).ValueBool())
		}
		return a, nil
	case typeObject:
		attrs, err := resourceAttributes(f, at)
		if err != nil {
			return nil, err
		}
		a := rschema.SingleNestedAttribute{Attributes: attrs, Required: required, Optional: optional, Computed: computed,
			Description: desc, MarkdownDescription: desc, Validators: objectValidators(f)}
		if def != nil {
			a.Default = objectdefault.StaticValue(def.(types.Object))
		}
		return a, nil
	case typeList:
		if def != nil {
			return nil, fmt.Errorf("%s: defaults of lists are not supported", at)
		}
		if f.Elem.Type == typeObject {
			attrs, err := resourceAttributes(f.Elem, at)
			if err != nil {
				return nil, err
			}
			return rschema.ListNestedAttribute{
				NestedObject: rschema.NestedAttributeObject{Attributes: attrs, Validators: objectValidators(f.Elem)},
				Required:     required, Optional: optional, Computed: computed,
				Description: desc, MarkdownDescription: desc, Validators: listValidators(f),
			}, nil
		}
		return rschema.ListAttribute{ElementType: attrType(f.Elem), Required: required, Optional: optional, Computed: computed,
			Description: desc, MarkdownDescription: desc, Validators: listValidators(f)}, nil
	case typeMap:
		if def != nil || f.Elem.Type == typeObject || f.Elem.Type == typeList {
			return nil, fmt.Errorf("%s: maps of %d or with defaults are not supported", at, f.Elem.Type)
		}
		var vs []validator.Map
		if ev := stringValidators(f.Elem); len(ev) > 0 && (f.Elem.Type == typeString || f.Elem.Type == typeQuantity) {
			vs = append(vs, mapvalidator.ValueStringsAre(ev...))
		}
		return rschema.MapAttribute{ElementType: attrType(f.Elem), Required: required, Optional: optional, Computed: computed,
			Description: desc, MarkdownDescription: desc, Validators: vs}, nil
	}
	return nil, fmt.Errorf("%s: unknown field type %d", at, f.Type)
}

// withDefaults returns x with the defaults of f's fields filled in, as the API server does
// when it defaults an object whose fields have defaults of their own.
func withDefaults(f *field, x any) any {
	obj, ok := x.(map[string]any)
	if f.Type != typeObject || !ok {
		return x
	}
	out := make(map[string]any, len(obj))
	for _, c := range f.Fields {
		v, set := obj[c.JSON]
		if !set && c.Default != nil {
			v, set = c.Default, true
		}
		if set {
			out[c.JSON] = withDefaults(c, v)
		}
	}
	return out
}

func stringValidators(f *field) []validator.String {
	var vs []validator.String
	if len(f.Enum) > 0 {
		vs = append(vs, stringvalidator.OneOf(f.Enum...))
	}
	if f.Pattern != "" {
		if re, err := regexp.Compile(f.Pattern); err == nil {
			vs = append(vs, stringvalidator.RegexMatches(re, "must match "+f.Pattern))
		}
	}
	switch {
	case f.MinLength != nil && f.MaxLength != nil:
		vs = append(vs, stringvalidator.LengthBetween(int(*f.MinLength), int(*f.MaxLength)))
	case f.MinLength != nil:
		vs = append(vs, stringvalidator.LengthAtLeast(int(*f.MinLength)))
	case f.MaxLength != nil:
		vs = append(vs, stringvalidator.LengthAtMost(int(*f.MaxLength)))
	}
	return vs
}

func int64Validators(f *field) []validator.Int64 {
	switch {
	case f.Minimum != nil && f.Maximum != nil:
		return []validator.Int64{int64validator.Between(*f.Minimum, *f.Maximum)}
	case f.Minimum != nil:
		return []validator.Int64{int64validator.AtLeast(*f.Minimum)}
	case f.Maximum != nil:
		return []validator.Int64{int64validator.AtMost(*f.Maximum)}
	}
	return nil
}

func listValidators(f *field) []validator.List {
	var vs []validator.List
	switch {
	case f.MinItems != nil && f.MaxItems != nil:
		vs = append(vs, listvalidator.SizeBetween(int(*f.MinItems), int(*f.MaxItems)))
	case f.MinItems != nil:
		vs = append(vs, listvalidator.SizeAtLeast(int(*f.MinItems)))
	case f.MaxItems != nil:
		vs = append(vs, listvalidator.SizeAtMost(int(*f.MaxItems)))
	}
	if f.Elem.Type == typeString {
		if ev := stringValidators(f.Elem); len(ev) > 0 {
			vs = append(vs, listvalidator.ValueStringsAre(ev...))
		}
	}
	return vs
}

func objectValidators(f *field) []validator.Object {
	if len(f.OneOf) == 0 {
		return nil
	}
	names := make([]string, len(f.OneOf))
	for i, n := range f.OneOf {
		names[i] = f.child(n).TF
	}
	return []validator.Object{oneOf{names: names, atMostOne: f.AtMostOne}}
}

// dataSourceAttributes returns the data source attributes of an object's fields: all
// computed.
func dataSourceAttributes(f *field) map[string]dschema.Attribute {
	return byTF(f, dataSourceAttribute)
}

func dataSourceAttribute(f *field) dschema.Attribute {
	desc := f.Description
	switch f.Type {
	case typeInt:
		return dschema.Int64Attribute{Computed: true, Description: desc, MarkdownDescription: desc}
	case typeBool:
		return dschema.BoolAttribute{Computed: true, Description: desc, MarkdownDescription: desc}
	case typeObject:
		return dschema.SingleNestedAttribute{Attributes: dataSourceAttributes(f), Computed: true, Description: desc, MarkdownDescription: desc}
	case typeList:
		if f.Elem.Type == typeObject {
			return dschema.ListNestedAttribute{NestedObject: dschema.NestedAttributeObject{Attributes: dataSourceAttributes(f.Elem)},
				Computed: true, Description: desc, MarkdownDescription: desc}
		}
		return dschema.ListAttribute{ElementType: attrType(f.Elem), Computed: true, Description: desc, MarkdownDescription: desc}
	case typeMap:
		return dschema.MapAttribute{ElementType: attrType(f.Elem), Computed: true, Description: desc, MarkdownDescription: desc}
	}
	return dschema.StringAttribute{Computed: true, Description: desc, MarkdownDescription: desc}
}

// oneOf validates an object on which exactly one (or at most one) of some attributes may be
// set, as the CRD's rules say. A false boolean counts as not set, as in the CRD's rules.
type oneOf struct {
	names     []string
	atMostOne bool
}

func (v oneOf) Description(ctx context.Context) string { return v.MarkdownDescription(ctx) }

func (v oneOf) MarkdownDescription(context.Context) string {
	quoted := make([]string, len(v.names))
	for i, n := range v.names {
		quoted[i] = "`" + n + "`"
	}
	if v.atMostOne {
		return "at most one of " + strings.Join(quoted, ", ") + " may be set"
	}
	return "exactly one of " + strings.Join(quoted, ", ") + " must be set"
}

func (v oneOf) ValidateObject(ctx context.Context, req validator.ObjectRequest, resp *validator.ObjectResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	attrs := req.ConfigValue.Attributes()
	var set []string
	for _, n := range v.names {
		a, ok := attrs[n]
		switch {
		case !ok || a.IsNull():
		case a.IsUnknown():
			return // decided at apply
		default:
			if b, ok := a.(types.Bool); ok && !b.ValueBool() {
				continue
			}
			set = append(set, n)
		}
	}
	if len(set) == 1 || len(set) == 0 && v.atMostOne {
		return
	}
	detail := fmt.Sprintf("At %s: %s; set: %s.", req.Path, v.MarkdownDescription(ctx), orNone(set))
	// Terraform can point only at a top-level attribute; the detail names the full path.
	resp.Diagnostics.AddAttributeError(diagnosticPath(req.Path), "Invalid Attribute Combination", detail)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
