package controller

import (
	"context"
	"fmt"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
)

// The uniqueness of checkpoint locations is checked on every reconcile and admission. Listing
// every query each time would cost O(queries) per check, O(queries²) per resync of a cluster.
// So the cache indexes each query's spec.checkpoint.location under the location itself ("=L")
// and under each of its folders ("<F", for every F that L lies inside), and overlapping finds
// the queries that overlap L (equal, around it or inside it; see Overlaps) with one indexed
// lookup per folder of L.
const locationIndex = "lockstep.location"

// storeIndex indexes each query under the CheckpointStore it names (spec.checkpoint.store), so
// that a store's event or its deletion finds its queries without listing every query.
const storeIndex = "lockstep.store"

// indexed remembers the field indexers the indexes were added to: the reconcilers and the
// webhook all need them, and a manager refuses the same index twice.
var indexed sync.Map // client.FieldIndexer → struct{}

// indexQueries adds the location and store indexes to the manager's cache, once per cache.
func indexQueries(ctx context.Context, fi client.FieldIndexer) error {
	if _, done := indexed.LoadOrStore(fi, struct{}{}); done {
		return nil
	}
	err := fi.IndexField(ctx, &v1.StreamingQuery{}, locationIndex, func(o client.Object) []string {
		return locationKeys(o.(*v1.StreamingQuery).Spec.Checkpoint.Location)
	})
	if err != nil {
		indexed.Delete(fi)
		return fmt.Errorf("index StreamingQueries by checkpoint location: %w", err)
	}
	err = fi.IndexField(ctx, &v1.StreamingQuery{}, storeIndex, func(o client.Object) []string {
		if s := o.(*v1.StreamingQuery).Spec.Checkpoint.Store; s != "" {
			return []string{s}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("index StreamingQueries by checkpoint store: %w", err)
	}
	return nil
}

// queriesNaming returns the queries that name store, from the manager's cache and its index.
func queriesNaming(ctx context.Context, cache client.Reader, store string) ([]v1.StreamingQuery, error) {
	var list v1.StreamingQueryList
	if err := cache.List(ctx, &list, client.MatchingFields{storeIndex: store}); err != nil {
		return nil, fmt.Errorf("list the StreamingQueries of store %s: %w", store, err)
	}
	return list.Items, nil
}

// locationKeys returns the index keys of a location: "=L" and "<F" for each folder F around it.
func locationKeys(loc string) []string {
	loc = checkpoint.CanonicalLocation(loc)
	if loc == "" {
		return nil
	}
	keys := []string{"=" + loc}
	for _, f := range folders(loc) {
		keys = append(keys, "<"+f)
	}
	return keys
}

// folders returns the proper prefixes of loc that end where a "/" starts.
func folders(loc string) []string {
	var out []string
	for i := 1; i < len(loc); i++ {
		if loc[i] == '/' && loc[i-1] != '/' {
			out = append(out, loc[:i])
		}
	}
	return out
}

// lookupKeys returns the index keys under which the queries overlapping loc are: those inside
// it ("<L"), at it ("=L") and around it ("=F" for each folder F of L).
func lookupKeys(loc string) []string {
	loc = checkpoint.CanonicalLocation(loc)
	if loc == "" {
		return nil
	}
	keys := []string{"<" + loc, "=" + loc}
	for _, f := range folders(loc) {
		keys = append(keys, "="+f)
	}
	return keys
}

// overlapping returns the queries whose spec.checkpoint.location overlaps loc, from a reader
// with the location index (the manager's cached client).
func overlapping(ctx context.Context, c client.Reader, loc string) ([]v1.StreamingQuery, error) {
	var out []v1.StreamingQuery
	for _, k := range lookupKeys(loc) {
		var list v1.StreamingQueryList
		if err := c.List(ctx, &list, client.MatchingFields{locationIndex: k}); err != nil {
			return nil, fmt.Errorf("list StreamingQueries at %s: %w", loc, err)
		}
		out = append(out, list.Items...)
	}
	return out, nil
}
