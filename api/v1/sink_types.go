package v1

// Sink is where a query's output rows go. Exactly one field is set.
// +kubebuilder:validation:XValidation:rule="[has(self.delta), has(self.files), has(self.kafka), has(self.postgres), has(self.webhook), has(self.console)].filter(x, x).size() == 1",message="exactly one of delta, files, kafka, postgres, webhook, console must be set"
type Sink struct {
	// Delta writes each batch to a Delta table in one commit (exactly-once). Output modes
	// append, update (a MERGE by the query's key) and complete.
	// +optional
	Delta *DeltaSink `json:"delta,omitempty"`
	// Files writes each batch as files and lists them in a manifest log in the output folder
	// (exactly-once). Output modes append and update (a changelog).
	// +optional
	Files *FilesSink `json:"files,omitempty"`
	// Kafka produces each row as a record (at-least-once; exactly-once with ExactlyOnce).
	// +optional
	Kafka *KafkaSink `json:"kafka,omitempty"`
	// Postgres writes each batch to a PostgreSQL table in one transaction with a progress row
	// (exactly-once). Output modes append, update (an upsert by key) and complete.
	// +optional
	Postgres *PostgresSink `json:"postgres,omitempty"`
	// Webhook POSTs each batch to a URL (at-least-once, with an idempotency key).
	// +optional
	Webhook *WebhookSink `json:"webhook,omitempty"`
	// Console prints rows (no guarantee: not fault tolerant).
	// +optional
	Console *ConsoleSink `json:"console,omitempty"`
}

// SinkKind names the kind of a sink, as its field is named in the spec.
type SinkKind string

// Sink kinds.
const (
	SinkDelta    SinkKind = "delta"
	SinkFiles    SinkKind = "files"
	SinkKafka    SinkKind = "kafka"
	SinkPostgres SinkKind = "postgres"
	SinkWebhook  SinkKind = "webhook"
	SinkConsole  SinkKind = "console"
)

// Kinds returns the kinds that are set on s, in spec order; a valid sink has exactly one.
func (s *Sink) Kinds() []SinkKind {
	var kinds []SinkKind
	if s.Delta != nil {
		kinds = append(kinds, SinkDelta)
	}
	if s.Files != nil {
		kinds = append(kinds, SinkFiles)
	}
	if s.Kafka != nil {
		kinds = append(kinds, SinkKafka)
	}
	if s.Postgres != nil {
		kinds = append(kinds, SinkPostgres)
	}
	if s.Webhook != nil {
		kinds = append(kinds, SinkWebhook)
	}
	if s.Console != nil {
		kinds = append(kinds, SinkConsole)
	}
	return kinds
}

// Kind returns the sink's kind, or "" unless exactly one kind is set.
func (s *Sink) Kind() SinkKind {
	if k := s.Kinds(); len(k) == 1 {
		return k[0]
	}
	return ""
}

// OutputModes returns the output modes the sink kind accepts (DESIGN §2): files append and
// update; delta, postgres, kafka, webhook and console all three.
func (k SinkKind) OutputModes() []OutputMode {
	switch k {
	case SinkFiles:
		return []OutputMode{OutputAppend, OutputUpdate}
	default:
		return OutputModes()
	}
}

// DeltaSink writes a Delta table. Each batch is one commit carrying txn(appId = query id,
// version = batch id), so a replayed batch is found and skipped.
type DeltaSink struct {
	// Path is the table's folder: a local path, a file:// URL or an s3://bucket/prefix.
	// +kubebuilder:validation:MinLength=1
	Path string `json:"path"`
	// S3 reaches an s3:// path on another server or account than the checkpoint's.
	// +optional
	S3 *S3Connection `json:"s3,omitempty"`
	// PartitionColumns are output columns the table is partitioned by, in order.
	// +optional
	// +listType=atomic
	PartitionColumns []string `json:"partitionColumns,omitempty"`
	// MergeKeys are the output columns that identify a row of the table in update mode: each
	// batch's rows replace the table's rows with the same key values (nulls equal) and add the
	// others. Omitted with an aggregation: its grouping keys (window_start and window_end for
	// a window). Required for update mode without an aggregation; with one, it must name the
	// grouping key columns.
	// +optional
	// +listType=atomic
	MergeKeys []string `json:"mergeKeys,omitempty"`
}

// PostgresSink writes a PostgreSQL table. Each batch is one transaction that also inserts the
// row (query id, batch id) into lockstep_batches, in the table's schema, so a replayed batch
// finds its row and writes nothing.
type PostgresSink struct {
	// Connection says where the connection string (a libpq URL or key=value DSN, with its TLS
	// settings such as sslmode and sslrootcert) comes from.
	Connection PostgresConnection `json:"connection"`
	// Table is the table written: name or schema.name (unquoted identifiers: lowercase letters,
	// digits and _).
	// +kubebuilder:validation:MinLength=1
	Table string `json:"table"`
	// KeyColumns are the output columns of the table's primary key, the conflict target of
	// update mode's upsert. Omitted with an aggregation: its grouping keys. Required for update
	// mode without an aggregation; with one, it must name the grouping key columns.
	// +optional
	// +listType=atomic
	KeyColumns []string `json:"keyColumns,omitempty"`
	// CreateTable creates the table (with the key columns as primary key) when it does not
	// exist. Default false: a missing table stops the query.
	// +optional
	CreateTable bool `json:"createTable,omitempty"`
}

