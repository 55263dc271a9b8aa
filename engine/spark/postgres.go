package spark

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine/postgres"
)

// postgresSink compiles the PostgreSQL sink: the built-in sink (engine/postgres) writes and
// commits each batch's rows in Go (SinkRows, rows.go), with its own statements, transaction
// and connection; Spark computes the rows.
func (c *compiler) postgresSink(p *field.Path, pg *v1.PostgresSink, cols v1.Columns) (Sink, []Step) {
	if keys, _ := c.spec.UpsertKeys(); c.spec.OutputMode == v1.OutputUpdate && len(keys) > 0 && !c.hasAggregate() {
		c.refuse(p.Child("keyColumns"), pg.KeyColumns, "an upsert without an aggregation: "+lastRowOfAKey+"; aggregate by the keys, or run on the lockstep runtime")
	}
	return rowsSink(cols)
}

// postgresStatic compiles a stream–static join's PostgreSQL side: Spark's JDBC reader running
// the built-in engine's own SELECT (engine/postgres.StaticSelectSQL: every row, each column cast
// by PostgreSQL to its schema type), so that both runtimes read the same values. The connection
// string's run-time parameters (search_path, timezone, ...), which pgx sends when it connects,
// are the URL's options, and its timezone is set again by the session's first statement; the
// password travels in the runner's environment, under the variable the plan names (n: the
// side's place among the query's PostgreSQL static sides). getenv is nil while only checking.
func (c *compiler) postgresStatic(p *field.Path, st *v1.StaticSide, n int, getenv func(string) string) *Source {
	pg := st.Postgres
	s := &Source{Format: "jdbc", Options: map[string]string{
		"query": postgres.StaticSelectSQL(postgres.TableIdentifier(pg.Table), st.Schema.Columns),
	}}
	for _, col := range st.Schema.Columns {
		s.Project = append(s.Project, fmt.Sprintf("CAST(%s AS %s) AS %s", quoteIdent(col.Name), sqlType(col.Type), quoteIdent(col.Name)))
	}
	if getenv == nil {
		return s
	}
	cfg := c.jdbc(p.Child("connection"), pg.Connection, getenv)
	if cfg == nil {
		return s
	}
	s.Options["url"], s.Options["user"] = cfg.url, cfg.user
	// pgjdbc sends the JVM's time zone as TimeZone when it connects, over the URL's options;
	// the session's first statement before the read sets the connection string's again.
	for _, k := range slices.Sorted(maps.Keys(cfg.params)) {
		if strings.EqualFold(k, "timezone") {
			s.Options["sessionInitStatement"] = "SELECT set_config('TimeZone', " + pgString(cfg.params[k]) + ", false)"
		}
	}
	s.PasswordEnv = StaticPasswordEnv(n)
	return s
}

// StaticPasswordEnv is the runner's environment variable that carries the password of the
// query's n-th PostgreSQL static side (0 the first, in transform order).
func StaticPasswordEnv(n int) string {
	return fmt.Sprintf("LOCKSTEP_SPARK_POSTGRES_PASSWORD_STATIC_%d", n)
}

// jdbcConfig is a connection string as pgjdbc takes it: the URL (server, database, sslmode,
// and the run-time parameters, such as search_path, as the options PostgreSQL applies when the
// session starts, as pgx sends them; no credentials), the user, and the run-time parameters.
type jdbcConfig struct {
	url, user string
	params    map[string]string
}

// jdbc reads the connection string of conn with getenv and maps it to JDBC, refusing what is
// not mapped; nil when there is none (reported).
func (c *compiler) jdbc(p *field.Path, conn v1.PostgresConnection, getenv func(string) string) *jdbcConfig {
	name := conn.DSNEnvName()
	dsn := getenv(name)
	cfg, err := pgx.ParseConfig(dsn)
	if dsn == "" || err != nil {
		c.errs = append(c.errs, field.Invalid(p, name, fmt.Sprintf("no usable connection string in $%s: %v", name, err)))
		return nil
	}
	mode := sslMode(dsn)
	switch mode {
	case "disable", "allow", "prefer", "require":
	default:
		c.refuse(p, name, "sslmode "+mode+" (a verified server certificate) is not mapped to JDBC yet")
	}
	u := fmt.Sprintf("jdbc:postgresql://%s:%d/%s?sslmode=%s", cfg.Host, cfg.Port, url.PathEscape(cfg.Database), mode)
	if len(cfg.RuntimeParams) > 0 {
		u += "&options=" + url.QueryEscape(startupOptions(cfg.RuntimeParams))
	}
	return &jdbcConfig{url: u, user: cfg.User, params: cfg.RuntimeParams}
}

// startupOptions writes run-time parameters as PostgreSQL's startup options (-c name=value, in
// name order), a backslash before each space and backslash in them.
func startupOptions(params map[string]string) string {
	esc := strings.NewReplacer(`\`, `\\`, " ", `\ `)
	var opts []string
	for _, k := range slices.Sorted(maps.Keys(params)) {
		opts = append(opts, "-c "+esc.Replace(k+"="+params[k]))
	}
	return strings.Join(opts, " ")
}

// pgString writes s as a PostgreSQL string literal (standard_conforming_strings, on since 9.1).
func pgString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// runnerSecrets is the runner's environment that carries the passwords of the query's
// PostgreSQL static sides, each under the variable its part of the plan names
// (StaticPasswordEnv). The plan never holds a password; the sink's stays with Go (rows.go).
func runnerSecrets(spec *v1.StreamingQuerySpec, getenv func(string) string) []string {
	password := func(conn v1.PostgresConnection) string {
		cfg, err := pgx.ParseConfig(getenv(conn.DSNEnvName()))
		if err != nil {
			return ""
		}
		return cfg.Password
	}
	var env []string
	for n, st := range postgresStatics(spec) {
		if pw := password(st.Postgres.Connection); pw != "" {
			env = append(env, StaticPasswordEnv(n)+"="+pw)
		}
	}
	return env
}

// postgresStatics lists the query's PostgreSQL static sides in transform order: the order
// StaticPasswordEnv numbers them in.
func postgresStatics(spec *v1.StreamingQuerySpec) []*v1.StaticSide {
	var out []*v1.StaticSide
	for i := range spec.Transform {
		if j := spec.Transform[i].Join; j != nil && j.Static != nil && j.Static.Kind() == v1.StaticPostgresKind {
			out = append(out, j.Static)
		}
	}
	return out
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
