package checkpoint_test

import (
	"context"
	"errors"
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
