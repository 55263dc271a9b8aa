package kafka

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
)

// keySubject is the subject of a topic's key schema: <topic>-key (the topic name strategy).
func keySubject(topic string) string { return topic + "-key" }

// keyEncoder writes a sink's key column's value (not null) as a record key.
type keyEncoder interface {
	append(b []byte, v any) ([]byte, error)
}

// newKeyEncoder returns the encoder of keys in format f of column col; for avro and protobuf
// it registers the key schema under subject first (in spec's registry, with cl).
func newKeyEncoder(ctx context.Context, cl *sr.Client, f v1.KafkaFormat, spec *v1.SchemaRegistry, subject string, col v1.Column) (keyEncoder, error) {
	switch f {
	case "", v1.KafkaKeyString:
		return stringKey{}, nil
	case v1.KafkaJSON:
		return jsonKey{}, nil
	case v1.KafkaAvro:
		text, err := avroKeySchema(col.Type)
		if err != nil {
			return nil, fmt.Errorf("keyColumn %s: %w", col.Name, err)
		}
		s, err := cl.CreateSchema(ctx, subject, sr.Schema{Schema: text, Type: sr.TypeAvro})
		if err != nil {
			return nil, fmt.Errorf("schema registry: register the key schema %s under subject %s: %w", text, subject, err)
		}
		var h sr.ConfluentHeader
		prefix, err := h.AppendEncode(nil, s.ID, nil)
		if err != nil {
			return nil, err
		}
		return avroKey{prefix: prefix}, nil
	case v1.KafkaProtobuf:
		// A message of one optional field: Protobuf has no top-level scalars. The value
		// encoder's rules make it (a version pin is the value's, not the key's).
		keySpec := *spec
		keySpec.Version, keySpec.Subject = nil, ""
		enc, err := newValueEncoder(ctx, cl, v1.KafkaProtobuf, &keySpec, subject, v1.Columns{col})
		if err != nil {
			return nil, fmt.Errorf("key: %w", err)
		}
		return protoKey{enc: enc}, nil
	}
	return nil, fmt.Errorf("keyFormat %q: the Kafka sink writes keys as string, json, avro or protobuf", f)
}

// stringKey writes a key as its text.
type stringKey struct{}

func (stringKey) append(b []byte, v any) ([]byte, error) { return appendKey(b, v), nil }

// jsonKey writes a key as its JSON value: a string quoted, a timestamp as an RFC 3339
// string, a non-finite double as null.
type jsonKey struct{}

func (jsonKey) append(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case string:
		q, err := json.Marshal(v)
		return append(b, q...), err
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return append(b, "null"...), nil
		}
		return strconv.AppendFloat(b, v, 'g', -1, 64), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case time.Time:
		b = append(b, '"')
		b = v.UTC().AppendFormat(b, time.RFC3339Nano)
		return append(b, '"'), nil
	}
	return nil, fmt.Errorf("key of type %T", v)
}

// avroKeySchema is the primitive Avro schema of a key column of type t, as Confluent's
// serializers write a String or Long key.
func avroKeySchema(t v1.ColumnType) (string, error) {
	switch t {
	case v1.TypeString:
		return `"string"`, nil
	case v1.TypeLong:
		return `"long"`, nil
	case v1.TypeDouble:
		return `"double"`, nil
	case v1.TypeBoolean:
		return `"boolean"`, nil
	case v1.TypeTimestamp:
		return `{"type":"long","logicalType":"timestamp-micros"}`, nil
	}
	return "", fmt.Errorf("no Avro key for a column of type %s", t)
}

// avroKey writes a key in the wire format with its primitive schema's id (prefix).
type avroKey struct{ prefix []byte }

func (k avroKey) append(b []byte, v any) ([]byte, error) {
	b = append(b, k.prefix...)
	switch v := v.(type) {
	case string:
		b = binary.AppendVarint(b, int64(len(v)))
		return append(b, v...), nil
	case int64:
		return binary.AppendVarint(b, v), nil
	case float64:
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(v)), nil
	case bool:
		if v {
			return append(b, 1), nil
		}
		return append(b, 0), nil
	case time.Time:
		return binary.AppendVarint(b, v.UnixMicro()), nil
	}
	return nil, fmt.Errorf("key of type %T", v)
}

// protoKey writes a key as a message of one field.
type protoKey struct{ enc valueEncoder }

func (k protoKey) append(b []byte, v any) ([]byte, error) { return k.enc.append(b, []any{v}) }

// keyDecoder reads a source's record keys in format json, avro or protobuf into the text of
// the _key column. Writer schemas are fetched by id and kept. It is safe for concurrent use.
type keyDecoder struct {
	format v1.KafkaFormat
	cl     *sr.Client
	proto  *protoDecoder

	mu   sync.Mutex
	avro map[int]avro.Schema
}

func newKeyDecoder(format v1.KafkaFormat, cl *sr.Client) *keyDecoder {
	return &keyDecoder{format: format, cl: cl, proto: newProtoDecoder(cl, nil), avro: map[int]avro.Schema{}}
}

