// Package kafka holds the engine's Kafka source and Kafka sink, built on
// franz-go (kgo and kadm).
//
// Nothing registers itself: a program registers the kinds it offers,
//
//	reg.RegisterSource(v1.SourceKafka, kafka.SourceSpec(), kafka.NewSource)
//	reg.RegisterSink(v1.SinkKafka, kafka.SinkSpec(), kafka.NewSink)
//
// # Source
//
// The source reads topics (or the topics matching topicPattern) without a
// consumer group: the checkpoint is the only record of progress, and nothing
// is committed to Kafka. Its offset in the offsets log is the next offset to
// read per topic-partition, in Spark's JSON form {"topic":{"0":12}}. Plan lists
// the partitions' last stable offsets (records are read with
// isolation.level=read_committed) and caps the batch at maxOffsetsPerTrigger,
// split across partitions in proportion to their backlog; Read returns exactly
// the records of the logged range, also when a later run replays it, partition
// by partition in offset order. A goroutine of the source fetches and decodes
// records ahead of the batches; Close stops it.
//
// A source new to the checkpoint resolves startingOffsets once and records the
// result, with the Kafka cluster id, in its checkpoint folder
// (sources/<name>/kafka-start.json). A later start against a cluster with
// another id is refused (engine.ErrRefused): the offsets would mean nothing
// there. Partitions that appear later start at offset 0 (earliest).
//
// Records that should have been read but are gone — below the log start after
// retention or DeleteRecords, or in a partition that vanished — stop the query
// with a *DataLossError when failOnDataLoss is true (the default); when it is
// false the source logs a warning, counts the lost records in
// Source.LostRecords and continues from the earliest offset available.
//
// # Sink
//
// The sink produces each output row as one record whose value is the row as a
// JSON object, keyed by keyColumn when set. Every record carries the header
// lockstep-batch: <query id>:<batch id> and the batch's timestamp, the same on
// a replay. By default the sink is at-least-once: a batch replayed after a
// crash is produced again. With exactlyOnce each batch is one Kafka
// transaction whose transactional id is derived from the query id
// (lockstep-<query id>) and which also writes a marker record (key
// <query id>:<topic>, value the batch id) to MarkerTopic. On its first write
// after a start the sink fences the previous run's producer and reads the
// committed markers, from the batch's timestamp on, skipping a batch whose
// marker it finds. Consumers must read with isolation.level=read_committed.
//
// # Connections
//
// Both components authenticate with SASL (PLAIN, SCRAM-SHA-256/512; the
// credentials come from environment variables) and encrypt with TLS as the
// spec says. At start they wait at most the connect timeout (30s by default,
// see WithConnectTimeout) for a broker to answer and fail with a
// *ConnectError naming the brokers otherwise. Later, a broker that is down is
// waited for (see WithBrokerTimeout) rather than failing the query at once.
package kafka
