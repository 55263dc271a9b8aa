package s3_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// OpenFolder resolves a relative path against the working directory and refuses what
// checkpoint.ParseLocation refuses.
func TestOpenFolder(t *testing.T) {
	wd, _ := os.Getwd()
	for in, want := range map[string]string{
		"/data/in":         "/data/in",
		"file:///data/in/": "/data/in",
		"rel/dir":          filepath.Join(wd, "rel/dir"),
	} {
		f, err := s3.OpenFolder(in)
		if err != nil || f.Location() != want {
			t.Errorf("OpenFolder(%q) = %v, %v; want the folder %s", in, f, err, want)
		}
	}
	for _, in := range []string{"s3:///nobucket", "gs://bucket/x", ""} {
		if _, err := s3.OpenFolder(in); !errors.Is(err, checkpoint.ErrInvalidLocation) {
			t.Errorf("OpenFolder(%q) error = %v, want ErrInvalidLocation", in, err)
		}
	}
}

// OpenFolder sends no request for an S3 folder (a missing bucket is found by the first
// one), and the folder it returns reads and writes the prefix.
func TestOpenFolderOnS3(t *testing.T) {
	srv := testenv.S3(t)
	ctx := t.Context()
	missing, err := s3.OpenFolder("s3://no-such-bucket-here/in", serverOptions(srv)...)
	if err != nil {
		t.Fatalf("OpenFolder of a missing bucket sent a request: %v", err)
	}
	if _, err := missing.List(ctx, ""); !errors.Is(err, s3.ErrNoSuchBucket) {
		t.Errorf("List in a missing bucket = %v, want ErrNoSuchBucket", err)
	}
	f, err := s3.OpenFolder("s3://"+srv.Bucket+"/folder/in/", serverOptions(srv)...)
	if err != nil {
		t.Fatal(err)
	}
	if want := "s3://" + srv.Bucket + "/folder/in"; f.Location() != want {
		t.Errorf("Location() = %q, want %q", f.Location(), want)
	}
	if err := f.Put(ctx, "a.json", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	list, err := f.List(ctx, "")
	if err != nil || len(list) != 1 || list[0].Key != "a.json" || list[0].Size != 2 {
		t.Errorf("List = %+v, %v; want a.json of 2 bytes", list, err)
	}
}
