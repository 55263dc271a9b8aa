package v1_test

import (
	"os"
	"reflect"
	"strings"
	"testing"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
)

// TestSpecDocsKafkaFields: docs/spec.md's tables of the Kafka source and sink name every field
// of their types and every value their enumerations allow, so that the reference page does not
// fall behind docs/kafka.md.
func TestSpecDocsKafkaFields(t *testing.T) {
	data, err := os.ReadFile("../../docs/spec.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	source := section(t, doc, "**`kafka`**", "**`files`**")
	sink := section(t, doc, "| `kafka` |", "\n")
	for _, tc := range []struct {
		name string
		text string
		typ  reflect.Type
	}{
		{"the Kafka source's table", source, reflect.TypeFor[v1.KafkaSource]()},
		{"the Kafka sink's row", sink, reflect.TypeFor[v1.KafkaSink]()},
	} {
		for f := range tc.typ.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			if !strings.Contains(tc.text, "`"+name+"`") {
				t.Errorf("docs/spec.md: %s does not name the field `%s`", tc.name, name)
			}
		}
	}
	for _, tc := range []struct {
		what   string
		text   string
		values []v1.KafkaFormat
	}{
		{"the Kafka source's formats", source, []v1.KafkaFormat{v1.KafkaJSON, v1.KafkaCSV, v1.KafkaRaw, v1.KafkaAvro, v1.KafkaProtobuf, v1.KafkaJSONSchema}},
		{"the Kafka source's key formats", source, []v1.KafkaFormat{v1.KafkaKeyString, v1.KafkaJSON, v1.KafkaAvro, v1.KafkaProtobuf}},
		{"the Kafka sink's formats", sink, []v1.KafkaFormat{v1.KafkaJSON, v1.KafkaAvro, v1.KafkaProtobuf, v1.KafkaJSONSchema}},
	} {
		for _, v := range tc.values {
			if !strings.Contains(tc.text, "`"+string(v)+"`") {
				t.Errorf("docs/spec.md: %s do not include `%s`", tc.what, v)
			}
		}
	}
}

// section is the text of doc from the first from up to the next to.
func section(t *testing.T, doc, from, to string) string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, from)
	if !ok {
		t.Fatalf("docs/spec.md has no %q", from)
	}
	s, _, _ := strings.Cut(rest, to)
	return s
}
