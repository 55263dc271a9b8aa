package sparkckpt

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// OperatorMetadata is what state/<op>/_metadata records of a stateful operator.
type OperatorMetadata struct {
	Version int `json:"version"`
	// ID is the operator's id (its folder under state/); Name its kind as Spark names it
	// (stateStoreSave, dedupe, symmetricHashJoin, sessionWindowStateStoreSaveExec,
	// transformWithStateExec, …).
	ID     int64       `json:"id"`
	Name   string      `json:"name"`
	Stores []StoreInfo `json:"stores"`
	// Properties (v2) is the operator's own JSON (transformWithState: timeMode, outputMode,
	// state variables).
	Properties json.RawMessage `json:"properties,omitempty"`
}

// StoreInfo describes one state store of an operator.
type StoreInfo struct {
	Name             string `json:"storeName"`
	NumColsPrefixKey int    `json:"numColsPrefixKey"`
	NumPartitions    int    `json:"numPartitions"`
	// SchemaPath (v2) is where the store's schema file is, as an absolute URI.
	SchemaPath string `json:"stateSchemaFilePath,omitempty"`
}

type operatorMetadataJSON struct {
	OperatorInfo struct {
		OperatorID   int64  `json:"operatorId"`
		OperatorName string `json:"operatorName"`
	} `json:"operatorInfo"`
	StateStoreInfo         []StoreInfo `json:"stateStoreInfo"`
	OperatorPropertiesJSON string      `json:"operatorPropertiesJson"`
}

// ParseOperatorMetadata reads state/<op>/_metadata/metadata (v1) or _metadata/v2/<batch>.
func ParseOperatorMetadata(file string, data []byte) (OperatorMetadata, error) {
	v, rest, err := versionLine(file, "operator metadata", data, OperatorMetadataVersion)
	if err != nil {
		return OperatorMetadata{}, err
	}
	var m operatorMetadataJSON
	if err := json.Unmarshal(bytes.TrimSpace(rest), &m); err != nil {
		return OperatorMetadata{}, fmt.Errorf("operator metadata %s: %w", file, err)
	}
	om := OperatorMetadata{Version: v, ID: m.OperatorInfo.OperatorID, Name: m.OperatorInfo.OperatorName, Stores: m.StateStoreInfo}
	if m.OperatorPropertiesJSON != "" {
		om.Properties = json.RawMessage(m.OperatorPropertiesJSON)
	}
	return om, nil
}

// StateSchema is a state store's schema file: one column family for v1 and v2, any number
// for v3.
type StateSchema struct {
	Version  int            `json:"version"`
	Families []ColumnFamily `json:"families"`
}

// ColumnFamily is the key and value schema of one column family of a state store ("default"
// for the operators that have one).
type ColumnFamily struct {
	Name  string     `json:"name"`
	Key   StructType `json:"key"`
	Value StructType `json:"value"`
	// KeyEncoder (v3) is the key encoder's spec, as Spark wrote it.
	KeyEncoder json.RawMessage `json:"keyEncoder,omitempty"`
}

// StructType is a Spark SQL struct type as its JSON form has it.
type StructType struct {
	Fields []StructField `json:"fields"`
}

// StructField is one field of a StructType. Type is Spark's JSON of the field's type: a
// string for a primitive ("long", "string", "timestamp", "decimal(38,18)"), an object for a
// struct, array or map.
type StructField struct {
	Name     string          `json:"name"`
	Type     json.RawMessage `json:"type"`
	Nullable bool            `json:"nullable"`
}

// TypeName is the field's type as Spark prints it in its errors: long, string,
// struct<start:timestamp,end:timestamp>, array<…>.
func (f StructField) TypeName() string { return typeName(f.Type) }

func typeName(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var t struct {
		Type         string          `json:"type"`
		Fields       []StructField   `json:"fields"`
		ElementType  json.RawMessage `json:"elementType"`
		KeyType      json.RawMessage `json:"keyType"`
		ValueType    json.RawMessage `json:"valueType"`
		ContainsNull bool            `json:"containsNull"`
	}
	if json.Unmarshal(raw, &t) != nil {
		return string(raw)
	}
	switch t.Type {
	case "struct":
		var b bytes.Buffer
		b.WriteString("struct<")
		for i, f := range t.Fields {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(f.Name + ":" + f.TypeName())
		}
		b.WriteByte('>')
		return b.String()
	case "array":
		return "array<" + typeName(t.ElementType) + ">"
	case "map":
		return "map<" + typeName(t.KeyType) + "," + typeName(t.ValueType) + ">"
	}
	return t.Type
}

// Names returns the fields' names.
func (s StructType) Names() []string {
	out := make([]string, len(s.Fields))
	for i, f := range s.Fields {
		out[i] = f.Name
	}
	return out
}

// ParseStateSchema reads a state schema file: writeUTF("v<N>"), then for v1 the key and
// value schemas' JSON as one writeUTF each, for v2 each as an int count of writeUTF chunks,
// and for v3 an int count of column families, each a writeUTF name and four chunked JSONs
// (key schema, value schema, key encoder spec, user key schema).
func ParseStateSchema(file string, data []byte) (StateSchema, error) {
	in := &dataInput{b: data}
	vs, err := in.readUTF()
	if err != nil {
		return StateSchema{}, fmt.Errorf("state schema %s: version: %w", file, err)
	}
	v, err := parseVersion(vs)
	if err != nil {
		return StateSchema{}, fmt.Errorf("state schema %s: %w", file, err)
	}
	if v > StateSchemaVersion {
		return StateSchema{}, &UnsupportedVersionError{File: file, Kind: "state schema", Found: v, Newest: StateSchemaVersion}
	}
	s := StateSchema{Version: v}
	fail := func(what string, err error) (StateSchema, error) {
		return StateSchema{}, fmt.Errorf("state schema %s (v%d): %s: %w", file, v, what, err)
	}
	switch v {
	case 1, 2:
		read := in.readChunkedUTF
		if v == 1 {
			read = in.readUTF
		}
		cf := ColumnFamily{Name: "default"}
		for _, part := range []struct {
			what string
			to   *StructType
		}{{"key schema", &cf.Key}, {"value schema", &cf.Value}} {
			js, err := read()
			if err != nil {
				return fail(part.what, err)
			}
			if err := json.Unmarshal([]byte(js), part.to); err != nil {
				return fail(part.what, err)
			}
		}
		s.Families = []ColumnFamily{cf}
	case 3:
		n, err := in.readInt()
		if err != nil {
			return fail("column family count", err)
		}
		for i := range n {
			var cf ColumnFamily
			if cf.Name, err = in.readUTF(); err != nil {
				return fail(fmt.Sprintf("column family %d name", i), err)
			}
			var parts [4]string
			for k := range parts {
				if parts[k], err = in.readChunkedUTF(); err != nil {
					return fail(fmt.Sprintf("column family %s", cf.Name), err)
				}
			}
			if err := json.Unmarshal([]byte(parts[0]), &cf.Key); err != nil {
				return fail("column family "+cf.Name+" key schema", err)
			}
			if err := json.Unmarshal([]byte(parts[1]), &cf.Value); err != nil {
				return fail("column family "+cf.Name+" value schema", err)
			}
			cf.KeyEncoder = json.RawMessage(parts[2])
			s.Families = append(s.Families, cf)
		}
	}
	return s, nil
}
