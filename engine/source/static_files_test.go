package source_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/source"
)

// TestStaticFilesFiles: the files a snapshot lists, for another reader (the spark runtime) to
// read exactly them: a file added since is not among them; a file gone or rewritten to another
// size since is an error naming it.
func TestStaticFilesFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.json", `{"id":"a","n":1}`+"\n")
	write("b.json", `{"id":"b","n":2}`+"\n")
	spec := &v1.StaticSide{Files: &v1.StaticFiles{Path: dir, Format: v1.FormatJSON}, Schema: &v1.Schema{Columns: schema}}
	table, err := source.NewStaticFiles(ctx, spec, engine.StaticEnv{Join: "j", Open: func(loc string) (checkpoint.Store, error) { return checkpoint.OpenDir(loc) }})
	if err != nil {
		t.Fatal(err)
	}
	files := table.(*source.StaticFiles)
	snap, err := files.Latest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	write("c.json", `{"id":"c","n":3}`+"\n")
	got, err := files.Files(ctx, snap)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")}; !cmp.Equal(got, want) {
		t.Errorf("Files = %v, want %v", got, want)
	}

	write("b.json", `{"id":"b","n":22}`+"\n")
	if _, err := files.Files(ctx, snap); err == nil || !strings.Contains(err.Error(), "b.json is 18 bytes, not the 17") {
		t.Errorf("Files after b.json was rewritten: %v, want an error naming it and its sizes", err)
	}
	if err := os.Remove(filepath.Join(dir, "a.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := files.Files(ctx, snap); !errors.Is(err, checkpoint.ErrNotFound) || !strings.Contains(err.Error(), "a.json") {
		t.Errorf("Files after a.json was removed: %v, want ErrNotFound naming it", err)
	}
}
