// Package pgserver names the PostgreSQL server and database a postgres sink's connection
// string points at, "host:port/database", for the compatibility rules (compat.WithPostgresServer):
// the sink's identity is that server and database and its table, not the name of the Secret or
// variable that carries the string. The engine, lockstep plan (from the environment), the
// admission webhook and the controller (from the Secret) derive it the same way, so that the
// shape the engine records and the one a change is judged by agree.
package pgserver

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
)

// ErrUnreadable means the connection string is absent or does not parse.
var ErrUnreadable = errors.New("the postgres connection string cannot be read")

// Of returns "host:port/database" of the connection string dsn (a libpq URL or key=value
// string) as pgx parses it when the sink connects: the first host, lower-cased. Parts the
// string leaves out take pgx's defaults (the PG* variables of the calling process, then
// libpq's). The error never quotes dsn, which may hold a password.
func Of(dsn string) (string, error) {
	if strings.TrimSpace(dsn) == "" {
		return "", fmt.Errorf("%w: it is empty", ErrUnreadable)
	}
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "", fmt.Errorf("%w: it does not parse", ErrUnreadable)
	}
	return strings.ToLower(cfg.Host) + ":" + strconv.Itoa(int(cfg.Port)) + "/" + cfg.Database, nil
}

// FromSecret returns Of the connection string in a postgres sink's Secret data (its key
// v1.PostgresDSNSecretKey). name is the Secret's, for the error.
func FromSecret(name string, data map[string][]byte) (string, error) {
	dsn, ok := data[v1.PostgresDSNSecretKey]
	if !ok {
		return "", fmt.Errorf("%w: Secret %s has no key %q", ErrUnreadable, name, v1.PostgresDSNSecretKey)
	}
	s, err := Of(string(dsn))
	if err != nil {
		return "", fmt.Errorf("secret %s, key %q: %w", name, v1.PostgresDSNSecretKey, err)
	}
	return s, nil
}

// FromEnv returns Of the connection string in the variable the connection names
// (conn.DSNEnvName()), read with getenv, as the engine reads it.
func FromEnv(conn v1.PostgresConnection, getenv func(string) string) (string, error) {
	name := conn.DSNEnvName()
	s, err := Of(getenv(name))
	if err != nil {
		return "", fmt.Errorf("variable %s: %w", name, err)
	}
	return s, nil
}
