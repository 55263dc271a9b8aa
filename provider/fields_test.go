package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
)

// TestEmbeddedCRDsAreCurrent keeps the CRDs the provider embeds equal to config/crd/bases.
func TestEmbeddedCRDsAreCurrent(t *testing.T) {
	for _, file := range []string{queryCRD, storeCRD} {
		got, err := crds.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join("..", "config", "crd", "bases", filepath.Base(file)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("provider/%s differs from config/crd/bases: run `make generate` (or go generate ./provider)", file)
		}
	}
}

// kindCase pairs a Go type of api/v1 with the field tree the provider derives from its CRD.
type kindCase struct {
	name  string
	typ   reflect.Type
	field func(*kinds) *field
}

var kindCases = []kindCase{
	{"StreamingQuerySpec", reflect.TypeFor[v1.StreamingQuerySpec](), func(k *kinds) *field { return k.query }},
	{"StreamingQueryStatus", reflect.TypeFor[v1.StreamingQueryStatus](), func(k *kinds) *field { return k.queryStatus }},
	{"CheckpointStoreSpec", reflect.TypeFor[v1.CheckpointStoreSpec](), func(k *kinds) *field { return k.store }},
	{"CheckpointStoreStatus", reflect.TypeFor[v1.CheckpointStoreStatus](), func(k *kinds) *field { return k.storeStatus }},
}

// TestEveryFieldIsRepresentable walks each Go type with reflect alongside the field tree:
// every Go field has an attribute of a matching type, and every attribute a Go field.
func TestEveryFieldIsRepresentable(t *testing.T) {
	k := loadKinds()
	if k.err != nil {
		t.Fatal(k.err)
	}
	for _, tc := range kindCases {
		t.Run(tc.name, func(t *testing.T) {
			for _, problem := range matchType(tc.field(k), tc.typ, "") {
				t.Error(problem)
			}
		})
	}
}

var (
	quantityType = reflect.TypeFor[resource.Quantity]()
	timeType     = reflect.TypeFor[metav1.Time]()
)

// matchType returns the mismatches between field f and Go type typ at path at.
func matchType(f *field, typ reflect.Type, at string) []string {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	want := func(ft fieldType) []string {
		if f.Type != ft {
			return []string{fmt.Sprintf("%s: Go type %s has field type %d, want %d", at, typ, f.Type, ft)}
		}
		return nil
	}
	switch {
	case typ == quantityType:
		return want(typeQuantity)
	case typ == timeType:
		return want(typeString)
	}
	switch typ.Kind() {
	case reflect.String:
		return want(typeString)
	case reflect.Bool:
		return want(typeBool)
	case reflect.Int, reflect.Int32, reflect.Int64:
		return want(typeInt)
	case reflect.Slice:
		if typ.Elem().Kind() == reflect.Uint8 {
			if p := want(typeString); p != nil || !f.Bytes {
				return append(p, at+": []byte is not a bytes string")
			}
			return nil
		}
		if p := want(typeList); p != nil {
			return p
		}
		return matchType(f.Elem, typ.Elem(), at+"[]")
	case reflect.Map:
		if p := want(typeMap); p != nil {
			return p
		}
		return matchType(f.Elem, typ.Elem(), at+"{}")
	case reflect.Struct:
		if p := want(typeObject); p != nil {
			return p
		}
		var problems []string
		seen := map[string]bool{}
		for _, sf := range jsonFields(typ) {
			name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
			c := f.child(name)
			if c == nil {
				problems = append(problems, fmt.Sprintf("%s.%s: Go field %s has no attribute", at, name, sf.Name))
				continue
			}
			seen[name] = true
			problems = append(problems, matchType(c, sf.Type, at+"."+name)...)
		}
		for _, c := range f.Fields {
			if !seen[c.JSON] {
				problems = append(problems, fmt.Sprintf("%s.%s: attribute has no Go field", at, c.JSON))
			}
		}
		return problems
	}
	return []string{fmt.Sprintf("%s: unexpected Go type %s", at, typ)}
}

