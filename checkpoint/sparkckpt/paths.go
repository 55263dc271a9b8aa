package sparkckpt

import (
	"context"
	"path"
	"path/filepath"
	"strings"

	"github.com/lockstep-dev/lockstep/checkpoint"
)

// HadoopLocation is a Lockstep location (a local path, file://, s3://) as Spark and Hadoop
// name it: a local path made absolute, s3:// as s3a://.
func HadoopLocation(loc string) string {
	switch {
	case strings.HasPrefix(loc, "s3://"):
		return "s3a://" + strings.TrimPrefix(loc, "s3://")
	case strings.HasPrefix(loc, "file://"):
		return loc
	}
	if abs, err := filepath.Abs(loc); err == nil {
		return abs
	}
	return loc
}

// LockstepLocation is a path Spark wrote in its files (file:/in/a.json, s3a://b/in/a.json) as
// a Lockstep location (/in/a.json, s3://b/in/a.json): HadoopLocation's inverse.
func LockstepLocation(p string) string {
	switch {
	case strings.HasPrefix(p, "s3a://"):
		return "s3://" + strings.TrimPrefix(p, "s3a://")
	case strings.HasPrefix(p, "file://"):
		return strings.TrimPrefix(p, "file://")
	case strings.HasPrefix(p, "file:"):
		return strings.TrimPrefix(p, "file:")
	}
	return p
}

// folder is the folder of a path Spark wrote: path.Dir, but keeping a URL's "//"
// (s3a://b/in/a.json → s3a://b/in, where path.Dir makes s3a:/b/in).
func folder(p string) string {
	if i := strings.Index(p, "://"); i >= 0 {
		return p[:i+3] + path.Dir(p[i+3:])
	}
	return path.Dir(p)
}

// Newest returns the newest batch of the commit log and of the offsets log in store, -1 for
// a log without one.
func Newest(ctx context.Context, store checkpoint.Store) (committed, planned int64, err error) {
	newest := func(dir string) (int64, error) {
		ids, err := batches(ctx, store, dir)
		if err != nil || len(ids) == 0 {
			return -1, err
		}
		return ids[len(ids)-1], nil
	}
	if committed, err = newest("commits/"); err != nil {
		return -1, -1, err
	}
	planned, err = newest("offsets/")
	return committed, planned, err
}
