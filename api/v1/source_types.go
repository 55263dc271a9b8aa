package v1

import "slices"

// Source is one named input of a query. Exactly one of Kafka, Files, Delta, Rate and Nexmark is set.
// +kubebuilder:validation:XValidation:rule="[has(self.kafka), has(self.files), has(self.delta), has(self.rate), has(self.nexmark)].filter(x, x).size() == 1",message="exactly one of kafka, files, delta, rate, nexmark must be set"
// +kubebuilder:validation:XValidation:rule="!has(self.rate) || !has(self.schema)",message="a rate source takes no schema: it yields timestamp and value"
// +kubebuilder:validation:XValidation:rule="!has(self.nexmark) || !has(self.schema)",message="a nexmark source takes no schema: its table fixes its columns"
// +kubebuilder:validation:XValidation:rule="(has(self.onMalformed) && self.onMalformed == 'deadLetter') == has(self.deadLetterPath)",message="deadLetterPath is set exactly when onMalformed is deadLetter"
// +kubebuilder:validation:XValidation:rule="!has(self.delta) || !has(self.onMalformed) || self.onMalformed == 'fail'",message="a delta source takes only onMalformed: fail: it reads Parquet files written to the table's schema, and a file it cannot read stops the query"
type Source struct {
	// Name identifies the source in the checkpoint, which keys its offsets by it: lower-case
	// letters, digits, '-' and '_', starting and ending with a letter or digit (orders_eu), so
	// that it is one path segment; unique in the query. A new name is a new source, read from
	// its starting position.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-_a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// +optional
	Kafka *KafkaSource `json:"kafka,omitempty"`
	// +optional
	Files *FilesSource `json:"files,omitempty"`
	// +optional
	Delta *DeltaSource `json:"delta,omitempty"`
	// +optional
	Rate *RateSource `json:"rate,omitempty"`
	// +optional
	Nexmark *NexmarkSource `json:"nexmark,omitempty"`

	// Schema lists the columns read from each record. Required except for rate (which yields
	// timestamp and value), nexmark (whose table fixes its columns) and Kafka's raw format
	// (which yields value).
	// +optional
	Schema *Schema `json:"schema,omitempty"`

	// OnMalformed says what happens to a record that does not parse against the schema: fail
	// (default: the query stops, naming the file or partition and the position), skip (counted
	// in progress), or deadLetter (written as is to DeadLetterPath, and counted). A delta
	// source takes only fail: it reads Parquet files written to the table's schema.
	// +optional
	// +kubebuilder:default=fail
	OnMalformed MalformedPolicy `json:"onMalformed,omitempty"`

	// DeadLetterPath is the folder (local path, file:// or s3://) that receives malformed
	// records when OnMalformed is deadLetter.
	// +optional
	DeadLetterPath string `json:"deadLetterPath,omitempty"`
}

// SourceKind names the kind of a source, as its field is named in the spec.
type SourceKind string

// Source kinds.
const (
	SourceKafka   SourceKind = "kafka"
	SourceFiles   SourceKind = "files"
	SourceDelta   SourceKind = "delta"
	SourceRate    SourceKind = "rate"
	SourceNexmark SourceKind = "nexmark"
)

// Kinds returns the kinds that are set on s, in spec order; a valid source has exactly one.
func (s *Source) Kinds() []SourceKind {
	var kinds []SourceKind
	if s.Kafka != nil {
		kinds = append(kinds, SourceKafka)
	}
	if s.Files != nil {
		kinds = append(kinds, SourceFiles)
	}
	if s.Delta != nil {
		kinds = append(kinds, SourceDelta)
	}
	if s.Rate != nil {
		kinds = append(kinds, SourceRate)
	}
	if s.Nexmark != nil {
		kinds = append(kinds, SourceNexmark)
	}
	return kinds
}

// Kind returns the source's kind, or "" unless exactly one kind is set.
func (s *Source) Kind() SourceKind {
	if k := s.Kinds(); len(k) == 1 {
		return k[0]
	}
	return ""
}

// MalformedPolicy says what a source does with a record that does not parse.
// +kubebuilder:validation:Enum=fail;skip;deadLetter
type MalformedPolicy string

// Malformed-record policies.
const (
	MalformedFail       MalformedPolicy = "fail"
	MalformedSkip       MalformedPolicy = "skip"
	MalformedDeadLetter MalformedPolicy = "deadLetter"
)

