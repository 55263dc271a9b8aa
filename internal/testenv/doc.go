// Package testenv starts the real services Lockstep's tests talk to: an S3
// server (versitygw, or MinIO with LOCKSTEP_TEST_S3=minio), an Apache Kafka
// broker (KRaft, one node), a Kubernetes control plane (envtest: kube-apiserver and etcd), PostgreSQL, and the
// Terraform CLI.
//
// Every helper takes the test, starts (or reuses) the service on a free
// loopback port, waits until it answers, and registers its cleanup. Binaries
// come from the tool cache that `make tools` fills ($LOCKSTEP_TOOLS, default
// $HOME/.cache/lockstep/tools). A missing binary fails the test with the
// command that installs it; nothing is ever skipped silently.
//
// Services that are slow to start (S3, Kafka, the control plane, PostgreSQL)
// are started once per test binary and shared; each test gets its own
// bucket, namespace or database, and the Kafka broker is leased to one test
// at a time and emptied for it ([Kafka]), or hands a parallel test a topic of
// its own ([KafkaTopic]). A package that uses them must call [Main] from its
// TestMain so the shared processes stop when the tests end; without it they
// refuse to start, saying so. [Client] talks to a control plane directly, with
// [Scheme] (client-go's kinds and Lockstep's).
//
// # Faults on S3
//
// [NewS3Proxy] puts a fault-injecting HTTP proxy on a loopback port in front
// of an [S3Server]; [S3Proxy.Server] describes it as an S3Server, so every
// helper, client and child process that takes one works through it
// unchanged. Requests pass through as the client signed them (Host header
// and body byte for byte). Rules ([S3Proxy.Inject]) aim a fault at the Nth
// or next K requests, or at a random share of them, matching by method,
// key, list or If-None-Match: a lost reply after the server applied the
// request, 503 SlowDown or ServiceUnavailable, 500 InternalError, a reset
// before forwarding, a delay. [S3Proxy.Random] mixes them for soak tests and
// [S3Proxy.Outage] refuses, resets or answers 503 to everything for a while.
// Random choices come from the proxy's seed, so a run that sends the same
// requests in the same order gets the same faults; every fault is logged
// with the seed and counted ([S3Proxy.Faults], [S3Proxy.Counts]).
//
// # Web identity
//
// [MinIOWithOIDC] starts a MinIO of the test's own that trusts an OpenID
// Connect provider served by the test ([OIDC]), so that its STS answers
// AssumeRoleWithWebIdentity with temporary credentials for the provider's
// tokens ([OIDC.Token]): IRSA and Workload Identity without a cloud.
//
// To point tests at a service that already runs, set LOCKSTEP_TEST_S3_ENDPOINT
// (with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY) or LOCKSTEP_TEST_POSTGRES_DSN;
// see docs/development.md. Kafka tests always run on brokers of their own: the
// shared one deletes every topic between tests.
package testenv
