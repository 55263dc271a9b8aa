package s3

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Environment variables read when the matching option is not given.
const (
	EnvEndpoint     = "LOCKSTEP_S3_ENDPOINT" // http://host:port or https://host:port; unset means AWS
	EnvRegion       = "AWS_REGION"
	EnvAccessKey    = "AWS_ACCESS_KEY_ID"
	EnvSecretKey    = "AWS_SECRET_ACCESS_KEY"
	EnvSessionToken = "AWS_SESSION_TOKEN"
	EnvCABundle     = "AWS_CA_BUNDLE" // a PEM file of extra CAs to trust
)

// Defaults of the options.
const (
	DefaultRegion         = "us-east-1"
	DefaultAttempts       = 5
	DefaultBaseDelay      = 50 * time.Millisecond
	DefaultMaxDelay       = 2 * time.Second
	DefaultRequestTimeout = 30 * time.Second
	awsEndpoint           = "https://s3.amazonaws.com"
)

// An Option configures Open.
type Option func(*config)

type config struct {
	endpoint  *string
	region    *string
	creds     *credentials.Credentials
	accessKey string // for messages
	caFile    *string
	insecure  bool
	tls       *tls.Config
	attempts  int
	baseDelay time.Duration
	maxDelay  time.Duration
	timeout   time.Duration
	readOnly  bool
}

// WithEndpoint sets the server: "http://host:port" or "https://host:port".
// The default is $LOCKSTEP_S3_ENDPOINT, and AWS S3 when that is unset.
func WithEndpoint(endpoint string) Option { return func(c *config) { c.endpoint = &endpoint } }

// WithRegion sets the region. The default is $AWS_REGION, else us-east-1.
func WithRegion(region string) Option { return func(c *config) { c.region = &region } }

// WithCredentials sets static credentials; sessionToken may be empty. The
// default is $AWS_ACCESS_KEY_ID, $AWS_SECRET_ACCESS_KEY and
// $AWS_SESSION_TOKEN when the first two are set, else the AWS shared
// credentials file, else the instance's IAM role.
func WithCredentials(accessKey, secretKey, sessionToken string) Option {
	return func(c *config) {
		c.creds = credentials.NewStaticV4(accessKey, secretKey, sessionToken)
		c.accessKey = accessKey
	}
}

// WithCA trusts the CAs in a PEM file as well as the system's. The default
// is $AWS_CA_BUNDLE when set.
func WithCA(pemFile string) Option { return func(c *config) { c.caFile = &pemFile } }

// WithInsecureSkipVerify accepts any server certificate. For tests only;
// the default verifies.
func WithInsecureSkipVerify() Option { return func(c *config) { c.insecure = true } }

// WithTLSConfig sets the whole TLS configuration, for client certificates and
// the like; WithCA and WithInsecureSkipVerify apply on top of it.
func WithTLSConfig(cfg *tls.Config) Option { return func(c *config) { c.tls = cfg.Clone() } }

// WithRetries sets how many times a request is tried in all (default 5) and
// the delay before the first retry (default 50ms), which doubles up to 2s,
// with jitter. Only transient failures are retried: 5xx, 429, 408,
// throttling, timeouts and connection errors; never a failed precondition,
// a missing object or a refused permission. attempts 1 disables retries.
func WithRetries(attempts int, baseDelay time.Duration) Option {
	return func(c *config) { c.attempts, c.baseDelay = max(attempts, 1), baseDelay }
}

// WithRequestTimeout bounds each attempt of a request. The default is 30s.
func WithRequestTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// ReadOnly opens the store for reading only: Open does not write its
// scratch object, and Create, Put and Delete fail with
// checkpoint.ErrReadOnly. For inspection with read-only credentials.
func ReadOnly() Option { return func(c *config) { c.readOnly = true } }

func newConfig(opts []Option) *config {
	c := &config{attempts: DefaultAttempts, baseDelay: DefaultBaseDelay, maxDelay: DefaultMaxDelay, timeout: DefaultRequestTimeout}
	for _, opt := range opts {
		opt(c)
	}
	if c.endpoint == nil {
		ep := os.Getenv(EnvEndpoint)
		if ep == "" {
			ep = awsEndpoint
		}
		c.endpoint = &ep
	}
	if c.region == nil {
		r := os.Getenv(EnvRegion)
		if r == "" {
			r = DefaultRegion
		}
		c.region = &r
	}
	if c.creds == nil {
		if id, secret := os.Getenv(EnvAccessKey), os.Getenv(EnvSecretKey); id != "" && secret != "" {
			c.creds = credentials.NewStaticV4(id, secret, os.Getenv(EnvSessionToken))
			c.accessKey = id
		} else {
			c.creds = credentials.NewChainCredentials([]credentials.Provider{
				&credentials.FileAWSCredentials{},
				&credentials.IAM{},
			})
		}
	}
	if c.caFile == nil {
		if f := os.Getenv(EnvCABundle); f != "" {
			c.caFile = &f
		}
	}
	return c
}

// parseEndpoint splits "http(s)://host[:port]" into host and whether it uses TLS.
func parseEndpoint(endpoint string) (host string, secure bool, err error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.User != nil {
		return "", false, fmt.Errorf("S3 endpoint %q: want http://host:port or https://host:port (%s)", endpoint, EnvEndpoint)
	}
	return u.Host, u.Scheme == "https", nil
}

// transport builds the HTTP transport for the TLS settings.
func (c *config) transport(secure bool) (http.RoundTripper, error) {
	tr, err := minio.DefaultTransport(secure)
	if err != nil {
		return nil, err
	}
	if !secure {
		return tr, nil
	}
	if c.tls != nil {
		tr.TLSClientConfig = c.tls.Clone()
	}
	if tr.TLSClientConfig == nil {
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if c.insecure {
		tr.TLSClientConfig.InsecureSkipVerify = true
	}
	if c.caFile != nil {
		pem, err := os.ReadFile(*c.caFile)
		if err != nil {
			return nil, fmt.Errorf("read CA bundle: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA bundle %s holds no PEM certificate", *c.caFile)
		}
		tr.TLSClientConfig.RootCAs = pool
	}
	return tr, nil
}
