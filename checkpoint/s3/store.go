package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/lockstep-dev/lockstep/checkpoint"
)

// Store is a checkpoint.Store in an S3 bucket under a prefix: the object of
// key k is <prefix>/k. It is safe for concurrent use.
type Store struct {
	client   *minio.Client
	bucket   string
	prefix   string // "" or ending in "/"
	endpoint string // for messages
	cfg      *config
}

var (
	_ checkpoint.Store  = (*Store)(nil)
	_ checkpoint.Opener = Opener()
)

// Location returns s3://bucket/prefix.
func (s *Store) Location() string {
	return "s3://" + s.bucket + "/" + strings.TrimSuffix(s.prefix, "/")
}

func (s *Store) object(key string) string { return s.prefix + key }

func (s *Store) name(key string) string { return s.Location() + "/" + key }

// Get reads the object with one GET.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	if err := checkpoint.CheckKey(key); err != nil {
		return nil, err
	}
	var data []byte
	err := s.retry(ctx, opGet, func(ctx context.Context) error {
		r, _, _, err := minio.Core{Client: s.client}.GetObject(ctx, s.bucket, s.object(key), minio.GetObjectOptions{})
		if err != nil {
			return err
		}
		defer r.Close()
		data, err = io.ReadAll(r)
		return err
	})
	if err != nil {
		return nil, s.wrap("get", key, err)
	}
	return data, nil
}

// Create writes the object with one PUT that carries If-None-Match: *, the
// exact size and no multipart upload, so the server evaluates the condition
// atomically with the write.
//
// An attempt can fail in a way that leaves its outcome unknown: the reply
// was lost, the connection reset after the request was sent, the attempt
// timed out, the server answered 5xx. Create never guesses then: when the
// retries end (in success, a 412 or an error) after such an attempt, it reads
// the object back. If it holds exactly data, an attempt of ours wrote it and
// Create succeeds; if it holds other bytes, another writer won and the error
// wraps checkpoint.ErrExists; if it is absent, or cannot be read, the error
// says the outcome is unknown and wraps neither. Two writers creating
// identical bytes are indistinguishable, which is harmless: equal content
// means the same batch plan, the same manifest entry.
func (s *Store) Create(ctx context.Context, key string, data []byte) error {
	if err := s.checkWrite(key); err != nil {
		return err
	}
	wasUncertain := false
	err := s.retry(ctx, opCreate, func(ctx context.Context) error {
		err := s.putIfAbsent(ctx, s.object(key), data)
		if err != nil && !preconditionFailed(err) && uncertain(err) {
			wasUncertain = true
		}
		return err
	})
	switch {
	case err == nil:
		return nil
	case !wasUncertain && preconditionFailed(err):
		return fmt.Errorf("create %s: %w", s.name(key), checkpoint.ErrExists)
	case !wasUncertain:
		return s.wrap("create", key, err)
	}
	got, gerr := s.Get(ctx, key)
	switch {
	case gerr == nil && bytes.Equal(got, data):
		s.cfg.stats.resolved()
		return nil
	case gerr == nil:
		return fmt.Errorf("create %s: another writer created it first: %w", s.name(key), checkpoint.ErrExists)
	case errors.Is(gerr, checkpoint.ErrNotFound) && !preconditionFailed(err):
		return fmt.Errorf("create %s: the outcome is unknown and the object is absent: %w", s.name(key), s.classify(err))
	default:
		return fmt.Errorf("create %s: the outcome is unknown (%w) and reading it back failed: %v", s.name(key), s.classify(err), gerr)
	}
}

func (s *Store) putIfAbsent(ctx context.Context, object string, data []byte) error {
	opts := minio.PutObjectOptions{DisableMultipart: true, ContentType: "application/octet-stream"}
	opts.SetMatchETagExcept("*")
	_, err := s.client.PutObject(ctx, s.bucket, object, bytes.NewReader(data), int64(len(data)), opts)
	return err
}

// Put writes the object with one unconditional PUT.
func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	if err := s.checkWrite(key); err != nil {
		return err
	}
	err := s.retry(ctx, opPut, func(ctx context.Context) error {
		_, err := s.client.PutObject(ctx, s.bucket, s.object(key), bytes.NewReader(data), int64(len(data)),
			minio.PutObjectOptions{DisableMultipart: true, ContentType: "application/octet-stream"})
		return err
	})
	if err != nil {
		return s.wrap("put", key, err)
	}
	return nil
}

