package controller_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// TestExplainShowsFlowingText: the descriptions the API server serves for our kinds, which
// `kubectl explain` prints and wraps to the terminal itself, are flowing text, not the doc
// comments of api/v1 with their line breaks every ~100 columns.
func TestExplainShowsFlowingText(t *testing.T) {
	cs, err := kubernetes.NewForConfig(testenv.ControlPlane(t))
	if err != nil {
		t.Fatal(err)
	}
	// The API server publishes a CRD's schema a moment after it is established.
	path := "/openapi/v3/apis/" + v1.GroupVersion.String()
	var body []byte
	eventually(t, "the OpenAPI schema of "+v1.GroupVersion.String(), func() (err error) {
		body, err = cs.CoreV1().RESTClient().Get().AbsPath(path).DoRaw(context.Background())
		return err
	})
	var doc struct {
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	// A line break inside a sentence: the next line goes on in lower case.
	wrapped := regexp.MustCompile(`\n[^A-Z\n]`)
	var descriptions []string
	for name, s := range doc.Components.Schemas {
		if !strings.Contains(name, "lockstep") {
			continue
		}
		walkDescriptions(s, func(d string) {
			descriptions = append(descriptions, d)
			if wrapped.MatchString(d) {
				t.Errorf("%s: a description with a hard line break: %q", name, d)
			}
		})
	}
	if len(descriptions) < 100 {
		t.Fatalf("found %d descriptions of our kinds, want all of them", len(descriptions))
	}
	const want = "Location is a local path, a file:// URL or an s3://bucket/prefix. On Kubernetes it is defaulted from Store's location template. Changing it starts the query afresh."
	found := false
	for _, d := range descriptions {
		found = found || d == want
	}
	if !found {
		t.Errorf("no description reads %q, as spec.checkpoint.location's doc comment does", want)
	}
}

// walkDescriptions calls f with every "description" in an OpenAPI schema.
func walkDescriptions(v any, f func(string)) {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			if d, ok := c.(string); ok && k == "description" {
				f(d)
			}
			walkDescriptions(c, f)
		}
	case []any:
		for _, c := range x {
			walkDescriptions(c, f)
		}
	}
}
