package spark

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
)

// TestRunnerSecrets: each PostgreSQL static side's password reaches the runner under the
// variable its part of the plan names, by its place in transform order; the sink's does not
// (the Go sink writes the rows: rows.go).
func TestRunnerSecrets(t *testing.T) {
	col := qt.Col("id", v1.TypeString)
	spec := qt.Make("q", "ns").FilesSource("orders", "/in", v1.FormatJSON, col).
		Join(v1.Join{Keys: qt.Keys("id", "id"), RightPrefix: "a_", Static: qt.StaticPostgres("a", "A_DSN", col)}).
		Join(v1.Join{Keys: qt.Keys("id", "id"), RightPrefix: "f_", Static: qt.StaticFiles("/f", v1.FormatJSON, col)}).
		Join(v1.Join{Keys: qt.Keys("id", "id"), RightPrefix: "b_", Static: qt.StaticPostgres("b", "B_DSN", col)}).
		Sink(v1.Sink{Postgres: &v1.PostgresSink{Table: "out", Connection: v1.PostgresConnection{DSNEnv: "SINK_DSN"}}}).Obj().Spec
	env := map[string]string{
		"A_DSN":    "postgres://a:pa@h/db",
		"B_DSN":    "host=h user=b password=pb dbname=db",
		"SINK_DSN": "postgres://s:ps@h/db",
	}
	got := runnerSecrets(&spec, func(k string) string { return env[k] })
	want := []string{StaticPasswordEnv(0) + "=pa", StaticPasswordEnv(1) + "=pb"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("runnerSecrets (-want +got):\n%s", diff)
	}
}
