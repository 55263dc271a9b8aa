package delta

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
)

// ErrSchemaMismatch means rows do not fit the table: a column changed type,
// or the partition columns differ. Errors wrapping it are *SchemaError.
var ErrSchemaMismatch = errors.New("schema does not match the delta table")

// SchemaError tells which column does not fit and why.
type SchemaError struct {
	Table     string // the table's location
	Column    string
	TableType string // what the table has: a type, or another spelling of the name
	QueryType string // what the query's output has
	Reason    string // what to do about it
}

func (e *SchemaError) Error() string {
	return fmt.Sprintf("delta table %s: column %q is %s in the table but %s in the query output: %s",
		e.Table, e.Column, e.TableType, e.QueryType, e.Reason)
}

func (e *SchemaError) Unwrap() error { return ErrSchemaMismatch }

// deltaType maps a Lockstep column type to a Delta primitive type name.
func deltaType(t v1.ColumnType) (string, error) {
	switch t {
	case v1.TypeString, v1.TypeLong, v1.TypeDouble, v1.TypeBoolean, v1.TypeTimestamp:
		return string(t), nil // the names coincide
	}
	return "", fmt.Errorf("column type %q has no delta type", t)
}

// columnType maps a Delta primitive type to a Lockstep column type. Narrower
// integers and floats widen (a reader may), other types are refused.
func columnType(t string) (v1.ColumnType, error) {
	switch t {
	case "string", "long", "double", "boolean", "timestamp":
		return v1.ColumnType(t), nil
	case "integer", "short", "byte":
		return v1.TypeLong, nil
	case "float":
		return v1.TypeDouble, nil
	}
	return "", fmt.Errorf("delta type %q is not supported (want string, long, double, boolean or timestamp)", t)
}

type schemaJSON struct {
	Type   string        `json:"type"`
	Fields []schemaField `json:"fields"`
}

type schemaField struct {
	Name     string          `json:"name"`
	Type     json.RawMessage `json:"type"`
	Nullable bool            `json:"nullable"`
	Metadata map[string]any  `json:"metadata"`
}

// SchemaString renders columns as a Delta schema (a JSON struct type); every
// column is nullable.
func SchemaString(cols v1.Columns) (string, error) {
	s := schemaJSON{Type: "struct", Fields: make([]schemaField, 0, len(cols))}
	for _, c := range cols {
		dt, err := deltaType(c.Type)
		if err != nil {
			return "", fmt.Errorf("column %q: %w", c.Name, err)
		}
		typ, _ := json.Marshal(dt)
		s.Fields = append(s.Fields, schemaField{Name: c.Name, Type: typ, Nullable: true, Metadata: map[string]any{}})
	}
	b, err := json.Marshal(s)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// ParseSchema reads a Delta schema string into columns. Nested types are
// refused.
func ParseSchema(schema string) (v1.Columns, error) {
	var s schemaJSON
	if err := json.Unmarshal([]byte(schema), &s); err != nil {
		return nil, fmt.Errorf("parse delta schema: %w", err)
	}
	if s.Type != "struct" {
		return nil, fmt.Errorf("parse delta schema: type %q, want struct", s.Type)
	}
	cols := make(v1.Columns, 0, len(s.Fields))
	for _, f := range s.Fields {
		var name string
		if err := json.Unmarshal(f.Type, &name); err != nil {
			return nil, fmt.Errorf("delta column %q: nested types are not supported", f.Name)
		}
		t, err := columnType(name)
		if err != nil {
			return nil, fmt.Errorf("delta column %q: %w", f.Name, err)
		}
		cols = append(cols, v1.Column{Name: f.Name, Type: t})
	}
	return cols, nil
}

// mergeColumns returns the table's columns followed by the query's new ones.
// added reports whether there were any. A column whose type differs is a
// *SchemaError. Names compare case-insensitively, as Delta's do.
func mergeColumns(location string, table, query v1.Columns, tableTypes map[string]string) (merged v1.Columns, added bool, err error) {
	merged = append(v1.Columns(nil), table...)
	for _, q := range query {
		i := indexFold(merged, q.Name)
		if i < 0 {
			merged = append(merged, q)
			added = true
			continue
		}
		t := merged[i]
		if t.Name != q.Name {
			return nil, false, &SchemaError{Table: location, Column: q.Name, TableType: "named " + t.Name, QueryType: "named " + q.Name,
				Reason: "delta column names are case-insensitive; rename the output column to match the table"}
		}
		if dt := tableTypes[t.Name]; dt != "" && dt != string(q.Type) || t.Type != q.Type {
			shown := tableTypes[t.Name]
			if shown == "" {
				shown = string(t.Type)
			}
			return nil, false, &SchemaError{Table: location, Column: q.Name, TableType: shown, QueryType: string(q.Type),
				Reason: "a column's type cannot change; cast it back in a select step, or write to a new table"}
		}
	}
	return merged, added, nil
}

// rawTypes returns each top-level column's Delta type name as written in
// the schema, so that an integer column is not taken for a long one when
// writing.
func rawTypes(schema string) map[string]string {
	var s schemaJSON
	if json.Unmarshal([]byte(schema), &s) != nil {
		return nil
	}
	m := make(map[string]string, len(s.Fields))
	for _, f := range s.Fields {
		var name string
		if json.Unmarshal(f.Type, &name) == nil {
			m[f.Name] = name
		}
	}
	return m
}

func indexFold(cols v1.Columns, name string) int {
	for i, c := range cols {
		if strings.EqualFold(c.Name, name) {
			return i
		}
	}
	return -1
}