// Delete removes the object.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.checkWrite(key); err != nil {
		return err
	}
	err := s.retry(ctx, opDelete, func(ctx context.Context) error {
		return s.client.RemoveObject(ctx, s.bucket, s.object(key), minio.RemoveObjectOptions{})
	})
	if err != nil && !notFound(err) {
		return s.wrap("delete", key, err)
	}
	return nil
}

// List lists the objects under the prefix with their sizes and modification
// times. Objects with an element starting with a dot (such as Open's scratch
// object) are left out, as in every Store.
func (s *Store) List(ctx context.Context, prefix string) ([]checkpoint.ObjectInfo, error) {
	if err := checkpoint.CheckPrefix(prefix); err != nil {
		return nil, err
	}
	var infos []checkpoint.ObjectInfo
	err := s.retry(ctx, opList, func(ctx context.Context) error {
		infos = infos[:0]
		for obj := range s.client.ListObjectsIter(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.object(prefix), Recursive: true}) {
			if obj.Err != nil {
				return obj.Err
			}
			key := strings.TrimPrefix(obj.Key, s.prefix)
			if !checkpoint.ValidKey(key) { // a scratch object, a folder marker, or not ours
				continue
			}
			infos = append(infos, checkpoint.ObjectInfo{Key: key, Size: obj.Size, ModTime: obj.LastModified})
		}
		return ctx.Err()
	})
	if err != nil {
		return nil, s.wrap("list", prefix, err)
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Key < infos[j].Key })
	return infos, nil
}

func (s *Store) checkWrite(key string) error {
	if err := checkpoint.CheckKey(key); err != nil {
		return err
	}
	if s.cfg.readOnly {
		return fmt.Errorf("write %s: %w", s.name(key), checkpoint.ErrReadOnly)
	}
	return nil
}

// wrap names the object in an error and maps S3's answers to the
// checkpoint package's and this package's sentinels.
func (s *Store) wrap(op, key string, err error) error {
	if notFound(err) {
		return fmt.Errorf("%s %s: %w", op, s.name(key), checkpoint.ErrNotFound)
	}
	return fmt.Errorf("%s %s: %w", op, s.name(key), s.classify(err))
}

// classify adds a sentinel to the S3 errors that have one, saying what the
// code means.
func (s *Store) classify(err error) error {
	var er minio.ErrorResponse
	if !errors.As(err, &er) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		return fmt.Errorf("%s: %w", s.endpoint, err)
	}
	rejected := false
	switch er.Code {
	case minio.NoSuchBucket:
		return fmt.Errorf("bucket %s does not exist on %s: %w", s.bucket, s.endpoint, ErrNoSuchBucket)
	case "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken",
		"XAdminUserNotFound": // versitygw's answer to an unknown access key
		rejected = true
	case minio.AccessDenied:
	default:
		return fmt.Errorf("%s: %w", s.endpoint, err)
	}
	if s.cfg.chain == nil {
		if rejected {
			return fmt.Errorf("%s rejected the credentials (access key %q; set %s and %s): %s: %w",
				s.endpoint, s.cfg.accessKey, EnvAccessKey, EnvSecretKey, er.Message, ErrCredentials)
		}
		return fmt.Errorf("%s denied access to bucket %s (access key %q): %s: %w", s.endpoint, s.bucket, s.cfg.accessKey, er.Message, ErrAccessDenied)
	}
	// No static keys: the credentials came from the standard chain. When it
	// found none, minio-go sent the request unsigned and the server's
	// answer hides the cause, which the chain's last source kept.
	if cerr := s.cfg.chain.failure(); cerr != nil {
		var sts credentials.ErrorResponse
		if errors.As(cerr, &sts) && sts.STSError.Code != "" {
			cerr = fmt.Errorf("%s: %w", sts.STSError.Code, cerr)
		}
		return fmt.Errorf("no credentials for %s: no static keys (%s, %s) and %s gave none: %v: %w",
			s.endpoint, EnvAccessKey, EnvSecretKey, s.cfg.chain.source, cerr, ErrCredentials)
	}
	if rejected {
		return fmt.Errorf("%s rejected the credentials from %s: %s: %w", s.endpoint, s.cfg.chain.used(), er.Message, ErrCredentials)
	}
	return fmt.Errorf("%s denied access to bucket %s (credentials from %s): %s: %w", s.endpoint, s.bucket, s.cfg.chain.used(), er.Message, ErrAccessDenied)
}

func notFound(err error) bool {
	var er minio.ErrorResponse
	return errors.As(err, &er) && er.Code == minio.NoSuchKey
}

func preconditionFailed(err error) bool {
	var er minio.ErrorResponse
	return errors.As(err, &er) && (er.StatusCode == http.StatusPreconditionFailed || er.Code == minio.PreconditionFailed)
}
