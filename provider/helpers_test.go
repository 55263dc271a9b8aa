package provider

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	dschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

func mustKinds(t testing.TB) *kinds {
	t.Helper()
	k := loadKinds()
	if k.err != nil {
		t.Fatal(k.err)
	}
	return k
}

func TestAttributePath(t *testing.T) {
	spec := mustKinds(t).query
	tests := []struct {
		field string
		want  string
		ok    bool
	}{
		{"spec.sources[0].files.path", "sources[0].files.path", true},
		{"spec.transform[3].aggregate.groupBy[0]", "transform[3].aggregate.group_by[0]", true},
		{"spec.checkpoint.location", "checkpoint.location", true},
		{"spec.resources.requests[cpu]", `resources.requests["cpu"]`, true},
		{"spec.sink.kafka.bootstrapServers", "sink.kafka.bootstrap_servers", true},
		{"spec.sources[0].nosuch", "sources[0]", true}, // the part that matches
		{"spec.nosuch", "", false},
		{"metadata.name", "", false},
	}
	for _, tc := range tests {
		p, ok := attributePath(spec, tc.field)
		if ok != tc.ok || ok && p.String() != tc.want {
			t.Errorf("attributePath(%q) = %s, %v; want %s, %v", tc.field, p, ok, tc.want, tc.ok)
		}
	}
}

func TestTerraformPaths(t *testing.T) {
	remedy := "Revert spec.sources[0].files.path, or start fresh at a new spec.checkpoint.location."
	if got, want := terraformPaths(mustKinds(t).query, remedy), "Revert sources[0].files.path, or start fresh at a new checkpoint.location."; got != want {
		t.Errorf("terraformPaths = %q, want %q", got, want)
	}
}

func TestReconcile(t *testing.T) {
	spec := mustKinds(t).query
	str := func(s string) tftypes.Value { return tftypes.NewValue(tftypes.String, s) }
	null := func(f *field) tftypes.Value { return tftypes.NewValue(tfType(f), nil) }
	suspend, trigger := spec.child("suspend"), spec.child("trigger")
	requests := spec.child("resources").child("requests")
	reqs := func(q string) tftypes.Value {
		return tftypes.NewValue(tfType(requests), map[string]tftypes.Value{"cpu": str(q)})
	}
	emptyTrigger, _ := fromAPI(trigger, map[string]any{})
	setTrigger, _ := fromAPI(trigger, map[string]any{"processingTime": "1m"})
	tests := []struct {
		name      string
		f         *field
		want, got tftypes.Value
		expect    tftypes.Value
	}{
		{"false written, absent read", suspend, tftypes.NewValue(tftypes.Bool, false), null(suspend), tftypes.NewValue(tftypes.Bool, false)},
		{"true read where unset: drift", suspend, null(suspend), tftypes.NewValue(tftypes.Bool, true), tftypes.NewValue(tftypes.Bool, true)},
		{"empty object written, absent read", trigger, emptyTrigger, null(trigger), emptyTrigger},
		{"object removed outside: drift", trigger, setTrigger, null(trigger), null(trigger)},
		{"equal quantity keeps the spelling", requests, reqs("0.5"), reqs("500m"), reqs("0.5")},
		{"other quantity: drift", requests, reqs("1"), reqs("500m"), reqs("500m")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := reconcile(tc.f, tc.want, tc.got); !got.Equal(tc.expect) {
				t.Errorf("reconcile(%v, %v) = %v, want %v", tc.want, tc.got, got, tc.expect)
			}
		})
	}
}

// TestSetSpecAfterImport writes a spec that holds zero values — an empty console sink, an
// explicit false, an empty trigger — into a state that holds nothing yet, as the first read
// after terraform import does: every value the object holds lands in state, so that a
// configuration saying the same plans no change (issue 23 #3).
func TestSetSpecAfterImport(t *testing.T) {
	ctx := context.Background()
	spec := mustKinds(t).query
	apiSpec := map[string]any{
		"sources": []any{map[string]any{
			"name":   "orders",
			"kafka":  map[string]any{"bootstrapServers": []any{"kafka:9092"}, "topics": []any{"orders"}, "failOnDataLoss": false},
			"schema": map[string]any{"columns": []any{map[string]any{"name": "id", "type": "string"}}},
		}},
		"sink":       map[string]any{"console": map[string]any{}},
		"trigger":    map[string]any{},
		"suspend":    false,
		"outputMode": "append",
	}
	r := &queryResource{kinds: mustKinds(t)}
	s, err := r.schema(ctx)
	if err != nil {
		t.Fatal(err)
	}
	state := tfsdk.State{Schema: s, Raw: rootValue(t, spec, nil)}
	if diags := setSpec(ctx, &state, spec, apiSpec, tftypes.NewValue(state.Raw.Type(), nil)); diags.HasError() {
		t.Fatal(diags)
	}
	got, known, err := specOf(spec, state.Raw)
	if err != nil || !known {
		t.Fatalf("specOf(state) = %v, known %v", err, known)
	}
	if diff := cmp.Diff(jsonForm(t, apiSpec), jsonForm(t, got)); diff != "" {
		t.Errorf("spec in state after import (-object +state):\n%s", diff)
	}
}

