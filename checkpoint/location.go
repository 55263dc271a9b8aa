package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"strings"
)

// ErrInvalidLocation means a location is malformed.
var ErrInvalidLocation = errors.New("invalid checkpoint location")

// Location is a parsed location: of a checkpoint, or of a source's or sink's
// data. It is the one parser of locations; every package that compares,
// indexes or opens a location goes through ParseLocation, so that
// file:///a/b and /a/b/ name the same folder everywhere.
type Location struct {
	// Scheme is SchemeFile for a local folder (a path or a file:// URL) and
	// SchemeS3 for a prefix of an S3 bucket.
	Scheme string
	// Path is a local folder's path, cleaned. It is absolute unless the
	// location was written as a relative path (see Abs).
	Path string
	// Bucket is the S3 bucket, a valid bucket name.
	Bucket string
	// Prefix is the S3 prefix: slash-separated names with no leading or
	// trailing slash; empty for the whole bucket.
	Prefix string
}

// The schemes of a Location.
const (
	SchemeFile = "file"
	SchemeS3   = "s3"
)

// ParseLocation parses a location without any I/O:
//
//	/abs/path, file:///abs/path   a local folder (file://localhost/… too)
//	rel/path                      a local folder relative to the working directory
//	s3://bucket/prefix            a prefix of an S3 or MinIO bucket
//
// A trailing slash is ignored. A malformed location is an error wrapping
// ErrInvalidLocation that says what is wrong.
func ParseLocation(s string) (Location, error) {
	invalid := func(format string, args ...any) (Location, error) {
		return Location{}, fmt.Errorf("%w %q: %s", ErrInvalidLocation, s, fmt.Sprintf(format, args...))
	}
	if s == "" {
		return invalid("empty")
	}
	if strings.HasPrefix(s, "/") {
		return Location{Scheme: SchemeFile, Path: path.Clean(s)}, nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return invalid("%v", errors.Unwrap(err))
	}
	if u.Scheme == "" {
		return Location{Scheme: SchemeFile, Path: path.Clean(s)}, nil
	}
	extras := u.RawQuery != "" || u.Fragment != "" || u.User != nil || u.Opaque != ""
	switch u.Scheme {
	case SchemeFile:
		if extras {
			return invalid("want file:///path with no user, query or fragment")
		}
		if u.Host != "" && u.Host != "localhost" {
			return invalid("file locations name a path on this machine: file:///path")
		}
		if !strings.HasPrefix(u.Path, "/") || u.Path == "/" {
			return invalid("want file:///path with an absolute path other than /")
		}
		return Location{Scheme: SchemeFile, Path: path.Clean(u.Path)}, nil
	case SchemeS3:
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
		return Location{Scheme: SchemeS3, Bucket: u.Host, Prefix: prefix}, nil
	default:
		return invalid("unknown scheme %q: want a local path, file:// or s3://", u.Scheme)
	}
}

// String returns the location's canonical form: the cleaned path of a local
// folder (file:// dropped), s3://bucket/prefix with no trailing slash. Two
// locations name the same folder exactly when their String()s are equal.
func (l Location) String() string {
	if l.Scheme == SchemeS3 {
		if l.Prefix == "" {
			return "s3://" + l.Bucket
		}
		return "s3://" + l.Bucket + "/" + l.Prefix
	}
	return l.Path
}

// Abs returns the location with a relative local path made absolute against
// the working directory; other locations are returned as they are.
func (l Location) Abs() (Location, error) {
	if l.Scheme != SchemeFile || path.IsAbs(l.Path) {
		return l, nil
	}
	abs, err := filepath.Abs(l.Path)
	if err != nil {
		return Location{}, fmt.Errorf("%w %q: %w", ErrInvalidLocation, l.Path, err)
	}
	l.Path = filepath.ToSlash(abs)
	return l, nil
}

// Contains reports whether o is l or lies inside it.
func (l Location) Contains(o Location) bool {
	a, b := l.String(), o.String()
	return a == b || strings.HasPrefix(b, strings.TrimSuffix(a, "/")+"/")
}

// Overlaps reports whether a and b are the same location or one lies inside
// the other: two checkpoints there would read or purge each other's files.
func (l Location) Overlaps(o Location) bool { return l.Contains(o) || o.Contains(l) }

// CanonicalLocation returns ParseLocation(s).String(), or s without trailing
// slashes when s does not parse, for comparing and indexing locations that
// validation has already checked (a malformed one then compares only with
// itself). The empty location stays empty.
func CanonicalLocation(s string) string {
	loc, err := ParseLocation(s)
	if err != nil {
		return strings.TrimRight(s, "/")
	}
	return loc.String()
}

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
// A malformed location, or a relative path, is an error wrapping
// ErrInvalidLocation. Open does not create anything; whether a checkpoint
// exists there is for Claim and Load to find out.
func Open(ctx context.Context, location string, opts ...OpenOption) (Store, error) {
	loc, err := ParseLocation(location)
	if err != nil {
		return nil, err
	}
	return OpenLocation(ctx, loc, opts...)
}

// OpenLocation is Open for a parsed location.
func OpenLocation(ctx context.Context, loc Location, opts ...OpenOption) (Store, error) {
	var o openOptions
	for _, opt := range opts {
		opt(&o)
	}
	switch {
	case loc.Scheme == SchemeS3 && o.s3 == nil:
		return nil, fmt.Errorf("%w: %q: this program cannot open s3:// locations", ErrInvalidLocation, loc)
	case loc.Scheme == SchemeS3:
		return o.s3(ctx, loc.Bucket, loc.Prefix)
	case !path.IsAbs(loc.Path):
		return nil, fmt.Errorf("%w %q: a local path must be absolute; other locations are file:///path or s3://bucket/prefix", ErrInvalidLocation, loc.Path)
	default:
		return OpenDir(loc.Path)
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
