// Package testenv starts the real services Lockstep's tests talk to: an S3
// server (versitygw, or MinIO with LOCKSTEP_TEST_S3=minio), a Kafka-protocol
// broker (franz-go's kfake, in-process or as a separate process), a Kubernetes
// control plane (envtest: kube-apiserver and etcd), PostgreSQL, and the
// Terraform CLI.
//
// Every helper takes the test, starts (or reuses) the service on a free
// loopback port, waits until it answers, and registers its cleanup. Binaries
// come from the tool cache that `make tools` fills ($LOCKSTEP_TOOLS, default
// $HOME/.cache/lockstep/tools). A missing binary fails the test with the
// command that installs it; nothing is ever skipped silently.
//
// Services that are slow to start (S3, the control plane, PostgreSQL) are
// started once per test binary and shared; each test gets its own bucket,
// namespace or database. A package that uses them should call [Main] from its
// TestMain so the shared processes stop when the tests end.
//
// To point tests at a service that already runs, set LOCKSTEP_TEST_S3_ENDPOINT
// (with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), LOCKSTEP_TEST_KAFKA_BROKERS
// or LOCKSTEP_TEST_POSTGRES_DSN; see docs/development.md.
package testenv
