package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/bufbuild/protocompile"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine/internal/box"
)

// protoFile is the name a registered .proto schema compiles under.
const protoFile = "schema.proto"

// compileProto compiles the .proto text of a registered schema (imports of Google's
// well-known types resolve; references to other subjects are not supported).
func compileProto(ctx context.Context, text string) (protoreflect.FileDescriptor, error) {
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: func(path string) (io.ReadCloser, error) {
			if path == protoFile {
				return io.NopCloser(strings.NewReader(text)), nil
			}
			return nil, fmt.Errorf("import %s: schema references are not supported", path)
		},
	})}
	files, err := c.Compile(ctx, protoFile)
	if err != nil {
		return nil, fmt.Errorf("compile: %w", err)
	}
	return files[0], nil
}

// protoDecoder decodes records in the Schema Registry wire format for Protobuf (schema id,
// then the message indexes that pick the message type in the schema's file) into the
// source's columns, by field name as avroDecoder does (a__b for a field of a nested message).
// An unset proto3 scalar without presence reads as its default (0, "", false), as Protobuf
// defines it; a field with presence (optional, a message, a wrapper) unset reads as null.
type protoDecoder struct {
	cl   *sr.Client
	cols v1.Columns

	mu    sync.Mutex
	files map[int]*protoSchema
}

// protoSchema is one writer schema: its compiled file and, per message, the plan.
type protoSchema struct {
	file  protoreflect.FileDescriptor
	err   error
	plans map[string]*protoPlan // by message full name
}

// protoPlan is how the messages of one type fill the columns.
type protoPlan struct {
	md    protoreflect.MessageDescriptor
	paths [][]protoreflect.FieldDescriptor // per column; nil when the message lacks the field
	err   error
}

func newProtoDecoder(cl *sr.Client, cols v1.Columns) *protoDecoder {
	return &protoDecoder{cl: cl, cols: cols, files: map[int]*protoSchema{}}
}

func (d *protoDecoder) decode(value []byte, row []any, vals *box.Slab) error {
	var h sr.ConfluentHeader
	id, rest, err := h.DecodeID(value)
	if err != nil {
		return fmt.Errorf("not in the Schema Registry wire format: %w", err)
	}
	index, rest, err := h.DecodeIndex(rest, 64)
	if err != nil {
		return fmt.Errorf("message indexes: %w", err)
	}
	p, err := d.plan(id, index)
	if err != nil {
		return err
	}
	msg := dynamicpb.NewMessage(p.md)
	if err := proto.Unmarshal(rest, msg); err != nil {
		return fmt.Errorf("protobuf (writer schema %d, message %s): %w", id, p.md.FullName(), err)
	}
	for i, path := range p.paths {
		if path != nil {
			row[i] = protoValue(msg, path, d.cols[i].Type, vals)
		}
	}
	return nil
}

// message returns the descriptor of message index in writer schema id.
func (d *protoDecoder) message(id int, index []int) (protoreflect.MessageDescriptor, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, md, err := d.fileMessage(id, index)
	return md, err
}

// fileMessage returns writer schema id, compiled, and the descriptor of its message index;
// d.mu is held.
func (d *protoDecoder) fileMessage(id int, index []int) (*protoSchema, protoreflect.MessageDescriptor, error) {
	s, err := d.file(id)
	if err != nil {
		return nil, nil, err
	}
	md, err := protoMessage(s.file, index)
	if err != nil {
		return nil, nil, fmt.Errorf("writer schema %d: %w", id, err)
	}
	return s, md, nil
}

// file returns writer schema id, compiled; d.mu is held.
func (d *protoDecoder) file(id int) (*protoSchema, error) {
	s, ok := d.files[id]
	if !ok {
		ctx, cancel := context.WithTimeout(context.Background(), registryTimeout)
		defer cancel()
		schema, err := d.cl.SchemaByID(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("writer schema %d: %w", id, err)
		}
		s = &protoSchema{plans: map[string]*protoPlan{}}
		if schema.Type != sr.TypeProtobuf {
			s.err = fmt.Errorf("is a %s schema, not protobuf", schema.Type)
		} else {
			s.file, s.err = compileProto(ctx, schema.Schema)
		}
		d.files[id] = s
	}
	if s.err != nil {
		return nil, fmt.Errorf("writer schema %d: %w", id, s.err)
	}
	return s, nil
}

// plan returns the plan of message index in writer schema id.
func (d *protoDecoder) plan(id int, index []int) (*protoPlan, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, md, err := d.fileMessage(id, index)
	if err != nil {
		return nil, err
	}
	p, ok := s.plans[string(md.FullName())]
	if !ok {
		p = newProtoPlan(md, d.cols)
		s.plans[string(md.FullName())] = p
	}
	if p.err != nil {
		return nil, fmt.Errorf("writer schema %d, message %s: %w", id, md.FullName(), p.err)
	}
	return p, nil
}

