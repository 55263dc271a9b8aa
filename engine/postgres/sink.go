package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
)

var (
	_ engine.Sink = (*Sink)(nil)
	_ io.Closer   = (*Sink)(nil)
)

// ProgressTable is the name of the table, in the sink's table's schema, that
// records the committed batches.
const ProgressTable = "lockstep_batches"

// ErrSchemaMismatch means an existing table cannot take the query's output.
var ErrSchemaMismatch = errors.New("table does not match the query's output")

// SchemaError says how an existing table differs from the query's output.
type SchemaError struct {
	Table  string
	Column string
	// TableType is the column's type in the table ("missing" when absent);
	// QueryType the type the query needs.
	TableType, QueryType string
	Reason               string
}

func (e *SchemaError) Error() string {
	return fmt.Sprintf("postgres table %s: column %s is %s in the table, the query writes %s: %s",
		e.Table, e.Column, e.TableType, e.QueryType, e.Reason)
}

// Unwrap returns ErrSchemaMismatch.
func (e *SchemaError) Unwrap() error { return ErrSchemaMismatch }

// SinkSpec describes the postgres sink for the registry and the docs.
func SinkSpec() engine.ComponentSpec {
	return engine.ComponentSpec{
		Summary: "Writes each batch to a PostgreSQL table in one transaction with a lockstep_batches(query_id, batch_id) row; " +
			"output modes append (COPY), update (INSERT … ON CONFLICT DO UPDATE by key) and complete (replace the contents).",
		Fields: []engine.FieldSpec{
			{Name: "connection.secretName", Description: "a Secret whose key dsn holds the connection string (libpq URL or DSN, with its TLS settings)"},
			{Name: "connection.dsnEnv", Default: v1.PostgresDSNEnv, Description: "the environment variable holding the connection string"},
			{Name: "table", Description: "name or schema.name"},
			{Name: "keyColumns", Default: "the aggregation's grouping keys", Description: "update mode: the conflict target (primary key)"},
			{Name: "createTable", Default: "false", Description: "create a missing table, key columns as primary key"},
		},
	}
}

// Sink writes each batch to a PostgreSQL table in one transaction. It holds
// one connection, opened by NewSink, reopened by Write when it broke, and
// closed by Close. It is used by one goroutine at a time.
type Sink struct {
	dsn      string
	table    pgx.Identifier
	progress pgx.Identifier
	mode     v1.OutputMode
	cols     v1.Columns
	keys     []string
	reached  func(engine.Phase, int64)
	logger   *slog.Logger

	conn *pgx.Conn
}

