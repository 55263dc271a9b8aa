package postgres

import (
	"strings"

	"github.com/jackc/pgx/v5"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
)

// This file holds the statements that the spark runtime runs too, over JDBC: the sink's, so
// that both write the same tables the same way, and a static side's read, so that both read
// the same values.

// TableIdentifier is the sink's table as an identifier: schema.name, or name alone, which the
// server then finds on its search path (the current schema).
func TableIdentifier(table string) pgx.Identifier {
	if schema, name, ok := strings.Cut(table, "."); ok {
		return pgx.Identifier{schema, name}
	}
	return pgx.Identifier{table}
}

// ProgressIdentifier is the progress table beside the sink's table: in its schema.
func ProgressIdentifier(table pgx.Identifier) pgx.Identifier {
	return append(table[:len(table)-1:len(table)-1], ProgressTable)
}

// ProgressTableSQL creates the progress table: one row per (query id, batch id) committed.
func ProgressTableSQL(progress pgx.Identifier) string {
	return "CREATE TABLE IF NOT EXISTS " + progress.Sanitize() +
		" (query_id text NOT NULL, batch_id bigint NOT NULL, committed_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (query_id, batch_id))"
}

// RecordBatchSQL records batch ($2) of query ($1), and affects no row when it is recorded
// already: the batch was committed, and its transaction must write nothing.
func RecordBatchSQL(progress pgx.Identifier) string {
	return "INSERT INTO " + progress.Sanitize() + " (query_id, batch_id, committed_at) VALUES ($1, $2, now()) ON CONFLICT DO NOTHING"
}

// CreateTableSQL creates the sink's table (createTable: true) with the columns' types and,
// for update mode, the keys as its primary key.
func CreateTableSQL(table pgx.Identifier, cols v1.Columns, keys []string) string {
	return createTableSQL(table, cols, keys)
}

// IdentList writes column names as a list of quoted identifiers.
func IdentList(names []string) string { return identList(names) }

// StaticSelectSQL reads every row of a static side's table: each column cast by PostgreSQL to
// its schema type (text, bigint, double precision, boolean, timestamp with time zone) and
// named as the column.
func StaticSelectSQL(table pgx.Identifier, cols v1.Columns) string {
	exprs := make([]string, len(cols))
	for i, c := range cols {
		q := pgx.Identifier{c.Name}.Sanitize()
		exprs[i] = q + "::" + pgType(c.Type) + " AS " + q
	}
	return "SELECT " + strings.Join(exprs, ", ") + " FROM " + table.Sanitize()
}
