package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

type pgService struct {
	dsn  string // without a database name: postgres://user@host:port
	proc *process
}

// Postgres returns a connection string for a new, empty database on the shared
// PostgreSQL server of this test binary (Debian's PostgreSQL, in a temp folder
// on a loopback port). LOCKSTEP_TEST_POSTGRES_DSN points at a running server
// (its user must be allowed to create databases).
func Postgres(t testing.TB) string {
	t.Helper()
	shared.mu.Lock()
	if shared.pg == nil && shared.pgErr == nil {
		shared.pg, shared.pgErr = startPostgres()
	}
	svc, err := shared.pg, shared.pgErr
	shared.buckets++
	n := shared.buckets
	shared.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	db := dbName(t.Name(), n)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, svc.dsn+"/postgres")
	if err != nil {
		t.Fatalf("connect to postgres: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		t.Fatalf("create database %s: %v", db, err)
	}
	return svc.dsn + "/" + db
}

var nonIdentChars = regexp.MustCompile(`[^a-z0-9_]+`)

func dbName(test string, n int) string {
	name := nonIdentChars.ReplaceAllString(strings.ToLower(test), "_")
	if len(name) > 40 {
		name = name[:40]
	}
	return fmt.Sprintf("t%d_%s", n, name)
}

func startPostgres() (*pgService, error) {
	if dsn := os.Getenv("LOCKSTEP_TEST_POSTGRES_DSN"); dsn != "" {
		return &pgService{dsn: strings.TrimSuffix(dsn, "/")}, nil
	}
	initdb, err := LookupTool("initdb")
	if err != nil {
		return nil, err
	}
	postgres, err := LookupTool("postgres")
	if err != nil {
		return nil, err
	}
	// Resolve the cache's links: the server may run as a user who cannot enter $HOME.
	if initdb, err = filepath.EvalSymlinks(initdb); err != nil {
		return nil, err
	}
	if postgres, err = filepath.EvalSymlinks(postgres); err != nil {
		return nil, err
	}
	dir, err := sharedDir()
	if err != nil {
		return nil, err
	}
	pgDir := filepath.Join(dir, "postgres")
	if err := os.MkdirAll(pgDir, 0o755); err != nil {
		return nil, err
	}
	data := filepath.Join(pgDir, "data")
	const user = "lockstep"
	// initdb and postgres refuse to run as root; run them as an unprivileged user then.
	initCmd := exec.Command(initdb, "-D", data, "-U", user, "--auth=trust", "--no-sync", "-E", "UTF8")
	if out, err := asUnprivileged(initCmd, pgDir).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	args := []string{"-D", data, "-p", fmt.Sprint(port), "-h", "127.0.0.1", "-k", data, "-F", "-c", "fsync=off"}
	p, err := startProcessAs("postgres", postgres, args, filepath.Join(pgDir, "postgres.log"), pgDir)
	if err != nil {
		return nil, err
	}
	dsn := fmt.Sprintf("postgres://%s@127.0.0.1:%d", user, port)
	ready := func(ctx context.Context) error {
		c, err := pgx.Connect(ctx, dsn+"/postgres")
		if err != nil {
			return err
		}
		return c.Close(ctx)
	}
	if err := p.waitReady(ready); err != nil {
		return nil, err
	}
	shared.stops = append(shared.stops, p.stop)
	return &pgService{dsn: dsn, proc: p}, nil
}