// text returns the key's text; null is true for a key that decodes to null.
func (d *keyDecoder) text(key []byte) (text []byte, null bool, err error) {
	switch d.format {
	case v1.KafkaJSON:
		return jsonText(key)
	case v1.KafkaAvro:
		var h sr.ConfluentHeader
		id, rest, err := h.DecodeID(key)
		if err != nil {
			return nil, false, fmt.Errorf("not in the Schema Registry wire format: %w", err)
		}
		schema, err := d.avroSchema(id)
		if err != nil {
			return nil, false, err
		}
		var v any
		if err := avro.Unmarshal(schema, rest, &v); err != nil {
			return nil, false, fmt.Errorf("avro (writer schema %d): %w", id, err)
		}
		return valueText(v)
	case v1.KafkaProtobuf:
		var h sr.ConfluentHeader
		id, rest, err := h.DecodeID(key)
		if err != nil {
			return nil, false, fmt.Errorf("not in the Schema Registry wire format: %w", err)
		}
		index, rest, err := h.DecodeIndex(rest, 64)
		if err != nil {
			return nil, false, fmt.Errorf("message indexes: %w", err)
		}
		md, err := d.proto.message(id, index)
		if err != nil {
			return nil, false, err
		}
		msg := dynamicpb.NewMessage(md)
		if err := proto.Unmarshal(rest, msg); err != nil {
			return nil, false, fmt.Errorf("protobuf (writer schema %d, message %s): %w", id, md.FullName(), err)
		}
		return protoText(msg)
	}
	return key, false, nil
}

// avroSchema returns writer schema id. An id the registry does not know is asked again
// next time: it may be registered later.
func (d *keyDecoder) avroSchema(id int) (avro.Schema, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.avro[id]; ok {
		return s, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), registryTimeout)
	defer cancel()
	s, err := d.cl.SchemaByID(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("writer schema %d: %w", id, err)
	}
	if s.Type != sr.TypeAvro {
		return nil, fmt.Errorf("writer schema %d is a %s schema, not avro", id, s.Type)
	}
	schema, err := avro.Parse(s.Schema)
	if err != nil {
		return nil, fmt.Errorf("writer schema %d: %w", id, err)
	}
	d.avro[id] = schema
	return schema, nil
}

// jsonText is a JSON key's text: a string's contents, any other value compacted.
func jsonText(key []byte) ([]byte, bool, error) {
	key = bytes.TrimSpace(key)
	switch {
	case bytes.Equal(key, []byte("null")):
		return nil, true, nil
	case len(key) > 0 && key[0] == '"':
		var s string
		if err := json.Unmarshal(key, &s); err != nil {
			return nil, false, fmt.Errorf("json key: %w", err)
		}
		return []byte(s), false, nil
	}
	var out bytes.Buffer
	if err := json.Compact(&out, key); err != nil {
		return nil, false, fmt.Errorf("json key: %w", err)
	}
	return out.Bytes(), false, nil
}

// valueText is the text of a decoded key: a primitive as the string sink writes it, a
// record, map or array as JSON.
func valueText(v any) ([]byte, bool, error) {
	switch v := v.(type) {
	case nil:
		return nil, true, nil
	case string:
		return []byte(v), false, nil
	case []byte:
		return v, false, nil
	case int:
		return strconv.AppendInt(nil, int64(v), 10), false, nil
	case int32:
		return strconv.AppendInt(nil, int64(v), 10), false, nil
	case int64, float64, bool, time.Time:
		return appendKey(nil, v), false, nil
	case float32:
		return strconv.AppendFloat(nil, float64(v), 'g', -1, 32), false, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, false, fmt.Errorf("key as JSON: %w", err)
	}
	return b, false, nil
}

// protoText is the text of a key message: the value of its field when it declares one (a
// scalar wrapped in a message, as the sink writes it), else the message as JSON.
func protoText(msg *dynamicpb.Message) ([]byte, bool, error) {
	md := msg.Descriptor()
	if md.Fields().Len() == 1 {
		fd := md.Fields().Get(0)
		if fd.HasPresence() && !msg.Has(fd) {
			return nil, true, nil
		}
		if fd.Cardinality() != protoreflect.Repeated && fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind {
			v := msg.Get(fd)
			if fd.Kind() == protoreflect.EnumKind {
				if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
					return []byte(ev.Name()), false, nil
				}
			}
			return valueText(v.Interface())
		}
		if fd.Kind() == protoreflect.MessageKind && fd.Cardinality() != protoreflect.Repeated {
			b, err := protojson.Marshal(msg.Get(fd).Message().Interface())
			if err != nil {
				return nil, false, fmt.Errorf("key as JSON: %w", err)
			}
			return jsonText(b)
		}
	}
	b, err := protojson.Marshal(msg)
	if err != nil {
		return nil, false, fmt.Errorf("key as JSON: %w", err)
	}
	return jsonText(b)
}
