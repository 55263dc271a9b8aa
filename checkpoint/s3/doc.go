// Package s3 is the checkpoint.Store on S3 and S3-compatible servers (MinIO,
// versitygw), with minio-go.
//
// The checkpoint's logs depend on create-if-absent. Store.Create sends one
// PUT with If-None-Match: *, the exact size and no multipart upload: multipart
// uploads drop the condition on some servers, and with minio-go an unknown
// size silently becomes one. A 412 answer is checkpoint.ErrExists.
//
// Open checks the location before handing out a Store: that the bucket exists
// (ErrNoSuchBucket), that the credentials are accepted (ErrCredentials,
// ErrAccessDenied) and, once per Open and unless ReadOnly is given, that the
// server honours If-None-Match, by creating a scratch object under the prefix
// twice. A server that lets the second create succeed is refused with
// ErrConditionalWritesIgnored, since two writers there could both write the
// same batch.
//
// Settings (a plain struct: endpoint, region, credentials, web identity, CAs)
// come from WithSettings, else from the environment through FromEnv:
// LOCKSTEP_S3_ENDPOINT (http://host:port or https://host:port; unset means
// AWS), AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_SESSION_TOKEN, the web identity variables and AWS_CA_BUNDLE; options
// such as WithEndpoint apply on top. Package internal/storeconn resolves the
// settings of a CheckpointStore and of a source's or sink's spec.s3.
//
// Settings is the one S3 settings type: every other form the settings take derives
// from it, with one region default (RegionOrDefault): a process's environment (Env,
// which the controller renders into engine pods), Spark's S3A options (package
// engine/spark), and for a CA bundle a PKCS#12 trust store for JVMs (TrustStore,
// JavaTrustOptions), since S3A trusts only its JVM's trust store.
//
// Requests failing transiently (5xx, 429, timeouts, network errors) are retried
// with exponential backoff; a failed precondition, a missing object or a refused
// permission never is.
//
// Package checkpoint does not import this one. Programs that accept s3://
// locations pass the opener as a value:
//
//	store, err := checkpoint.Open(ctx, location, checkpoint.WithS3(s3.Opener()))
//
// A source's or sink's data folder, local or on S3, is opened with OpenFolder, which sends no
// request (the first one tells of a missing bucket or rejected credentials).
//
// See docs/checkpoint-format.md for the layout the objects follow.
package s3
