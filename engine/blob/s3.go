package blob

import (
	"context"

	"github.com/lockstep-dev/lockstep/checkpoint/s3"
)

// S3 is a Folder under a prefix of an S3 (or MinIO, versitygw) bucket. It is
// the checkpoint's S3 store (package checkpoint/s3) with modification times
// in listings: the same client, retries, credential chain, TLS settings and
// resolution of uncertain creates.
type S3 struct{ *s3.Store }

var _ Folder = S3{}

// OpenS3 returns the Folder for s3://bucket/prefix, with opts applied over
// the environment's S3 settings. It creates the client but sends no request.
func OpenS3(bucket, prefix string, opts ...s3.Option) (S3, error) {
	st, err := s3.New(bucket, prefix, opts...)
	if err != nil {
		return S3{}, err
	}
	return S3{st}, nil
}

// List lists the objects under the prefix recursively, with their sizes and
// modification times.
func (f S3) List(ctx context.Context, prefix string) ([]Object, error) {
	return f.ListInfo(ctx, prefix)
}
