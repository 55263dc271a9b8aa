package charts_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// maxSchemaError bounds helm's answer to a wrong value: a line or two naming it, not the
// multi-KB patch the API server would answer with.
const maxSchemaError = 600

// TestValuesSchemaRefuses: a wrong value fails `helm template` at once, with a short message
// naming the value, before anything reaches a cluster.
func TestValuesSchemaRefuses(t *testing.T) {
	for _, tc := range []struct {
		set  string
		want string // the value's path in helm's message
	}{
		{"replicaCount=abc", "replicaCount"},
		{"replicaCount=-1", "replicaCount"},
		{"image.pullPolicy=Sometimes", "pullPolicy"},
		{"engine.gracePeriod=soon", "gracePeriod"},
		{"controller.resync=30", "resync"},
		{"webhook.timeoutSeconds=60", "timeoutSeconds"},
		{"webhook.port=0", "port"},
		{"webhook.certManager.enabled=yes", "enabled"},
		{"rbac.storeReaders.enabled=maybe", "enabled"},
		{"rbac.storeReaders.subjects[0].kind=Team,rbac.storeReaders.subjects[0].name=x", "kind"},
		{"replicas=3", "replicas"}, // a misspelt key is refused, not ignored
	} {
		t.Run(tc.set, func(t *testing.T) {
			out, err := helm(t, "template", release, "charts/"+chart, "--set", tc.set)
			if err == nil {
				t.Fatalf("helm template --set %s succeeded, want a refusal naming %s:\n%.300s", tc.set, tc.want, out)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) || !strings.Contains(msg, "schema") {
				t.Errorf("helm template --set %s: %s\nwant a schema error naming %s", tc.set, msg, tc.want)
			}
			if len(msg) > maxSchemaError {
				t.Errorf("helm template --set %s: a %d-byte error, want at most %d:\n%s", tc.set, len(msg), maxSchemaError, msg)
			}
		})
	}
}

// TestValuesSchemaCoversValues keeps values.schema.json and the chart in step: every key of
// values.yaml, and every .Values path the templates read, is a property of the schema (down
// to the free-form maps: resources, annotations, affinity, …).
func TestValuesSchemaCoversValues(t *testing.T) {
	dir := filepath.Join(root(t), "charts", chart)
	schema := readSchema(t, filepath.Join(dir, "values.schema.json"))
	data, err := os.ReadFile(filepath.Join(dir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatalf("values.yaml: %v", err)
	}
	for _, path := range keyPaths(values, nil) {
		if _, ok := schema.lookup(path); !ok {
			t.Errorf("values.yaml has %s, values.schema.json does not", strings.Join(path, "."))
		}
	}

	templates, err := filepath.Glob(filepath.Join(dir, "templates", "*"))
	if err != nil {
		t.Fatal(err)
	}
	refs := regexp.MustCompile(`\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)`)
	seen := 0
	for _, f := range templates {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range refs.FindAllStringSubmatch(string(text), -1) {
			seen++
			path := strings.Split(strings.TrimPrefix(m[1], "."), ".")
			if _, ok := schema.lookup(path); !ok {
				t.Errorf("%s reads .Values.%s, values.schema.json does not have it", filepath.Base(f), strings.Join(path, "."))
			}
		}
	}
	if seen == 0 {
		t.Fatal("found no .Values in the templates")
	}
}

// jsonSchema is a node of a JSON Schema, enough of it to look properties up.
type jsonSchema struct {
	root map[string]any
	node map[string]any
}

func readSchema(t *testing.T, path string) jsonSchema {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var root map[string]any
	if err := json.Unmarshal(data, &root); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return jsonSchema{root: root, node: root}
}

// resolve follows a local "$ref" (#/definitions/name).
func (s jsonSchema) resolve() jsonSchema {
	ref, ok := s.node["$ref"].(string)
	if !ok {
		return s
	}
	name, ok := strings.CutPrefix(ref, "#/definitions/")
	if !ok {
		return jsonSchema{root: s.root}
	}
	defs, _ := s.root["definitions"].(map[string]any)
	node, _ := defs[name].(map[string]any)
	return jsonSchema{root: s.root, node: node}
}

// lookup finds the schema of a path of keys. Below a node without properties (a free-form
// map such as podAnnotations, or an array) every path is accepted.
func (s jsonSchema) lookup(path []string) (jsonSchema, bool) {
	s = s.resolve()
	if len(path) == 0 {
		return s, s.node != nil
	}
	props, ok := s.node["properties"].(map[string]any)
	if !ok {
		return s, s.node != nil && (s.node["additionalProperties"] != false)
	}
	child, ok := props[path[0]].(map[string]any)
	if !ok {
		return s, false
	}
	return jsonSchema{root: s.root, node: child}.lookup(path[1:])
}

// keyPaths lists the path of every key of a values tree, maps only (list items are the
// schema's "items").
func keyPaths(m map[string]any, prefix []string) [][]string {
	var out [][]string
	for k, v := range m {
		path := append(slices.Clone(prefix), k)
		out = append(out, path)
		if sub, ok := v.(map[string]any); ok {
			out = append(out, keyPaths(sub, path)...)
		}
	}
	return out
}