// protoMessage finds the message the indexes name: the index-th message of the file, then
// the nested ones.
func protoMessage(f protoreflect.FileDescriptor, index []int) (protoreflect.MessageDescriptor, error) {
	if len(index) == 0 {
		index = []int{0}
	}
	msgs := f.Messages()
	var md protoreflect.MessageDescriptor
	for _, i := range index {
		if i < 0 || i >= msgs.Len() {
			return nil, fmt.Errorf("message index %v: no such message", index)
		}
		md = msgs.Get(i)
		msgs = md.Messages()
	}
	return md, nil
}

func newProtoPlan(md protoreflect.MessageDescriptor, cols v1.Columns) *protoPlan {
	p := &protoPlan{md: md, paths: make([][]protoreflect.FieldDescriptor, len(cols))}
	var errs []error
	for i, c := range cols {
		path := protoField(md, c.Name)
		if path == nil {
			continue
		}
		if err := protoReadable(path[len(path)-1], c.Type); err != nil {
			errs = append(errs, fmt.Errorf("column %s (%s): field %s: %w", c.Name, c.Type, path[len(path)-1].FullName(), err))
		}
		p.paths[i] = path
	}
	p.err = errors.Join(errs...)
	return p
}

// protoField finds the field column name reads: the field of that name, or the path
// a__b__c through nested messages.
func protoField(md protoreflect.MessageDescriptor, name string) []protoreflect.FieldDescriptor {
	if f := md.Fields().ByName(protoreflect.Name(name)); f != nil && !f.IsList() && !f.IsMap() {
		return []protoreflect.FieldDescriptor{f}
	}
	head, tail, ok := strings.Cut(name, "__")
	if !ok {
		return nil
	}
	f := md.Fields().ByName(protoreflect.Name(head))
	if f == nil || f.Kind() != protoreflect.MessageKind || f.IsList() || f.IsMap() {
		return nil
	}
	if rest := protoField(f.Message(), tail); rest != nil {
		return append([]protoreflect.FieldDescriptor{f}, rest...)
	}
	return nil
}

// wrapperValue is the field of Google's wrapper messages (google.protobuf.Int64Value …).
const wrapperValue = "value"

// protoLeaf returns the scalar kind a field holds: its own, or its wrapper's.
func protoLeaf(f protoreflect.FieldDescriptor) (protoreflect.Kind, string) {
	if f.Kind() == protoreflect.MessageKind {
		name := string(f.Message().FullName())
		if strings.HasPrefix(name, "google.protobuf.") && strings.HasSuffix(name, "Value") {
			return f.Message().Fields().ByName(wrapperValue).Kind(), ""
		}
		return f.Kind(), name
	}
	return f.Kind(), ""
}

// protoReadable says whether a column of type t can hold field f: integers as long or
// double, floats as double, strings, enums (their names) and bytes as strings, bools,
// google.protobuf.Timestamp as timestamp, and the wrapper types as what they wrap.
func protoReadable(f protoreflect.FieldDescriptor, t v1.ColumnType) error {
	k, msg := protoLeaf(f)
	ok := false
	switch k {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind, protoreflect.Uint32Kind,
		protoreflect.Fixed32Kind, protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		ok = t == v1.TypeLong || t == v1.TypeDouble
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		ok = t == v1.TypeDouble
	case protoreflect.StringKind, protoreflect.EnumKind, protoreflect.BytesKind:
		ok = t == v1.TypeString
	case protoreflect.BoolKind:
		ok = t == v1.TypeBoolean
	case protoreflect.MessageKind:
		ok = t == v1.TypeTimestamp && msg == "google.protobuf.Timestamp"
	}
	if !ok {
		what := k.String()
		if msg != "" {
			what = msg
		}
		return fmt.Errorf("the writer's %s cannot be read as %s", what, t)
	}
	return nil
}

// protoValue reads path from msg as a value of column type t.
func protoValue(msg protoreflect.Message, path []protoreflect.FieldDescriptor, t v1.ColumnType, vals *box.Slab) any {
	for _, f := range path[:len(path)-1] {
		if !msg.Has(f) {
			return nil
		}
		msg = msg.Get(f).Message()
	}
	f := path[len(path)-1]
	if f.HasPresence() && !msg.Has(f) {
		return nil
	}
	v := msg.Get(f)
	k, name := protoLeaf(f)
	if f.Kind() == protoreflect.MessageKind {
		m := v.Message()
		if name == "google.protobuf.Timestamp" {
			fs := m.Descriptor().Fields()
			return vals.Time(time.Unix(m.Get(fs.ByName("seconds")).Int(), m.Get(fs.ByName("nanos")).Int()).UTC())
		}
		v = m.Get(m.Descriptor().Fields().ByName(wrapperValue))
	}
	switch k {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		if t == v1.TypeDouble {
			return vals.Float64(float64(v.Int()))
		}
		return vals.Int64(v.Int())
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		if t == v1.TypeDouble {
			return vals.Float64(float64(v.Uint()))
		}
		return vals.Int64(int64(v.Uint()))
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return vals.Float64(v.Float())
	case protoreflect.StringKind:
		return vals.String(v.String())
	case protoreflect.BytesKind:
		return vals.Bytes(v.Bytes())
	case protoreflect.EnumKind:
		if ev := f.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return vals.String(string(ev.Name()))
		}
		return vals.String(fmt.Sprint(v.Enum()))
	case protoreflect.BoolKind:
		return v.Bool()
	}
	return nil
}

