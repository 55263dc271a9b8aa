package blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

var _ Folder = (*S3)(nil)

// Environment variables read by S3ConfigFromEnv: the same as the checkpoint's.
const (
	EnvAccessKey = "AWS_ACCESS_KEY_ID"
	EnvSecretKey = "AWS_SECRET_ACCESS_KEY"
	EnvRegion    = "AWS_REGION"
	EnvEndpoint  = "LOCKSTEP_S3_ENDPOINT"
)

// S3Config holds the connection settings of S3 locations.
type S3Config struct {
	// Endpoint is http://host:port or https://host:port; empty means AWS.
	Endpoint string
	// AccessKey and SecretKey are static credentials; empty means the AWS
	// environment and instance-role chain.
	AccessKey string
	SecretKey string
	// Region defaults to us-east-1.
	Region string
}

// S3ConfigFromEnv reads AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION
// and LOCKSTEP_S3_ENDPOINT through getenv (os.Getenv in a program).
func S3ConfigFromEnv(getenv func(string) string) S3Config {
	return S3Config{
		Endpoint:  getenv(EnvEndpoint),
		AccessKey: getenv(EnvAccessKey),
		SecretKey: getenv(EnvSecretKey),
		Region:    getenv(EnvRegion),
	}
}

// S3 is a Folder under a prefix of an S3 (or MinIO, versitygw) bucket,
// through minio-go. Put and Create send the whole object in one request
// (multipart disabled), so an object appears whole or not at all; Create adds
// If-None-Match: * so that of two creators exactly one wins.
type S3 struct {
	client *minio.Client
	bucket string
	prefix string // "" or ends with "/"
}

// OpenS3 returns the Folder for s3://bucket/prefix. It creates the client
// but sends no request.
func OpenS3(cfg S3Config, bucket, prefix string) (*S3, error) {
	host, secure := "s3.amazonaws.com", true
	lookup := minio.BucketLookupAuto
	if cfg.Endpoint != "" {
		u, err := url.Parse(cfg.Endpoint)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("%w: %s=%q: want http://host:port or https://host:port", ErrInvalidLocation, EnvEndpoint, cfg.Endpoint)
		}
		host, secure = u.Host, u.Scheme == "https"
		lookup = minio.BucketLookupPath
	}
	region := cfg.Region
	if region == "" {
		region = "us-east-1"
	}
	creds := credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, "")
	if cfg.AccessKey == "" {
		creds = credentials.NewChainCredentials([]credentials.Provider{
			&credentials.EnvAWS{},
			&credentials.IAM{Client: &http.Client{Transport: http.DefaultTransport}},
		})
	}
	client, err := minio.New(host, &minio.Options{Creds: creds, Secure: secure, Region: region, BucketLookup: lookup})
	if err != nil {
		return nil, fmt.Errorf("s3 client for %s: %w", host, err)
	}
	p := strings.Trim(prefix, "/")
	if p != "" {
		p += "/"
	}
	return &S3{client: client, bucket: bucket, prefix: p}, nil
}

// Location returns s3://bucket/prefix.
func (s *S3) Location() string {
	return "s3://" + s.bucket + "/" + strings.TrimSuffix(s.prefix, "/")
}

// List lists the objects under the prefix recursively.
func (s *S3) List(ctx context.Context, prefix string) ([]Object, error) {
	var out []Object
	for info := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix + prefix, Recursive: true}) {
		if info.Err != nil {
			return nil, fmt.Errorf("list %s: %w", s.name(prefix), info.Err)
		}
		key := strings.TrimPrefix(info.Key, s.prefix)
		if key == "" || strings.HasSuffix(key, "/") {
			continue // a folder marker
		}
		out = append(out, Object{Key: key, Size: info.Size, ModTime: info.LastModified})
	}
	return out, nil
}

// Get reads the object.
func (s *S3) Get(ctx context.Context, key string) ([]byte, error) {
	obj, err := s.client.GetObject(ctx, s.bucket, s.prefix+key, minio.GetObjectOptions{})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", s.name(key), s.mapErr(err))
	}
	defer obj.Close()
	data, err := io.ReadAll(obj)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", s.name(key), s.mapErr(err))
	}
	return data, nil
}

// Put writes the object in one request.
func (s *S3) Put(ctx context.Context, key string, data []byte) error {
	if err := s.put(ctx, key, data, false); err != nil {
		return fmt.Errorf("write %s: %w", s.name(key), err)
	}
	return nil
}

// Create writes the object in one request with If-None-Match: *.
func (s *S3) Create(ctx context.Context, key string, data []byte) error {
	if err := s.put(ctx, key, data, true); err != nil {
		return fmt.Errorf("create %s: %w", s.name(key), err)
	}
	return nil
}

// Delete removes the object.
func (s *S3) Delete(ctx context.Context, key string) error {
	if err := s.client.RemoveObject(ctx, s.bucket, s.prefix+key, minio.RemoveObjectOptions{}); err != nil {
		if err := s.mapErr(err); !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("delete %s: %w", s.name(key), err)
		}
	}
	return nil
}

// conflictRetries bounds the retries of a conditional write that the server
// answered with 409 (another conditional write of the key in flight).
const conflictRetries = 5

func (s *S3) put(ctx context.Context, key string, data []byte, ifAbsent bool) error {
	for attempt := 0; ; attempt++ {
		opts := minio.PutObjectOptions{DisableMultipart: true, ContentType: "application/octet-stream"}
		if ifAbsent {
			opts.SetMatchETagExcept("*")
		}
		_, err := s.client.PutObject(ctx, s.bucket, s.prefix+key, bytes.NewReader(data), int64(len(data)), opts)
		if err == nil {
			return nil
		}
		resp := minio.ToErrorResponse(err)
		switch {
		case ifAbsent && (resp.StatusCode == http.StatusPreconditionFailed || resp.Code == "PreconditionFailed"):
			return ErrExists
		case ifAbsent && resp.StatusCode == http.StatusConflict && attempt < conflictRetries:
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(attempt+1) * 20 * time.Millisecond):
			}
			continue
		}
		return s.mapErr(err)
	}
}

func (s *S3) mapErr(err error) error {
	resp := minio.ToErrorResponse(err)
	if resp.Code == "NoSuchKey" || resp.StatusCode == http.StatusNotFound && resp.Code != "NoSuchBucket" {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return err
}

func (s *S3) name(key string) string { return "s3://" + s.bucket + "/" + s.prefix + key }