// KafkaSource reads records from Kafka topics. Offsets in the checkpoint are the next offset to
// read per topic-partition. Besides the schema's columns (or value, for format raw) it yields the
// metadata columns _key (string), _topic (string), _partition (long), _offset (long) and
// _timestamp (timestamp).
// +kubebuilder:validation:XValidation:rule="has(self.topics) != has(self.topicPattern)",message="exactly one of topics, topicPattern must be set"
type KafkaSource struct {
	// BootstrapServers are host:port addresses of brokers of one cluster.
	// +kubebuilder:validation:MinItems=1
	BootstrapServers []string `json:"bootstrapServers"`
	// Topics to read. Exactly one of Topics and TopicPattern is set.
	// +optional
	Topics []string `json:"topics,omitempty"`
	// TopicPattern is a regular expression (RE2 syntax) matched against whole topic names.
	// +optional
	TopicPattern string `json:"topicPattern,omitempty"`
	// StartingOffsets is where a source new to the checkpoint starts: earliest, latest (default),
	// or Spark's JSON form per partition, {"topic":{"0":12,"1":-2}} (-2 earliest, -1 latest).
	// A source already in the checkpoint continues from its offsets; partitions that appear
	// later start at earliest.
	// +optional
	// +kubebuilder:default=latest
	StartingOffsets string `json:"startingOffsets,omitempty"`
	// MaxOffsetsPerTrigger caps the records of one batch, split across partitions in proportion
	// to their backlog. Omitted: no cap.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxOffsetsPerTrigger *int64 `json:"maxOffsetsPerTrigger,omitempty"`
	// FailOnDataLoss stops the query when records it should have read are gone (retention,
	// deleted records or partitions). Default true. False: warn, count, continue from the earliest.
	// +optional
	// +kubebuilder:default=true
	FailOnDataLoss *bool `json:"failOnDataLoss,omitempty"`
	// Format of the record values: json (default), csv (columns in schema order, no header),
	// raw (the value as a string column named value; no schema) or avro (the Schema Registry
	// wire format: each record decoded with its writer schema, fetched by id from
	// schemaRegistry, and resolved to the schema's columns; see docs/kafka.md) or protobuf (the
	// same with Protobuf schemas and message indexes) or jsonSchema (JSON objects in the wire
	// format, their schema ids checked with the registry, read like json).
	// +optional
	// +kubebuilder:default=json
	// +kubebuilder:validation:Enum=json;csv;raw;avro;protobuf;jsonSchema
	Format KafkaFormat `json:"format,omitempty"`
	// KeyFormat is how record keys are read into the _key column: string (default: the key's
	// bytes as a string), json (a JSON string as its text, any other JSON value as compact
	// JSON text), avro or protobuf (the Schema Registry wire format, each key decoded with its
	// writer schema by id: a primitive as its text, a record or message as JSON text, a
	// message of one field as that field's text; see docs/kafka.md). A key that cannot be
	// decoded makes the record malformed.
	// +optional
	// +kubebuilder:validation:Enum=string;json;avro;protobuf
	KeyFormat KafkaFormat `json:"keyFormat,omitempty"`
	// SchemaRegistry is the Confluent-compatible Schema Registry of formats avro, protobuf and jsonSchema
	// (of the values or the keys); required with them, not allowed otherwise.
	// +optional
	SchemaRegistry *SchemaRegistry `json:"schemaRegistry,omitempty"`
	// SASL authenticates to the brokers. Omitted: no authentication.
	// +optional
	SASL *KafkaSASL `json:"sasl,omitempty"`
	// TLS encrypts the connection to the brokers. Omitted: plain text.
	// +optional
	TLS *KafkaTLS `json:"tls,omitempty"`
}

// StartingOffsets values besides the per-partition JSON form.
const (
	OffsetsEarliest = "earliest"
	OffsetsLatest   = "latest"
)

// KafkaFormat is the encoding of Kafka record values.
type KafkaFormat string

