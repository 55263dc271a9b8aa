package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/sr"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/codec"
	"github.com/lockstep-dev/lockstep/engine/internal/box"
)

// jsonSchemaDecoder reads records in format jsonSchema: the Schema Registry wire header (a
// zero byte, the schema id) and a JSON object, read into the columns by the json format's
// rules. The writer's serializer validated the object against its schema; the decoder checks
// that the id is a JSON Schema the registry knows (kept per id) and does not validate again.
type jsonSchemaDecoder struct {
	cl  *sr.Client
	dec *codec.Decoder

	mu  sync.Mutex
	ids map[int]error // nil: a JSON Schema
}

func newJSONSchemaDecoder(cl *sr.Client, dec *codec.Decoder) *jsonSchemaDecoder {
	return &jsonSchemaDecoder{cl: cl, dec: dec, ids: map[int]error{}}
}

func (d *jsonSchemaDecoder) decode(value []byte, row []any, vals *box.Slab) error {
	var h sr.ConfluentHeader
	id, rest, err := h.DecodeID(value)
	if err != nil {
		return fmt.Errorf("not in the Schema Registry wire format: %w", err)
	}
	if err := d.check(id); err != nil {
		return err
	}
	return d.dec.DecodeJSON(rest, row, vals)
}

// check fetches writer schema id once and says whether it is a JSON Schema. An id the
// registry does not know is asked again next time: it may be registered later.
func (d *jsonSchemaDecoder) check(id int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err, ok := d.ids[id]; ok {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), registryTimeout)
	defer cancel()
	s, err := d.cl.SchemaByID(ctx, id)
	if err != nil {
		return fmt.Errorf("writer schema %d: %w", id, err)
	}
	if s.Type != sr.TypeJSON {
		err = fmt.Errorf("writer schema %d is a %s schema, not a JSON Schema", id, s.Type)
	}
	d.ids[id] = err
	return err
}

// jsonSchemaFor is the JSON Schema (draft-07) of records of cols: an object whose property
// per column has the column's JSON type or null (a timestamp a date-time string). Other
// properties are allowed (an open content model), so that a consumer's schema may lag.
func jsonSchemaFor(subject string, cols v1.Columns) string {
	type property struct {
		Type   []string `json:"type"`
		Format string   `json:"format,omitempty"`
	}
	props := make(map[string]property, len(cols))
	for _, c := range cols {
		p := property{Type: []string{jsonType(c.Type), "null"}}
		if c.Type == v1.TypeTimestamp {
			p.Format = "date-time"
		}
		props[c.Name] = p
	}
	b, _ := json.Marshal(struct {
		Schema     string              `json:"$schema"`
		Title      string              `json:"title"`
		Type       string              `json:"type"`
		Properties map[string]property `json:"properties"`
	}{"http://json-schema.org/draft-07/schema#", subject, "object", props})
	return string(b)
}

// jsonType is the JSON Schema type of a column type's values.
func jsonType(t v1.ColumnType) string {
	switch t {
	case v1.TypeLong:
		return "integer"
	case v1.TypeDouble:
		return "number"
	case v1.TypeBoolean:
		return "boolean"
	}
	return "string"
}

// registerJSONSchema registers the JSON Schema of cols under subject and returns its id.
func registerJSONSchema(ctx context.Context, cl *sr.Client, subject string, cols v1.Columns) (int, error) {
	return register(ctx, cl, subject, sr.Schema{Schema: jsonSchemaFor(subject, cols), Type: sr.TypeJSON}, func(_ context.Context, latest, _ string) (string, string) {
		return jsonSchemaBreak(latest, cols)
	})
}

// jsonSchemaBreak finds the first column whose property in the old schema has none of the
// column's JSON types: the field by which the new schema changed a type.
func jsonSchemaBreak(oldText string, cols v1.Columns) (field, reason string) {
	props, err := jsonSchemaProperties(oldText)
	if err != nil {
		return "", ""
	}
	for _, c := range cols {
		types, ok := props[c.Name]
		if ok && len(types) > 0 && !slices.Contains(types, jsonType(c.Type)) &&
			!(c.Type == v1.TypeDouble && slices.Contains(types, "integer")) {
			return c.Name, fmt.Sprintf("changed from %v to %s", types, jsonType(c.Type))
		}
	}
	return "", ""
}

// jsonSchemaProperties returns the types of each top-level property of a JSON Schema
// object (nil for a property without a type).
func jsonSchemaProperties(text string) (map[string][]string, error) {
	var s struct {
		Properties map[string]struct {
			Type json.RawMessage `json:"type"`
		} `json:"properties"`
	}
	if err := json.Unmarshal([]byte(text), &s); err != nil {
		return nil, err
	}
	out := make(map[string][]string, len(s.Properties))
	for name, p := range s.Properties {
		var one string
		var many []string
		switch {
		case len(p.Type) == 0:
		case json.Unmarshal(p.Type, &one) == nil:
			many = []string{one}
		default:
			_ = json.Unmarshal(p.Type, &many)
		}
		out[name] = many
	}
	return out, nil
}

// jsonSchemaFits checks that a JSON Schema has a property per column of a type the column
// can read (the start guard's and a pinned version's check).
func jsonSchemaFits(text string, cols v1.Columns) error {
	props, err := jsonSchemaProperties(text)
	if err != nil {
		return fmt.Errorf("parse: %w", err)
	}
	var errs []error
	for _, c := range cols {
		types, ok := props[c.Name]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("column %s: no property %s", c.Name, c.Name))
		case len(types) == 0:
		case slices.Contains(types, jsonType(c.Type)), c.Type == v1.TypeDouble && slices.Contains(types, "integer"):
		default:
			errs = append(errs, fmt.Errorf("column %s (%s): property %s is %v", c.Name, c.Type, c.Name, types))
		}
	}
	return errors.Join(errs...)
}

// jsonSchemaEncoder encodes rows as JSON objects (the json format's encoding) after the wire
// header of schema id.
type jsonSchemaEncoder struct {
	prefix []byte
	cols   v1.Columns
	rows   []engine.Row // one row, reused
}

func newJSONSchemaEncoder(id int, cols v1.Columns) (*jsonSchemaEncoder, error) {
	var h sr.ConfluentHeader
	prefix, err := h.AppendEncode(nil, id, nil)
	if err != nil {
		return nil, err
	}
	return &jsonSchemaEncoder{prefix: prefix, cols: cols, rows: make([]engine.Row, 1)}, nil
}

func (e *jsonSchemaEncoder) append(b []byte, row []any) ([]byte, error) {
	b = append(b, e.prefix...)
	e.rows[0] = row
	b, err := codec.AppendJSON(b, e.cols, e.rows)
	if err != nil {
		return nil, err
	}
	return b[:len(b)-1], nil // AppendJSON ends each row with a newline
}