// NewSink returns the postgres sink of spec. It connects, creates the
// progress table (and, with createTable, the table) if absent, and checks the
// table's columns, and in update mode its unique key, against the query's
// output, so that a mismatch stops the query before its first batch.
func NewSink(ctx context.Context, spec *v1.Sink, env engine.SinkEnv) (engine.Sink, error) {
	pg := spec.Postgres
	if pg == nil {
		return nil, errors.New("not a postgres sink")
	}
	getenv := env.Getenv
	if getenv == nil {
		return nil, errors.New("postgres sink: the engine passed no environment")
	}
	name := pg.Connection.DSNEnvName()
	dsn := getenv(name)
	if dsn == "" {
		return nil, fmt.Errorf("postgres sink: the connection string variable %s is empty or unset", name)
	}
	mode := env.OutputMode
	if mode == "" {
		mode = v1.OutputAppend
	}
	keys := pg.KeyColumns
	if len(keys) == 0 {
		keys = env.Keys
	}
	if mode == v1.OutputUpdate && keys == nil {
		return nil, errors.New("postgres sink: update mode upserts by key: name sink.postgres.keyColumns, or write an aggregation")
	}
	for _, k := range keys {
		if !slices.Contains(env.Columns.Names(), k) {
			return nil, fmt.Errorf("postgres sink: key column %q is not an output column (%s)", k, strings.Join(env.Columns.Names(), ", "))
		}
	}
	s := &Sink{dsn: dsn, mode: mode, cols: env.Columns, keys: keys, reached: env.Reached, logger: env.Logger}
	if s.reached == nil {
		s.reached = func(engine.Phase, int64) {}
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	conn, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.prepare(ctx, conn, pg); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	s.conn = conn
	return s, nil
}

// Write commits the batch in one transaction with its progress row, or finds
// the progress row and writes nothing.
func (s *Sink) Write(ctx context.Context, b *engine.Batch) error {
	if s.conn == nil || s.conn.IsClosed() {
		conn, err := s.connect(ctx)
		if err != nil {
			return fmt.Errorf("postgres sink: batch %d: %w", b.ID, err)
		}
		s.conn = conn
	}
	skipped, err := s.write(ctx, b)
	if err != nil {
		if s.conn.IsClosed() {
			s.conn = nil // reconnect on the next write
		}
		return fmt.Errorf("postgres sink: batch %d: %w", b.ID, err)
	}
	if skipped {
		s.logger.Info("Skipped a batch already in the postgres table", "batch", b.ID, "table", s.table.Sanitize())
	}
	return nil
}

// Close closes the connection.
func (s *Sink) Close() error {
	if s.conn == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.conn.Close(ctx)
}

// write runs the batch's transaction in as few round trips as it can: BEGIN, the progress
// row and the upsert (or the DELETE of a replace) go in one pipelined batch; a COPY follows;
// then COMMIT. Each round trip cost about as much as writing a 1,000-row batch
// (docs/benchmarks.md). When the progress row is already there, the transaction is rolled
// back, undoing what the batch's statements did.
func (s *Sink) write(ctx context.Context, b *engine.Batch) (skipped bool, err error) {
	rows := make([][]any, len(b.Rows))
	for i, r := range b.Rows {
		rows[i] = r
	}
	names := s.cols.Names()
	replace := s.mode == v1.OutputComplete || s.mode == v1.OutputUpdate && len(s.keys) == 0 // a global aggregate has one row: replace it
	upsert := s.mode == v1.OutputUpdate && len(s.keys) > 0

	batch := &pgx.Batch{}
	batch.Queue("BEGIN")
	// The progress row first: a concurrent instance writing the same batch
	// waits here for this transaction, then finds the row and skips.
	batch.Queue(RecordBatchSQL(s.progress), b.QueryID, b.ID)
	switch {
	case replace:
		batch.Queue("DELETE FROM " + s.table.Sanitize())
	case upsert:
		sql, args, err := s.upsert(lastPerKey(s.cols, s.keys, rows))
		if err != nil {
			return false, err
		}
		batch.Queue(sql, args...)
	}
	committed := false
	defer func() {
		if !committed && !s.conn.IsClosed() {
			_, _ = s.conn.Exec(context.WithoutCancel(ctx), "ROLLBACK") // a warning only when no transaction is open
		}
	}()
	br := s.conn.SendBatch(ctx, batch)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return false, fmt.Errorf("begin: %w", err)
	}
	tag, err := br.Exec()
	if err != nil {
		br.Close()
		return false, fmt.Errorf("record the batch in %s: %w", s.progress.Sanitize(), err)
	}
	if replace || upsert {
		if _, err := br.Exec(); err != nil {
			br.Close()
			if replace {
				return false, fmt.Errorf("replace the contents of %s: %w", s.table.Sanitize(), err)
			}
			return false, fmt.Errorf("upsert into %s: %w", s.table.Sanitize(), err)
		}
	}
	if err := br.Close(); err != nil {
		return false, fmt.Errorf("write the batch: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return true, nil // rolled back by the deferred ROLLBACK
	}
	if !upsert {
		if _, err := s.conn.CopyFrom(ctx, s.table, names, pgx.CopyFromRows(rows)); err != nil {
			return false, fmt.Errorf("copy into %s: %w", s.table.Sanitize(), err)
		}
	}
	s.reached(engine.PhaseSinkWrite, b.ID)
	ct, err := s.conn.Exec(ctx, "COMMIT")
	if err != nil {
		return false, fmt.Errorf("commit: %w", err)
	}
	committed = true
	if ct.String() != "COMMIT" {
		return false, fmt.Errorf("commit: the server rolled the transaction back (%s)", ct.String())
	}
	return false, nil
}

// upsert returns the statement that writes rows with one INSERT … SELECT FROM
// unnest(one array per column) ON CONFLICT (keys) DO UPDATE, and its arguments. (A temporary staging table filled by
// COPY cost more to create in every transaction than the upsert of a
// 1,000-row batch, and was no faster at 100,000 rows: docs/benchmarks.md.)
func (s *Sink) upsert(rows [][]any) (string, []any, error) {
	names := s.cols.Names()
	arrays := make([]any, len(s.cols))
	params := make([]string, len(s.cols))
	for i, c := range s.cols {
		a, err := columnArray(c, i, rows)
		if err != nil {
			return "", nil, fmt.Errorf("upsert into %s: %w", s.table.Sanitize(), err)
		}
		arrays[i] = a
		params[i] = fmt.Sprintf("$%d::%s[]", i+1, pgType(c.Type))
	}
	cols := identList(names)
	var set []string
	for _, n := range names {
		if !slices.Contains(s.keys, n) {
			q := pgx.Identifier{n}.Sanitize()
			set = append(set, q+" = EXCLUDED."+q)
		}
	}
	action := "DO NOTHING"
	if len(set) > 0 {
		action = "DO UPDATE SET " + strings.Join(set, ", ")
	}
	sql := "INSERT INTO " + s.table.Sanitize() + " (" + cols + ") SELECT * FROM unnest(" + strings.Join(params, ", ") + ")" +
		" ON CONFLICT (" + identList(s.keys) + ") " + action
	return sql, arrays, nil
}

// columnArray returns column i of rows as a slice of c's Go type (of pointers
// to it, nil for null, when the column holds a null), which pgx sends as an
// array of c's PostgreSQL type.
func columnArray(c v1.Column, i int, rows [][]any) (any, error) {
	switch c.Type {
	case v1.TypeString:
		return typedColumn[string](c, i, rows)
	case v1.TypeLong:
		return typedColumn[int64](c, i, rows)
	case v1.TypeDouble:
		return typedColumn[float64](c, i, rows)
	case v1.TypeBoolean:
		return typedColumn[bool](c, i, rows)
	case v1.TypeTimestamp:
		return typedColumn[time.Time](c, i, rows)
	}
	return nil, fmt.Errorf("column %s: type %q", c.Name, c.Type)
}

// typedColumn returns column i of rows as a []T, or as a []*T when it holds a null: pgx
// encodes the first without a pointer per value.
func typedColumn[T any](c v1.Column, i int, rows [][]any) (any, error) {
	out := make([]T, len(rows))
	for r, row := range rows {
		switch v := row[i].(type) {
		case nil:
			return typedNullableColumn[T](c, i, rows)
		case T:
			out[r] = v
		default:
			return nil, fmt.Errorf("row %d, column %s: value %v (%T) is not a %s", r, c.Name, v, v, c.Type)
		}
	}
	return out, nil
}

func typedNullableColumn[T any](c v1.Column, i int, rows [][]any) ([]*T, error) {
	out := make([]*T, len(rows))
	for r, row := range rows {
		switch v := row[i].(type) {
		case nil:
		case T:
			out[r] = &v
		default:
			return nil, fmt.Errorf("row %d, column %s: value %v (%T) is not a %s", r, c.Name, v, v, c.Type)
		}
	}
	return out, nil
}

func (s *Sink) connect(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(s.dsn)
	if err != nil {
		// The error may quote the connection string; say only what is wrong.
		return nil, errors.New("postgres sink: the connection string does not parse")
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 30 * time.Second
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres sink: connect to %s:%d database %s: %w", cfg.Host, cfg.Port, cfg.Database, err)
	}
	return conn, nil
}

// prepare resolves the table's schema, creates what is missing and checks
// the table against the output.
func (s *Sink) prepare(ctx context.Context, conn *pgx.Conn, pg *v1.PostgresSink) error {
	schema, name, qualified := strings.Cut(pg.Table, ".")
	if !qualified {
		name = schema
		if err := conn.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
			return fmt.Errorf("postgres sink: current schema: %w", err)
		}
	}
	s.table = pgx.Identifier{schema, name}
	s.progress = pgx.Identifier{schema, ProgressTable}
	if _, err := conn.Exec(ctx, ProgressTableSQL(s.progress)); err != nil {
		return fmt.Errorf("postgres sink: create %s: %w", s.progress.Sanitize(), err)
	}
	have, err := tableColumns(ctx, conn, schema, name)
	if err != nil {
		return err
	}
	if have == nil {
		if !pg.CreateTable {
			return fmt.Errorf("postgres sink: table %s does not exist: create it, or set sink.postgres.createTable: true", s.table.Sanitize())
		}
		if _, err := conn.Exec(ctx, createTableSQL(s.table, s.cols, s.keys)); err != nil {
			return fmt.Errorf("postgres sink: create table %s: %w", s.table.Sanitize(), err)
		}
		return nil
	}
	for _, c := range s.cols {
		got, ok := have[c.Name]
		want := pgType(c.Type)
		switch {
		case !ok:
			return &SchemaError{Table: s.table.Sanitize(), Column: c.Name, TableType: "missing", QueryType: want,
				Reason: "add the column (ALTER TABLE … ADD COLUMN), or write to a new table"}
		case got != want && !(c.Type == v1.TypeString && got == "character varying"):
			return &SchemaError{Table: s.table.Sanitize(), Column: c.Name, TableType: got, QueryType: want,
				Reason: "change the column's type, cast the output column in a select step, or write to a new table"}
		}
	}
	if s.mode == v1.OutputUpdate && len(s.keys) > 0 {
		ok, err := hasUniqueKey(ctx, conn, s.table, s.keys)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("postgres table %s has no primary key or unique index on exactly (%s), which update mode upserts ON CONFLICT by: add one, or write to a new table with createTable: %w",
				s.table.Sanitize(), strings.Join(s.keys, ", "), ErrSchemaMismatch)
		}
	}
	return nil
}