// Kafka value formats.
const (
	KafkaJSON KafkaFormat = "json"
	KafkaCSV  KafkaFormat = "csv"
	KafkaRaw  KafkaFormat = "raw"
	// KafkaAvro is Avro in the Schema Registry wire format: a zero byte, the writer schema's
	// id (4 bytes, big-endian), the Avro binary encoding.
	KafkaAvro KafkaFormat = "avro"
	// KafkaProtobuf is Protobuf in the Schema Registry wire format: a zero byte, the schema's
	// id, the message indexes (which message of the schema's file), the Protobuf encoding.
	KafkaProtobuf KafkaFormat = "protobuf"
	// KafkaJSONSchema is a JSON object in the Schema Registry wire format: a zero byte, the
	// id of its JSON Schema, the JSON text (Confluent's JSON Schema serializer).
	KafkaJSONSchema KafkaFormat = "jsonSchema"
	// KafkaKeyString is the default key format: the key's bytes are a string (keys only).
	KafkaKeyString KafkaFormat = "string"
)

// UsesSchemaRegistry reports whether records of format f carry Schema Registry ids.
func (f KafkaFormat) UsesSchemaRegistry() bool {
	return f == KafkaAvro || f == KafkaProtobuf || f == KafkaJSONSchema
}

// SchemaRegistry reaches a Schema Registry with the Confluent REST API (Confluent's, Apicurio's
// ccompat API, Redpanda's, Karapace). Credentials never sit in the spec: the engine reads them
// from the environment variables named by UsernameEnv and PasswordEnv, as for SASL.
type SchemaRegistry struct {
	// URL is the API's base URL, http or https (for Apicurio, ending in /apis/ccompat/v6 or v7).
	// +kubebuilder:validation:Pattern=`^https?://`
	URL string `json:"url"`
	// Subject is the subject of the sink's value schema. Default <topic>-value (the topic name
	// strategy). A source decodes by schema id and reads Subject only to check its columns
	// at start (default <first topic>-value).
	// +optional
	Subject string `json:"subject,omitempty"`
	// SecretName names a Secret in the query's namespace with the keys username and password,
	// for HTTP basic authentication. Omitted (and no variables set): no authentication.
	// +optional
	SecretName string `json:"secretName,omitempty"`
	// UsernameEnv names the variable holding the user name. Default
	// LOCKSTEP_SCHEMA_REGISTRY_USERNAME; unset or empty: no authentication.
	// +optional
	// +kubebuilder:default=LOCKSTEP_SCHEMA_REGISTRY_USERNAME
	UsernameEnv string `json:"usernameEnv,omitempty"`
	// PasswordEnv names the variable holding the password. Default LOCKSTEP_SCHEMA_REGISTRY_PASSWORD.
	// +optional
	// +kubebuilder:default=LOCKSTEP_SCHEMA_REGISTRY_PASSWORD
	PasswordEnv string `json:"passwordEnv,omitempty"`
	// Version pins a sink's value schema to this version of Subject, registered beforehand: the
	// sink encodes with it instead of registering a schema derived from its columns. Each output
	// column fills the field of its name (which must hold the column's type); a field without a
	// column must have a default. Omitted: the derived schema. Not allowed on a source, which
	// reads each record by the schema id it carries.
	// +optional
	// +kubebuilder:validation:Minimum=1
	Version *int32 `json:"version,omitempty"`
	// CAFile is a PEM bundle of the CAs to trust for an https URL. Omitted: the system's roots.
	// +optional
	CAFile string `json:"caFile,omitempty"`
	// CASecretName names a Secret in the query's namespace with the key ca.crt, mounted as CAFile.
	// +optional
	CASecretName string `json:"caSecretName,omitempty"`
}

// Default environment variables of Schema Registry credentials.
const (
	DefaultSchemaRegistryUsernameEnv = "LOCKSTEP_SCHEMA_REGISTRY_USERNAME"
	DefaultSchemaRegistryPasswordEnv = "LOCKSTEP_SCHEMA_REGISTRY_PASSWORD"
)

// KafkaSASL authenticates to Kafka with SASL. Credentials never sit in the spec: the engine
// reads them from the environment variables named by UsernameEnv and PasswordEnv. On
// Kubernetes the controller fills those variables from the Secret named by SecretName.
type KafkaSASL struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
	Mechanism SASLMechanism `json:"mechanism"`
	// SecretName names a Secret in the query's namespace with the keys username and password.
	// +optional
	SecretName string `json:"secretName,omitempty"`
	// UsernameEnv names the variable holding the user name. Default LOCKSTEP_KAFKA_USERNAME.
	// +optional
	// +kubebuilder:default=LOCKSTEP_KAFKA_USERNAME
	UsernameEnv string `json:"usernameEnv,omitempty"`
	// PasswordEnv names the variable holding the password. Default LOCKSTEP_KAFKA_PASSWORD.
	// +optional
	// +kubebuilder:default=LOCKSTEP_KAFKA_PASSWORD
	PasswordEnv string `json:"passwordEnv,omitempty"`
}

