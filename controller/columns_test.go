package controller_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// TestWideColumns: `kubectl get sq -o wide` shows the store, the checkpoint location and the
// restarts besides the default columns (the API server's Table, which kubectl prints; wide
// adds the columns of priority 1).
func TestWideColumns(t *testing.T) {
	cfg := testenv.ControlPlane(t)
	f := newFixture(t, cfg)
	f.create(f.query("orders").Obj())
	q := f.get("orders")
	q.Status = v1.StreamingQueryStatus{Phase: v1.PhaseRunning, CheckpointLocation: f.location("orders"), Restarts: 2, LatestCommittedBatch: ptr.To(int64(4))}
	if err := f.c.Status().Update(context.Background(), q); err != nil {
		t.Fatal(err)
	}

	table := getTable(t, cfg, "/apis/"+v1.GroupVersion.String()+"/namespaces/"+f.ns+"/streamingqueries")
	cells := map[string]any{}
	wide := map[string]bool{}
	for i, c := range table.ColumnDefinitions {
		if len(table.Rows) == 1 {
			cells[c.Name] = table.Rows[0].Cells[i]
		}
		if c.Priority > 0 {
			wide[c.Name] = true
		}
	}
	if len(table.Rows) != 1 {
		t.Fatalf("table rows = %d, want 1", len(table.Rows))
	}
	want := map[string]any{"Store": f.store.Name, "Location": f.location("orders"), "Restarts": float64(2)}
	for name, v := range want {
		if !wide[name] || cells[name] != v {
			t.Errorf("column %s: wide %v, cell %v; want a wide column with %v", name, wide[name], cells[name], v)
		}
	}
	for _, name := range []string{"Name", "Phase", "Batch", "Lag", "Guarantee", "Age"} {
		if _, ok := cells[name]; !ok || wide[name] {
			t.Errorf("column %s missing or only in -o wide; columns %v", name, table.ColumnDefinitions)
		}
	}
}

// TestShortNamesAreUnique: no short name of ours is also a short name of another resource
// the API server serves (`cs` is componentstatuses': kubectl would never reach ours).
func TestShortNamesAreUnique(t *testing.T) {
	dc, err := discovery.NewDiscoveryClientForConfig(testenv.ControlPlane(t))
	if err != nil {
		t.Fatal(err)
	}
	lists, err := dc.ServerPreferredResources()
	if err != nil {
		t.Fatal(err)
	}
	owners := map[string][]string{}
	ours := map[string][]string{}
	for _, l := range lists {
		for _, r := range l.APIResources {
			for _, s := range r.ShortNames {
				owners[s] = append(owners[s], l.GroupVersion+"/"+r.Name)
			}
			if l.GroupVersion == v1.GroupVersion.String() {
				ours[r.Name] = r.ShortNames
			}
		}
	}
	want := map[string][]string{"streamingqueries": {"sq"}, "checkpointstores": {"ckpts"}}
	for name, shorts := range want {
		if !slices.Equal(ours[name], shorts) {
			t.Errorf("%s short names = %v, want %v", name, ours[name], shorts)
		}
	}
	for _, shorts := range ours {
		for _, s := range shorts {
			if len(owners[s]) > 1 {
				t.Errorf("short name %s is taken by %v", s, owners[s])
			}
		}
	}
}

// getTable GETs path as the Table kubectl asks for.
func getTable(t *testing.T, cfg *rest.Config, path string) *metav1.Table {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	body, err := cs.CoreV1().RESTClient().Get().AbsPath(path).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("GET %s as a Table: %v\n%s", path, err, body)
	}
	var table metav1.Table
	if err := json.Unmarshal(body, &table); err != nil {
		t.Fatalf("decode Table: %v\n%s", err, body)
	}
	return &table
}
