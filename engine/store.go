package engine

import (
	"context"
	"strings"

	"github.com/lockstep-dev/lockstep/checkpoint"
)

var _ checkpoint.Store = prefixStore{}

// prefixStore is the part of a checkpoint store under a prefix, such as
// sources/<name>/: what a component may touch. It adapts checkpoint.Store,
// which has no such view.
type prefixStore struct {
	store  checkpoint.Store
	prefix string // ends with "/"
}

func (p prefixStore) Get(ctx context.Context, key string) ([]byte, error) {
	return p.store.Get(ctx, p.prefix+key)
}

func (p prefixStore) Create(ctx context.Context, key string, data []byte) error {
	return p.store.Create(ctx, p.prefix+key, data)
}

func (p prefixStore) Put(ctx context.Context, key string, data []byte) error {
	return p.store.Put(ctx, p.prefix+key, data)
}

func (p prefixStore) List(ctx context.Context, prefix string) ([]string, error) {
	keys, err := p.store.List(ctx, p.prefix+prefix)
	if err != nil {
		return nil, err
	}
	for i, k := range keys {
		keys[i] = strings.TrimPrefix(k, p.prefix)
	}
	return keys, nil
}

func (p prefixStore) Delete(ctx context.Context, key string) error {
	return p.store.Delete(ctx, p.prefix+key)
}

func (p prefixStore) Location() string {
	return p.store.Location() + "/" + strings.TrimSuffix(p.prefix, "/")
}
