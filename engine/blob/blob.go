package blob

import (
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
)

// Folder holds the objects under one location: it is the checkpoint's Store
// (package checkpoint), the one storage model of Lockstep. Its List gives
// every object's size and modification time (the files source takes new
// files oldest first).
type Folder = checkpoint.Store

// Object describes one stored object: its slash-separated key relative to
// the folder, size and modification time.
type Object = checkpoint.ObjectInfo

// Open returns the Folder of a location (see checkpoint.ParseLocation): a
// local path (relative paths are resolved against the working directory), a
// file:// URL, or s3://bucket/prefix, opened with opts. Open does no I/O for
// local folders and none but creating the client for S3: the first request
// tells of a missing bucket or rejected credentials.
func Open(location string, opts ...s3.Option) (Folder, error) {
	loc, err := checkpoint.ParseLocation(location)
	if err != nil {
		return nil, err
	}
	if loc, err = loc.Abs(); err != nil {
		return nil, err
	}
	if loc.Scheme == checkpoint.SchemeS3 {
		return s3.New(loc.Bucket, loc.Prefix, opts...)
	}
	return checkpoint.OpenDir(loc.Path)
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
