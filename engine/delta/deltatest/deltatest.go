// Package deltatest reads a Delta table the way other implementations do,
// for tests: with DuckDB (verify.mjs, which replays _delta_log on its own)
// and with rivian/delta-go, next to this module's reader. [EveryVersion]
// checks that the three agree on every version of a table.
package deltatest

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	deltago "github.com/rivian/delta-go"
	"github.com/rivian/delta-go/lock/nillock"
	"github.com/rivian/delta-go/state/localstate"
	"github.com/rivian/delta-go/storage"
	"github.com/rivian/delta-go/storage/filestore"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/engine/delta"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

//go:embed verify.mjs
var verifyScript []byte

// DuckDBModules returns the node_modules folder holding @duckdb/node-api,
// failing the test with the command that installs it when it is missing.
func DuckDBModules(t testing.TB) string {
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

// View is what verify.mjs prints: one version of the table as DuckDB reads
// it.
type View struct {
	Version int64            `json:"version"`
	Txns    map[string]int64 `json:"txns"`
	Columns []struct {
		Name string `json:"name"`
		Type string `json:"type"`
	} `json:"columns"`
	Files []string    `json:"files"` // active files, unescaped, sorted
	Rows  [][]*string `json:"rows"`
}

// ReadWithDuckDB replays the table at dir with DuckDB and returns its
// newest version.
func ReadWithDuckDB(t testing.TB, dir string) View {
	t.Helper()
	views := duckDB(t, dir)
	if len(views) != 1 {
		t.Fatalf("verify.mjs printed %d views, want 1", len(views))
	}
	return views[0]
}

// ReadEveryVersionWithDuckDB replays the table at dir with DuckDB from
// commit 0 and returns every version, in order.
func ReadEveryVersionWithDuckDB(t testing.TB, dir string) []View {
	t.Helper()
	return duckDB(t, dir, "--every-version")
}

func duckDB(t testing.TB, dir string, args ...string) []View {
	t.Helper()
	modules := DuckDBModules(t)
	script := filepath.Join(t.TempDir(), "verify.mjs")
	if err := os.WriteFile(script, verifyScript, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", append([]string{script, dir}, args...)...)
	cmd.Env = append(os.Environ(), "DUCKDB_NODE_MODULES="+modules)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node verify.mjs %s: %v\n%s", dir, err, stderr.String())
	}
	var views []View
	lines := bufio.NewScanner(bytes.NewReader(out))
	lines.Buffer(nil, 64<<20)
	for lines.Scan() {
		var v View
		if err := json.Unmarshal(lines.Bytes(), &v); err != nil {
			t.Fatalf("parse verify.mjs output: %v\n%s", err, lines.Bytes())
		}
		views = append(views, v)
	}
	return views
}

// TypedRows turns DuckDB's strings back into the values Table.ReadAll
// returns, in DuckDB's order.
func (v View) TypedRows(t testing.TB) []delta.Row {
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
	return rows
}

// DeltaGo loads the table at dir with rivian/delta-go, at version or, when
// version is nil, its newest.
func DeltaGo(t testing.TB, dir string, version *int64) *deltago.Table {
	t.Helper()
	dg := deltago.NewTable(filestore.New(storage.NewPath(dir)), nillock.New(), localstate.New(-1))
	var err error
	if version == nil {
		err = dg.Load(nil)
	} else {
		err = dg.LoadVersion(version)
	}
	if err != nil && !errors.Is(err, deltago.ErrUnsupportedWriterVersion) {
		t.Fatalf("delta-go load of %s at version %v: %v", dir, version, err)
	}
	return dg
}

// Version is one version of a table as every reader agreed it reads.
type Version struct {
	Version int64
	Txns    map[string]int64
	Rows    []delta.Row // sorted by SortRows
}

// EveryVersion reads every version of the table at dir (a local folder)
// with this module's reader, DuckDB and delta-go, fails t where they
// disagree (rows, active files, txn versions) or where an active file is
// missing, and returns the versions.
func EveryVersion(t testing.TB, dir string) []Version {
	t.Helper()
	ctx := context.Background()
	store, err := checkpoint.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	tbl := delta.Open(store)
	latest, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatalf("snapshot of %s: %v", dir, err)
	}
	duck := ReadEveryVersionWithDuckDB(t, dir)
	if int64(len(duck)) != latest.Version+1 {
		t.Fatalf("DuckDB replayed %d versions, want %d", len(duck), latest.Version+1)
	}
	var out []Version
	for v := int64(0); v <= latest.Version; v++ {
		s, err := tbl.SnapshotAt(ctx, v)
		if err != nil {
			t.Fatalf("version %d: %v", v, err)
		}
		_, rows, err := tbl.ReadAll(ctx, s)
		if err != nil {
			t.Fatalf("read version %d: %v", v, err)
		}
		rows = SortRows(rows)
		txns := map[string]int64{}
		for _, x := range s.Txns() {
			txns[x.AppID] = x.Version
		}
		var files []string
		for _, f := range s.Files() {
			p := unescape(f.Path)
			files = append(files, p)
			if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
				t.Errorf("version %d: active file %s: %v", v, p, err)
			}
		}
		slices.Sort(files)

		d := duck[v]
		if d.Version != v {
			t.Fatalf("DuckDB's view %d is of version %d", v, d.Version)
		}
		if diff := gocmp.Diff(rows, SortRows(d.TypedRows(t))); diff != "" {
			t.Errorf("version %d: rows (-ours +DuckDB):\n%s", v, diff)
		}
		if diff := gocmp.Diff(files, d.Files); diff != "" {
			t.Errorf("version %d: active files (-ours +DuckDB):\n%s", v, diff)
		}
		if diff := gocmp.Diff(txns, d.Txns); diff != "" {
			t.Errorf("version %d: txns (-ours +DuckDB):\n%s", v, diff)
		}

		dg := DeltaGo(t, dir, &v).State
		if dg.Version != v {
			t.Errorf("delta-go loaded version %d, want %d", dg.Version, v)
		}
		var theirs []string
		for p := range dg.Files {
			theirs = append(theirs, unescape(p))
		}
		slices.Sort(theirs)
		if diff := gocmp.Diff(files, theirs); diff != "" {
			t.Errorf("version %d: active files (-ours +delta-go):\n%s", v, diff)
		}
		if diff := gocmp.Diff(txns, dg.AppTransactionVersion, cmpEmpty); diff != "" {
			t.Errorf("version %d: txns (-ours +delta-go):\n%s", v, diff)
		}
		out = append(out, Version{Version: v, Txns: txns, Rows: rows})
	}
	return out
}

