package spark

import (
	"strings"

	"github.com/lockstep-dev/lockstep/checkpoint/s3"
)

// S3AConf returns the Spark settings that point S3A (s3a:// checkpoints and tables) at the
// S3 service the environment names as for every Lockstep command (checkpoint/s3's
// LOCKSTEP_S3_ENDPOINT, AWS_REGION): an endpoint other than AWS's is reached with path-style
// requests, as S3-compatible servers expect. Credentials are not settings: S3A's default
// chain reads AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY from each JVM's environment, so a
// secret never enters Spark's configuration (which the driver sends to its executors).
// getenv is os.Getenv in a pod.
func S3AConf(getenv func(string) string) map[string]string {
	conf := map[string]string{}
	if ep := getenv(s3.EnvEndpoint); ep != "" {
		conf["spark.hadoop.fs.s3a.endpoint"] = ep
		conf["spark.hadoop.fs.s3a.path.style.access"] = "true"
		conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = boolString(strings.HasPrefix(ep, "https://"))
	}
	if r := getenv(s3.EnvRegion); r != "" {
		conf["spark.hadoop.fs.s3a.endpoint.region"] = r
	}
	return conf
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
