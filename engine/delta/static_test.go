package delta_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/delta"
)

// TestStaticReadsTheNamedVersion: the static side of a join names the table's newest version
// and reads exactly a named version later, though the table moved on (time travel through
// the log), on a local folder and on S3.
func TestStaticReadsTheNamedVersion(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			l := newTableLocation(t, kind)
			tbl := l.table(t)
			spec := &v1.StaticSide{Delta: &v1.StaticDelta{Path: l.path}, Schema: &v1.Schema{Columns: sourceColumns}}
			st, err := delta.NewStatic(ctx, spec, engine.StaticEnv{Join: "customers", Open: l.open})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Latest(ctx); err == nil || !strings.Contains(err.Error(), "no commit yet") {
				t.Errorf("Latest() of a table without a commit = %v, want an error saying so", err)
			}
			write := func(rows ...delta.Row) {
				if _, err := tbl.Write(ctx, delta.Write{Columns: sourceColumns, Rows: rows}); err != nil {
					t.Fatal(err)
				}
			}
			write(delta.Row{"c1", int64(1)})
			v0, err := st.Latest(ctx)
			if err != nil || string(v0) != `{"version":0}` {
				t.Fatalf("Latest() = %s, %v; want version 0", v0, err)
			}
			write(delta.Row{"c2", int64(2)})
			if v1, _ := st.Latest(ctx); string(v1) != `{"version":1}` {
				t.Errorf("Latest() after a commit = %s, want version 1", v1)
			}
			rows, err := st.Read(ctx, v0)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]engine.Row{{"c1", int64(1)}}, rows); diff != "" {
				t.Errorf("Read(version 0) mismatch (-want +got):\n%s", diff)
			}
			if rows, _ := st.Read(ctx, []byte(`{"version":1}`)); len(rows) != 2 {
				t.Errorf("Read(version 1) = %v, want 2 rows", rows)
			}
		})
	}
}
