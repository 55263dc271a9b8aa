package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
)

var _ engine.StaticTable = (*Static)(nil)

// ErrSnapshotChanged means a PostgreSQL table's rows differ from the snapshot a batch
// recorded, which a replay of that batch needs.
var ErrSnapshotChanged = errors.New("postgres table changed since the snapshot was recorded")

// StaticSpec describes the static side of a stream–static join on a PostgreSQL table.
func StaticSpec() engine.ComponentSpec {
	return engine.ComponentSpec{
		Summary: "Reads a PostgreSQL table whole as the static side of a join, in one REPEATABLE READ transaction; " +
			"the batch records the rows' count and SHA-256 digest, and a replay stops, naming the table, if its rows changed since.",
		Fields: []engine.FieldSpec{
			{Name: "connection.dsnEnv", Description: "the environment variable holding the connection string"},
			{Name: "table", Description: "name or schema.name"},
		},
	}
}

// staticSnapshot names a snapshot of a static PostgreSQL table: its row count and the SHA-256
// of its rows, each encoded as the JSON array of its values in schema order, sorted.
type staticSnapshot struct {
	Rows   int64  `json:"rows"`
	SHA256 string `json:"sha256"`
}

// Static is a PostgreSQL table read as the static side of a join. It keeps the rows it read
// last, so that the Read after a Latest does not read the table again. It is used by one
// goroutine at a time; it holds no connection between calls.
type Static struct {
	dsn     string
	table   pgx.Identifier
	columns v1.Columns

	mu   sync.Mutex
	last staticSnapshot
	rows []engine.Row
}

// NewStatic returns the static side of spec, a PostgreSQL table. It does no I/O: each Latest
// and Read connects, reads and disconnects.
func NewStatic(_ context.Context, spec *v1.StaticSide, env engine.StaticEnv) (engine.StaticTable, error) {
	if spec.Postgres == nil || spec.Schema == nil {
		return nil, errors.New("not a postgres static side with a schema")
	}
	getenv := env.Getenv
	if getenv == nil {
		return nil, errors.New("no environment to read the connection string from")
	}
	name := spec.Postgres.Connection.DSNEnvName()
	dsn := getenv(name)
	if dsn == "" {
		return nil, fmt.Errorf("postgres table %s: environment variable %s holds no connection string", spec.Postgres.Table, name)
	}
	return &Static{dsn: dsn, table: TableIdentifier(spec.Postgres.Table), columns: spec.Schema.Columns}, nil
}

// Latest reads the table and returns the name of its rows' snapshot.
func (s *Static) Latest(ctx context.Context) (engine.Snapshot, error) {
	rows, snap, err := s.read(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.last, s.rows = snap, rows
	s.mu.Unlock()
	return json.Marshal(snap)
}

// Read returns the rows of the named snapshot: those Latest read, if it named this snapshot,
// else the table's rows read again, if they still are that snapshot (ErrSnapshotChanged if not).
func (s *Static) Read(ctx context.Context, name engine.Snapshot) ([]engine.Row, error) {
	var want staticSnapshot
	if err := json.Unmarshal(name, &want); err != nil {
		return nil, fmt.Errorf("postgres snapshot %s: %w", name, err)
	}
	s.mu.Lock()
	if s.rows != nil && s.last == want {
		rows := s.rows
		s.mu.Unlock()
		return rows, nil
	}
	s.mu.Unlock()
	rows, got, err := s.read(ctx)
	if err != nil {
		return nil, err
	}
	if got != want {
		return nil, fmt.Errorf("postgres table %s: %d rows with digest %s, the batch joined %d rows with digest %s; PostgreSQL keeps no older versions, so restore the table's rows or start the query afresh: %w",
			s.table.Sanitize(), got.Rows, got.SHA256, want.Rows, want.SHA256, ErrSnapshotChanged)
	}
	s.mu.Lock()
	s.last, s.rows = got, rows
	s.mu.Unlock()
	return rows, nil
}

// read reads every row of the table in one REPEATABLE READ transaction, each column cast to
// its schema type, and returns them with their snapshot's name.
func (s *Static) read(ctx context.Context) ([]engine.Row, staticSnapshot, error) {
	conn, err := pgx.Connect(ctx, s.dsn)
	if err != nil {
		return nil, staticSnapshot{}, fmt.Errorf("postgres table %s: connect: %w", s.table.Sanitize(), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, staticSnapshot{}, fmt.Errorf("postgres table %s: begin: %w", s.table.Sanitize(), err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // read-only
	q := StaticSelectSQL(s.table, s.columns)
	res, err := tx.Query(ctx, q)
	if err != nil {
		return nil, staticSnapshot{}, fmt.Errorf("postgres table %s: %s: %w", s.table.Sanitize(), q, err)
	}
	defer res.Close()
	var (
		rows    []engine.Row
		encoded [][]byte
	)
	for res.Next() {
		vals, err := res.Values()
		if err != nil {
			return nil, staticSnapshot{}, fmt.Errorf("postgres table %s: read row: %w", s.table.Sanitize(), err)
		}
		row := make(engine.Row, len(vals))
		for i, v := range vals {
			if t, ok := v.(time.Time); ok {
				v = t.UTC()
			}
			row[i] = v
		}
		enc, err := json.Marshal(row)
		if err != nil {
			return nil, staticSnapshot{}, fmt.Errorf("postgres table %s: encode row: %w", s.table.Sanitize(), err)
		}
		rows = append(rows, row)
		encoded = append(encoded, enc)
	}
	if err := res.Err(); err != nil {
		return nil, staticSnapshot{}, fmt.Errorf("postgres table %s: %w", s.table.Sanitize(), err)
	}
	// The digest does not depend on the order PostgreSQL returns the rows in.
	slices.SortFunc(encoded, func(a, b []byte) int { return strings.Compare(string(a), string(b)) })
	h := sha256.New()
	for _, e := range encoded {
		h.Write(binary.AppendUvarint(nil, uint64(len(e))))
		h.Write(e)
	}
	return rows, staticSnapshot{Rows: int64(len(rows)), SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}
