package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"
)

// Store holds the objects of one checkpoint location. Keys are slash-separated
// paths relative to the location ("offsets/00000000000000000007").
//
// Implementations are safe for concurrent use by several goroutines and by
// several processes: the guarantees below hold between writers that do not
// know of each other. Every implementation passes the conformance suite in
// package checkpoint/storetest.
type Store interface {
	// Get returns the whole object. A missing object is an error wrapping
	// ErrNotFound (which is fs.ErrNotExist).
	Get(ctx context.Context, key string) ([]byte, error)

	// Create writes the object only if no object has the key. It is atomic:
	// a reader sees either no object or all of data, never a part. When
	// several writers race, exactly one succeeds and the others get an error
	// wrapping ErrExists. Logs (offsets, commits, shape) are written with it.
	Create(ctx context.Context, key string, data []byte) error

	// Put writes the object, replacing any object with the key. It is atomic
	// like Create. It is for files that are not part of a log.
	Put(ctx context.Context, key string, data []byte) error

	// List returns the objects whose keys start with prefix, at any depth, in
	// lexicographic (byte) order of their keys, with their sizes and
	// modification times, without reading them. Objects being written by
	// Create or Put, and names starting with a dot, are not listed.
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)

	// Delete removes the object. Deleting a missing object is not an error.
	Delete(ctx context.Context, key string) error

	// Location names the store's root, as a user would write it
	// ("/var/lib/q", "s3://bucket/prefix"), for messages.
	Location() string
}

// ObjectInfo describes one stored object.
type ObjectInfo struct {
	Key  string
	Size int64
	// ModTime is when the object was last written, as the store reports
	// it; the zero time when it does not know.
	ModTime time.Time
}

// CopyPrefix copies the objects under prefix from one store to another, but those whose key
// skip accepts (nil copies all).
func CopyPrefix(ctx context.Context, from, to Store, prefix string, skip func(key string) bool) error {
	keys, err := ListKeys(ctx, from, prefix)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, prefix) || skip != nil && skip(k) {
			continue
		}
		data, err := from.Get(ctx, k)
		if err != nil {
			return err
		}
		if err := to.Put(ctx, k, data); err != nil {
			return err
		}
	}
	return nil
}

// ListKeys returns the keys of the objects under prefix (see Store.List).
func ListKeys(ctx context.Context, s Store, prefix string) ([]string, error) {
	infos, err := s.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(infos))
	for i, info := range infos {
		keys[i] = info.Key
	}
	return keys, nil
}

var (
	// ErrNotFound means the object does not exist. It is fs.ErrNotExist, so
	// errors.Is(err, fs.ErrNotExist) holds as well.
	ErrNotFound = fs.ErrNotExist

	// ErrExists means Create lost: an object with the key already exists.
	ErrExists = errors.New("object already exists")

	// ErrFenced means another writer added the log entry this writer meant to
	// add: that writer owns the checkpoint now and this one must stop.
	// errors.Is(err, ErrExists) holds for it too.
	ErrFenced = fmt.Errorf("another writer owns this checkpoint: %w", ErrExists)

	// ErrInvalidKey means a key is not a clean relative path (see ValidKey).
	ErrInvalidKey = errors.New("invalid key")
)

// ValidKey reports whether key can name an object: a slash-separated relative
// path with no empty, "." or ".." element and no element starting with a dot.
// Names starting with a dot are reserved for a store's temporary files, which
// List never returns.
func ValidKey(key string) bool {
	if key == "" {
		return false
	}
	for elem := range strings.SplitSeq(key, "/") {
		if elem == "" || elem[0] == '.' || strings.ContainsRune(elem, 0) || strings.ContainsRune(elem, '\\') {
			return false
		}
	}
	return true
}

// CheckKey returns nil for a valid key and an error wrapping ErrInvalidKey
// otherwise. Store implementations call it first in every method.
func CheckKey(key string) error {
	if !ValidKey(key) {
		return fmt.Errorf("%w %q", ErrInvalidKey, key)
	}
	return nil
}

// CheckPrefix is CheckKey for a List prefix: the empty prefix and a prefix
// ending in "/" are allowed, and the last element may be partial.
func CheckPrefix(prefix string) error {
	p := strings.TrimSuffix(prefix, "/")
	if p == "" || ValidKey(p) {
		return nil
	}
	return fmt.Errorf("%w prefix %q", ErrInvalidKey, prefix)
}
