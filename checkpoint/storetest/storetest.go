package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/lockstep-dev/lockstep/checkpoint"
)

// Racers and RaceRounds size the create-if-absent race: in each round Racers
// goroutines create the same key and exactly one must win.
const (
	Racers     = 8
	RaceRounds = 20
)

// LargeSize is the size of the large object the suite writes: above the
// 16 MiB at which S3 clients switch to multipart uploads by default.
const LargeSize = 17 << 20

// Run runs the conformance suite as subtests of t. newStore returns a new,
// empty store each time it is called; stores from different calls must not
// share objects.
func Run(t *testing.T, newStore func(t *testing.T) checkpoint.Store) {
	tests := []struct {
		name string
		test func(t *testing.T, s checkpoint.Store)
	}{
		{"Location", testLocation},
		{"GetMissing", testGetMissing},
		{"CreateThenGet", testCreateThenGet},
		{"CreateExisting", testCreateExisting},
		{"PutOverwrites", testPutOverwrites},
		{"CreateAfterPut", testCreateAfterPut},
		{"LargeObject", testLargeObject},
		{"List", testList},
		{"ListSizesAndTimes", testListSizesAndTimes},
		{"Delete", testDelete},
		{"InvalidKeys", testInvalidKeys},
		{"CanceledContext", testCanceledContext},
		{"CreateRace", testCreateRace},
		{"CreateManyKeysConcurrently", testCreateManyKeys},
		{"PutIsAtomic", testPutIsAtomic},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.test(t, newStore(t))
		})
	}
}

func testLocation(t *testing.T, s checkpoint.Store) {
	if s.Location() == "" {
		t.Error("Location() = \"\", want the store's location")
	}
}

func testGetMissing(t *testing.T, s checkpoint.Store) {
	ctx := t.Context()
	for _, key := range []string{"missing", "offsets/00000000000000000000", "a/b/c"} {
		_, err := s.Get(ctx, key)
		if !errors.Is(err, checkpoint.ErrNotFound) || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Get(%q) error = %v, want ErrNotFound (fs.ErrNotExist)", key, err)
		}
	}
	mustCreate(t, s, "a/b", []byte("x"))
	if _, err := s.Get(ctx, "a/b/c"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("Get(a/b/c) below the object a/b: error = %v, want ErrNotFound", err)
	}
	if _, err := s.Get(ctx, "a"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("Get(a), a prefix of a/b: error = %v, want ErrNotFound", err)
	}
}

func testCreateThenGet(t *testing.T, s checkpoint.Store) {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	for _, tc := range []struct {
		key  string
		data []byte
	}{
		{"metadata", []byte(`{"id":"q"}` + "\n")},
		{"offsets/00000000000000000000", []byte("v1\n{}\n")},
		{"state/op/0/00000000000000000001.delta", all},
		{"empty", []byte{}},
		{"deep/er/and/deeper/key_with-odd.chars=1", []byte("deep")},
	} {
		mustCreate(t, s, tc.key, tc.data)
		if got := mustGet(t, s, tc.key); !bytes.Equal(got, tc.data) {
			t.Errorf("Get(%q) = %q, want %q", tc.key, got, tc.data)
		}
	}
}

func testCreateExisting(t *testing.T, s checkpoint.Store) {
	ctx := t.Context()
	mustCreate(t, s, "commits/00000000000000000003", []byte("first"))
	err := s.Create(ctx, "commits/00000000000000000003", []byte("second"))
	if !errors.Is(err, checkpoint.ErrExists) {
		t.Fatalf("second Create error = %v, want ErrExists", err)
	}
	if got := mustGet(t, s, "commits/00000000000000000003"); string(got) != "first" {
		t.Errorf("after a lost Create, Get = %q, want %q", got, "first")
	}
	// The same content does not make a second Create succeed either.
	if err := s.Create(ctx, "commits/00000000000000000003", []byte("first")); !errors.Is(err, checkpoint.ErrExists) {
		t.Errorf("Create of identical content error = %v, want ErrExists", err)
	}
}

func testPutOverwrites(t *testing.T, s checkpoint.Store) {
	mustPut(t, s, "_latest", []byte("a longer first version"))
	mustPut(t, s, "_latest", []byte("short"))
	if got := mustGet(t, s, "_latest"); string(got) != "short" {
		t.Errorf("Get after two Puts = %q, want %q", got, "short")
	}
	mustCreate(t, s, "created", []byte("by create"))
	mustPut(t, s, "created", []byte("by put"))
	if got := mustGet(t, s, "created"); string(got) != "by put" {
		t.Errorf("Get after Create then Put = %q, want %q", got, "by put")
	}
}

