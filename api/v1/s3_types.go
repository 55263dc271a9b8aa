package v1

import "strings"

// S3Connection says how to reach the s3:// location of a source or sink that
// lives on another S3 server, account or bucket policy than the checkpoint
// (data on AWS S3, checkpoints on MinIO, say). Without it, an s3:// path is
// reached with the checkpoint's settings.
type S3Connection struct {
	// Endpoint is the server, http://host:port or https://host:port. Empty
	// means AWS S3.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
	// Region of the bucket. Default us-east-1.
	// +optional
	Region string `json:"region,omitempty"`
	// SecretName names a Secret in the query's namespace with the keys
	// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and, for temporary
	// credentials, AWS_SESSION_TOKEN. On Kubernetes the controller sets them
	// in the engine's environment under CredentialsEnvPrefix. Without it (and
	// without those variables) the engine uses the standard credential
	// chain: web identity (IRSA, Workload Identity), then the pod's or
	// instance's metadata endpoint.
	// +optional
	SecretName string `json:"secretName,omitempty"`
	// CredentialsEnvPrefix is the prefix of the variables holding the keys:
	// <prefix>AWS_ACCESS_KEY_ID, <prefix>AWS_SECRET_ACCESS_KEY and
	// <prefix>AWS_SESSION_TOKEN. Default LOCKSTEP_<NAME>_, NAME being the
	// source's name, or SINK, upper-cased with - as _.
	// +optional
	CredentialsEnvPrefix string `json:"credentialsEnvPrefix,omitempty"`
	// InsecureSkipVerify accepts any certificate of the server. For tests.
	// +optional
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
}

// S3Connection returns the source's own S3 settings, nil when it has none.
func (s *Source) S3Connection() *S3Connection {
	switch {
	case s.Files != nil:
		return s.Files.S3
	case s.Delta != nil:
		return s.Delta.S3
	}
	return nil
}

// S3Connection returns the sink's own S3 settings, nil when it has none.
func (s *Sink) S3Connection() *S3Connection {
	switch {
	case s.Files != nil:
		return s.Files.S3
	case s.Delta != nil:
		return s.Delta.S3
	}
	return nil
}

// S3CredentialsEnvPrefix returns the prefix of the credential variables of a
// connection used by the source or sink called name ("" for the sink).
func S3CredentialsEnvPrefix(c *S3Connection, name string) string {
	if c != nil && c.CredentialsEnvPrefix != "" {
		return c.CredentialsEnvPrefix
	}
	if name == "" {
		name = "sink"
	}
	return "LOCKSTEP_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_")) + "_"
}
