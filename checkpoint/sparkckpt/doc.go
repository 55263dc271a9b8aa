// Package sparkckpt reads the checkpoint of an Apache Spark Structured Streaming query,
// without a JVM and without a cluster: what `lockstep checkpoint describe` shows of a Spark
// checkpoint, and what `lockstep plan` infers from one that Lockstep did not write.
//
// It reads, through a checkpoint.Store (a local folder or S3):
//   - metadata: the query id;
//   - offsets/<N>, versions 1 and 2 (v2 keys offsets by source id or name: Spark 4.2's
//     source naming);
//   - commits/<N>, versions 1 to 3;
//   - sources/<id>/: the file source's log (with its .compact files) and the Kafka source's
//     initial offsets;
//   - state/<op>/_metadata/metadata (operator metadata v1) and _metadata/v2/<batch> (v2);
//   - the state schema files, versions 1 to 3 (Java DataOutputStream framing with modified
//     UTF-8 strings), from state/<op>/<part>/_metadata/schema and state/<op>/_stateSchema/.
//
// State data (lz4-compressed UnsafeRows, RocksDB files) is not read: the planner needs the
// schemas, not the rows. A file of a version newer than this package reads is refused with
// the version found and the newest it supports ([UnsupportedVersionError]).
//
// The formats follow Spark 4.2 (sql/core/.../streaming/checkpointing and .../state); the tests
// read checkpoints that real Spark writes.
package sparkckpt