func testCreateAfterPut(t *testing.T, s checkpoint.Store) {
	mustPut(t, s, "k", []byte("put"))
	if err := s.Create(t.Context(), "k", []byte("create")); !errors.Is(err, checkpoint.ErrExists) {
		t.Errorf("Create after Put error = %v, want ErrExists", err)
	}
}

func testLargeObject(t *testing.T, s checkpoint.Store) {
	data := make([]byte, LargeSize)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	mustCreate(t, s, "state/op/0/00000000000000000009.snapshot", data)
	if err := s.Create(t.Context(), "state/op/0/00000000000000000009.snapshot", data[:10]); !errors.Is(err, checkpoint.ErrExists) {
		t.Fatalf("second Create of a large object error = %v, want ErrExists", err)
	}
	if got := mustGet(t, s, "state/op/0/00000000000000000009.snapshot"); !bytes.Equal(got, data) {
		t.Errorf("Get of a %d-byte object returned %d bytes, or other bytes", len(data), len(got))
	}
	mustPut(t, s, "large-put", data)
	if got := mustGet(t, s, "large-put"); !bytes.Equal(got, data) {
		t.Errorf("Get of a %d-byte Put returned %d bytes, or other bytes", len(data), len(got))
	}
}

// listKeys are stored in this order, which is not the listing order.
var listKeys = []string{
	"offsets/00000000000000000010",
	"x0",
	"offsets/00000000000000000002",
	"x/z/w",
	"commits/00000000000000000002",
	"x-y",
	"offsets/00000000000000000001",
	"x/y",
	"metadata",
}

func testList(t *testing.T, s checkpoint.Store) {
	ctx := t.Context()
	if got, err := checkpoint.ListKeys(ctx, s, ""); err != nil || len(got) != 0 {
		t.Fatalf("List(\"\") of an empty store = %q, %v; want nothing", got, err)
	}
	for i, k := range listKeys {
		if i%2 == 0 {
			mustCreate(t, s, k, []byte(k))
		} else {
			mustPut(t, s, k, []byte(k))
		}
	}
	sorted := slices.Clone(listKeys)
	sort.Strings(sorted)
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"", sorted},
		{"offsets/", []string{"offsets/00000000000000000001", "offsets/00000000000000000002", "offsets/00000000000000000010"}},
		{"offsets/0000000000000000000", []string{"offsets/00000000000000000001", "offsets/00000000000000000002"}},
		{"off", []string{"offsets/00000000000000000001", "offsets/00000000000000000002", "offsets/00000000000000000010"}},
		{"x", []string{"x-y", "x/y", "x/z/w", "x0"}},
		{"x/", []string{"x/y", "x/z/w"}},
		{"x/z/", []string{"x/z/w"}},
		{"metadata", []string{"metadata"}},
		{"nothing/", nil},
		{"nothing", nil},
		{"x/y/", nil},
	} {
		got, err := checkpoint.ListKeys(ctx, s, tc.prefix)
		if err != nil {
			t.Errorf("List(%q) error = %v", tc.prefix, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("List(%q) mismatch (-want +got):\n%s", tc.prefix, diff)
		}
	}
}

func testListSizesAndTimes(t *testing.T, s checkpoint.Store) {
	mustCreate(t, s, "a/one", []byte("1"))
	mustPut(t, s, "a/three", []byte("333"))
	mustCreate(t, s, "a/zero", nil)
	got, err := s.List(t.Context(), "a/")
	if err != nil {
		t.Fatalf("List error = %v", err)
	}
	for i := range got {
		if got[i].ModTime.IsZero() {
			t.Errorf("List(a/): %s has no modification time", got[i].Key)
		}
		got[i].ModTime = time.Time{}
	}
	want := []checkpoint.ObjectInfo{{Key: "a/one", Size: 1}, {Key: "a/three", Size: 3}, {Key: "a/zero", Size: 0}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("List(a/) mismatch (-want +got):\n%s", diff)
	}
}

