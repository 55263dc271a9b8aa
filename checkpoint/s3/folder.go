package s3

import "github.com/lockstep-dev/lockstep/checkpoint"

// OpenFolder returns the Store of a source's or sink's data folder: a local path (relative
// paths are resolved against the working directory), a file:// URL, or s3://bucket/prefix,
// opened with opts (see checkpoint.ParseLocation). Unlike checkpoint.Open with Opener, it does
// no I/O for local folders and none but creating the client for S3 (New, not Open): data
// folders are opened where no context is at hand, and the first request tells of a missing
// bucket or rejected credentials. A malformed location is an error wrapping
// checkpoint.ErrInvalidLocation.
func OpenFolder(location string, opts ...Option) (checkpoint.Store, error) {
	loc, err := checkpoint.ParseLocation(location)
	if err != nil {
		return nil, err
	}
	if loc, err = loc.Abs(); err != nil {
		return nil, err
	}
	if loc.Scheme == checkpoint.SchemeS3 {
		return New(loc.Bucket, loc.Prefix, opts...)
	}
	return checkpoint.OpenDir(loc.Path)
}
