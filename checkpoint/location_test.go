package checkpoint_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/lockstep-dev/lockstep/checkpoint"
)

func TestOpen(t *testing.T) {
	type s3Call struct{ bucket, prefix string }
	for _, tc := range []struct {
		location string
		want     string // Location() of the local store, or bucket|prefix for s3
	}{
		{"/var/lib/ckpt", "/var/lib/ckpt"},
		{"/var/lib/ckpt/", "/var/lib/ckpt"},
		{"/var/lib/../lib/ckpt", "/var/lib/ckpt"},
		{"file:///var/lib/ckpt", "/var/lib/ckpt"},
		{"file://localhost/var/lib/ckpt", "/var/lib/ckpt"},
		{"s3://checkpoints/payments/revenue", "checkpoints|payments/revenue"},
		{"s3://checkpoints/payments/revenue/", "checkpoints|payments/revenue"},
		{"s3://checkpoints", "checkpoints|"},
		{"s3://my.bucket-1/q", "my.bucket-1|q"},
	} {
		t.Run(tc.location, func(t *testing.T) {
			var got s3Call
			opener := func(_ context.Context, bucket, prefix string) (checkpoint.Store, error) {
				got = s3Call{bucket, prefix}
				return newDir(t), nil
			}
			s, err := checkpoint.Open(t.Context(), tc.location, checkpoint.WithS3(opener))
			if err != nil {
				t.Fatalf("Open(%q) error = %v", tc.location, err)
			}
			if got != (s3Call{}) {
				if g := got.bucket + "|" + got.prefix; g != tc.want {
					t.Errorf("Open(%q) called the S3 opener with %q, want %q", tc.location, g, tc.want)
				}
			} else if s.Location() != tc.want {
				t.Errorf("Open(%q).Location() = %q, want %q", tc.location, s.Location(), tc.want)
			}
		})
	}
}

func TestOpenRefusesMalformedLocations(t *testing.T) {
	for _, loc := range []string{
		"",
		"relative/path",
		"./ckpt",
		"file://otherhost/path",
		"file:///",
		"file://",
		"file:relative",
		"file:///path?x=1",
		"s3://",
		"s3:///prefix",
		"s3:/bucket/prefix",
		"s3://Bucket/prefix",
		"s3://bu/prefix",
		"s3://bucket_name/prefix",
		"s3://-bucket/prefix",
		"s3://bucket:9000/prefix",
		"s3://user@bucket/prefix",
		"s3://bucket/a//b",
		"s3://bucket/../up",
		"s3://bucket/.hidden",
		"s3://bucket/p?versionId=1",
		"s3://bucket/p#frag",
		"gs://bucket/prefix",
		"http://host/path",
		"c:/windows",
		"%zz",
	} {
		opener := func(context.Context, string, string) (checkpoint.Store, error) {
			t.Errorf("Open(%q) called the S3 opener", loc)
			return nil, errors.New("unexpected")
		}
		if _, err := checkpoint.Open(t.Context(), loc, checkpoint.WithS3(opener)); !errors.Is(err, checkpoint.ErrInvalidLocation) {
			t.Errorf("Open(%q) error = %v, want ErrInvalidLocation", loc, err)
		}
	}
}

func TestOpenS3WithoutOpener(t *testing.T) {
	if _, err := checkpoint.Open(t.Context(), "s3://bucket/prefix"); !errors.Is(err, checkpoint.ErrInvalidLocation) {
		t.Errorf("Open(s3://…) without WithS3 error = %v, want ErrInvalidLocation", err)
	}
}

func TestOpenPassesTheOpenersError(t *testing.T) {
	boom := errors.New("bucket checkpoints does not exist")
	opener := func(context.Context, string, string) (checkpoint.Store, error) { return nil, boom }
	if _, err := checkpoint.Open(t.Context(), "s3://checkpoints/q", checkpoint.WithS3(opener)); !errors.Is(err, boom) {
		t.Errorf("Open error = %v, want the opener's", err)
	}
}

func TestParseLocation(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want checkpoint.Location
		str  string
	}{
		{"/data/in", checkpoint.Location{Scheme: "file", Path: "/data/in"}, "/data/in"},
		{"/data/in/", checkpoint.Location{Scheme: "file", Path: "/data/in"}, "/data/in"},
		{"file:///data/in/", checkpoint.Location{Scheme: "file", Path: "/data/in"}, "/data/in"},
		{"file://localhost/data/../in", checkpoint.Location{Scheme: "file", Path: "/in"}, "/in"},
		{"rel/dir/", checkpoint.Location{Scheme: "file", Path: "rel/dir"}, "rel/dir"},
		{"./rel", checkpoint.Location{Scheme: "file", Path: "rel"}, "rel"},
		{"s3://bucket", checkpoint.Location{Scheme: "s3", Bucket: "bucket"}, "s3://bucket"},
		{"s3://bucket/", checkpoint.Location{Scheme: "s3", Bucket: "bucket"}, "s3://bucket"},
		{"s3://bucket/a/b/", checkpoint.Location{Scheme: "s3", Bucket: "bucket", Prefix: "a/b"}, "s3://bucket/a/b"},
	} {
		got, err := checkpoint.ParseLocation(tc.in)
		if err != nil || got != tc.want || got.String() != tc.str {
			t.Errorf("ParseLocation(%q) = %+v (%q), %v; want %+v (%q)", tc.in, got, got.String(), err, tc.want, tc.str)
		}
	}
	for _, in := range []string{"", "s3:///nobucket", "gs://bucket/x", "file:relative", "s3://bucket/a//b"} {
		if _, err := checkpoint.ParseLocation(in); !errors.Is(err, checkpoint.ErrInvalidLocation) {
			t.Errorf("ParseLocation(%q) error = %v, want ErrInvalidLocation", in, err)
		}
	}
}

func TestLocationOverlaps(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"/a/b", "file:///a/b/", true},
		{"/a/b", "/a/b/c", true},
		{"/a/b/c", "/a/b", true},
		{"/a/b", "/a/bc", false},
		{"s3://bkt/x", "s3://bkt/x/y", true},
		{"s3://bkt", "s3://bkt/x", true},
		{"s3://bkt/x", "s3://bkt/xy", false},
		{"s3://bkt/x", "s3://other/x", false},
		{"/bkt/x", "s3://bkt/x", false},
	} {
		a, _ := checkpoint.ParseLocation(tc.a)
		b, _ := checkpoint.ParseLocation(tc.b)
		if got := a.Overlaps(b); got != tc.want {
			t.Errorf("%s.Overlaps(%s) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestLocationAbs(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	loc, _ := checkpoint.ParseLocation("rel/dir")
	got, err := loc.Abs()
	if want := filepath.Join(wd, "rel/dir"); err != nil || got.Path != want {
		t.Errorf("Abs() = %+v, %v; want path %s", got, err, want)
	}
}
