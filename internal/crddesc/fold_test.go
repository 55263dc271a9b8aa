package crddesc_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/lockstep-dev/lockstep/internal/crddesc"
)

func TestFold(t *testing.T) {
	manifest := `spec:
  versions:
  - schema:
      openAPIV3Schema:
        description: |-
          StreamingQuery is a streaming query run as micro-batches: named sources, ordered
          steps, one sink.

          A second paragraph, wrapped
          where the comment was.
            an indented line: code
          after it.
        properties:
          phase:
            description: Phase summarises the query's state.
            type: string
          sources:
            description: |-
              Sources are read in order.
              Each has a name.
            items:
              description: |-
                A source: kafka, files,
                delta or rate.
              type: object
            type: array
        type: object
`
	var got, want apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(crddesc.Fold([]byte(manifest)), &got); err != nil {
		t.Fatalf("Fold made the manifest unreadable: %v", err)
	}
	if err := yaml.Unmarshal([]byte(manifest), &want); err != nil {
		t.Fatal(err)
	}
	s := want.Spec.Versions[0].Schema.OpenAPIV3Schema
	s.Description = "StreamingQuery is a streaming query run as micro-batches: named sources, ordered steps, one sink.\n" +
		"A second paragraph, wrapped where the comment was.\n  an indented line: code\nafter it."
	p := s.Properties["sources"]
	p.Description = "Sources are read in order. Each has a name."
	p.Items.Schema.Description = "A source: kafka, files, delta or rate."
	s.Properties["sources"] = p
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Fold (-want +got):\n%s", diff)
	}
}
