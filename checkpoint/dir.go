package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// Dir is a Store in a local folder. Objects are plain files under the folder,
// named by their keys.
//
// Create writes a temporary file next to the final name, fsyncs it, links it
// to the final name with link(2), which fails if the name exists, removes the
// temporary name and fsyncs the folder. Put renames instead of linking. A
// writer killed at any point leaves either nothing or the whole object under
// the final name; its temporary file (".tmp-…") stays behind and is never
// listed. Such leftovers may be deleted whenever no writer is running.
//
// The folder must be on a file system with hard links and atomic rename
// (every local Linux file system; not all network file systems). A key can
// not be both an object and a prefix of another key ("a" and "a/b"), which the
// checkpoint layout never needs.
type Dir struct {
	root string

	// afterChunk, when set, is called after each chunk written to a temporary
	// file. Tests use it to kill a writer in the middle of a write.
	afterChunk func(written int)
}

var _ Store = (*Dir)(nil)

// writeChunk is how much of an object Dir writes per write(2).
const writeChunk = 1 << 20

// OpenDir returns the Store in the folder at path, which must be absolute.
// The folder need not exist: Create and Put make it and any sub-folders, so
// opening a location only to read it changes nothing on disk.
func OpenDir(path string) (*Dir, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("%w: %q: a local checkpoint location must be an absolute path", ErrInvalidLocation, path)
	}
	root := filepath.Clean(path)
	fi, err := os.Stat(root)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("open checkpoint folder: %w", err)
	case !fi.IsDir():
		return nil, fmt.Errorf("%w: %s is a file, not a folder", ErrInvalidLocation, root)
	}
	return &Dir{root: root}, nil
}

// Location returns the folder's absolute path.
func (d *Dir) Location() string { return d.root }

func (d *Dir) path(key string) string { return filepath.Join(d.root, filepath.FromSlash(key)) }

// Get reads the object's file.
func (d *Dir) Get(ctx context.Context, key string) ([]byte, error) {
	if err := d.check(ctx, key); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(d.path(key))
	if err != nil {
		if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR) {
			// A file where the key needs a folder, or a folder where it
			// needs a file: either way there is no such object.
			return nil, fmt.Errorf("get %s: %w", d.path(key), ErrNotFound)
		}
		return nil, err // *fs.PathError; ENOENT matches ErrNotFound
	}
	return b, nil
}

// Create writes the object if its file does not exist (link(2)).
func (d *Dir) Create(ctx context.Context, key string, data []byte) error {
	return d.write(ctx, key, data, "create", func(tmp, final string) error {
		defer os.Remove(tmp)
		if err := os.Link(tmp, final); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return ErrExists
			}
			return err
		}
		if err := os.Remove(tmp); err != nil {
			return fmt.Errorf("remove temporary file: %w", err)
		}
		return nil
	})
}

// Put writes the object, replacing its file (rename(2)).
func (d *Dir) Put(ctx context.Context, key string, data []byte) error {
	return d.write(ctx, key, data, "put", func(tmp, final string) error {
		if err := os.Rename(tmp, final); err != nil {
			os.Remove(tmp)
			return err
		}
		return nil
	})
}

// write writes data to a temporary file beside the object's file, has place move it to the
// final name, and syncs the folder. Its errors start with verb and the file's name.
func (d *Dir) write(ctx context.Context, key string, data []byte, verb string, place func(tmp, final string) error) error {
	if err := d.check(ctx, key); err != nil {
		return err
	}
	final := d.path(key)
	dir := filepath.Dir(final)
	if err := mkdirAll(dir); err != nil {
		return fmt.Errorf("%s %s: %w", verb, final, err)
	}
	tmp, err := d.writeTemp(dir, filepath.Base(final), data)
	if err != nil {
		return fmt.Errorf("%s %s: %w", verb, final, err)
	}
	if err := place(tmp, final); err != nil {
		return fmt.Errorf("%s %s: %w", verb, final, err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("%s %s: %w", verb, final, err)
	}
	return nil
}

// Delete removes the object's file. The removal is not fsynced: a deletion
// lost in a crash only leaves an old object behind.
func (d *Dir) Delete(ctx context.Context, key string) error {
	if err := d.check(ctx, key); err != nil {
		return err
	}
	err := os.Remove(d.path(key))
	if err == nil || errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil
	}
	return fmt.Errorf("delete: %w", err)
}

// List walks the folder named by the prefix up to its last slash. A link to
// a file lists as that file, as reading it does.
func (d *Dir) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := CheckPrefix(prefix); err != nil {
		return nil, err
	}
	start := d.root
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		start = d.path(prefix[:i])
	}
	var infos []ObjectInfo
	err := filepath.WalkDir(start, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				return nil // the folder does not exist (yet), or vanished
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == d.root {
			return nil
		}
		rel, err := filepath.Rel(d.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if strings.HasPrefix(e.Name(), ".") { // temporary files, and anything not ours
			if e.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if e.IsDir() {
			dirKey := key + "/"
			if !strings.HasPrefix(dirKey, prefix) && !strings.HasPrefix(prefix, dirKey) {
				return fs.SkipDir
			}
			return nil
		}
		if !strings.HasPrefix(key, prefix) {
			return nil
		}
		fi, err := e.Info()
		if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			fi, err = os.Stat(p)
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil // deleted while we walked, or a dangling link
		}
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		infos = append(infos, ObjectInfo{Key: key, Size: fi.Size(), ModTime: fi.ModTime()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", filepath.Join(d.root, prefix), err)
	}
	// WalkDir visits "a/b" before "a-c"; keys compare as strings.
	sort.Slice(infos, func(i, j int) bool { return infos[i].Key < infos[j].Key })
	return infos, nil
}

func (d *Dir) check(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return CheckKey(key)
}

// writeTemp writes data to a new temporary file in dir, fsyncs and closes it,
// and returns its path.
func (d *Dir) writeTemp(dir, base string, data []byte) (path string, err error) {
	f, err := os.CreateTemp(dir, ".tmp-"+base+"-*")
	if err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	for written := 0; written < len(data); {
		n := min(writeChunk, len(data)-written)
		if _, err := f.Write(data[written : written+n]); err != nil {
			return "", err
		}
		written += n
		if d.afterChunk != nil {
			d.afterChunk(written)
		}
	}
	if err := f.Chmod(0o644); err != nil {
		return "", err
	}
	if err := f.Sync(); err != nil {
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return f.Name(), nil
}

// mkdirAll is os.MkdirAll that also fsyncs the parent of every folder it
// makes, so a new folder survives a crash together with the file linked in it.
func mkdirAll(dir string) error {
	fi, err := os.Stat(dir)
	if err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a folder", dir)
		}
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := mkdirAll(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return syncDir(parent)
}

// syncDir fsyncs a folder, making the names created in it durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}
