// Package postgres holds the engine's PostgreSQL sink, built on pgx
// (github.com/jackc/pgx/v5).
//
// Nothing registers itself: a program registers the kind,
//
//	reg.RegisterSink(v1.SinkPostgres, postgres.SinkSpec(), postgres.NewSink)
//
// # Exactly-once
//
// Each batch is one transaction. It first inserts (query id, batch id) into
// lockstep_batches, a progress table in the schema of the sink's table
// (created if absent); when that row is already there the batch was
// committed before — by an earlier run, or by another instance of the same
// query that won the race — and the transaction is rolled back having
// written nothing. Otherwise the rows are written and the transaction
// commits rows and progress row together. The key is the query id and the
// batch id, never the batch id alone, so a fresh checkpoint writing into the
// same table is not mistaken for a replay.
//
// # Output modes
//
// Append copies the rows in (COPY). Update upserts them by the key columns
// (the aggregation's grouping keys, or keyColumns) with one INSERT … SELECT
// FROM unnest(one array per column) ON CONFLICT (keys) DO UPDATE; the table
// needs a primary key or unique index on exactly those columns.
// Complete deletes the table's rows and copies the batch's in, in the same
// transaction, so readers see the old result until the new one commits.
//
// # Columns
//
// Output columns map to string → text, long → bigint, double → double
// precision, boolean → boolean, timestamp → timestamp with time zone. An
// existing table must have every output column with that type (a string
// column may also be varchar); NewSink refuses one that does not with a
// *SchemaError wrapping ErrSchemaMismatch. With createTable a missing table
// is created, its key columns as primary key.
//
// See docs/postgres.md for what is and is not supported.
package postgres
