package spark

import (
	"cmp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/checkpoint/sparkckpt"
)

// S3AConf maps the S3 settings Lockstep reads (checkpoint/s3's variables, read with getenv)
// to Spark's S3A settings, so that s3:// locations (s3a:// on Spark) reach the same server with
// the same identity. It is the one place where that mapping lives.
//
// Credentials never enter the plan: static keys are read by the AWS SDK from the runner's
// environment (which inherits Lockstep's), web identity from its token file. SDK 2.35's
// default checksums are turned off, as third-party stores (MinIO, versitygw) need
// (HADOOP-19654).
func S3AConf(getenv func(string) string) map[string]string {
	const p = "spark.hadoop.fs.s3a."
	conf := map[string]string{
		p + "checksum.generation":               "false",
		p + "create.checksum.algorithm":         "",
		p + "request.md5.header":                "true",
		p + "change.detection.version.required": "false",
	}
	region := getenv(s3.EnvRegion)
	if region == "" {
		region = s3.DefaultRegion
	}
	conf[p+"endpoint.region"] = region
	if ep := getenv(s3.EnvEndpoint); ep != "" {
		conf[p+"endpoint"] = ep
		conf[p+"path.style.access"] = "true"
		conf[p+"connection.ssl.enabled"] = boolString(strings.HasPrefix(ep, "https://"))
	}
	switch {
	case getenv(s3.EnvAccessKey) != "" && getenv(s3.EnvSecretKey) != "":
		conf[p+"aws.credentials.provider"] = "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider"
	case getenv(s3.EnvWebIdentityTokenFile) != "":
		conf[p+"aws.credentials.provider"] = "software.amazon.awssdk.auth.credentials.WebIdentityTokenFileCredentialsProvider"
	}
	return conf
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
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
	c.sparkConf[b+"endpoint.region"] = cmp.Or(conn.Region, s3.DefaultRegion)
	if conn.Endpoint != "" {
		c.sparkConf[b+"endpoint"] = conn.Endpoint
		c.sparkConf[b+"path.style.access"] = "true"
		c.sparkConf[b+"connection.ssl.enabled"] = boolString(strings.HasPrefix(conn.Endpoint, "https://"))
	}
	c.sparkConf[b+"aws.credentials.provider"] = EnvCredentialsClass
	c.sparkConf[b+strings.TrimPrefix(ConfCredentialsEnvPrefix, "fs.s3a.")] = v1.S3CredentialsEnvPrefix(conn, name)
}

// s3Bucket returns the bucket of an s3:// location, or of its s3a:// form (a plan's).
func s3Bucket(location string) (string, bool) {
	loc, err := checkpoint.ParseLocation(sparkckpt.LockstepLocation(location))
	return loc.Bucket, err == nil && loc.Scheme == checkpoint.SchemeS3
}
