package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/checkpoint/sparkckpt"
	"github.com/lockstep-dev/lockstep/compat"
	"github.com/lockstep-dev/lockstep/internal/storeconn"
)

// Key of the credentials Secret besides the two required ones.

// Bounds on the controller's and webhook's checkpoint reads: they run inside a reconcile or
// an admission request, so they fail fast rather than retry for long.
const (
	checkpointAttempts = 2
	checkpointTimeout  = 5 * time.Second
)

// errStoreRefused marks a problem with the query's store that a retry will not fix until
// something changes in the cluster (a missing Secret, a refused namespace).
var errStoreRefused = errors.New("checkpoint store refused")

// placement is where a query's checkpoint lives and how to reach it.
type placement struct {
	store    *v1.CheckpointStore
	location string
	// records is the folder inside location that holds Lockstep's records: "" for the
	// built-in engine, sparkckpt.RecordsDir for a spark query (Spark's own files are beside
	// it). The status and the judgement read it.
	records string
}

// recordsLocation is where the checkpoint's Lockstep records are.
func (p placement) recordsLocation() string {
	if p.records == "" {
		return p.location
	}
	return strings.TrimRight(p.location, "/") + "/" + p.records
}

// checkpoints opens the checkpoints of queries with the credentials of their namespace. It
// reads Secrets and Namespaces through an uncached reader, so that the controller neither
// lists nor watches them.
type checkpoints struct {
	reader client.Reader
	// cache, when set, is the manager's cache. CheckpointStores are read from it before
	// reader (the reconciler's watch of stores keeps it current; the webhook shares it); a
	// store it does not hold yet (created a moment ago) is read from reader. It holds the
	// metadata of Secrets too (see secretVersion).
	cache client.Reader
}

// locate returns the query's store and effective checkpoint location: spec.checkpoint.location,
// or the store's template when the webhook did not default it. When the store is missing or
// refuses the query, the field errors say why; err is for failures worth a retry.
func (c checkpoints) locate(ctx context.Context, q *v1.StreamingQuery) (p placement, refused field.ErrorList, err error) {
	if name := q.Spec.Checkpoint.Store; name != "" {
		var st v1.CheckpointStore
		var err error
		if c.cache != nil {
			err = c.cache.Get(ctx, types.NamespacedName{Name: name}, &st)
		}
		if c.cache == nil || apierrors.IsNotFound(err) {
			err = c.reader.Get(ctx, types.NamespacedName{Name: name}, &st)
		}
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return p, nil, fmt.Errorf("get CheckpointStore %s: %w", name, err)
		default:
			p.store = &st
		}
	}
	p.location = q.Spec.Checkpoint.Location
	if p.location == "" && p.store != nil {
		if loc, err := p.store.Spec.Location(q.Namespace, q.Name); err == nil {
			p.location = loc
		}
	}
	var labels map[string]string
	if p.store != nil && p.store.Spec.NamespaceSelector != nil {
		var ns corev1.Namespace
		if err := c.reader.Get(ctx, types.NamespacedName{Name: q.Namespace}, &ns); err != nil {
			return p, nil, fmt.Errorf("get Namespace %s: %w", q.Namespace, err)
		}
		labels = ns.Labels
	}
	if q.Spec.Runtime.Spark != nil {
		p.records = sparkckpt.RecordsDir
	}
	located := q.DeepCopy()
	located.Spec.Checkpoint.Location = p.location
	return p, ValidatePlacement(located, p.store, labels), nil
}

// open opens the store at the placement with the credentials in the query's namespace.
// readOnly opens it without the write probe. A missing Secret wraps errStoreRefused.
func (c checkpoints) open(ctx context.Context, namespace string, p placement, readOnly bool) (checkpoint.Store, error) {
	sec, err := c.secret(ctx, namespace, p)
	if err != nil {
		return nil, err
	}
	return openStore(ctx, p, sec, readOnly)
}

