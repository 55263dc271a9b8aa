package storeconn_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/internal/storeconn"
)

// env is a process environment with the checkpoint's server, keys and a web
// identity, and the keys of a source's own connection.
var env = map[string]string{
	s3.EnvEndpoint:                      "http://ckpt:9000",
	s3.EnvRegion:                        "eu-west-1",
	s3.EnvAccessKey:                     "ckpt-id",
	s3.EnvSecretKey:                     "ckpt-secret",
	s3.EnvCABundle:                      "/etc/ca.pem",
	s3.EnvOperationTimeout:              "90s",
	s3.EnvWebIdentityTokenFile:          "/var/token",
	s3.EnvRoleARN:                       "arn:role",
	"LAKE_" + s3.EnvAccessKey:           "lake-id",
	"LAKE_" + s3.EnvSecretKey:           "lake-secret",
	"LOCKSTEP_ORDERS_AWS_SESSION_TOKEN": "unused without keys",
}

func getenv(k string) string { return env[k] }

// Resolve gives each kind of location its settings: the environment's for
// the checkpoint, a connection's own server and keys (never the
// checkpoint's) for a source, and only the store's for a CheckpointStore.
func TestResolve(t *testing.T) {
	store := &v1.CheckpointStore{Spec: v1.CheckpointStoreSpec{
		CredentialsSecretName: "s3-credentials",
		S3:                    v1.S3Store{Bucket: "ckpts", Endpoint: "https://minio:9000", Region: "r1", InsecureSkipVerify: true},
	}}
	keys := map[string][]byte{"AWS_ACCESS_KEY_ID": []byte("id"), "AWS_SECRET_ACCESS_KEY": []byte("secret"), "AWS_SESSION_TOKEN": []byte("tok")}
	for _, tc := range []struct {
		name string
		from storeconn.From
		want s3.Settings
	}{
		{"environment", storeconn.From{}, s3.Settings{
			Endpoint: "http://ckpt:9000", Region: "eu-west-1", AccessKey: "ckpt-id", SecretKey: "ckpt-secret",
			WebIdentityTokenFile: "/var/token", RoleARN: "arn:role", CAFile: "/etc/ca.pem", OperationTimeout: 90 * time.Second,
		}},
		{"connection with keys", storeconn.From{Conn: &v1.S3Connection{Endpoint: "https://lake", CredentialsEnvPrefix: "LAKE_"}, Name: "orders"}, s3.Settings{
			Endpoint: "https://lake", AccessKey: "lake-id", SecretKey: "lake-secret",
			WebIdentityTokenFile: "/var/token", RoleARN: "arn:role", CAFile: "/etc/ca.pem", OperationTimeout: 90 * time.Second,
		}},
		{"connection without keys", storeconn.From{Conn: &v1.S3Connection{Region: "us-west-2", InsecureSkipVerify: true}, Name: "orders"}, s3.Settings{
			Region: "us-west-2", InsecureSkipVerify: true,
			WebIdentityTokenFile: "/var/token", RoleARN: "arn:role", CAFile: "/etc/ca.pem", OperationTimeout: 90 * time.Second,
		}},
		{"store", storeconn.From{Store: store, Secret: keys}, s3.Settings{
			Endpoint: "https://minio:9000", Region: "r1", AccessKey: "id", SecretKey: "secret", SessionToken: "tok", InsecureSkipVerify: true,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := storeconn.Resolve(getenv, tc.from)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Resolve mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// A Secret without both keys, or a caBundle without a certificate, is
// refused with ErrIncomplete naming what is missing; a malformed timeout in
// the environment is named.
func TestResolveRefuses(t *testing.T) {
	store := &v1.CheckpointStore{Spec: v1.CheckpointStoreSpec{CredentialsSecretName: "s3-credentials"}}
	store.Name = "team"
	keys := map[string][]byte{"AWS_ACCESS_KEY_ID": []byte("id"), "AWS_SECRET_ACCESS_KEY": []byte("secret")}
	if _, err := storeconn.Resolve(nil, storeconn.From{Store: store, Secret: keys}); err != nil {
		t.Fatalf("Resolve of a complete store = %v, want nil", err)
	}
	if _, err := storeconn.Resolve(nil, storeconn.From{Store: store, Secret: map[string][]byte{"AWS_ACCESS_KEY_ID": []byte("id")}}); !errors.Is(err, storeconn.ErrIncomplete) {
		t.Errorf("Resolve without the secret key: %v, want ErrIncomplete", err)
	}
	bad := store.DeepCopy()
	bad.Spec.S3.CABundle = []byte("not a certificate")
	if _, err := storeconn.Resolve(nil, storeconn.From{Store: bad, Secret: keys}); !errors.Is(err, storeconn.ErrIncomplete) {
		t.Errorf("Resolve with a caBundle without a certificate: %v, want ErrIncomplete", err)
	}
	badEnv := func(k string) string {
		if k == s3.EnvOperationTimeout {
			return "soon"
		}
		return ""
	}
	if _, err := storeconn.Resolve(badEnv, storeconn.From{}); err == nil {
		t.Errorf("Resolve with %s=soon = nil error, want one", s3.EnvOperationTimeout)
	}
}

// Connection is what a store or a connection says by itself: no credentials, nothing from the
// environment.
func TestConnection(t *testing.T) {
	store := &v1.CheckpointStore{Spec: v1.CheckpointStoreSpec{
		CredentialsSecretName: "s3-credentials",
		S3:                    v1.S3Store{Bucket: "ckpts", Endpoint: "https://minio:9000", Region: "r1", CABundle: []byte("pem"), InsecureSkipVerify: true},
	}}
	for _, tc := range []struct {
		name string
		from storeconn.From
		want s3.Settings
	}{
		{"environment", storeconn.From{}, s3.Settings{}},
		{"store", storeconn.From{Store: store, Secret: map[string][]byte{"AWS_ACCESS_KEY_ID": []byte("id")}},
			s3.Settings{Endpoint: "https://minio:9000", Region: "r1", CABundle: []byte("pem"), InsecureSkipVerify: true}},
		{"connection", storeconn.From{Conn: &v1.S3Connection{Endpoint: "https://lake", Region: "us-west-2", CredentialsEnvPrefix: "LAKE_"}, Name: "orders"},
			s3.Settings{Endpoint: "https://lake", Region: "us-west-2"}},
	} {
		if diff := cmp.Diff(tc.want, storeconn.Connection(tc.from)); diff != "" {
			t.Errorf("%s: Connection (-want +got):\n%s", tc.name, diff)
		}
	}
}