// tableColumns returns the table's columns and their types, nil if the table
// does not exist.
func tableColumns(ctx context.Context, conn *pgx.Conn, schema, name string) (map[string]string, error) {
	rows, err := conn.Query(ctx, "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2", schema, name)
	if err != nil {
		return nil, fmt.Errorf("postgres sink: read the columns of %s.%s: %w", schema, name, err)
	}
	defer rows.Close()
	var cols map[string]string
	for rows.Next() {
		var c, t string
		if err := rows.Scan(&c, &t); err != nil {
			return nil, err
		}
		if cols == nil {
			cols = map[string]string{}
		}
		cols[c] = t
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres sink: read the columns of %s.%s: %w", schema, name, err)
	}
	return cols, nil
}

// hasUniqueKey reports whether the table has a primary key or unique index
// on exactly keys (in any order), as ON CONFLICT (keys) needs.
func hasUniqueKey(ctx context.Context, conn *pgx.Conn, table pgx.Identifier, keys []string) (bool, error) {
	rows, err := conn.Query(ctx, `SELECT array_agg(a.attname::text ORDER BY a.attname::text)
		FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
		WHERE i.indrelid = $1::regclass AND i.indisunique AND i.indpred IS NULL
		GROUP BY i.indexrelid`, table.Sanitize())
	if err != nil {
		return false, fmt.Errorf("postgres sink: read the unique keys of %s: %w", table.Sanitize(), err)
	}
	defer rows.Close()
	want := slices.Sorted(slices.Values(keys))
	found := false
	for rows.Next() {
		var cols []string
		if err := rows.Scan(&cols); err != nil {
			return false, err
		}
		found = found || slices.Equal(cols, want)
	}
	return found, rows.Err()
}

