// Package storeconn turns a CheckpointStore and the data of its credentials
// Secret into the options of package checkpoint/s3. It is the one translation
// the controller, the admission webhook, the store reconciler and the
// Terraform provider share, so that they reach a store exactly as its
// engines do.
package storeconn

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
)

// ErrIncomplete means the credentials Secret lacks a key, or the store's
// settings cannot be used (a caBundle without a certificate).
var ErrIncomplete = errors.New("incomplete store settings")

// Options returns the S3 options of store with the keys in data (a Secret's
// data): its endpoint and region, the static keys and optional session token,
// its CA bundle and TLS verification. Nothing comes from the environment of
// the process calling it. Callers add their own retries, timeouts and
// s3.ReadOnly.
func Options(store *v1.CheckpointStore, data map[string][]byte) ([]s3.Option, error) {
	spec := store.Spec
	id, key := string(data[s3.EnvAccessKey]), string(data[s3.EnvSecretKey])
	if id == "" || key == "" {
		return nil, fmt.Errorf("%w: Secret %s lacks %s or %s", ErrIncomplete, spec.CredentialsSecretName, s3.EnvAccessKey, s3.EnvSecretKey)
	}
	opts := []s3.Option{
		s3.WithEnv(func(string) string { return "" }),
		s3.WithEndpoint(cmp.Or(spec.S3.Endpoint, s3.AWSEndpoint)),
		s3.WithRegion(cmp.Or(spec.S3.Region, s3.DefaultRegion)),
		s3.WithCredentials(id, key, string(data[s3.EnvSessionToken])),
	}
	if len(spec.S3.CABundle) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(spec.S3.CABundle) {
			return nil, fmt.Errorf("%w: CheckpointStore %s: caBundle holds no PEM certificate", ErrIncomplete, store.Name)
		}
		opts = append(opts, s3.WithTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}))
	}
	if spec.S3.InsecureSkipVerify {
		opts = append(opts, s3.WithInsecureSkipVerify())
	}
	return opts, nil
}
