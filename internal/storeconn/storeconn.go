// Package storeconn resolves the S3 settings of a location into
// checkpoint/s3's Settings. Resolve is the one translation of a
// CheckpointStore (with its credentials Secret), of a source's or sink's
// spec.s3 and of the environment: the engine, the controller, the admission
// webhook, the store reconciler and the Terraform provider all call it, so
// that each reaches a location exactly as an engine does, and a runtime that
// needs the settings in another form (Spark's s3a options) maps the same
// plain s3.Settings.
package storeconn

import (
	"crypto/x509"
	"errors"
	"fmt"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
)

// ErrIncomplete means the credentials Secret lacks a key, or the store's
// settings cannot be used (a caBundle without a certificate).
var ErrIncomplete = errors.New("incomplete store settings")

// From says where the settings of one location come from. The zero From is
// the environment alone.
type From struct {
	// Store is a CheckpointStore and Secret the data of its credentials
	// Secret: its endpoint, region, CA bundle, TLS verification and the keys
	// in Secret, and nothing from the environment of the process resolving
	// them.
	Store  *v1.CheckpointStore
	Secret map[string][]byte
	// Conn is a source's or sink's own spec.s3, and Name the source's name
	// ("" for the sink): its endpoint, region and TLS verification, its keys
	// from the variables under its prefix (v1.S3CredentialsEnvPrefix), else
	// the standard credential chain (never the checkpoint's keys). The CA
	// bundle, web identity and operation timeout come from the environment.
	Conn *v1.S3Connection
	Name string
}

// Resolve returns the S3 settings of a location from a store, a connection
// or the environment (read through getenv), as from says. Callers add their
// own retries, timeouts and s3.ReadOnly as options after s3.WithSettings.
func Resolve(getenv func(string) string, from From) (s3.Settings, error) {
	if from.Store != nil {
		return storeSettings(from.Store, from.Secret)
	}
	st, err := s3.FromEnv(getenv)
	if err != nil {
		return s3.Settings{}, err
	}
	if c := from.Conn; c != nil {
		own := Connection(from)
		st.Endpoint, st.Region, st.InsecureSkipVerify = own.Endpoint, own.Region, own.InsecureSkipVerify
		st.AccessKey, st.SecretKey, st.SessionToken = "", "", ""
		prefix := v1.S3CredentialsEnvPrefix(c, from.Name)
		if id, secret := getenv(prefix+s3.EnvAccessKey), getenv(prefix+s3.EnvSecretKey); id != "" && secret != "" {
			st.AccessKey, st.SecretKey, st.SessionToken = id, secret, getenv(prefix+s3.EnvSessionToken)
		}
	}
	return st, nil
}

// storeSettings are the settings of store with the keys in data (a Secret's
// data).
func storeSettings(store *v1.CheckpointStore, data map[string][]byte) (s3.Settings, error) {
	spec := store.Spec
	id, key := string(data[s3.EnvAccessKey]), string(data[s3.EnvSecretKey])
	if id == "" || key == "" {
		return s3.Settings{}, fmt.Errorf("%w: Secret %s lacks %s or %s", ErrIncomplete, spec.CredentialsSecretName, s3.EnvAccessKey, s3.EnvSecretKey)
	}
	if len(spec.S3.CABundle) > 0 && !x509.NewCertPool().AppendCertsFromPEM(spec.S3.CABundle) {
		return s3.Settings{}, fmt.Errorf("%w: CheckpointStore %s: caBundle holds no PEM certificate", ErrIncomplete, store.Name)
	}
	st := Connection(From{Store: store})
	st.AccessKey, st.SecretKey, st.SessionToken = id, key, string(data[s3.EnvSessionToken])
	return st, nil
}

// Connection returns the settings a store or a connection gives by itself, without
// credentials and without the environment: a CheckpointStore's endpoint, region, CA bundle
// and TLS verification, or a spec.s3's endpoint, region and TLS verification; the zero
// Settings for the environment alone. The controller derives the engine pod's environment
// from a store's (s3.Settings.Env), its keys going by reference to the Secret; the Spark
// runtime derives S3A's per-bucket settings from a connection's.
func Connection(from From) s3.Settings {
	switch {
	case from.Store != nil:
		spec := from.Store.Spec.S3
		return s3.Settings{Endpoint: spec.Endpoint, Region: spec.Region, CABundle: spec.CABundle, InsecureSkipVerify: spec.InsecureSkipVerify}
	case from.Conn != nil:
		c := from.Conn
		return s3.Settings{Endpoint: c.Endpoint, Region: c.Region, InsecureSkipVerify: c.InsecureSkipVerify}
	}
	return s3.Settings{}
}
