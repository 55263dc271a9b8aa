package provider

import (
	"embed"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// crds holds copies of config/crd/bases, made by go generate (see generate.go); a test keeps
// them equal to the originals.
//
//go:embed crds/*.yaml
var crds embed.FS

// CRD files embedded from config/crd/bases.
const (
	queryCRD = "crds/streaming.lockstep.dev_streamingqueries.yaml"
	storeCRD = "crds/streaming.lockstep.dev_checkpointstores.yaml"
)

// fieldType is the kind of value a field holds, as Terraform sees it.
type fieldType int

const (
	typeString fieldType = iota
	typeInt
	typeBool
	typeObject
	typeList
	typeMap
	// typeQuantity is a Kubernetes quantity (int-or-string), written as a string: 500m, 1Gi.
	typeQuantity
)

// field is one field of a Lockstep kind as its CRD's OpenAPI schema describes it. The CRD is
// generated from the api/v1 Go types, so this tree is the one source of the Terraform schema
// (names, nesting, descriptions, defaults, validators) and of the conversions between
// Terraform values and API objects.
type field struct {
	JSON        string // name in the API: camelCase
	TF          string // attribute name in Terraform: snake_case
	Type        fieldType
	Description string
	Required    bool
	// Default is the CRD's default, decoded from JSON; nil when there is none.
	Default any
	// Fields are an object's fields, sorted by JSON name.
	Fields []*field
	// Elem is the element of a list or map.
	Elem *field

	Enum                 []string
	Pattern              string
	Bytes                bool // a string holding base64 in the API, plain text in Terraform
	MinLength, MaxLength *int64
	Minimum, Maximum     *int64
	MinItems, MaxItems   *int64
	// OneOf is an object's rule that exactly one (AtMostOne: at most one) of the named
	// fields (JSON names) is set.
	OneOf     []string
	AtMostOne bool
	// ListMapKeys are the keys of a list whose elements server-side apply merges by key
	// (x-kubernetes-list-type: map); nil for atomic lists, which an apply replaces whole.
	ListMapKeys []string
}

// child returns the field of an object with the given JSON name, or nil.
func (f *field) child(json string) *field {
	for _, c := range f.Fields {
		if c.JSON == json {
			return c
		}
	}
	return nil
}

// byTF returns of(c) for each field c of an object, by c's Terraform name.
func byTF[V any](f *field, of func(*field) V) map[string]V {
	m := make(map[string]V, len(f.Fields))
	for _, c := range f.Fields {
		m[c.TF] = of(c)
	}
	return m
}

// kindFields returns the spec and status fields of a kind from its embedded CRD, as two
// objects.
func kindFields(file string) (spec, status *field, err error) {
	data, err := crds.ReadFile(file)
	if err != nil {
		return nil, nil, err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", file, err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name != "v1" || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		root := v.Schema.OpenAPIV3Schema
		spec, err = fieldOf("spec", root.Properties["spec"], slices.Contains(root.Required, "spec"))
		if err != nil {
			return nil, nil, err
		}
		status, err = fieldOf("status", root.Properties["status"], false)
		if err != nil {
			return nil, nil, err
		}
		return spec, status, nil
	}
	return nil, nil, fmt.Errorf("%s: no schema for version v1", file)
}

// oneOfMessage matches the messages of the CRD's one-of rules, as the api/v1 markers write
// them: "exactly one of kafka, files, delta, rate must be set".
var oneOfMessage = regexp.MustCompile(`^(exactly|at most) one of ([A-Za-z, ]+) (must|may) be set$`)

// fieldOf converts one property of an OpenAPI schema.
func fieldOf(name string, s apiextensionsv1.JSONSchemaProps, required bool) (*field, error) {
	f := &field{
		JSON:        name,
		TF:          snake(name),
		Description: strings.Join(strings.Fields(s.Description), " "),
		Required:    required,
		Enum:        enumStrings(s.Enum),
		Pattern:     s.Pattern,
		MinLength:   s.MinLength,
		MaxLength:   s.MaxLength,
		MinItems:    s.MinItems,
		MaxItems:    s.MaxItems,
	}
	if s.Minimum != nil {
		m := int64(*s.Minimum)
		f.Minimum = &m
	}
	if s.Maximum != nil {
		m := int64(*s.Maximum)
		f.Maximum = &m
	}
	if s.Default != nil {
		if err := json.Unmarshal(s.Default.Raw, &f.Default); err != nil {
			return nil, fmt.Errorf("%s: default: %w", name, err)
		}
	}
	switch {
	case s.XIntOrString:
		f.Type = typeQuantity
	case s.Type == "string":
		f.Type = typeString
		f.Bytes = s.Format == "byte"
	case s.Type == "integer":
		f.Type = typeInt
	case s.Type == "boolean":
		f.Type = typeBool
	case s.Type == "array":
		if s.Items == nil || s.Items.Schema == nil {
			return nil, fmt.Errorf("%s: array without items", name)
		}
		elem, err := fieldOf(name, *s.Items.Schema, true)
		if err != nil {
			return nil, err
		}
		f.Type, f.Elem = typeList, elem
		if s.XListType != nil && *s.XListType == "map" {
			f.ListMapKeys = s.XListMapKeys
		}
	case s.Type == "object" && s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
		elem, err := fieldOf(name, *s.AdditionalProperties.Schema, true)
		if err != nil {
			return nil, err
		}
		f.Type, f.Elem = typeMap, elem
	case s.Type == "object":
		if err := f.setObject(name, s); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("%s: unsupported schema type %q", name, s.Type)
	}
	return f, nil
}

// setObject makes f the object that s describes: its properties as fields, and the one-of
// rules among them.
func (f *field) setObject(name string, s apiextensionsv1.JSONSchemaProps) error {
	f.Type = typeObject
	for _, key := range sortedKeys(s.Properties) {
		c, err := fieldOf(key, s.Properties[key], slices.Contains(s.Required, key))
		if err != nil {
			return fmt.Errorf("%s.%w", name, err)
		}
		f.Fields = append(f.Fields, c)
	}
	for _, rule := range s.XValidations {
		m := oneOfMessage.FindStringSubmatch(rule.Message)
		if m == nil {
			continue // other rules are left to the API server, which the plan asks
		}
		f.AtMostOne = m[1] == "at most"
		for n := range strings.SplitSeq(m[2], ",") {
			n = strings.TrimSpace(n)
			if f.child(n) == nil {
				return fmt.Errorf("%s: rule %q names unknown field %s", name, rule.Message, n)
			}
			f.OneOf = append(f.OneOf, n)
		}
	}
	return nil
}

func enumStrings(values []apiextensionsv1.JSON) []string {
	var out []string
	for _, v := range values {
		var s string
		if json.Unmarshal(v.Raw, &s) == nil {
			out = append(out, s)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// snake converts an API field name to a Terraform attribute name: bootstrapServers →
// bootstrap_servers, caFile → ca_file, URL → url.
func snake(name string) string {
	var b strings.Builder
	runes := []rune(name)
	for i, r := range runes {
		if unicode.IsUpper(r) {
			prevLower := i > 0 && (unicode.IsLower(runes[i-1]) || unicode.IsDigit(runes[i-1]))
			nextLower := i > 0 && i+1 < len(runes) && unicode.IsLower(runes[i+1]) && unicode.IsUpper(runes[i-1])
			if prevLower || nextLower {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
