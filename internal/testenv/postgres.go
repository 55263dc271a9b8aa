package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

type pgService struct {
	dsn string // without a database name: postgres://user@host:port

	mu    sync.Mutex
	proc  *process
	start func() (*process, error) // starts the server again on its data folder and port
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
	shared.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	return svc.database(t)
}

// database creates a new, empty database on the server and returns its
// connection string.
func (svc *pgService) database(t testing.TB) string {
	t.Helper()
	shared.mu.Lock()
	shared.buckets++
	n := shared.buckets
	shared.mu.Unlock()
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

// PostgresServer is a PostgreSQL server of one test's own, which the test
// stops and starts again while a client uses it (the shared server of
// [Postgres] stays up for the other tests).
type PostgresServer struct{ svc *pgService }

// OwnPostgres starts a PostgreSQL server for t alone and stops it when t
// ends.
func OwnPostgres(t testing.TB) *PostgresServer {
	t.Helper()
	shared.mu.Lock()
	dir, err := sharedDir()
	shared.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	pgDir, err := os.MkdirTemp(dir, "postgres-")
	if err != nil {
		t.Fatal(err)
	}
	svc, err := newPostgres(pgDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		svc.mu.Lock()
		defer svc.mu.Unlock()
		svc.proc.stop()
	})
	return &PostgresServer{svc: svc}
}

// Database returns a connection string for a new, empty database on the
// server.
func (s *PostgresServer) Database(t testing.TB) string {
	t.Helper()
	return s.svc.database(t)
}

// PostgresStop is how [PostgresServer.Stop] shuts the server down.
type PostgresStop int

const (
	// PostgresFast ends every session, rolling back the transactions in
	// flight, and shuts down cleanly (SIGINT, pg_ctl -m fast).
	PostgresFast PostgresStop = iota
	// PostgresImmediate ends the server at once, as a crash does (SIGQUIT,
	// pg_ctl -m immediate): the next start recovers from the WAL.
	PostgresImmediate
)

// Stop shuts the server down and waits until it has exited.
func (s *PostgresServer) Stop(mode PostgresStop) {
	s.svc.mu.Lock()
	defer s.svc.mu.Unlock()
	sig := syscall.SIGINT
	if mode == PostgresImmediate {
		sig = syscall.SIGQUIT
	}
	p := s.svc.proc
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.kill()
	}
}

// Start starts the stopped server again, on the same port and data, and
// waits until it accepts connections. It may be called from any goroutine.
func (s *PostgresServer) Start() error {
	s.svc.mu.Lock()
	defer s.svc.mu.Unlock()
	if !s.svc.proc.exited() {
		return nil
	}
	p, err := s.svc.start()
	if err != nil {
		return fmt.Errorf("restart postgres: %w", err)
	}
	s.svc.proc = p
	return nil
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
	dir, err := sharedDir()
	if err != nil {
		return nil, err
	}
	svc, err := newPostgres(filepath.Join(dir, "postgres"))
	if err != nil {
		return nil, err
	}
	shared.stops = append(shared.stops, func() {
		svc.mu.Lock()
		defer svc.mu.Unlock()
		svc.proc.stop()
	})
	return svc, nil
}

// newPostgres initialises a cluster in pgDir and starts a server on it, on a
// free loopback port.
func newPostgres(pgDir string) (*pgService, error) {
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
	dsn := fmt.Sprintf("postgres://%s@127.0.0.1:%d", user, port)
	ready := func(ctx context.Context) error {
		c, err := pgx.Connect(ctx, dsn+"/postgres")
		if err != nil {
			return err
		}
		return c.Close(ctx)
	}
	start := func() (*process, error) {
		p, err := startProcessAs("postgres", postgres, args, filepath.Join(pgDir, "postgres.log"), pgDir)
		if err != nil {
			return nil, err
		}
		if err := p.waitReady(ready); err != nil {
			return nil, err
		}
		return p, nil
	}
	p, err := start()
	if err != nil {
		return nil, err
	}
	return &pgService{dsn: dsn, proc: p, start: start}, nil
}
