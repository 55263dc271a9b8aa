package storeconn_test

import (
	"errors"
	"testing"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/internal/storeconn"
)

// A Secret without both keys, or a caBundle without a certificate, is
// refused with ErrIncomplete naming what is missing; a complete one gives
// options.
func TestOptions(t *testing.T) {
	store := &v1.CheckpointStore{Spec: v1.CheckpointStoreSpec{CredentialsSecretName: "s3-credentials"}}
	store.Name = "team"
	keys := map[string][]byte{"AWS_ACCESS_KEY_ID": []byte("id"), "AWS_SECRET_ACCESS_KEY": []byte("secret")}
	if opts, err := storeconn.Options(store, keys); err != nil || len(opts) == 0 {
		t.Fatalf("Options = %d options, %v; want some, nil", len(opts), err)
	}
	if _, err := storeconn.Options(store, map[string][]byte{"AWS_ACCESS_KEY_ID": []byte("id")}); !errors.Is(err, storeconn.ErrIncomplete) {
		t.Errorf("Options without the secret key: %v, want ErrIncomplete", err)
	}
	bad := store.DeepCopy()
	bad.Spec.S3.CABundle = []byte("not a certificate")
	if _, err := storeconn.Options(bad, keys); !errors.Is(err, storeconn.ErrIncomplete) {
		t.Errorf("Options with a caBundle without a certificate: %v, want ErrIncomplete", err)
	}
}