// Default environment variables of Kafka SASL credentials.
const (
	DefaultKafkaUsernameEnv = "LOCKSTEP_KAFKA_USERNAME"
	DefaultKafkaPasswordEnv = "LOCKSTEP_KAFKA_PASSWORD"
)

// SASLMechanism is a Kafka SASL mechanism.
// +kubebuilder:validation:Enum=PLAIN;SCRAM-SHA-256;SCRAM-SHA-512
type SASLMechanism string

// SASL mechanisms.
const (
	SASLPlain       SASLMechanism = "PLAIN"
	SASLScramSHA256 SASLMechanism = "SCRAM-SHA-256"
	SASLScramSHA512 SASLMechanism = "SCRAM-SHA-512"
)

// KafkaTLS encrypts connections to Kafka. Certificates come from files in the engine's file
// system; on Kubernetes the controller mounts the named Secrets there.
type KafkaTLS struct {
	// CAFile is a PEM bundle of the CAs to trust. Omitted: the system's roots.
	// +optional
	CAFile string `json:"caFile,omitempty"`
	// CASecretName names a Secret in the query's namespace with the key ca.crt, mounted as CAFile.
	// +optional
	CASecretName string `json:"caSecretName,omitempty"`
	// CertFile and KeyFile are the client certificate and key (PEM) for mutual TLS.
	// +optional
	CertFile string `json:"certFile,omitempty"`
	// KeyFile is the client's private key (PEM) for mutual TLS, set together with CertFile.
	// +optional
	KeyFile string `json:"keyFile,omitempty"`
	// ClientSecretName names a kubernetes.io/tls Secret in the query's namespace, mounted as
	// CertFile and KeyFile.
	// +optional
	ClientSecretName string `json:"clientSecretName,omitempty"`
	// ServerName overrides the name checked in the brokers' certificates.
	// +optional
	ServerName string `json:"serverName,omitempty"`
	// InsecureSkipVerify turns off certificate verification. For tests only.
	// +optional
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
}

// FilesSource reads new files under a folder, oldest first by modification time, then by
// name. A seen-files log in the checkpoint remembers which files were read.
type FilesSource struct {
	// Path is the folder to read: a local path, a file:// URL or an s3://bucket/prefix.
	// +kubebuilder:validation:MinLength=1
	Path string `json:"path"`
	// S3 reaches an s3:// path on another server or account than the checkpoint's.
	// +optional
	S3 *S3Connection `json:"s3,omitempty"`
	// Format of the files: json (one object per line), csv (columns in schema order, no
	// header) or parquet.
	// +kubebuilder:validation:Enum=json;csv;parquet
	Format FileFormat `json:"format"`
	// MaxFilesPerTrigger caps the files of one batch. Omitted: no cap.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxFilesPerTrigger *int32 `json:"maxFilesPerTrigger,omitempty"`
}

// FileFormat is the encoding of files read or written.
type FileFormat string

// File formats.
const (
	FormatJSON    FileFormat = "json"
	FormatCSV     FileFormat = "csv"
	FormatParquet FileFormat = "parquet"
)

// DeltaSource streams the data-changing commits of a Delta table, in order. Offsets are
// (table version, index in the commit).
type DeltaSource struct {
	// Path is the table's folder: a local path, a file:// URL or an s3://bucket/prefix.
	// +kubebuilder:validation:MinLength=1
	Path string `json:"path"`
	// S3 reaches an s3:// path on another server or account than the checkpoint's.
	// +optional
	S3 *S3Connection `json:"s3,omitempty"`
	// MaxFilesPerTrigger caps the data files of one batch. Omitted: no cap.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxFilesPerTrigger *int32 `json:"maxFilesPerTrigger,omitempty"`
	// StartingVersion is the first table version a source new to the checkpoint reads.
	// Omitted: the table's current content, then every later commit.
	// +optional
	// +kubebuilder:validation:Minimum=0
	StartingVersion *int64 `json:"startingVersion,omitempty"`
	// IgnoreChanges lets commits that remove or rewrite data pass (their added files are read
	// again); otherwise such a commit stops the query. Default false.
	// +optional
	IgnoreChanges bool `json:"ignoreChanges,omitempty"`
	// FailOnDataLoss stops the query when log files it needs were removed by retention.
	// Default true. False: warn and continue at the oldest version still there.
	// +optional
	// +kubebuilder:default=true
	FailOnDataLoss *bool `json:"failOnDataLoss,omitempty"`
}