// readSpark reads the Spark checkpoint at the location of a spark query (Spark's own files,
// beside its records), read-only; nil when Spark's files are not there.
func (c checkpoints) readSpark(ctx context.Context, namespace string, p placement) (*sparkckpt.Checkpoint, error) {
	p.records = ""
	store, err := c.open(ctx, namespace, p, true)
	if err != nil {
		return nil, err
	}
	if ok, err := sparkckpt.IsSparkCheckpoint(ctx, store); err != nil || !ok {
		return nil, err
	}
	return sparkckpt.Read(ctx, store)
}

// secretMissingError is a store's credentials Secret that does not exist (yet) in a query's
// namespace. It is a refusal (errors.Is errStoreRefused) that ends when the Secret is
// created: admission admits the query with a warning, and its status waits for the Secret.
type secretMissingError struct {
	namespace, name, store string
}

func (e *secretMissingError) Error() string {
	return fmt.Sprintf("%v: Secret %s/%s with %s and %s not found: create it in the query's namespace",
		errStoreRefused, e.namespace, e.name, EnvAccessKeyID, EnvSecretAccessKey)
}

func (e *secretMissingError) Is(target error) bool { return target == errStoreRefused }

// waiting says what a query waits for while the Secret is missing.
func (e *secretMissingError) waiting() string {
	return fmt.Sprintf("Secret %s/%s, the credentials of CheckpointStore %s (%s and %s), does not exist: create it in the query's namespace; the engine runs once it does",
		e.namespace, e.name, e.store, EnvAccessKeyID, EnvSecretAccessKey)
}

// secret reads the store's credentials Secret in the query's namespace. A missing Secret is
// a *secretMissingError; one without both keys wraps errStoreRefused.
func (c checkpoints) secret(ctx context.Context, namespace string, p placement) (*corev1.Secret, error) {
	spec := p.store.Spec
	var sec corev1.Secret
	err := c.reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: spec.CredentialsSecretName}, &sec)
	if apierrors.IsNotFound(err) {
		return nil, &secretMissingError{namespace: namespace, name: spec.CredentialsSecretName, store: p.store.Name}
	}
	if err != nil {
		return nil, fmt.Errorf("get Secret %s/%s: %w", namespace, spec.CredentialsSecretName, err)
	}
	if len(sec.Data[EnvAccessKeyID]) == 0 || len(sec.Data[EnvSecretAccessKey]) == 0 {
		return nil, fmt.Errorf("%w: Secret %s/%s lacks %s or %s", errStoreRefused, namespace, spec.CredentialsSecretName, EnvAccessKeyID, EnvSecretAccessKey)
	}
	return &sec, nil
}

// secretCurrent reports whether the store's credentials Secret in namespace is still at
// version, by the cache of Secrets' metadata; false without a cache (read it again).
func (c checkpoints) secretCurrent(ctx context.Context, namespace string, p placement, version string) bool {
	if c.cache == nil || version == "" {
		return false
	}
	now, err := secretVersion(ctx, c.cache, namespace, p.store.Spec.CredentialsSecretName)
	return err == nil && now == version
}

// openStore opens the store at the placement with the credentials in sec.
func openStore(ctx context.Context, p placement, sec *corev1.Secret, readOnly bool) (checkpoint.Store, error) {
	st, err := storeconn.Resolve(nil, storeconn.From{Store: p.store, Secret: sec.Data})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errStoreRefused, err)
	}
	opts := []s3.Option{s3.WithSettings(st), s3.WithRetries(checkpointAttempts, 50*time.Millisecond), s3.WithRequestTimeout(checkpointTimeout)}
	if readOnly {
		opts = append(opts, s3.ReadOnly())
	}
	return checkpoint.Open(ctx, p.recordsLocation(), checkpoint.WithS3(s3.Opener(opts...)))
}

// snapshot is what the controller and the webhook read of a checkpoint.
type snapshot struct {
	// exists is false when the location holds no checkpoint yet.
	exists bool
	meta   checkpoint.Metadata
	// shaped is true when a batch committed under a recorded shape.
	shaped bool
	// shape is the shape the committed batches ran under; the zero Shape when none
	// committed under a recorded shape.
	shape compat.Shape
	// head is the newest entry of each log (see readHead).
	head checkpoint.Head
	// committedOffsets is the offsets entry of the newest committed batch, for its timestamp
	// and watermark; nil when there is none.
	committedOffsets *checkpoint.Offsets
	// rebuild is how far a rebuild of the state under way has come; nil when none is (or
	// the spec cannot ask for one, and it was not read).
	rebuild *checkpoint.RebuildProgress
}

