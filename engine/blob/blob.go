package blob

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"strings"

	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
)

var (
	// ErrNotFound means the object does not exist. It is checkpoint.ErrNotFound
	// (fs.ErrNotExist).
	ErrNotFound = checkpoint.ErrNotFound

	// ErrExists means Create lost: an object with the key exists. It is
	// checkpoint.ErrExists.
	ErrExists = checkpoint.ErrExists

	// ErrInvalidLocation means a location cannot be parsed.
	ErrInvalidLocation = errors.New("invalid location")
)

// Object describes one stored object: its slash-separated key relative to
// the folder, size and modification time.
type Object = checkpoint.ObjectInfo

// Folder holds the objects under one location. Keys are slash-separated paths
// relative to it. Implementations are safe for concurrent use.
type Folder interface {
	// List returns the objects whose key starts with prefix, at any depth, in
	// key order. Objects being written and temporary files are not listed.
	List(ctx context.Context, prefix string) ([]Object, error)

	// Get returns the whole object; a missing one is an error wrapping
	// ErrNotFound.
	Get(ctx context.Context, key string) ([]byte, error)

	// Put writes the object atomically, replacing any object with the key.
	Put(ctx context.Context, key string, data []byte) error

	// Create writes the object atomically only if no object has the key; when
	// one has, the error wraps ErrExists.
	Create(ctx context.Context, key string, data []byte) error

	// Delete removes the object; a missing object is not an error.
	Delete(ctx context.Context, key string) error

	// Location names the folder as a user would write it, for messages.
	Location() string
}

// Open returns the Folder of a location: a local path (relative paths are
// resolved against the working directory), a file:// URL, or s3://bucket/prefix,
// opened with opts over the environment's S3 settings. Open does no I/O for
// local folders and none but creating the client for S3.
func Open(location string, opts ...s3.Option) (Folder, error) {
	loc, err := Parse(location)
	if err != nil {
		return nil, err
	}
	if loc.Bucket != "" {
		return OpenS3(loc.Bucket, loc.Prefix, opts...)
	}
	return OpenDir(loc.Path)
}

// Location is a parsed location: either Path (a local folder, absolute) or
// Bucket and Prefix (S3; Prefix has no leading or trailing slash).
type Location struct {
	Path   string
	Bucket string
	Prefix string
}

// Parse parses a location without any I/O. Relative local paths are made
// absolute.
func Parse(location string) (Location, error) {
	invalid := func(why string) (Location, error) {
		return Location{}, fmt.Errorf("%w %q: %s", ErrInvalidLocation, location, why)
	}
	switch {
	case location == "":
		return invalid("empty")
	case strings.HasPrefix(location, "s3://"):
		u, err := url.Parse(location)
		if err != nil {
			return invalid(err.Error())
		}
		if u.Host == "" {
			return invalid("no bucket: want s3://bucket/prefix")
		}
		if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return invalid("want s3://bucket/prefix with no user, query or fragment")
		}
		return Location{Bucket: u.Host, Prefix: strings.Trim(path.Clean("/"+u.Path), "/")}, nil
	case strings.HasPrefix(location, "file://"):
		u, err := url.Parse(location)
		if err != nil {
			return invalid(err.Error())
		}
		if u.Host != "" && u.Host != "localhost" || !strings.HasPrefix(u.Path, "/") {
			return invalid("want file:///absolute/path")
		}
		return Location{Path: filepath.Clean(u.Path)}, nil
	case strings.Contains(location, "://"):
		return invalid("want a local path, file:///path or s3://bucket/prefix")
	}
	abs, err := filepath.Abs(location)
	if err != nil {
		return invalid(err.Error())
	}
	return Location{Path: abs}, nil
}

// hidden reports whether a key names a file that readers skip: one whose
// name, or the name of a folder on its path, starts with "." or "_" (as
// Spark's file source does; the files sink keeps its manifest in
// _lockstep_manifest).
func hidden(key string) bool {
	for elem := range strings.SplitSeq(key, "/") {
		if strings.HasPrefix(elem, ".") || strings.HasPrefix(elem, "_") {
			return true
		}
	}
	return false
}

// Visible returns the objects of list whose keys are not hidden (no path
// element starting with "." or "_").
func Visible(list []Object) []Object {
	out := list[:0:0]
	for _, o := range list {
		if !hidden(o.Key) {
			out = append(out, o)
		}
	}
	return out
}