// PostgresConnection names the source of a PostgreSQL connection string. Exactly one field
// is set.
type PostgresConnection struct {
	// SecretName names a Secret in the query's namespace whose key "dsn" holds the connection
	// string; the controller passes it to the engine as LOCKSTEP_SINK_POSTGRES_DSN.
	// +optional
	SecretName string `json:"secretName,omitempty"`
	// DSNEnv names the engine's environment variable holding the connection string (for
	// lockstep run, or a pod whose environment the platform sets).
	// +optional
	DSNEnv string `json:"dsnEnv,omitempty"`
}

// PostgresDSNEnv is the environment variable that carries the connection string of a
// Postgres sink whose connection names a Secret.
const PostgresDSNEnv = "LOCKSTEP_SINK_POSTGRES_DSN"

// PostgresDSNSecretKey is the key of the connection string in a Postgres sink's Secret.
const PostgresDSNSecretKey = "dsn"

// DSNEnvName returns the environment variable the engine reads the connection string from.
func (c PostgresConnection) DSNEnvName() string {
	if c.DSNEnv != "" {
		return c.DSNEnv
	}
	return PostgresDSNEnv
}

// FilesSink writes files into a folder with a manifest log (_lockstep_manifest) that lists
// the files of each committed batch; readers trust only the manifest.
type FilesSink struct {
	// Path is the output folder: a local path, a file:// URL or an s3://bucket/prefix.
	// +kubebuilder:validation:MinLength=1
	Path string `json:"path"`
	// S3 reaches an s3:// path on another server or account than the checkpoint's.
	// +optional
	S3 *S3Connection `json:"s3,omitempty"`
	// Format is parquet (default) or json (one object per line).
	// +optional
	// +kubebuilder:default=parquet
	// +kubebuilder:validation:Enum=parquet;json
	Format FileFormat `json:"format,omitempty"`
}

// KafkaSink produces each output row as one Kafka record whose value is the row.
type KafkaSink struct {
	// BootstrapServers are host:port addresses of brokers of one cluster.
	// +kubebuilder:validation:MinItems=1
	BootstrapServers []string `json:"bootstrapServers"`
	// Topic receives the records.
	// +kubebuilder:validation:MinLength=1
	Topic string `json:"topic"`
	// KeyColumn is an output column whose value becomes the record key, in KeyFormat; a null
	// value gives a record without a key. Omitted: records have no key.
	// +optional
	KeyColumn string `json:"keyColumn,omitempty"`
	// KeyFormat is how KeyColumn's value is written: string (default: its text), json (its
	// JSON value), avro (the Schema Registry wire format with a primitive schema of the
	// column's type) or protobuf (the wire format with a message of one optional field named
	// after the column), avro and protobuf registered under the subject <topic>-key before
	// the first record; see docs/kafka.md. Needs keyColumn.
	// +optional
	// +kubebuilder:validation:Enum=string;json;avro;protobuf
	KeyFormat KafkaFormat `json:"keyFormat,omitempty"`
	// Format of the record values: json (default) or avro (the Schema Registry wire format,
	// with a value schema derived from the output columns and registered under
	// schemaRegistry's subject before the first record; see docs/kafka.md) or protobuf (the
	// same with a proto3 message) or jsonSchema (the json encoding in the wire format, with a
	// JSON Schema derived from the output columns).
	// +optional
	// +kubebuilder:default=json
	// +kubebuilder:validation:Enum=json;avro;protobuf;jsonSchema
	Format KafkaFormat `json:"format,omitempty"`
	// SchemaRegistry is the Confluent-compatible Schema Registry of formats avro, protobuf and jsonSchema
	// (of the values or the keys); required with them, not allowed otherwise.
	// +optional
	SchemaRegistry *SchemaRegistry `json:"schemaRegistry,omitempty"`
	// ExactlyOnce produces each batch in one Kafka transaction whose transactional id derives
	// from the query id, and records the batch id with it, so a replayed batch is not produced
	// again (readers must use read_committed). Default false: at-least-once.
	// +optional
	ExactlyOnce bool `json:"exactlyOnce,omitempty"`
	// +optional
	SASL *KafkaSASL `json:"sasl,omitempty"`
	// +optional
	TLS *KafkaTLS `json:"tls,omitempty"`
}

// WebhookSink POSTs each batch as JSON ({queryId, batchId, rows}) to a URL, in chunks of at
// most MaxRowsPerRequest rows, with the header Idempotency-Key: <query id>:<batch id>[:<chunk>].
// Delivery is at-least-once: the receiver de-duplicates by that key.
type WebhookSink struct {
	// URL is an http or https URL.
	// +kubebuilder:validation:MinLength=1
	URL string `json:"url"`
	// Headers are added to every request.
	// +optional
	Headers map[string]string `json:"headers,omitempty"`
	// HeadersSecretName names a Secret in the query's namespace whose keys are header names and
	// whose values are header values (for credentials such as Authorization).
	// +optional
	HeadersSecretName string `json:"headersSecretName,omitempty"`
	// MaxRowsPerRequest caps the rows of one request. Default 1000.
	// +optional
	// +kubebuilder:default=1000
	// +kubebuilder:validation:Minimum=1
	MaxRowsPerRequest int32 `json:"maxRowsPerRequest,omitempty"`
	// Timeout bounds one request (a Go duration). Default 30s.
	// +optional
	// +kubebuilder:default="30s"
	Timeout Duration `json:"timeout,omitempty"`
}

// ConsoleSink prints each batch's rows to the engine's standard output.
type ConsoleSink struct{}
