package spark

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine/postgres"
)

// PasswordEnv is the runner's environment variable that carries the PostgreSQL sink's
// password: the plan names it and never holds the password.
const PasswordEnv = "LOCKSTEP_SPARK_POSTGRES_PASSWORD"

// Postgres is the PostgreSQL sink's part of a plan: the statements of the built-in sink
// (engine/postgres), with JDBC's ? placeholders, run by the runner in foreachBatch: in one
// transaction, RecordBatch (query id, batch id) first; when it affects no row the batch
// committed before and the transaction is rolled back; else Replace (complete mode, a global
// aggregate), then Insert per row (an upsert by key in update mode), then COMMIT.
type Postgres struct {
	// JDBCURL names the server and database, without credentials.
	JDBCURL string `json:"jdbcUrl"`
	User    string `json:"user"`
	// Setup runs once before the query starts (the progress table, createTable).
	Setup       []string `json:"setup"`
	RecordBatch string   `json:"recordBatch"`
	Replace     string   `json:"replace,omitempty"`
	Insert      string   `json:"insert"`
	// Types are the inserted columns' types (v1 column types), for binding.
	Types []string `json:"types"`
}

// postgresSink compiles the PostgreSQL sink. The connection string is read with getenv (nil
// while only checking: the statements are made, the connection is not).
func (c *compiler) postgresSink(p *field.Path, pg *v1.PostgresSink, cols v1.Columns, getenv func(string) string) Sink {
	keys, _ := c.spec.UpsertKeys()
	mode := c.spec.OutputMode
	table := postgres.TableIdentifier(pg.Table)
	progress := postgres.ProgressIdentifier(table)
	jdbc := strings.NewReplacer("$1", "?", "$2", "?")
	out := &Postgres{Setup: []string{postgres.ProgressTableSQL(progress)}, RecordBatch: jdbc.Replace(postgres.RecordBatchSQL(progress))}
	if pg.CreateTable {
		out.Setup = append(out.Setup, postgres.CreateTableSQL(table, cols, keys))
	}
	names := cols.Names()
	marks := make([]string, len(names))
	for i, col := range cols {
		marks[i] = "?"
		out.Types = append(out.Types, string(col.Type))
	}
	out.Insert = "INSERT INTO " + table.Sanitize() + " (" + postgres.IdentList(names) + ") VALUES (" + strings.Join(marks, ", ") + ")"
	switch {
	case mode == v1.OutputComplete, mode == v1.OutputUpdate && len(keys) == 0:
		out.Replace = "DELETE FROM " + table.Sanitize()
	case mode == v1.OutputUpdate:
		if !c.hasAggregate() {
			c.refuse(p.Child("keyColumns"), pg.KeyColumns, "a stateless upsert is not compiled for Spark yet (two rows of one key in a batch)")
		}
		var set []string
		for _, n := range names {
			q := pgx.Identifier{n}.Sanitize()
			set = append(set, q+" = EXCLUDED."+q)
		}
		out.Insert += " ON CONFLICT (" + postgres.IdentList(keys) + ") DO UPDATE SET " + strings.Join(set, ", ")
	}
	if getenv != nil {
		dsn := getenv(pg.Connection.DSNEnvName())
		cfg, err := pgx.ParseConfig(dsn)
		if dsn == "" || err != nil {
			c.errs = append(c.errs, field.Invalid(p.Child("connection"), pg.Connection.DSNEnvName(), fmt.Sprintf("no usable connection string in $%s: %v", pg.Connection.DSNEnvName(), err)))
		} else {
			mode := sslMode(dsn)
			switch mode {
			case "disable", "allow", "prefer", "require":
			default:
				c.refuse(p.Child("connection"), pg.Connection.DSNEnvName(), "sslmode "+mode+" (a verified server certificate) is not mapped to JDBC yet")
			}
			out.JDBCURL = fmt.Sprintf("jdbc:postgresql://%s:%d/%s?sslmode=%s", cfg.Host, cfg.Port, url.PathEscape(cfg.Database), mode)
			out.User = cfg.User
		}
	}
	return Sink{Kind: SinkPostgres, Options: map[string]string{}, Postgres: out}
}

// postgresPassword is the password of the PostgreSQL sink's connection string, "" if none.
func postgresPassword(spec *v1.StreamingQuerySpec, getenv func(string) string) string {
	if spec.Sink.Postgres == nil {
		return ""
	}
	cfg, err := pgx.ParseConfig(getenv(spec.Sink.Postgres.Connection.DSNEnvName()))
	if err != nil {
		return ""
	}
	return cfg.Password
}

// sslMode is the sslmode a libpq connection string (URL or key=value) names; libpq's default
// is prefer. pgjdbc takes the same modes.
func sslMode(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		if m := u.Query().Get("sslmode"); m != "" {
			return m
		}
		return "prefer"
	}
	for _, f := range strings.Fields(dsn) {
		if v, ok := strings.CutPrefix(f, "sslmode="); ok {
			return strings.Trim(v, "'")
		}
	}
	return "prefer"
}

func (c *compiler) hasAggregate() bool {
	for i := range c.spec.Transform {
		if c.spec.Transform[i].Aggregate != nil {
			return true
		}
	}
	return false
}
