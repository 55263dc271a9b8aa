// Package codec converts between engine rows and the file formats of the
// files source and sink: JSON lines, CSV and Parquet.
//
// [Decoder] reads a file's bytes into rows of a schema, reporting each
// record that does not parse as a [Malformed] (the caller applies the
// source's onMalformed policy); [Decoder.DecodeJSON] reads one JSON record
// into a row the caller owns, for sources of single records such as Kafka,
// with the same rules. [Encode] writes rows as JSON lines or as a
// Parquet file with optional columns (string as UTF-8 byte arrays, long as
// INT64, double as DOUBLE, boolean as BOOLEAN, timestamp as INT64
// TIMESTAMP(MICROS, UTC)), which Decode reads back to equal rows;
// [AppendJSON] writes the JSON lines into a buffer the caller reuses.
package codec
