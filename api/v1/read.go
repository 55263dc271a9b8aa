package v1

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// DefaultNamespace is the namespace of a manifest that names none, as with kubectl.
const DefaultNamespace = "default"

// ManifestError is a manifest that cannot be read as the expected kind: malformed YAML or
// JSON, another apiVersion or kind, unknown or duplicate fields, values of the wrong type.
// Problems are listed in the order found; an unknown field is named by its full path, as in
// `unknown field "spec.sources[0].kafak"`.
type ManifestError struct {
	Problems []string
}

func (e *ManifestError) Error() string {
	return "invalid manifest: " + strings.Join(e.Problems, "; ")
}

// ReadQuery reads one StreamingQuery manifest, YAML or JSON, from r, strictly: any unknown or
// duplicate field is an error. It sets metadata.namespace to "default" when the manifest names
// none and applies the spec's defaults (see StreamingQuery.Default). It does not validate the
// spec: call Validate. A manifest that cannot be read yields a *ManifestError; errors from r
// are returned wrapped.
func ReadQuery(r io.Reader) (*StreamingQuery, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	return ParseQuery(data)
}

// ParseQuery is ReadQuery on a manifest in memory. The bytes hold exactly one document.
func ParseQuery(data []byte) (*StreamingQuery, error) {
	doc, err := oneDocument(data)
	if err != nil {
		return nil, err
	}
	var q StreamingQuery
	if err := decodeStrict(doc, &q, KindStreamingQuery, &q.TypeMeta); err != nil {
		return nil, err
	}
	if q.Namespace == "" {
		q.Namespace = DefaultNamespace
	}
	q.Default()
	return &q, nil
}

// oneDocument returns the one YAML or JSON document in data.
func oneDocument(data []byte) ([]byte, error) {
	yr := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := yr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, &ManifestError{Problems: []string{err.Error()}}
		}
		if len(bytes.TrimSpace(stripComments(doc))) > 0 {
			docs = append(docs, doc)
		}
	}
	switch len(docs) {
	case 0:
		return nil, &ManifestError{Problems: []string{"the manifest is empty"}}
	case 1:
		return docs[0], nil
	}
	return nil, &ManifestError{Problems: []string{fmt.Sprintf("the manifest holds %d documents; want one", len(docs))}}
}

// stripComments drops YAML comment lines, so that a document of only comments counts as empty.
func stripComments(doc []byte) []byte {
	var out [][]byte
	for line := range bytes.Lines(doc) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			out = append(out, line)
		}
	}
	return bytes.Join(out, nil)
}

// decodeStrict decodes a YAML or JSON document into obj, refusing unknown and duplicate
// fields, and checks its apiVersion and kind.
func decodeStrict(doc []byte, obj any, kind string, tm *metav1.TypeMeta) error {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return &ManifestError{Problems: []string{err.Error()}}
	}
	strict, err := kjson.UnmarshalStrict(j, obj)
	if err != nil {
		return &ManifestError{Problems: []string{typeProblem(err)}}
	}
	var problems []string
	for _, e := range strict {
		problems = append(problems, e.Error())
	}
	gvk := tm.GroupVersionKind()
	if gvk.GroupVersion() != GroupVersion || gvk.Kind != kind {
		problems = append(problems, fmt.Sprintf("apiVersion %q, kind %q: want apiVersion %q, kind %q",
			gvk.GroupVersion().String(), gvk.Kind, GroupVersion.String(), kind))
	}
	if len(problems) > 0 {
		return &ManifestError{Problems: problems}
	}
	return nil
}

// typeProblem says what a decoding error means. A boolean where a string belongs is most
// often YAML 1.1 reading an unquoted y, n, yes, no, on or off (a column named n, say) as a
// boolean: it names the field and says that quoting fixes it.
func typeProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Value == "bool" && te.Type != nil && te.Type.Kind() == reflect.String {
		return fmt.Sprintf("%s: a boolean where a string belongs: YAML reads an unquoted y, n, yes, no, on, off, true or false as a boolean; quote the value (for example \"n\")", te.Field)
	}
	return err.Error()
}