// load reads what a change is judged against: the checkpoint's metadata and the shape its
// committed batches ran under (a listing of shape/ and two GETs). A location without a
// checkpoint is the zero snapshot and a nil Checkpoint.
func load(ctx context.Context, s checkpoint.Store) (*checkpoint.Checkpoint, snapshot, error) {
	cp, err := checkpoint.Load(ctx, s)
	if errors.Is(err, checkpoint.ErrNotFound) {
		return nil, snapshot{}, nil
	}
	if err != nil {
		return nil, snapshot{}, err
	}
	snap := snapshot{exists: true, meta: cp.Metadata()}
	snap.shape, _, err = compat.ReadShape(ctx, cp)
	switch {
	case errors.Is(err, checkpoint.ErrNotFound):
	case err != nil:
		return nil, snapshot{}, err
	default:
		snap.shaped = true
	}
	return cp, snap, nil
}

// readHead reads the newest entry of each log into snap, and the offsets entry of the
// newest commit (its timestamp and watermark).
func readHead(ctx context.Context, cp *checkpoint.Checkpoint, snap *snapshot) error {
	head, err := cp.Head(ctx)
	if err != nil {
		return err
	}
	snap.head, snap.committedOffsets = head, nil
	if c := head.Committed; c != nil {
		if p := head.Planned; p != nil && p.BatchID == c.BatchID {
			snap.committedOffsets = p
		} else if o, err := cp.Offsets(ctx, c.BatchID); err == nil {
			snap.committedOffsets = &o
		}
	}
	return nil
}

// read reads all of the checkpoint in s that the controller shows: metadata, committed
// shape, head. It is what every status poll read before polls remembered (see poller).
func read(ctx context.Context, s checkpoint.Store) (*checkpoint.Checkpoint, snapshot, error) {
	cp, snap, err := load(ctx, s)
	if err != nil || cp == nil {
		return cp, snap, err
	}
	if err := readHead(ctx, cp, &snap); err != nil {
		return nil, snapshot{}, err
	}
	return cp, snap, nil
}

// ownedBy reports whether the checkpoint belongs to query q: its metadata names q's namespace
// and name (a recreated query with a new uid continues its predecessor's checkpoint).
func (s snapshot) ownedBy(q *v1.StreamingQuery) bool {
	return !s.exists || s.meta.Owner.Matches(checkpoint.Owner{Namespace: q.Namespace, Name: q.Name, UID: string(q.UID)})
}

// deleteAll removes every object of the checkpoint in s, the metadata last, so that a
// deletion cut short is retried and still finds the checkpoint's owner.
func deleteAll(ctx context.Context, s checkpoint.Store) error {
	keys, err := checkpoint.ListKeys(ctx, s, "")
	if err != nil {
		return fmt.Errorf("list %s: %w", s.Location(), err)
	}
	for _, k := range keys {
		if k == checkpoint.MetadataKey || strings.HasPrefix(k, ".") {
			continue
		}
		if err := s.Delete(ctx, k); err != nil {
			return fmt.Errorf("delete %s/%s: %w", s.Location(), k, err)
		}
	}
	if err := s.Delete(ctx, checkpoint.MetadataKey); err != nil {
		return fmt.Errorf("delete %s/%s: %w", s.Location(), checkpoint.MetadataKey, err)
	}
	return nil
}

// deleteAllBut removes every object of s except those under prefix (a spark query's records,
// which deleteAll removes last).
func deleteAllBut(ctx context.Context, s checkpoint.Store, prefix string) error {
	keys, err := checkpoint.ListKeys(ctx, s, "")
	if err != nil {
		return fmt.Errorf("list %s: %w", s.Location(), err)
	}
	for _, k := range keys {
		if strings.HasPrefix(k, prefix) || strings.HasPrefix(k, ".") {
			continue
		}
		if err := s.Delete(ctx, k); err != nil {
			return fmt.Errorf("delete %s/%s: %w", s.Location(), k, err)
		}
	}
	return nil
}
