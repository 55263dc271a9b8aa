package engine

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
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

func (p prefixStore) List(ctx context.Context, prefix string) ([]checkpoint.ObjectInfo, error) {
	infos, err := p.store.List(ctx, p.prefix+prefix)
	if err != nil {
		return nil, err
	}
	for i := range infos {
		infos[i].Key = strings.TrimPrefix(infos[i].Key, p.prefix)
	}
	return infos, nil
}

func (p prefixStore) Delete(ctx context.Context, key string) error {
	return p.store.Delete(ctx, p.prefix+key)
}

func (p prefixStore) Location() string {
	return p.store.Location() + "/" + strings.TrimSuffix(p.prefix, "/")
}

var _ checkpoint.Store = observedStore{}

// observedStore tells a StoreObserver of each operation on a store.
type observedStore struct {
	store checkpoint.Store
	obs   StoreObserver
	now   func() time.Time
}

// observe runs f as the operation op and reports it.
func (o observedStore) observe(ctx context.Context, op string, f func(context.Context) error) {
	var retries int
	began := o.now()
	err := f(s3.CountRetries(ctx, &retries))
	o.obs.StoreOperation(StoreOperation{
		Op: op, Duration: o.now().Sub(began), Retries: retries,
		Failed: err != nil && !errors.Is(err, checkpoint.ErrNotFound) && !errors.Is(err, checkpoint.ErrExists),
	})
}

func (o observedStore) Get(ctx context.Context, key string) (data []byte, err error) {
	o.observe(ctx, OpGet, func(ctx context.Context) error { data, err = o.store.Get(ctx, key); return err })
	return data, err
}

func (o observedStore) Create(ctx context.Context, key string, data []byte) (err error) {
	o.observe(ctx, OpCreate, func(ctx context.Context) error { err = o.store.Create(ctx, key, data); return err })
	return err
}

func (o observedStore) Put(ctx context.Context, key string, data []byte) (err error) {
	o.observe(ctx, OpPut, func(ctx context.Context) error { err = o.store.Put(ctx, key, data); return err })
	return err
}

func (o observedStore) List(ctx context.Context, prefix string) (infos []checkpoint.ObjectInfo, err error) {
	o.observe(ctx, OpList, func(ctx context.Context) error { infos, err = o.store.List(ctx, prefix); return err })
	return infos, err
}

func (o observedStore) Delete(ctx context.Context, key string) (err error) {
	o.observe(ctx, OpDelete, func(ctx context.Context) error { err = o.store.Delete(ctx, key); return err })
	return err
}

func (o observedStore) Location() string { return o.store.Location() }
