package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/reflect/protoreflect"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
)

// pinnedEncoder returns the encoder of a sink whose value schema is pinned to version of
// subject: the registry's schema, checked against the output columns (each column a field
// of its name that holds its type; each field without a column has a default).
func pinnedEncoder(ctx context.Context, cl *sr.Client, f v1.KafkaFormat, subject string, version int, cols v1.Columns) (valueEncoder, error) {
	ctx, cancel := context.WithTimeout(ctx, registryTimeout)
	defer cancel()
	s, err := cl.SchemaByVersion(ctx, subject, version)
	if err != nil {
		return nil, fmt.Errorf("schema registry: subject %s version %d: %w", subject, version, err)
	}
	want := sr.TypeAvro
	switch f {
	case v1.KafkaProtobuf:
		want = sr.TypeProtobuf
	case v1.KafkaJSONSchema:
		want = sr.TypeJSON
	}
	if s.Type != want {
		return nil, fmt.Errorf("schema registry: subject %s version %d is a %s schema, the sink writes %s", subject, version, s.Type, f)
	}
	var enc valueEncoder
	switch f {
	case v1.KafkaProtobuf:
		enc, err = pinnedProto(ctx, s.ID, s.Schema.Schema, cols)
	case v1.KafkaJSONSchema:
		if err = jsonSchemaFits(s.Schema.Schema, cols); err == nil {
			enc, err = newJSONSchemaEncoder(s.ID, cols)
		}
	default:
		enc, err = pinnedAvro(s.ID, s.Schema.Schema, cols)
	}
	if err != nil {
		return nil, fmt.Errorf("schema registry: subject %s version %d (id %d) does not fit the output columns: %w", subject, version, s.ID, err)
	}
	return enc, nil
}

// avroPinnedEncoder encodes rows with a registered Avro record schema, by field name.
type avroPinnedEncoder struct {
	id     int
	schema avro.Schema
	cols   v1.Columns
	kinds  []avro.Type // the field's non-null type per column
}

func pinnedAvro(id int, text string, cols v1.Columns) (*avroPinnedEncoder, error) {
	schema, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	rec, ok := schema.(*avro.RecordSchema)
	if !ok {
		return nil, fmt.Errorf("a %s, not a record", schema.Type())
	}
	e := &avroPinnedEncoder{id: id, schema: schema, cols: cols}
	var errs []error
	byName := map[string]bool{}
	for _, c := range cols {
		byName[c.Name] = true
		var ft avro.Schema
		for _, f := range rec.Fields() {
			if f.Name() == c.Name {
				ft = f.Type()
			}
		}
		if ft == nil {
			errs = append(errs, fmt.Errorf("column %s: no field %s", c.Name, c.Name))
			e.kinds = append(e.kinds, "")
			continue
		}
		leaf := nonNull(ft)
		typ, logical := leaf.Type(), avroLogical(leaf)
		ok := false
		switch c.Type {
		case v1.TypeString:
			ok = typ == avro.String
		case v1.TypeLong:
			ok = typ == avro.Long && logical == ""
		case v1.TypeDouble:
			ok = typ == avro.Double
		case v1.TypeBoolean:
			ok = typ == avro.Boolean
		case v1.TypeTimestamp:
			ok = typ == avro.Long && (logical == avro.TimestampMillis || logical == avro.TimestampMicros)
		}
		if !ok {
			what := string(typ)
			if logical != "" {
				what += " (" + string(logical) + ")"
			}
			errs = append(errs, fmt.Errorf("column %s (%s): field %s is %s, which cannot hold it", c.Name, c.Type, c.Name, what))
		}
		e.kinds = append(e.kinds, typ)
	}
	for _, f := range rec.Fields() {
		if !byName[f.Name()] && !f.HasDefault() {
			errs = append(errs, fmt.Errorf("field %s: no output column of that name and no default", f.Name()))
		}
	}
	return e, errors.Join(errs...)
}

func (e *avroPinnedEncoder) append(b []byte, row []any) ([]byte, error) {
	var h sr.ConfluentHeader
	b, err := h.AppendEncode(b, e.id, nil)
	if err != nil {
		return nil, err
	}
	rec := make(map[string]any, len(e.cols))
	for i, c := range e.cols {
		rec[c.Name] = row[i]
	}
	body, err := avro.Marshal(e.schema, rec)
	if err != nil {
		return nil, fmt.Errorf("avro: %w", err)
	}
	return append(b, body...), nil
}

// pinnedProto checks the first message of a registered .proto schema against cols and
// returns its encoder.
func pinnedProto(ctx context.Context, id int, text string, cols v1.Columns) (*protoEncoder, error) {
	f, err := compileProto(ctx, text)
	if err != nil {
		return nil, err
	}
	if f.Messages().Len() == 0 {
		return nil, errors.New("no message")
	}
	md := f.Messages().Get(0)
	e := &protoEncoder{id: id, md: md}
	var errs []error
	for _, c := range cols {
		fd := md.Fields().ByName(protoreflect.Name(c.Name))
		if fd == nil || fd.IsList() || fd.IsMap() {
			errs = append(errs, fmt.Errorf("column %s: no field %s", c.Name, c.Name))
			continue
		}
		ok := false
		switch c.Type {
		case v1.TypeString:
			ok = fd.Kind() == protoreflect.StringKind
		case v1.TypeLong:
			ok = fd.Kind() == protoreflect.Int64Kind || fd.Kind() == protoreflect.Sint64Kind || fd.Kind() == protoreflect.Sfixed64Kind
		case v1.TypeDouble:
			ok = fd.Kind() == protoreflect.DoubleKind
		case v1.TypeBoolean:
			ok = fd.Kind() == protoreflect.BoolKind
		case v1.TypeTimestamp:
			ok = fd.Kind() == protoreflect.MessageKind && fd.Message().FullName() == "google.protobuf.Timestamp"
			if ok {
				e.ts = fd.Message()
			}
		}
		if !ok {
			errs = append(errs, fmt.Errorf("column %s (%s): field %s is %s, which cannot hold it", c.Name, c.Type, fd.FullName(), fd.Kind()))
		}
		e.fields = append(e.fields, fd)
	}
	return e, errors.Join(errs...)
}
