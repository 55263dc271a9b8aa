package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// withDSNEnv writes a copy of examples/queries/revenue-to-postgres.yaml into dir whose
// connection reads the variable name, and returns its path.
func withDSNEnv(t *testing.T, dir, name string) string {
	t.Helper()
	data, err := os.ReadFile("../../examples/queries/revenue-to-postgres.yaml")
	if err != nil {
		t.Fatal(err)
	}
	y := strings.Replace(string(data), "dsnEnv: REVENUE_DB_DSN", "dsnEnv: "+name, 1)
	return writeFile(t, filepath.Join(dir, name+".yaml"), y)
}

// lockstep plan identifies a postgres sink by the server and database its connection string
// names, read from the environment: a renamed variable naming the same database is no
// change, one naming another server is refused, and an unset one falls back to the
// variable's name with a note.
func TestPlanPostgresSinkIdentity(t *testing.T) {
	dir := t.TempDir()
	old := withDSNEnv(t, dir, "REVENUE_DB_DSN")
	env := map[string]string{
		"REVENUE_DB_DSN": "postgres://app:secret@db1.example.com:5432/shop",
		"SAME_DB_DSN":    "host=DB1.example.com dbname=shop user=other password=other",
		"OTHER_DB_DSN":   "postgres://app:secret@db2.example.com:5432/shop",
	}
	for _, tc := range []struct {
		variable string
		wantCode int
		want     []string
	}{
		{"SAME_DB_DSN", exitOK, []string{"Verdict: allowed"}},
		{"OTHER_DB_DSN", exitRefused, []string{"✗ postgres-sink-table spec.sink.postgres.connection",
			"postgres table revenue_by_country on db1.example.com:5432/shop (connection env/REVENUE_DB_DSN) → postgres table revenue_by_country on db2.example.com:5432/shop (connection env/OTHER_DB_DSN)"}},
		{"UNSET_DB_DSN", exitRefused, []string{"Note: variable UNSET_DB_DSN: the postgres connection string cannot be read: it is empty",
			"could not be read, so the sink is judged by where its connection string comes from (env/UNSET_DB_DSN, was env/REVENUE_DB_DSN)"}},
	} {
		t.Run(tc.variable, func(t *testing.T) {
			o := planOptions{getenv: func(k string) string { return env[k] }}
			got, code, err := runPlan(t, o, "-f", withDSNEnv(t, dir, tc.variable), "--from", old)
			if code != tc.wantCode {
				t.Errorf("exit %d (%v), want %d", code, err, tc.wantCode)
			}
			containsAll(t, "output", got, tc.want...)
			if strings.Contains(got, "secret") {
				t.Errorf("output quotes a password:\n%s", got)
			}
		})
	}
}

// The engine records the postgres sink's server and database in the checkpoint's shape: run
// again with a renamed variable holding the same connection string, the query continues; with
// a variable (renamed or not) naming another database, it is refused before its first batch
// (exit 3).
func TestRunRefusesAnotherPostgresDatabase(t *testing.T) {
	first, second := testenv.Postgres(t), testenv.Postgres(t)
	dir := exampleDir(t)
	query := map[string]string{}
	for name, dsn := range map[string]string{"REVENUE_DB_DSN": first, "SAME_DB_DSN": first, "OTHER_DB_DSN": second} {
		t.Setenv(name, dsn)
		query[name] = withDSNEnv(t, dir, name)
	}
	t.Chdir(dir)
	if _, stderr, code := runCommand(t, "run", "-f", query["REVENUE_DB_DSN"]); code != exitOK {
		t.Fatalf("first run: exit %d:\n%s", code, stderr)
	}
	if _, stderr, code := runCommand(t, "run", "-f", query["SAME_DB_DSN"]); code != exitOK {
		t.Errorf("run with a renamed variable, same database: exit %d:\n%s", code, stderr)
	}
	_, stderr, code := runCommand(t, "run", "-f", query["OTHER_DB_DSN"])
	if code != exitRefused || !strings.Contains(stderr, "postgres-sink-table") {
		t.Errorf("run with another database: exit %d, want %d (refused by postgres-sink-table):\n%s", code, exitRefused, stderr)
	}
	// The same variable, now naming the other database.
	t.Setenv("REVENUE_DB_DSN", second)
	_, stderr, code = runCommand(t, "run", "-f", query["REVENUE_DB_DSN"])
	if code != exitRefused || !strings.Contains(stderr, "postgres-sink-table") {
		t.Errorf("run with the variable naming another database: exit %d, want %d (refused by postgres-sink-table):\n%s", code, exitRefused, stderr)
	}
}