// cmpEmpty treats a nil and an empty map as equal.
var cmpEmpty = gocmp.FilterValues(func(a, b map[string]int64) bool { return len(a) == 0 && len(b) == 0 }, gocmp.Ignore())

// SortRows returns rows ordered by their printed values.
func SortRows(rows []delta.Row) []delta.Row {
	out := slices.Clone(rows)
	slices.SortFunc(out, func(a, b delta.Row) int { return cmp.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	return out
}

// unescape turns a Delta add path (URL-escaped per segment) into the file's
// path in the table's folder.
func unescape(p string) string {
	if k, err := url.PathUnescape(p); err == nil {
		return k
	}
	return p
}

// Snapshots returns the table's snapshot at each of its versions, from 0 to
// the newest (time travel), failing t where one cannot be read.
func Snapshots(t testing.TB, tbl *delta.Table) []*delta.Snapshot {
	t.Helper()
	ctx := context.Background()
	latest, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	snaps := make([]*delta.Snapshot, 0, latest.Version+1)
	for v := int64(0); v < latest.Version; v++ {
		s, err := tbl.SnapshotAt(ctx, v)
		if err != nil {
			t.Fatalf("snapshot at version %d: %v", v, err)
		}
		snaps = append(snaps, s)
	}
	return append(snaps, latest)
}