// RateSource generates rows at a fixed rate, for demos and benchmarks, like Spark's rate
// source: timestamp (timestamp) and value (long, counting from 0). Values are deterministic.
type RateSource struct {
	// RowsPerSecond is the number of rows generated per second. Default 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	RowsPerSecond int64 `json:"rowsPerSecond,omitempty"`
}

// NexmarkSource generates the events of the Nexmark benchmark, an online auction: people,
// auctions and bids in the proportions 1:3:46, with ids, prices and timestamps by the rules of
// its reference generator (Apache Beam's and Flink's). The events are a pure function of the
// event number and the settings, and the offsets are event numbers, so a replayed batch
// yields the same rows. The source yields the events of one Table (see NexmarkColumns); the
// events of the other kinds still take their numbers, so ids and timestamps are those of the
// whole stream.
type NexmarkSource struct {
	// Table is the kind of event yielded: bid (default), auction or person.
	// +optional
	// +kubebuilder:default=bid
	Table NexmarkTable `json:"table,omitempty"`
	// EventsPerSecond is the stream's rate in event time: event n is stamped
	// startTime + n/eventsPerSecond. Unless AsFastAsPossible is set it is also the pace of
	// generation: an event is generated when its time has come since the run started (time
	// the query was stopped is not made up). Default 10000, Nexmark's.
	// +optional
	// +kubebuilder:default=10000
	// +kubebuilder:validation:Minimum=1
	EventsPerSecond int64 `json:"eventsPerSecond,omitempty"`
	// AsFastAsPossible generates events without waiting for them to be due: each batch takes
	// MaxEventsPerTrigger events, and event time runs ahead of the clock. For benchmarks.
	// +optional
	AsFastAsPossible bool `json:"asFastAsPossible,omitempty"`
	// MaxEventsPerTrigger caps the events of one batch; events of every kind count, and the
	// batch's rows are the events of Table among them. Default 100000.
	// +optional
	// +kubebuilder:default=100000
	// +kubebuilder:validation:Minimum=1
	MaxEventsPerTrigger int64 `json:"maxEventsPerTrigger,omitempty"`
	// NumEvents ends the stream after this many events (of every kind). Omitted: unbounded.
	// +optional
	// +kubebuilder:validation:Minimum=1
	NumEvents *int64 `json:"numEvents,omitempty"`
	// Seed selects one of the streams the generator can make; the same seed yields the same
	// events. Default 0.
	// +optional
	Seed int64 `json:"seed,omitempty"`
	// StartTime is the timestamp of event 0, in RFC 3339. Omitted: the time of the source's
	// first batch, which its offsets then carry.
	// +optional
	StartTime string `json:"startTime,omitempty"`
}

// NexmarkTable is the kind of Nexmark event a nexmark source yields.
// +kubebuilder:validation:Enum=bid;auction;person
type NexmarkTable string

// Nexmark tables.
const (
	NexmarkBid     NexmarkTable = "bid"
	NexmarkAuction NexmarkTable = "auction"
	NexmarkPerson  NexmarkTable = "person"
)

// Schema lists the columns of a source's records, in order.
type Schema struct {
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +listType=map
	// +listMapKey=name
	Columns Columns `json:"columns"`
}

// Columns returns the columns the source yields: its schema's columns, rate's timestamp and
// value, a nexmark table's columns, or Kafka raw's value, followed for Kafka by the metadata columns. It reports false
// when they cannot be known because the source is invalid (no kind, or no schema).
func (s *Source) Columns() (Columns, bool) {
	switch s.Kind() {
	case SourceRate:
		return RateColumns(), true
	case SourceNexmark:
		return NexmarkColumns(s.Nexmark.Table), true
	case SourceKafka:
		if s.Kafka.Format == KafkaRaw {
			return append(Columns{{Name: ColumnKafkaValue, Type: TypeString}}, KafkaMetadataColumns()...), true
		}
		if s.Schema == nil {
			return nil, false
		}
		return append(slices.Clone(s.Schema.Columns), KafkaMetadataColumns()...), true
	case SourceFiles, SourceDelta:
		if s.Schema == nil {
			return nil, false
		}
		return slices.Clone(s.Schema.Columns), true
	}
	return nil, false
}
