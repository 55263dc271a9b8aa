package delta_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/engine/delta"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// duckDBModules returns the node_modules folder holding @duckdb/node-api,
// failing the test with the command that installs it when it is missing.
func duckDBModules(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node not found: apt-get install nodejs npm, then run `hack/tools.sh duckdb`")
	}
	modules := filepath.Join(filepath.Dir(testenv.ToolsDir()), "node", "node_modules")
	if _, err := os.Stat(filepath.Join(modules, "@duckdb", "node-api", "package.json")); err != nil {
		t.Fatalf("DuckDB's Node API is not installed in %s: run `make tools` (or `hack/tools.sh duckdb`)", modules)
	}
	return modules
}

// duckDBView is what testdata/verify.mjs prints: the table as DuckDB reads
// it.
type duckDBView struct {
	Version int64            `json:"version"`
	Txns    map[string]int64 `json:"txns"`
	Columns []struct {
		Name string `json:"name"`
		Type string `json:"type"`
	} `json:"columns"`
	Rows [][]*string `json:"rows"`
}

// readWithDuckDB replays the table at dir with DuckDB.
func readWithDuckDB(t testing.TB, dir string) duckDBView {
	t.Helper()
	modules := duckDBModules(t)
	script, err := filepath.Abs(filepath.Join("testdata", "verify.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", script, dir)
	cmd.Env = append(os.Environ(), "DUCKDB_NODE_MODULES="+modules)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node verify.mjs %s: %v\n%s", dir, err, stderr.String())
	}
	var v duckDBView
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("parse verify.mjs output: %v\n%s", err, out)
	}
	return v
}

// typedRows turns DuckDB's strings back into the values Table.ReadAll
// returns.
func (v duckDBView) typedRows(t testing.TB) []delta.Row {
	t.Helper()
	rows := make([]delta.Row, len(v.Rows))
	for i, r := range v.Rows {
		row := make(delta.Row, len(r))
		for j, s := range r {
			if s == nil {
				continue
			}
			var err error
			switch v1.ColumnType(v.Columns[j].Type) {
			case v1.TypeString:
				row[j] = *s
			case v1.TypeLong:
				row[j], err = strconv.ParseInt(*s, 10, 64)
			case v1.TypeDouble:
				row[j], err = strconv.ParseFloat(*s, 64)
			case v1.TypeBoolean:
				row[j], err = strconv.ParseBool(*s)
			case v1.TypeTimestamp:
				var us int64
				us, err = strconv.ParseInt(*s, 10, 64)
				row[j] = time.UnixMicro(us).UTC()
			default:
				err = fmt.Errorf("type %q", v.Columns[j].Type)
			}
			if err != nil {
				t.Fatalf("row %d column %s: %v", i, v.Columns[j].Name, err)
			}
		}
		rows[i] = row
	}
	return sortRows(rows)
}

// DuckDB, replaying _delta_log on its own, sees the rows and the txn
// versions this package wrote: across a checkpoint, partitions (with a null
// partition), a column added later, and a complete-mode overwrite.
func TestDuckDBReadsWhatWeWrite(t *testing.T) {
	duckDBModules(t)
	ctx := context.Background()
	withNote := append(orderColumns[:len(orderColumns):len(orderColumns)], v1.Column{Name: "note", Type: v1.TypeString})
	for _, tc := range []struct {
		name   string
		writes func(tbl *delta.Table) error
	}{
		{"appends across a checkpoint", func(tbl *delta.Table) error {
			for b := range 13 {
				if _, err := tbl.Write(ctx, delta.Write{AppID: "query-1", Version: int64(b), Columns: orderColumns, Rows: orders(b, 40)}); err != nil {
					return err
				}
			}
			_, err := tbl.Write(ctx, delta.Write{AppID: "query-2", Version: 0, Columns: orderColumns, Rows: orders(99, 5)})
			return err
		}},
		{"partitioned, with a new column", func(tbl *delta.Table) error {
			for b := range 12 {
				cols, rows := orderColumns, orders(b, 25)
				if b >= 6 {
					cols = withNote
					for i := range rows {
						rows[i] = append(rows[i], fmt.Sprintf("note %d", i))
					}
				}
				if b == 3 {
					rows[0][1] = nil // a null partition
				}
				if _, err := tbl.Write(ctx, delta.Write{AppID: "q", Version: int64(b), Columns: cols, Rows: rows, PartitionColumns: []string{"country"}}); err != nil {
					return err
				}
			}
			return nil
		}},
		{"complete mode", func(tbl *delta.Table) error {
			for b := range 11 {
				if _, err := tbl.Write(ctx, delta.Write{AppID: "agg", Version: int64(b), Columns: orderColumns, Rows: orders(b, 4+b), Mode: delta.Complete}); err != nil {
					return err
				}
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			store, err := checkpoint.OpenDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.writes(delta.Open(store)); err != nil {
				t.Fatalf("write: %v", err)
			}
			snap, _, want := readAll(t, store)
			got := readWithDuckDB(t, dir)
			if got.Version != snap.Version {
				t.Errorf("DuckDB replayed version %d, want %d", got.Version, snap.Version)
			}
			wantTxns := map[string]int64{}
			for _, x := range snap.Txns() {
				wantTxns[x.AppID] = x.Version
			}
			if diff := cmp.Diff(wantTxns, got.Txns); diff != "" {
				t.Errorf("txns diff (-ours +DuckDB):\n%s", diff)
			}
			if diff := cmp.Diff(want, got.typedRows(t)); diff != "" {
				t.Errorf("rows diff (-ours +DuckDB):\n%s", diff)
			}
			t.Logf("DuckDB read %d rows at version %d, txns %v", len(got.Rows), got.Version, got.Txns)
		})
	}
}