// protoSchemaFor derives the value schema of the output columns: a proto3 message named after
// the subject, each column an optional field numbered by its position (timestamps as
// google.protobuf.Timestamp). Field numbers follow the column order: add columns at the end.
func protoSchemaFor(subject string, cols v1.Columns) string {
	var b strings.Builder
	b.WriteString("syntax = \"proto3\";\npackage lockstep;\n\nimport \"google/protobuf/timestamp.proto\";\n\n")
	fmt.Fprintf(&b, "message %s {\n", avroName(subject))
	for i, c := range cols {
		switch c.Type {
		case v1.TypeLong:
			fmt.Fprintf(&b, "  optional int64 %s = %d;\n", c.Name, i+1)
		case v1.TypeDouble:
			fmt.Fprintf(&b, "  optional double %s = %d;\n", c.Name, i+1)
		case v1.TypeBoolean:
			fmt.Fprintf(&b, "  optional bool %s = %d;\n", c.Name, i+1)
		case v1.TypeTimestamp:
			fmt.Fprintf(&b, "  google.protobuf.Timestamp %s = %d;\n", c.Name, i+1)
		default:
			fmt.Fprintf(&b, "  optional string %s = %d;\n", c.Name, i+1)
		}
	}
	b.WriteString("}\n")
	return b.String()
}

// protoEncoder encodes output rows as messages of the registered schema.
type protoEncoder struct {
	id     int
	md     protoreflect.MessageDescriptor
	fields []protoreflect.FieldDescriptor
	ts     protoreflect.MessageDescriptor
}

func newProtoEncoder(ctx context.Context, id int, subject string, cols v1.Columns) (*protoEncoder, error) {
	f, err := compileProto(ctx, protoSchemaFor(subject, cols))
	if err != nil {
		return nil, err
	}
	md := f.Messages().Get(0)
	e := &protoEncoder{id: id, md: md}
	for _, c := range cols {
		fd := md.Fields().ByName(protoreflect.Name(c.Name))
		e.fields = append(e.fields, fd)
		if fd.Kind() == protoreflect.MessageKind {
			e.ts = fd.Message()
		}
	}
	return e, nil
}

// append appends one row's record, header included.
func (e *protoEncoder) append(b []byte, row []any) ([]byte, error) {
	var h sr.ConfluentHeader
	b, err := h.AppendEncode(b, e.id, []int{0})
	if err != nil {
		return nil, err
	}
	msg := dynamicpb.NewMessage(e.md)
	for i, fd := range e.fields {
		var v protoreflect.Value
		switch x := row[i].(type) {
		case nil:
			continue
		case string:
			v = protoreflect.ValueOfString(x)
		case []byte:
			v = protoreflect.ValueOfString(string(x))
		case int64:
			v = protoreflect.ValueOfInt64(x)
		case float64:
			v = protoreflect.ValueOfFloat64(x)
		case bool:
			v = protoreflect.ValueOfBool(x)
		case time.Time:
			ts := dynamicpb.NewMessage(e.ts)
			ts.Set(e.ts.Fields().ByName("seconds"), protoreflect.ValueOfInt64(x.Unix()))
			ts.Set(e.ts.Fields().ByName("nanos"), protoreflect.ValueOfInt32(int32(x.Nanosecond())))
			v = protoreflect.ValueOfMessage(ts)
		default:
			return nil, fmt.Errorf("column %s: %T cannot be encoded", fd.Name(), x)
		}
		msg.Set(fd, v)
	}
	return proto.MarshalOptions{Deterministic: true}.MarshalAppend(b, msg)
}

// registerProto registers the Protobuf schema of cols under subject and returns its id.
func registerProto(ctx context.Context, cl *sr.Client, subject string, cols v1.Columns) (int, error) {
	return register(ctx, cl, subject, sr.Schema{Schema: protoSchemaFor(subject, cols), Type: sr.TypeProtobuf}, func(ctx context.Context, latest, _ string) (string, string) {
		return protoBreak(ctx, latest, cols, subject)
	})
}

// protoBreak finds the first field whose number the new schema gives another type or name.
func protoBreak(ctx context.Context, oldText string, cols v1.Columns, subject string) (field, reason string) {
	oldF, err1 := compileProto(ctx, oldText)
	newF, err2 := compileProto(ctx, protoSchemaFor(subject, cols))
	if err1 != nil || err2 != nil || oldF.Messages().Len() == 0 {
		return "", ""
	}
	olds, news := oldF.Messages().Get(0).Fields(), newF.Messages().Get(0).Fields()
	for i := range news.Len() {
		n := news.Get(i)
		o := olds.ByNumber(n.Number())
		if o == nil {
			continue
		}
		if o.Kind() != n.Kind() || o.Name() != n.Name() {
			return string(n.Name()), fmt.Sprintf("field number %d changed from %s %s to %s %s",
				n.Number(), o.Kind(), o.Name(), n.Kind(), n.Name())
		}
	}
	return "", ""
}