// jsonForm returns x as encoding/json decodes it, so that values of different Go types
// (int64, float64) compare by their meaning.
func jsonForm(t testing.TB, x any) any {
	t.Helper()
	b, err := json.Marshal(x)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestLeftovers(t *testing.T) {
	spec := mustKinds(t).query
	planned := map[string]any{
		"sources": []any{map[string]any{"name": "orders", "rate": map[string]any{"rowsPerSecond": int64(1)}}},
		"sink":    map[string]any{"console": map[string]any{}},
	}
	plan := rootValue(t, spec, planned)
	server := map[string]any{
		"sources": []any{
			map[string]any{"name": "extra", "rate": map[string]any{}},
			map[string]any{"name": "orders", "rate": map[string]any{"rowsPerSecond": int64(1)}, "onMalformed": "fail"},
		},
		"sink":       map[string]any{"console": map[string]any{}},
		"suspend":    true,                                                          // set outside Terraform
		"trigger":    map[string]any{"once": true},                                  // set outside Terraform
		"outputMode": "append",                                                      // a default
		"checkpoint": map[string]any{"location": "s3://b/x", "retention": "Retain"}, // defaults
	}
	got, err := leftovers(spec, plan, server)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/spec/sources/0", "/spec/suspend", "/spec/trigger"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("leftovers (-want +got):\n%s", diff)
	}

	// What the provider writes: the server's spec without them.
	obj := map[string]any{"spec": server}
	if err := removeFields(obj, got); err != nil {
		t.Fatal(err)
	}
	written := map[string]any{
		"sources":    []any{map[string]any{"name": "orders", "rate": map[string]any{"rowsPerSecond": int64(1)}, "onMalformed": "fail"}},
		"sink":       map[string]any{"console": map[string]any{}},
		"outputMode": "append",
		"checkpoint": map[string]any{"location": "s3://b/x", "retention": "Retain"},
	}
	if diff := cmp.Diff(written, obj["spec"]); diff != "" {
		t.Errorf("spec without the leftovers (-want +got):\n%s", diff)
	}
}

// TestRemoveFields removes fields at JSON pointers, deeper ones and later list elements first,
// whatever order they come in, and refuses a pointer to nothing.
func TestRemoveFields(t *testing.T) {
	obj := map[string]any{"spec": map[string]any{
		"a/b": 1,
		"list": []any{
			map[string]any{"x": 1, "y": 2},
			map[string]any{"x": 3},
			map[string]any{"x": 4, "y": 5},
		},
	}}
	if err := removeFields(obj, []string{"/spec/list/2", "/spec/list/0/y", "/spec/a~1b", "/spec/list/2/y"}); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"spec": map[string]any{"list": []any{map[string]any{"x": 1}, map[string]any{"x": 3}}}}
	if diff := cmp.Diff(want, obj); diff != "" {
		t.Errorf("removeFields (-want +got):\n%s", diff)
	}
	for _, p := range []string{"/spec/nosuch", "/spec/list/7", "/spec/list/0/x/deeper"} {
		if err := removeFields(obj, []string{p}); err == nil {
			t.Errorf("removeFields(%s) removed something that is not there", p)
		}
	}
}

// rootValue makes the resource's raw value with the given spec (API form) and the other
// attributes null.
func rootValue(t testing.TB, spec *field, apiSpec map[string]any) tftypes.Value {
	t.Helper()
	r := &queryResource{kinds: mustKinds(t)}
	s, err := r.schema(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	typ := s.Type().TerraformType(context.Background()).(tftypes.Object)
	attrs := map[string]tftypes.Value{}
	for name, at := range typ.AttributeTypes {
		attrs[name] = tftypes.NewValue(at, nil)
	}
	for _, c := range spec.Fields {
		v, err := fromAPI(c, apiSpec[c.JSON])
		if err != nil {
			t.Fatal(err)
		}
		attrs[c.TF] = v
	}
	return tftypes.NewValue(typ, attrs)
}

// TestEveryAttributeIsDescribed walks the schemas of the resource and the data sources: every
// attribute has a description, which the docs show.
func TestEveryAttributeIsDescribed(t *testing.T) {
	ctx := context.Background()
	p := New("test")().(*lockstepProvider)
	for _, newResource := range p.Resources(ctx) {
		var resp resource.SchemaResponse
		newResource().Schema(ctx, resource.SchemaRequest{}, &resp)
		if resp.Diagnostics.HasError() {
			t.Fatal(resp.Diagnostics)
		}
		checkNestedDescriptions(t, "resource", "", resp.Schema.Attributes)
	}
	for _, newDataSource := range p.DataSources(ctx) {
		var resp datasource.SchemaResponse
		newDataSource().Schema(ctx, datasource.SchemaRequest{}, &resp)
		if resp.Diagnostics.HasError() {
			t.Fatal(resp.Diagnostics)
		}
		checkNestedDescriptions(t, "data source", "", resp.Schema.Attributes)
	}
}

// described is an attribute of a resource's or a data source's schema.
type described interface{ GetMarkdownDescription() string }

// checkDescriptions checks that the attribute at of a kind ("resource" or "data source")
// schema, and every attribute nested in it, has a description.
func checkDescriptions(t testing.TB, kind, at string, a described) {
	t.Helper()
	if strings.TrimSpace(a.GetMarkdownDescription()) == "" {
		t.Errorf("%s attribute %s has no MarkdownDescription", kind, at)
	}
	switch n := a.(type) {
	case rschema.SingleNestedAttribute:
		checkNestedDescriptions(t, kind, at+".", n.Attributes)
	case rschema.ListNestedAttribute:
		checkNestedDescriptions(t, kind, at+"[].", n.NestedObject.Attributes)
	case dschema.SingleNestedAttribute:
		checkNestedDescriptions(t, kind, at+".", n.Attributes)
	case dschema.ListNestedAttribute:
		checkNestedDescriptions(t, kind, at+"[].", n.NestedObject.Attributes)
	}
}

func checkNestedDescriptions[A described](t testing.TB, kind, prefix string, attrs map[string]A) {
	t.Helper()
	for name, c := range attrs {
		checkDescriptions(t, kind, prefix+name, c)
	}
}
