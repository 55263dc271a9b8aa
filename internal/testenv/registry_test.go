package testenv_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// TestSchemaRegistry registers an Avro schema through the registry's Confluent-compatible
// API over TLS with basic authentication, reads it back by id, and sees the registry
// refuse an incompatible next version and an unauthenticated client.
func TestSchemaRegistry(t *testing.T) {
	reg := testenv.SchemaRegistry(t)
	httpc, err := reg.Client()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := sr.NewClient(sr.URLs(reg.TLSURL), sr.HTTPClient(httpc), sr.BasicAuth(reg.User, reg.Password))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	subject := "testenv-" + t.Name() + "-value"
	v1 := `{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}`
	s, err := cl.CreateSchema(ctx, subject, sr.Schema{Schema: v1, Type: sr.TypeAvro})
	if err != nil {
		t.Fatalf("create schema: %v", err)
	}
	// Apicurio sets a subject's compatibility only once the subject exists (Confluent's
	// registry also before).
	if rs := cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatBackward}, subject); len(rs) != 1 || rs[0].Err != nil {
		t.Fatalf("set compatibility: %+v", rs)
	}
	got, err := cl.SchemaByID(ctx, s.ID)
	if err != nil || got.Type != sr.TypeAvro {
		t.Fatalf("SchemaByID(%d) = %+v, %v", s.ID, got, err)
	}
	// A new field without a default breaks BACKWARD: old records lack it.
	v2 := `{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"b","type":"string"}]}`
	if _, err := cl.CreateSchema(ctx, subject, sr.Schema{Schema: v2, Type: sr.TypeAvro}); err == nil {
		t.Fatalf("CreateSchema(%s, field without default) = nil error, want the registry to refuse it", subject)
	}
	// Protobuf schemas register too.
	proto := "syntax = \"proto3\";\nmessage M { int64 a = 1; string b = 2; }\n"
	if _, err := cl.CreateSchema(ctx, "testenv-"+t.Name()+"-proto", sr.Schema{Schema: proto, Type: sr.TypeProtobuf}); err != nil {
		t.Fatalf("create protobuf schema: %v", err)
	}

	anon, err := sr.NewClient(sr.URLs(reg.URL))
	if err != nil {
		t.Fatal(err)
	}
	var resErr *sr.ResponseError
	if _, err := anon.Subjects(ctx); !errors.As(err, &resErr) || resErr.StatusCode != http.StatusUnauthorized {
		t.Fatalf("Subjects() without credentials = %v, want 401", err)
	}
}
