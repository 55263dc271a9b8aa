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

// NexmarkColumns returns the columns of a nexmark source's table (empty: bid), named as in
// Flink's Nexmark tables:
//
//	bid:     auction, bidder, price (long, in cents), channel, url, dateTime, extra
//	auction: id, itemName, description, initialBid, reserve, dateTime, expires, seller,
//	         category, extra
//	person:  id, name, emailAddress, creditCard, city, state, dateTime, extra
//
// Ids, prices and category are long; dateTime and expires timestamps; the rest strings.
func NexmarkColumns(t NexmarkTable) Columns {
	switch t {
	case NexmarkPerson:
		return Columns{
			{Name: "id", Type: TypeLong}, {Name: "name", Type: TypeString}, {Name: "emailAddress", Type: TypeString},
			{Name: "creditCard", Type: TypeString}, {Name: "city", Type: TypeString}, {Name: "state", Type: TypeString},
			{Name: "dateTime", Type: TypeTimestamp}, {Name: "extra", Type: TypeString},
		}
	case NexmarkAuction:
		return Columns{
			{Name: "id", Type: TypeLong}, {Name: "itemName", Type: TypeString}, {Name: "description", Type: TypeString},
			{Name: "initialBid", Type: TypeLong}, {Name: "reserve", Type: TypeLong}, {Name: "dateTime", Type: TypeTimestamp},
			{Name: "expires", Type: TypeTimestamp}, {Name: "seller", Type: TypeLong}, {Name: "category", Type: TypeLong},
			{Name: "extra", Type: TypeString},
		}
	}
	return Columns{
		{Name: "auction", Type: TypeLong}, {Name: "bidder", Type: TypeLong}, {Name: "price", Type: TypeLong},
		{Name: "channel", Type: TypeString}, {Name: "url", Type: TypeString}, {Name: "dateTime", Type: TypeTimestamp},
		{Name: "extra", Type: TypeString},
	}
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
