package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"
)

// ErrInvalidLocation means a checkpoint location is malformed.
var ErrInvalidLocation = errors.New("invalid checkpoint location")

// An Opener opens the Store of an s3:// location. bucket is a valid bucket
// name; prefix has no leading or trailing slash and may be empty. Package
// checkpoint/s3 provides one (s3.Opener); package checkpoint cannot import it,
// since that package builds on this one.
type Opener func(ctx context.Context, bucket, prefix string) (Store, error)

// An OpenOption configures Open.
type OpenOption func(*openOptions)

type openOptions struct {
	s3 Opener
}

// WithS3 makes Open serve s3:// locations with open. Without it, Open refuses
// them.
func WithS3(open Opener) OpenOption {
	return func(o *openOptions) { o.s3 = open }
}

// Open returns the Store of a checkpoint location:
//
//	/abs/path, file:///abs/path   a local folder (OpenDir)
//	s3://bucket/prefix            an S3 or MinIO bucket, through the WithS3 opener
//
// A malformed location is an error wrapping ErrInvalidLocation. Open does
// not create anything; whether a checkpoint exists there is for Claim and
// Load to find out.
func Open(ctx context.Context, location string, opts ...OpenOption) (Store, error) {
	var o openOptions
	for _, opt := range opts {
		opt(&o)
	}
	loc, err := parseLocation(location)
	if err != nil {
		return nil, err
	}
	switch loc.scheme {
	case "s3":
		if o.s3 == nil {
			return nil, fmt.Errorf("%w: %q: this program cannot open s3:// locations", ErrInvalidLocation, location)
		}
		return o.s3(ctx, loc.bucket, loc.prefix)
	default:
		return OpenDir(loc.path)
	}
}

type location struct {
	scheme string // "file" or "s3"
	path   string // file: absolute path
	bucket string // s3
	prefix string // s3: no leading or trailing slash
}

func parseLocation(s string) (location, error) {
	invalid := func(format string, args ...any) (location, error) {
		return location{}, fmt.Errorf("%w %q: %s", ErrInvalidLocation, s, fmt.Sprintf(format, args...))
	}
	if s == "" {
		return invalid("empty")
	}
	if strings.HasPrefix(s, "/") {
		return location{scheme: "file", path: path.Clean(s)}, nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return invalid("%v", errors.Unwrap(err))
	}
	if u.Scheme == "" {
		return invalid("a local path must be absolute; other locations are file:///path or s3://bucket/prefix")
	}
	extras := u.RawQuery != "" || u.Fragment != "" || u.User != nil || u.Opaque != ""
	switch u.Scheme {
	case "file":
		if extras {
			return invalid("want file:///path with no user, query or fragment")
		}
		if u.Host != "" && u.Host != "localhost" {
			return invalid("file locations name a path on this machine: file:///path")
		}
		if !strings.HasPrefix(u.Path, "/") || u.Path == "/" {
			return invalid("want file:///path with an absolute path other than /")
		}
		return location{scheme: "file", path: path.Clean(u.Path)}, nil
	case "s3":
		if extras {
			return invalid("want s3://bucket/prefix with no user, query or fragment")
		}
		if u.Host == "" {
			return invalid("no bucket: want s3://bucket/prefix")
		}
		if err := checkBucket(u.Host); err != nil {
			return invalid("%v", err)
		}
		prefix := strings.Trim(u.Path, "/")
		if prefix != "" && !ValidKey(prefix) {
			return invalid("the prefix %q must be slash-separated names, none empty, none starting with a dot", prefix)
		}
		return location{scheme: "s3", bucket: u.Host, prefix: prefix}, nil
	default:
		return invalid("unknown scheme %q: want a local path, file:// or s3://", u.Scheme)
	}
}

// checkBucket applies S3's bucket naming rules.
func checkBucket(b string) error {
	if len(b) < 3 || len(b) > 63 {
		return fmt.Errorf("bucket name %q must have 3 to 63 characters", b)
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return fmt.Errorf("bucket name %q may only hold lower-case letters, digits, dots and hyphens", b)
		}
	}
	if !isAlnum(b[0]) || !isAlnum(b[len(b)-1]) || strings.Contains(b, "..") {
		return fmt.Errorf("bucket name %q must start and end with a letter or digit", b)
	}
	return nil
}

func isAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
