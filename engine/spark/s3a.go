package spark

import (
	"strings"

	"github.com/lockstep-dev/lockstep/checkpoint/s3"
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
