package blob

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/lockstep-dev/lockstep/checkpoint"
)

var _ Folder = (*Dir)(nil)

// Dir is a Folder on a local file system. Writes go through checkpoint.Dir:
// a temporary file, fsync, then link(2) for Create or rename(2) for Put, so
// a reader never sees part of an object. Keys follow checkpoint.ValidKey (no
// element starting with a dot).
type Dir struct {
	root  string
	store *checkpoint.Dir
}

// OpenDir returns the Folder at path, which must be absolute. The folder
// need not exist yet.
func OpenDir(path string) (*Dir, error) {
	store, err := checkpoint.OpenDir(path)
	if err != nil {
		return nil, err
	}
	return &Dir{root: filepath.Clean(path), store: store}, nil
}

// Location returns the folder's absolute path.
func (d *Dir) Location() string { return d.root }

// List walks the folder. Temporary files (names starting with a dot) are
// skipped; a missing folder lists nothing.
func (d *Dir) List(ctx context.Context, prefix string) ([]Object, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	start := d.root
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		start = filepath.Join(d.root, filepath.FromSlash(prefix[:i]))
	}
	var out []Object
	err := filepath.WalkDir(start, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // vanished while walking, or no folder at all
			}
			return err
		}
		if strings.HasPrefix(e.Name(), ".") && p != start {
			if e.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if e.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(d.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if !strings.HasPrefix(key, prefix) {
			return nil
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		out = append(out, Object{Key: key, Size: fi.Size(), ModTime: fi.ModTime()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", filepath.Join(d.root, prefix), err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Get reads the object's file.
func (d *Dir) Get(ctx context.Context, key string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(d.root, filepath.FromSlash(key)))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", d.name(key), err)
	}
	return data, nil
}

// Put writes the object's file atomically (rename).
func (d *Dir) Put(ctx context.Context, key string, data []byte) error {
	if err := d.store.Put(ctx, key, data); err != nil {
		return fmt.Errorf("write %s: %w", d.name(key), err)
	}
	return nil
}

// Create writes the object's file atomically if it does not exist (link).
func (d *Dir) Create(ctx context.Context, key string, data []byte) error {
	if err := d.store.Create(ctx, key, data); err != nil {
		return fmt.Errorf("create %s: %w", d.name(key), err)
	}
	return nil
}

// Delete removes the object's file.
func (d *Dir) Delete(ctx context.Context, key string) error {
	return d.store.Delete(ctx, key)
}

func (d *Dir) name(key string) string { return filepath.Join(d.root, filepath.FromSlash(key)) }
