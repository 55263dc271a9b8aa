package blob_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/engine/blob"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// folders returns a fresh local folder and a fresh S3 prefix, so that every
// behaviour is checked on both.
func folders(t *testing.T) map[string]blob.Folder {
	t.Helper()
	dir, err := blob.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := testenv.S3(t)
	s3, err := blob.Open("s3://"+s.Bucket+"/some/prefix", s.Options()...)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]blob.Folder{"local": dir, "s3": s3}
}

func TestFolder(t *testing.T) {
	ctx := context.Background()
	for name, f := range folders(t) {
		t.Run(name, func(t *testing.T) {
			if _, err := f.Get(ctx, "missing"); !errors.Is(err, blob.ErrNotFound) {
				t.Fatalf("Get(missing) = %v, want ErrNotFound", err)
			}
			if err := f.Put(ctx, "a/b.json", []byte("one")); err != nil {
				t.Fatal(err)
			}
			if err := f.Put(ctx, "a/b.json", []byte("two")); err != nil {
				t.Fatalf("Put over an object: %v", err)
			}
			if got, err := f.Get(ctx, "a/b.json"); err != nil || string(got) != "two" {
				t.Fatalf("Get = %q, %v; want two", got, err)
			}
			if err := f.Create(ctx, "m/1", []byte("x")); err != nil {
				t.Fatal(err)
			}
			if err := f.Create(ctx, "m/1", []byte("y")); !errors.Is(err, blob.ErrExists) {
				t.Fatalf("second Create = %v, want ErrExists", err)
			}
			if got, _ := f.Get(ctx, "m/1"); string(got) != "x" {
				t.Fatalf("Create replaced the object: %q", got)
			}
			if err := f.Put(ctx, "_hidden/x", []byte("h")); err != nil {
				t.Fatal(err)
			}
			list, err := f.List(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, o := range list {
				keys = append(keys, o.Key)
				if o.ModTime.IsZero() || time.Since(o.ModTime) > time.Hour {
					t.Errorf("%s: ModTime %v", o.Key, o.ModTime)
				}
			}
			if diff := cmp.Diff([]string{"_hidden/x", "a/b.json", "m/1"}, keys); diff != "" {
				t.Errorf("List (-want +got):\n%s", diff)
			}
			var visible []string
			for _, o := range blob.Visible(list) {
				visible = append(visible, o.Key)
			}
			if diff := cmp.Diff([]string{"a/b.json", "m/1"}, visible); diff != "" {
				t.Errorf("Visible (-want +got):\n%s", diff)
			}
			if list, _ := f.List(ctx, "m/"); len(list) != 1 || list[0].Key != "m/1" || list[0].Size != 1 {
				t.Errorf("List(m/) = %+v", list)
			}
			if err := f.Delete(ctx, "m/1"); err != nil {
				t.Fatal(err)
			}
			if err := f.Delete(ctx, "m/1"); err != nil {
				t.Fatalf("Delete of a missing object: %v", err)
			}
		})
	}
}

// TestCreateRace checks that of several concurrent creators exactly one wins.
func TestCreateRace(t *testing.T) {
	ctx := context.Background()
	for name, f := range folders(t) {
		t.Run(name, func(t *testing.T) {
			for round := range 5 {
				key := "race/" + string(rune('a'+round))
				var (
					wg   sync.WaitGroup
					mu   sync.Mutex
					wins int
				)
				for range 6 {
					wg.Go(func() {
						err := f.Create(ctx, key, []byte("v"))
						if err != nil && !errors.Is(err, blob.ErrExists) {
							t.Errorf("Create: %v", err)
						}
						if err == nil {
							mu.Lock()
							wins++
							mu.Unlock()
						}
					})
				}
				wg.Wait()
				if wins != 1 {
					t.Errorf("round %d: %d creators won, want 1", round, wins)
				}
			}
		})
	}
}

func TestDirListSkipsTemporaryFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ".tmp-123"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := blob.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	list, err := f.List(context.Background(), "")
	if err != nil || len(list) != 1 || list[0].Key != "data.json" {
		t.Fatalf("List = %+v, %v; want data.json only", list, err)
	}
}

// Open resolves a relative path against the working directory and refuses
// what checkpoint.ParseLocation refuses.
func TestOpen(t *testing.T) {
	wd, _ := os.Getwd()
	for in, want := range map[string]string{
		"/data/in":         "/data/in",
		"file:///data/in/": "/data/in",
		"rel/dir":          filepath.Join(wd, "rel/dir"),
	} {
		f, err := blob.Open(in)
		if err != nil || f.Location() != want {
			t.Errorf("Open(%q) = %v, %v; want the folder %s", in, f, err, want)
		}
	}
	for _, in := range []string{"s3:///nobucket", "gs://bucket/x", ""} {
		if _, err := blob.Open(in); !errors.Is(err, checkpoint.ErrInvalidLocation) {
			t.Errorf("Open(%q) error = %v, want ErrInvalidLocation", in, err)
		}
	}
}