func createTableSQL(table pgx.Identifier, cols v1.Columns, keys []string) string {
	var defs []string
	for _, c := range cols {
		d := pgx.Identifier{c.Name}.Sanitize() + " " + pgType(c.Type)
		if slices.Contains(keys, c.Name) {
			d += " NOT NULL"
		}
		defs = append(defs, d)
	}
	if len(keys) > 0 {
		defs = append(defs, "PRIMARY KEY ("+identList(keys)+")")
	}
	return "CREATE TABLE IF NOT EXISTS " + table.Sanitize() + " (" + strings.Join(defs, ", ") + ")"
}

// pgType is the PostgreSQL type of a column type, as information_schema
// names it.
func pgType(t v1.ColumnType) string {
	switch t {
	case v1.TypeString:
		return "text"
	case v1.TypeLong:
		return "bigint"
	case v1.TypeDouble:
		return "double precision"
	case v1.TypeBoolean:
		return "boolean"
	case v1.TypeTimestamp:
		return "timestamp with time zone"
	}
	return "text"
}

func identList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = pgx.Identifier{n}.Sanitize()
	}
	return strings.Join(q, ", ")
}

// lastPerKey keeps, of rows with equal keys, the last: ON CONFLICT cannot
// change one row twice in a statement.
func lastPerKey(cols v1.Columns, keys []string, rows [][]any) [][]any {
	idx := make([]int, len(keys))
	for i, k := range keys {
		idx[i] = slices.Index(cols.Names(), k)
	}
	at := map[string]int{}
	var out [][]any
	for _, r := range rows {
		var b strings.Builder
		for _, i := range idx {
			b.WriteString(keyValue(r[i]))
			b.WriteByte(0)
		}
		k := b.String()
		if j, ok := at[k]; ok {
			out[j] = r
			continue
		}
		at[k] = len(out)
		out = append(out, r)
	}
	return out
}

func keyValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "n"
	case string:
		return "s" + strconv.Quote(x)
	case time.Time:
		return "t" + strconv.FormatInt(x.UnixMicro(), 10)
	}
	return fmt.Sprintf("%T:%v", v, v)
}