func testDelete(t *testing.T, s checkpoint.Store) {
	ctx := t.Context()
	mustCreate(t, s, "offsets/00000000000000000001", []byte("1"))
	mustCreate(t, s, "offsets/00000000000000000002", []byte("2"))
	if err := s.Delete(ctx, "offsets/00000000000000000001"); err != nil {
		t.Fatalf("Delete error = %v", err)
	}
	if _, err := s.Get(ctx, "offsets/00000000000000000001"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("Get after Delete error = %v, want ErrNotFound", err)
	}
	if got, err := checkpoint.ListKeys(ctx, s, "offsets/"); err != nil || !slices.Equal(got, []string{"offsets/00000000000000000002"}) {
		t.Errorf("List after Delete = %q, %v; want only offsets/00000000000000000002", got, err)
	}
	for _, key := range []string{"offsets/00000000000000000001", "never/was/here"} {
		if err := s.Delete(ctx, key); err != nil {
			t.Errorf("Delete(%q) of a missing object error = %v, want nil", key, err)
		}
	}
	if err := s.Create(ctx, "offsets/00000000000000000001", []byte("again")); err != nil {
		t.Fatalf("Create after Delete error = %v", err)
	}
	if got := mustGet(t, s, "offsets/00000000000000000001"); string(got) != "again" {
		t.Errorf("Get after re-Create = %q, want %q", got, "again")
	}
}

func testInvalidKeys(t *testing.T, s checkpoint.Store) {
	ctx := t.Context()
	for _, key := range []string{"", "/abs", "trailing/", "a//b", "../up", "a/../b", "./a", ".tmp-x", "a/.hidden", `back\slash`} {
		if _, err := s.Get(ctx, key); !errors.Is(err, checkpoint.ErrInvalidKey) {
			t.Errorf("Get(%q) error = %v, want ErrInvalidKey", key, err)
		}
		if err := s.Create(ctx, key, []byte("x")); !errors.Is(err, checkpoint.ErrInvalidKey) {
			t.Errorf("Create(%q) error = %v, want ErrInvalidKey", key, err)
		}
		if err := s.Put(ctx, key, []byte("x")); !errors.Is(err, checkpoint.ErrInvalidKey) {
			t.Errorf("Put(%q) error = %v, want ErrInvalidKey", key, err)
		}
		if err := s.Delete(ctx, key); !errors.Is(err, checkpoint.ErrInvalidKey) {
			t.Errorf("Delete(%q) error = %v, want ErrInvalidKey", key, err)
		}
	}
	for _, prefix := range []string{"../", "/abs", "a//", ".tmp"} {
		if _, err := s.List(ctx, prefix); !errors.Is(err, checkpoint.ErrInvalidKey) {
			t.Errorf("List(%q) error = %v, want ErrInvalidKey", prefix, err)
		}
	}
	if got, err := checkpoint.ListKeys(ctx, s, ""); err != nil || len(got) != 0 {
		t.Errorf("after refused writes List(\"\") = %q, %v; want nothing", got, err)
	}
}

func testCanceledContext(t *testing.T, s checkpoint.Store) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Create(ctx, "k", []byte("x")); !errors.Is(err, context.Canceled) {
		t.Errorf("Create with a canceled context error = %v, want context.Canceled", err)
	}
	if err := s.Put(ctx, "k", []byte("x")); !errors.Is(err, context.Canceled) {
		t.Errorf("Put with a canceled context error = %v, want context.Canceled", err)
	}
	if _, err := s.Get(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Errorf("Get with a canceled context error = %v, want context.Canceled", err)
	}
	if _, err := s.List(ctx, ""); !errors.Is(err, context.Canceled) {
		t.Errorf("List with a canceled context error = %v, want context.Canceled", err)
	}
	if _, err := s.Get(t.Context(), "k"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("Get after canceled writes error = %v, want ErrNotFound", err)
	}
}

