package s3

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/minio/minio-go/v7"

	"github.com/lockstep-dev/lockstep/checkpoint"
)

var (
	// ErrNoSuchBucket means the bucket does not exist.
	ErrNoSuchBucket = errors.New("no such bucket")

	// ErrCredentials means the server rejected the credentials (an unknown
	// access key, a wrong secret, an expired session) or, with no static
	// keys, the credential chain found none: STS refused the web identity
	// token or did not answer, or the metadata endpoint gave none. The
	// message says which and why.
	ErrCredentials = errors.New("credentials rejected")

	// ErrAccessDenied means the credentials are valid but may not do what
	// was asked.
	ErrAccessDenied = errors.New("access denied")

	// ErrConditionalWritesIgnored means the server ignored If-None-Match: a
	// second create-if-absent of the same object succeeded. Two writers on
	// such a server could both write the same batch, so Open refuses it.
	ErrConditionalWritesIgnored = errors.New("server ignores conditional writes (If-None-Match: *)")
)

// probeDir is where Open writes its scratch object, under the prefix. Its
// leading dot keeps it out of every listing.
const probeDir = ".lockstep-probe/"

// Opener returns a checkpoint.Opener that opens s3:// locations with opts:
//
//	checkpoint.Open(ctx, location, checkpoint.WithS3(s3.Opener()))
func Opener(opts ...Option) checkpoint.Opener {
	return func(ctx context.Context, bucket, prefix string) (checkpoint.Store, error) {
		return Open(ctx, bucket, prefix, opts...)
	}
}

// Open returns the Store for the objects under prefix in bucket, after
// checking, with a few requests, that it will work:
//
//   - the bucket exists (else ErrNoSuchBucket) and the credentials are
//     accepted (else ErrCredentials or ErrAccessDenied), by listing the prefix;
//   - unless ReadOnly is given, the server honours If-None-Match: * on a
//     single PUT, by creating a scratch object under the prefix twice
//     (else ErrConditionalWritesIgnored), then deleting it.
//
// Settings not given as options come from the environment (see the
// options). The Store starts no goroutines and needs no closing.
func Open(ctx context.Context, bucket, prefix string, opts ...Option) (*Store, error) {
	s, err := New(bucket, prefix, opts...)
	if err != nil {
		return nil, err
	}
	if err := s.checkAccess(ctx); err != nil {
		return nil, fmt.Errorf("open %s: %w", s.Location(), err)
	}
	if !s.cfg.readOnly {
		if err := s.checkConditionalWrites(ctx); err != nil {
			return nil, fmt.Errorf("open %s: %w", s.Location(), err)
		}
	}
	return s, nil
}

// New returns the Store for the objects under prefix in bucket without
// sending a request: for data folders, opened where no context is at hand,
// whose first request tells of a missing bucket or rejected credentials.
func New(bucket, prefix string, opts ...Option) (*Store, error) {
	prefix = strings.Trim(prefix, "/")
	loc := "s3://" + bucket + "/" + prefix
	if bucket == "" {
		return nil, fmt.Errorf("open %s: %w: no bucket", loc, checkpoint.ErrInvalidLocation)
	}
	if prefix != "" && !checkpoint.ValidKey(prefix) {
		return nil, fmt.Errorf("open %s: %w: prefix %q", loc, checkpoint.ErrInvalidLocation, prefix)
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", loc, err)
	}
	host, secure, err := parseEndpoint(cfg.endpoint)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", loc, err)
	}
	tr, err := cfg.transport(secure)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", loc, err)
	}
	lookup := minio.BucketLookupAuto
	if cfg.settings.PathStyle() {
		lookup = minio.BucketLookupPath // MinIO, versitygw and most others
	}
	client, err := minio.New(host, &minio.Options{
		Creds:        cfg.creds,
		Secure:       secure,
		Region:       cfg.region, // known: no GetBucketLocation round trip
		Transport:    tr,
		BucketLookup: lookup,
		MaxRetries:   1, // Store.retry decides what is retried
	})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", loc, err)
	}
	s := &Store{client: client, bucket: bucket, endpoint: cfg.endpoint, cfg: cfg}
	if prefix != "" {
		s.prefix = prefix + "/"
	}
	return s, nil
}

// checkAccess lists at most one object under the prefix, which fails
// distinctly for a missing bucket, rejected credentials and a refused
// permission.
func (s *Store) checkAccess(ctx context.Context) error {
	err := s.retry(ctx, opList, func(ctx context.Context) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		for obj := range s.client.ListObjectsIter(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix, MaxKeys: 1}) {
			return obj.Err // one answer is enough
		}
		return nil
	})
	if err != nil {
		return s.classify(err)
	}
	return nil
}

// checkConditionalWrites creates a scratch object twice with If-None-Match:
// * and refuses a server that lets the second create succeed.
func (s *Store) checkConditionalWrites(ctx context.Context) error {
	object := s.prefix + probeDir + uuid.NewString()
	defer s.client.RemoveObject(context.WithoutCancel(ctx), s.bucket, object, minio.RemoveObjectOptions{})
	err := s.retry(ctx, opCreate, func(ctx context.Context) error { return s.putIfAbsent(ctx, object, []byte("first")) })
	if err != nil && !preconditionFailed(err) { // 412: a retried attempt had written it
		return fmt.Errorf("write scratch object %s: %w", object, s.classify(err))
	}
	err = s.retry(ctx, opCreate, func(ctx context.Context) error { return s.putIfAbsent(ctx, object, []byte("second")) })
	switch {
	case err == nil:
		return fmt.Errorf("%s let a second create-if-absent of scratch object %s succeed: two writers could both write the same batch, so checkpoints there could be corrupted; use a server that honours If-None-Match (AWS S3, MinIO, versitygw): %w",
			s.endpoint, object, ErrConditionalWritesIgnored)
	case preconditionFailed(err):
		return nil
	default:
		return fmt.Errorf("write scratch object %s: %w", object, s.classify(err))
	}
}