// jsonFields returns the fields of a struct as JSON sees them: embedded structs without a
// JSON name (corev1's LocalObjectReference, inline) contribute their own fields.
func jsonFields(typ reflect.Type) []reflect.StructField {
	var out []reflect.StructField
	for sf := range typ.Fields() {
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if sf.Anonymous && name == "" && sf.Type.Kind() == reflect.Struct {
			out = append(out, jsonFields(sf.Type)...)
			continue
		}
		if name == "-" || !sf.IsExported() {
			continue
		}
		out = append(out, sf)
	}
	return out
}

// TestRoundTrip fills every field of each Go type, converts the value to its Terraform form
// and back, and wants it unchanged: spec → Terraform value → spec.
func TestRoundTrip(t *testing.T) {
	k := loadKinds()
	if k.err != nil {
		t.Fatal(k.err)
	}
	for _, tc := range kindCases {
		t.Run(tc.name, func(t *testing.T) {
			orig := reflect.New(tc.typ)
			fill(orig.Elem(), "v")
			b, err := json.Marshal(orig.Interface())
			if err != nil {
				t.Fatal(err)
			}
			var api map[string]any
			if err := json.Unmarshal(b, &api); err != nil {
				t.Fatal(err)
			}
			tf, err := fromAPI(tc.field(k), api)
			if err != nil {
				t.Fatalf("fromAPI: %v", err)
			}
			back, known, err := toAPI(tc.field(k), tf)
			if err != nil || !known {
				t.Fatalf("toAPI = %v, known %v", err, known)
			}
			b, err = json.Marshal(back)
			if err != nil {
				t.Fatal(err)
			}
			got := reflect.New(tc.typ)
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.DisallowUnknownFields()
			if err := dec.Decode(got.Interface()); err != nil {
				t.Fatalf("decode the round trip: %v\n%s", err, b)
			}
			if diff := cmp.Diff(orig.Interface(), got.Interface()); diff != "" {
				t.Errorf("round trip changed the value (-want +got):\n%s", diff)
			}
		})
	}
}

// fill sets every field of v to a value that is not zero, so that nothing is left out.
func fill(v reflect.Value, seed string) {
	switch {
	case v.Type() == quantityType:
		v.Set(reflect.ValueOf(resource.MustParse("250m")))
		return
	case v.Type() == timeType:
		v.Set(reflect.ValueOf(metav1.NewTime(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))))
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), seed)
	case reflect.String:
		v.SetString(seed)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(int64(len(seed)) + 7)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes([]byte("-----BEGIN CERTIFICATE-----\n" + seed + "\n-----END CERTIFICATE-----\n"))
			return
		}
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fill(s.Index(i), fmt.Sprintf("%s%d", seed, i))
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		key := reflect.New(v.Type().Key()).Elem()
		key.SetString(seed + "-key")
		val := reflect.New(v.Type().Elem()).Elem()
		fill(val, seed)
		m.SetMapIndex(key, val)
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), seed+"-"+v.Type().Field(i).Name)
			}
		}
	}
}

func TestSnake(t *testing.T) {
	for in, want := range map[string]string{
		"bootstrapServers": "bootstrap_servers", "caFile": "ca_file", "url": "url", "sasl": "sasl",
		"maxOffsetsPerTrigger": "max_offsets_per_trigger", "dropDuplicates": "drop_duplicates",
		"URL": "url", "caBundle": "ca_bundle", "queryID": "query_id", "durationMs": "duration_ms",
	} {
		if got := snake(in); got != want {
			t.Errorf("snake(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestQueryMetaSavesEveryField: set saves every attribute queryMeta names, so none is
// silently left out of the state.
func TestQueryMetaSavesEveryField(t *testing.T) {
	var m queryMeta
	saved := savedAttributes{}
	if diags := m.set(t.Context(), saved); diags.HasError() {
		t.Fatalf("set: %v", diags)
	}
	for name := range m.fields() {
		if !saved[name] {
			t.Errorf("attribute %s is not saved", name)
		}
	}
}

// savedAttributes records the attributes set saves.
type savedAttributes map[string]bool

func (s savedAttributes) SetAttribute(_ context.Context, p path.Path, _ any) diag.Diagnostics {
	s[p.String()] = true
	return nil
}
