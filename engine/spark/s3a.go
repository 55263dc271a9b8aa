package spark

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/checkpoint/sparkckpt"
	"github.com/lockstep-dev/lockstep/internal/storeconn"
)

// S3AConf maps the S3 settings of the query's locations (those of the environment, as
// storeconn.Resolve reads them) to Spark's S3A settings, so that s3:// locations (s3a:// on
// Spark) reach the same server in the same region with the same identity. It and s3Settings
// (a location's own spec.s3, per bucket) are the one mapping of s3.Settings to S3A; the CA
// bundle, which S3A has no option for, goes to the JVM as a trust store (s3.Settings.TrustStore, s3.JavaTrustOptions).
//
// Credentials never enter the plan: static keys are read by the AWS SDK from the runner's
// environment (which inherits Lockstep's), web identity from its token file. SDK 2.35's
// default checksums are turned off, as third-party stores (MinIO, versitygw) need
// (HADOOP-19654).
func S3AConf(st s3.Settings) map[string]string {
	const p = "spark.hadoop.fs.s3a."
	conf := map[string]string{
		p + "checksum.generation":               "false",
		p + "create.checksum.algorithm":         "",
		p + "request.md5.header":                "true",
		p + "change.detection.version.required": "false",
	}
	s3aConnection(conf, p, st)
	switch {
	case st.AccessKey != "":
		conf[p+"aws.credentials.provider"] = "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider"
	case st.WebIdentityTokenFile != "":
		conf[p+"aws.credentials.provider"] = "software.amazon.awssdk.auth.credentials.WebIdentityTokenFileCredentialsProvider"
	}
	return conf
}

// s3aConnection sets S3A's server settings under the prefix p (all buckets' or one bucket's)
// from st: the region, always (st.RegionOrDefault, the one default), and for another server
// than AWS S3 its endpoint, path-style access and TLS, as checkpoint/s3's client reaches it.
func s3aConnection(conf map[string]string, p string, st s3.Settings) {
	conf[p+"endpoint.region"] = st.RegionOrDefault()
	if st.Endpoint != "" {
		conf[p+"endpoint"] = st.Endpoint
		conf[p+"path.style.access"] = strconv.FormatBool(st.PathStyle())
		conf[p+"connection.ssl.enabled"] = strconv.FormatBool(st.Secure())
	}
}

// TrustStoreFile is the name of the trust store (s3.Settings.TrustStore) the runner's JVM is
// given when the S3 settings name a CA bundle.
const TrustStoreFile = "truststore.p12"

// writeTrustStore writes the trust store of the environment's S3 settings (read with getenv)
// into dir and returns the JVM options that make the runner's JVM trust it; none when the
// settings name no CA bundle. It holds the system's CAs too (s3.Settings.TrustStore). In local
// mode the driver's JVM is the executors'; on Kubernetes the executors get theirs from the
// controller.
func writeTrustStore(dir string, getenv func(string) string) ([]string, error) {
	st, err := storeconn.Resolve(getenv, storeconn.From{})
	if err != nil {
		return nil, err
	}
	ts, err := st.TrustStore()
	if err != nil || ts == nil {
		return nil, err
	}
	path := filepath.Join(dir, TrustStoreFile)
	if err := os.WriteFile(path, ts, 0o600); err != nil {
		return nil, fmt.Errorf("write the runner's trust store: %w", err)
	}
	return s3.JavaTrustOptions(path), nil
}

// EnvCredentialsClass is the runner's S3A credentials provider for a bucket with its own S3
// settings: it reads <prefix>AWS_ACCESS_KEY_ID, <prefix>AWS_SECRET_ACCESS_KEY and
// <prefix>AWS_SESSION_TOKEN from the environment, the prefix being the bucket's
// ConfCredentialsEnvPrefix, and without them takes web identity, then the instance's
// metadata, as the built-in engine does.
const EnvCredentialsClass = "dev.lockstep.spark.EnvCredentials"

// ConfCredentialsEnvPrefix is the S3A setting (per bucket) that names EnvCredentialsClass's
// variables' prefix.
const ConfCredentialsEnvPrefix = "fs.s3a.lockstep.credentials.env.prefix"

// s3Settings maps a location's own S3 settings (a source's, the sink's or a static side's
// s3:) to S3A's settings of its bucket (fs.s3a.bucket.<bucket>.*), which S3A applies to every
// path in that bucket: so the bucket must not be the checkpoint's (which the query's settings
// reach), and two locations in one bucket must agree. name is the source's or join's name
// ("" for the sink), which names the credentials' variables (v1.S3CredentialsEnvPrefix); the
// keys stay in the environment.
func (c *compiler) s3Settings(p *field.Path, conn *v1.S3Connection, name, location string) {
	if conn == nil {
		return
	}
	bucket, ok := s3Bucket(location)
	switch {
	case !ok:
		return // validation refuses s3: on a path that is not s3://
	case conn.InsecureSkipVerify:
		c.refuse(p.Child("insecureSkipVerify"), true, "S3A cannot skip the verification of the server's certificate; trust its CA in the JVM instead")
		return
	case bucket == c.checkpointBucket:
		c.refuse(p, bucket, "S3A's settings are per bucket, and bucket "+bucket+" holds the checkpoint, which the query's S3 settings reach; drop these settings or use another bucket")
		return
	}
	if prev, seen := c.buckets[bucket]; seen {
		if prev != *conn {
			c.refuse(p, bucket, "S3A's settings are per bucket, and another location in bucket "+bucket+" has other S3 settings; give both the same")
		}
		return
	}
	c.buckets[bucket] = *conn
	b := "spark.hadoop.fs.s3a.bucket." + bucket + "."
	s3aConnection(c.sparkConf, b, storeconn.Connection(storeconn.From{Conn: conn}))
	c.sparkConf[b+"aws.credentials.provider"] = EnvCredentialsClass
	c.sparkConf[b+strings.TrimPrefix(ConfCredentialsEnvPrefix, "fs.s3a.")] = v1.S3CredentialsEnvPrefix(conn, name)
}

// s3Bucket returns the bucket of an s3:// location, or of its s3a:// form (a plan's).
func s3Bucket(location string) (string, bool) {
	loc, err := checkpoint.ParseLocation(sparkckpt.LockstepLocation(location))
	return loc.Bucket, err == nil && loc.Scheme == checkpoint.SchemeS3
}
