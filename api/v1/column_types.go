package v1

import "slices"

// Column is a named, typed column of the rows that flow through a query.
type Column struct {
	// Name is how CEL expressions and later steps refer to the column: letters, digits and
	// underscores, not starting with a digit, and not a CEL reserved word.
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_]*$`
	// +kubebuilder:validation:MaxLength=128
	Name string `json:"name"`
	// Type is one of string, long, double, boolean, timestamp.
	Type ColumnType `json:"type"`
}

// ColumnType is the type of a column's values.
// +kubebuilder:validation:Enum=string;long;double;boolean;timestamp
type ColumnType string

// Column types. In CEL a long is an int, a boolean a bool and a timestamp a
// google.protobuf.Timestamp; timestamps are UTC instants.
const (
	TypeString    ColumnType = "string"
	TypeLong      ColumnType = "long"
	TypeDouble    ColumnType = "double"
	TypeBoolean   ColumnType = "boolean"
	TypeTimestamp ColumnType = "timestamp"
)

// ColumnTypes lists every column type.
func ColumnTypes() []ColumnType {
	return []ColumnType{TypeString, TypeLong, TypeDouble, TypeBoolean, TypeTimestamp}
}

// Valid reports whether t is one of the column types.
func (t ColumnType) Valid() bool { return slices.Contains(ColumnTypes(), t) }

// Numeric reports whether t is long or double.
func (t ColumnType) Numeric() bool { return t == TypeLong || t == TypeDouble }

// Columns is an ordered list of columns with unique names.
type Columns []Column

// Lookup returns the column named name.
func (cs Columns) Lookup(name string) (Column, bool) {
	for _, c := range cs {
		if c.Name == name {
			return c, true
		}
	}
	return Column{}, false
}

// Names returns the columns' names, in order.
func (cs Columns) Names() []string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Name
	}
	return names
}

// Names of the columns that some sources and steps yield.
const (
	// Rate source.
	ColumnRateTimestamp = "timestamp"
	ColumnRateValue     = "value"
	// Kafka source with format raw.
	ColumnKafkaValue = "value"
	// Kafka metadata, yielded by every Kafka source after its other columns.
	ColumnKafkaKey       = "_key"
	ColumnKafkaTopic     = "_topic"
	ColumnKafkaPartition = "_partition"
	ColumnKafkaOffset    = "_offset"
	ColumnKafkaTimestamp = "_timestamp"
	// Window group keys of an aggregate.
	ColumnWindowStart = "window_start"
	ColumnWindowEnd   = "window_end"
)

// RateColumns returns the columns of a rate source: timestamp (timestamp) and value (long).
func RateColumns() Columns {
	return Columns{{Name: ColumnRateTimestamp, Type: TypeTimestamp}, {Name: ColumnRateValue, Type: TypeLong}}
}

// KafkaMetadataColumns returns the metadata columns every Kafka source yields after the
// columns of its records.
func KafkaMetadataColumns() Columns {
	return Columns{
		{Name: ColumnKafkaKey, Type: TypeString},
		{Name: ColumnKafkaTopic, Type: TypeString},
		{Name: ColumnKafkaPartition, Type: TypeLong},
		{Name: ColumnKafkaOffset, Type: TypeLong},
		{Name: ColumnKafkaTimestamp, Type: TypeTimestamp},
	}
}
