package engine

import (
	"context"
	"errors"
	"time"

	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
)

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
