package delta

import (
	"context"

	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/engine/blob"
)

// FolderStore lets a Table live in a blob.Folder, the engine's handle on a
// sink's or source's location. Both folders (local and S3) create objects
// with create-if-absent, which commits rely on.
func FolderStore(f blob.Folder) checkpoint.Store { return folderStore{f} }

type folderStore struct{ blob.Folder }

// List returns the keys of the folder's objects under prefix.
func (s folderStore) List(ctx context.Context, prefix string) ([]string, error) {
	objs, err := s.Folder.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(objs))
	for i, o := range objs {
		keys[i] = o.Key
	}
	return keys, nil
}
