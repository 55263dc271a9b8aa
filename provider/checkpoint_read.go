package provider

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/internal/storeconn"
)

// checkpointBudget bounds the checkpoint reads of one plan, as the admission webhook bounds
// its own: a slow store makes the plan say it could not read, never hang.
const checkpointBudget = 3 * time.Second

// checkpointFacts is what a plan needs to know of the checkpoint at a location to say what
// applying will do to the query: whether there is one, whose it is, and how far it got.
type checkpointFacts struct {
	Location string
	Exists   bool
	QueryID  string
	Owner    checkpoint.Owner
	// Committed is the newest committed batch; nil before the first commit.
	Committed *int64
}

// ownedBy reports whether the checkpoint is the one of the query namespace/name, by the one
// ownership rule (checkpoint.Owner.Matches): a re-created query (new UID) continues its
// predecessor's checkpoint.
func (f checkpointFacts) ownedBy(namespace, name string) bool {
	return f.Exists && f.Owner.Matches(checkpoint.Owner{Namespace: namespace, Name: name})
}

// progress says how far the checkpoint got, for a diagnostic.
func (f checkpointFacts) progress() string {
	if f.Committed == nil {
		return "no batch committed yet"
	}
	return fmt.Sprintf("batches 0 to %d committed", *f.Committed)
}

// readCheckpoint reads the checkpoint at location as the controller does: with the
// CheckpointStore's S3 settings and the credentials Secret in the query's namespace, read
// only. It needs read access to that Secret; without it, or without a store, it returns an
// error that says why, for the plan to report that it could not tell.
func (c *cluster) readCheckpoint(ctx context.Context, namespace, storeName, location string) (checkpointFacts, error) {
	facts := checkpointFacts{Location: location}
	if storeName == "" {
		return facts, errors.New("the query names no checkpoint.store, whose credentials the plan would read it with")
	}
	ctx, cancel := context.WithTimeout(ctx, checkpointBudget)
	defer cancel()
	obj, err := c.stores().Get(ctx, storeName, metav1.GetOptions{})
	if err != nil {
		return facts, fmt.Errorf("read CheckpointStore %s: %w", storeName, err)
	}
	var store v1.CheckpointStore
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &store); err != nil {
		return facts, fmt.Errorf("read CheckpointStore %s: %w", storeName, err)
	}
	opts, err := c.storeOptions(ctx, namespace, &store)
	if err != nil {
		return facts, err
	}
	st, err := checkpoint.Open(ctx, location, checkpoint.WithS3(s3.Opener(opts...)))
	if err != nil {
		return facts, fmt.Errorf("open the checkpoint at %s: %w", location, err)
	}
	cp, err := checkpoint.Load(ctx, st)
	if errors.Is(err, checkpoint.ErrNotFound) {
		return facts, nil
	}
	if err != nil {
		return facts, fmt.Errorf("read the checkpoint at %s: %w", location, err)
	}
	meta := cp.Metadata()
	facts.Exists, facts.QueryID, facts.Owner = true, meta.ID, meta.Owner
	head, err := cp.Head(ctx)
	if err != nil {
		return facts, fmt.Errorf("read the newest batch of the checkpoint at %s: %w", location, err)
	}
	if head.Committed != nil {
		b := head.Committed.BatchID
		facts.Committed = &b
	}
	return facts, nil
}

// storeLocation returns the checkpoint location the store gives the query namespace/name,
// as the admission webhook derives it.
func (c *cluster) storeLocation(ctx context.Context, storeName, namespace, name string) (string, error) {
	if storeName == "" {
		return "", errors.New("no checkpoint.store")
	}
	obj, err := c.stores().Get(ctx, storeName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("read CheckpointStore %s: %w", storeName, err)
	}
	var store v1.CheckpointStore
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &store); err != nil {
		return "", fmt.Errorf("read CheckpointStore %s: %w", storeName, err)
	}
	return store.Spec.Location(namespace, name)
}

// storeOptions returns the S3 options of a store for a query in namespace: the store's
// endpoint, region and TLS settings, and the credentials of its Secret there. Nothing comes
// from the environment of the machine running Terraform.
func (c *cluster) storeOptions(ctx context.Context, namespace string, store *v1.CheckpointStore) ([]s3.Option, error) {
	spec := store.Spec
	secret, err := c.dyn.Resource(secretsResource).Namespace(namespace).Get(ctx, spec.CredentialsSecretName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("the store's credentials Secret %s/%s does not exist", namespace, spec.CredentialsSecretName)
	case err != nil:
		return nil, fmt.Errorf("read the store's credentials Secret %s/%s: %w", namespace, spec.CredentialsSecretName, err)
	}
	data := map[string][]byte{}
	raw, _, _ := unstructured.NestedStringMap(secret.Object, "data")
	for k, v := range raw {
		if b, err := base64.StdEncoding.DecodeString(v); err == nil {
			data[k] = b
		}
	}
	st, err := storeconn.Resolve(nil, storeconn.From{Store: store, Secret: data})
	if err != nil {
		return nil, fmt.Errorf("the store's credentials in namespace %s: %w", namespace, err)
	}
	return []s3.Option{s3.WithSettings(st), s3.WithRetries(2, 50*time.Millisecond), s3.WithRequestTimeout(checkpointBudget), s3.ReadOnly()}, nil
}

// retentionOf returns the retention policy of a query read from the API server: what its
// deletion does to its checkpoint.
func retentionOf(u *unstructured.Unstructured) v1.RetentionPolicy {
	r, _, _ := unstructured.NestedString(u.Object, "spec", "checkpoint", "retention")
	if r == "" {
		return v1.RetentionRetain
	}
	return v1.RetentionPolicy(r)
}