func testCreateRace(t *testing.T, s checkpoint.Store) {
	ctx := t.Context()
	for round := range RaceRounds {
		key := checkpoint.OffsetsKey(int64(round))
		errs := make([]error, Racers)
		var start, done sync.WaitGroup
		start.Add(1)
		for w := range Racers {
			done.Go(func() {
				start.Wait()
				errs[w] = s.Create(ctx, key, fmt.Appendf(nil, "writer %d round %d", w, round))
			})
		}
		start.Done()
		done.Wait()
		winner := -1
		for w, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: writers %d and %d both won Create(%q)", round, winner, w, key)
			case err == nil:
				winner = w
			case !errors.Is(err, checkpoint.ErrExists):
				t.Fatalf("round %d: writer %d: Create error = %v, want nil or ErrExists", round, w, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no writer won Create(%q)", round, key)
		}
		want := fmt.Sprintf("writer %d round %d", winner, round)
		if got := mustGet(t, s, key); string(got) != want {
			t.Fatalf("round %d: Get = %q, want the winner's %q", round, got, want)
		}
	}
}

func testCreateManyKeys(t *testing.T, s checkpoint.Store) {
	const n = 32
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			errs[i] = s.Create(t.Context(), fmt.Sprintf("state/op/%d/%s.delta", i%4, checkpoint.BatchName(int64(i))), []byte{byte(i)})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Create %d error = %v", i, err)
		}
	}
	keys, err := s.List(t.Context(), "state/")
	if err != nil || len(keys) != n {
		t.Errorf("List(state/) = %d keys, %v; want %d", len(keys), err, n)
	}
}

func testPutIsAtomic(t *testing.T, s checkpoint.Store) {
	versions := [][]byte{bytes.Repeat([]byte("a"), 1<<20), bytes.Repeat([]byte("b"), 2<<20)}
	mustPut(t, s, "hint", versions[0])
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var wg sync.WaitGroup
	readerErrs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				got, err := s.Get(ctx, "hint")
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					readerErrs <- fmt.Errorf("get during puts: %w", err)
					return
				}
				if !bytes.Equal(got, versions[0]) && !bytes.Equal(got, versions[1]) {
					readerErrs <- fmt.Errorf("get during puts returned %d bytes that are neither version", len(got))
					return
				}
			}
		})
	}
	for i := range 10 {
		if err := s.Put(t.Context(), "hint", versions[i%2]); err != nil {
			t.Errorf("Put %d error = %v", i, err)
		}
	}
	cancel()
	wg.Wait()
	close(readerErrs)
	for err := range readerErrs {
		t.Error(err)
	}
}

func mustCreate(t *testing.T, s checkpoint.Store, key string, data []byte) {
	t.Helper()
	if err := s.Create(t.Context(), key, data); err != nil {
		t.Fatalf("Create(%q) error = %v", key, err)
	}
}

func mustPut(t *testing.T, s checkpoint.Store, key string, data []byte) {
	t.Helper()
	if err := s.Put(t.Context(), key, data); err != nil {
		t.Fatalf("Put(%q) error = %v", key, err)
	}
}

func mustGet(t *testing.T, s checkpoint.Store, key string) []byte {
	t.Helper()
	b, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q) error = %v", key, err)
	}
	return b
}

// Objects returns the objects of s by key, those keep accepts (nil keeps all): what a test
// compares before and after to prove that a step changed nothing it must not.
func Objects(t testing.TB, s checkpoint.Store, keep func(key string) bool) map[string]string {
	t.Helper()
	ctx := context.Background()
	keys, err := checkpoint.ListKeys(ctx, s, "")
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string]string{}
	for _, k := range keys {
		if keep != nil && !keep(k) {
			continue
		}
		data, err := s.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		objs[k] = string(data)
	}
	return objs
}

// GenerationZero keeps the keys of a checkpoint's generation 0: not a later generation's
// folder or record, nor the _latest hint a rebuilt generation 0 may rewrite.
func GenerationZero(key string) bool {
	return !strings.HasPrefix(key, "generation-") && !strings.HasPrefix(key, checkpoint.GenerationsDir) && key != "_latest"
}

// ConcurrentClaims claims the checkpoint in s for owner from Racers goroutines at once and
// checks that every claim got the same query id: the create-if-absent of the metadata
// decides one.
func ConcurrentClaims(t *testing.T, s checkpoint.Store, owner checkpoint.Owner) {
	t.Helper()
	ids := make([]string, Racers)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			c, err := checkpoint.Claim(t.Context(), s, owner)
			if err != nil {
				t.Errorf("Claim %d error = %v", i, err)
				return
			}
			ids[i] = c.Metadata().ID
		})
	}
	wg.Wait()
	for i, id := range ids {
		if id != ids[0] {
			t.Errorf("Claim %d got query id %q, Claim 0 got %q", i, id, ids[0])
		}
	}
}
