package s3

import (
	"cmp"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Environment variables read when the matching option is not given. They are
// defined here and nowhere else: every S3 location Lockstep opens (checkpoint,
// source, sink) reads the same names.
const (
	EnvEndpoint           = "LOCKSTEP_S3_ENDPOINT" // http://host:port or https://host:port; unset means AWS
	EnvRegion             = "AWS_REGION"
	EnvAccessKey          = "AWS_ACCESS_KEY_ID"
	EnvSecretKey          = "AWS_SECRET_ACCESS_KEY"
	EnvSessionToken       = "AWS_SESSION_TOKEN"
	EnvCABundle           = "AWS_CA_BUNDLE"                    // a PEM file of extra CAs to trust
	EnvInsecureSkipVerify = "LOCKSTEP_S3_INSECURE_SKIP_VERIFY" // "true": accept any certificate (tests only)
	EnvOperationTimeout   = "LOCKSTEP_S3_OPERATION_TIMEOUT"    // a Go duration: how long one operation may retry

	// The web identity (IRSA, Workload Identity) variables, read by the
	// credential chain when no static keys are set.
	EnvWebIdentityTokenFile = "AWS_WEB_IDENTITY_TOKEN_FILE"
	EnvRoleARN              = "AWS_ROLE_ARN"
	// EnvSTSEndpoint is the STS server web identity asks for credentials
	// (the AWS SDKs' name); unset means AWS STS in $AWS_REGION.
	EnvSTSEndpoint = "AWS_ENDPOINT_URL_STS"
)

// Defaults of the options.
const (
	DefaultRegion = "us-east-1"
	// DefaultOperationTimeout bounds one operation (a Create, a Get, a
	// List), all its retries included. An outage shorter than it is ridden
	// out inside the operation.
	DefaultOperationTimeout = 2 * time.Minute
	DefaultBaseDelay        = 50 * time.Millisecond
	DefaultMaxDelay         = 5 * time.Second
	DefaultRequestTimeout   = 30 * time.Second
	// AWSEndpoint is AWS S3's endpoint, the default.
	AWSEndpoint = "https://s3.amazonaws.com"
)

// Settings are the resolved connection settings of one S3 location: which
// server, which region, which credentials, which certificates to trust. They
// are plain values so that a runtime other than this package's client (Spark's
// s3a options) can be given the very same settings. FromEnv reads them from
// the environment; package internal/storeconn resolves those of a
// CheckpointStore and of a source's or sink's spec.s3. The zero Settings are
// AWS S3 in us-east-1 with the standard credential chain.
type Settings struct {
	// Endpoint is "http://host:port" or "https://host:port"; empty means AWS
	// S3 (AWSEndpoint).
	Endpoint string
	// Region is the bucket's region; empty means DefaultRegion.
	Region string
	// AccessKey, SecretKey and SessionToken are static credentials; with no
	// AccessKey the standard chain finds credentials (see WithCredentials).
	AccessKey, SecretKey, SessionToken string
	// WebIdentityTokenFile, RoleARN and STSEndpoint are the web identity
	// (IRSA, Workload Identity) the standard chain uses, as the AWS_*
	// variables of the same names set them; STSEndpoint empty means AWS STS.
	WebIdentityTokenFile, RoleARN, STSEndpoint string
	// CABundle holds PEM certificates of CAs to trust besides the system's
	// (a CheckpointStore's caBundle); CAFile names a PEM file of them
	// ($AWS_CA_BUNDLE). CABundle wins when both are set.
	CABundle []byte
	CAFile   string
	// InsecureSkipVerify accepts any server certificate (tests only).
	InsecureSkipVerify bool
	// OperationTimeout bounds one operation with all its retries; zero means
	// DefaultOperationTimeout.
	OperationTimeout time.Duration
}

// FromEnv returns the settings the environment gives, read through getenv:
// $LOCKSTEP_S3_ENDPOINT, $AWS_REGION, the static keys when both
// $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY are set (with
// $AWS_SESSION_TOKEN), the web identity variables, $AWS_CA_BUNDLE,
// $LOCKSTEP_S3_INSECURE_SKIP_VERIFY ("true") and
// $LOCKSTEP_S3_OPERATION_TIMEOUT (a Go duration). It is what Open and New use
// when no WithSettings is given.
func FromEnv(getenv func(string) string) (Settings, error) {
	st := Settings{
		Endpoint:             getenv(EnvEndpoint),
		Region:               getenv(EnvRegion),
		WebIdentityTokenFile: getenv(EnvWebIdentityTokenFile),
		RoleARN:              getenv(EnvRoleARN),
		STSEndpoint:          getenv(EnvSTSEndpoint),
		CAFile:               getenv(EnvCABundle),
		InsecureSkipVerify:   getenv(EnvInsecureSkipVerify) == "true",
	}
	if id, secret := getenv(EnvAccessKey), getenv(EnvSecretKey); id != "" && secret != "" {
		st.AccessKey, st.SecretKey, st.SessionToken = id, secret, getenv(EnvSessionToken)
	}
	if v := getenv(EnvOperationTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return Settings{}, fmt.Errorf("%s=%q: want a positive Go duration such as 2m or 90s", EnvOperationTimeout, v)
		}
		st.OperationTimeout = d
	}
	return st, nil
}

// An Option configures Open and New. Options apply in order; a later one
// wins, so per-location settings can follow the defaults.
type Option func(*config)

type config struct {
	// edits change the settings in the order the options came; given is set
	// by WithSettings, and without it the settings start from the environment.
	edits []func(*Settings)
	given bool

	endpoint  string
	region    string
	creds     *credentials.Credentials
	accessKey string       // for messages
	chain     *chainSource // the standard chain's last failure; nil with static keys
	tls       *tls.Config
	attempts  int // 0: until the operation timeout
	baseDelay time.Duration
	maxDelay  time.Duration
	timeout   time.Duration // one request
	opTimeout time.Duration
	readOnly  bool
	stats     *Stats
	settings  Settings
}

func (c *config) edit(f func(*Settings)) { c.edits = append(c.edits, f) }

// WithSettings sets every connection setting at once, replacing the
// environment's and those of earlier options. Options after it apply on top.
func WithSettings(st Settings) Option {
	return func(c *config) {
		c.given = true
		c.edit(func(s *Settings) { *s = st })
	}
}

// WithEndpoint sets the server: "http://host:port" or "https://host:port".
// The default is $LOCKSTEP_S3_ENDPOINT, and AWS S3 when that is unset.
func WithEndpoint(endpoint string) Option {
	return func(c *config) { c.edit(func(s *Settings) { s.Endpoint = endpoint }) }
}

// WithRegion sets the region. The default is $AWS_REGION, else us-east-1.
func WithRegion(region string) Option {
	return func(c *config) { c.edit(func(s *Settings) { s.Region = region }) }
}

// WithCredentials sets static credentials; sessionToken may be empty. The
// default is the standard chain: $AWS_ACCESS_KEY_ID, $AWS_SECRET_ACCESS_KEY
// and $AWS_SESSION_TOKEN when the first two are set; else the AWS shared
// credentials file; else web identity ($AWS_WEB_IDENTITY_TOKEN_FILE and
// $AWS_ROLE_ARN, as IRSA and Workload Identity set them); else the container
// or instance metadata endpoint.
func WithCredentials(accessKey, secretKey, sessionToken string) Option {
	return func(c *config) {
		c.edit(func(s *Settings) { s.AccessKey, s.SecretKey, s.SessionToken = accessKey, secretKey, sessionToken })
	}
}

// standardChain is the credential chain after static keys: the shared
// credentials file, then web identity, then the container and instance
// metadata endpoints (minio-go's IAM provider tries those in that order,
// reading the AWS_* variables itself). minio-go's chain drops the reason a
// provider failed and signs nothing, so the server answers a bare "access
// denied"; the chainSource it also returns keeps that reason for classify.
func standardChain(st Settings) (*credentials.Credentials, *chainSource) {
	iam := &credentials.IAM{Client: &http.Client{Transport: http.DefaultTransport}}
	src := &chainSource{source: "the instance or container metadata endpoint"}
	if f := st.WebIdentityTokenFile; f != "" {
		// The provider's Endpoint is STS's for web identity, the metadata
		// endpoint's otherwise: set it only for the first.
		iam.Endpoint = st.STSEndpoint
		sts := iam.Endpoint
		if sts == "" {
			sts = "AWS STS"
		}
		src.source = fmt.Sprintf("web identity (STS %s, %s=%s, %s=%s)",
			sts, EnvWebIdentityTokenFile, f, EnvRoleARN, st.RoleARN)
	}
	src.Provider = iam
	return credentials.NewChainCredentials([]credentials.Provider{&credentials.FileAWSCredentials{}, src}), src
}

// chainSource is the standard chain's last provider, remembering why its
// latest retrieval failed. It is safe for concurrent use.
type chainSource struct {
	credentials.Provider
	source string // what it asks, for messages
	err    atomic.Pointer[error]
	ok     atomic.Bool // the latest retrieval succeeded
}

// Retrieve is RetrieveWithCredContext with the default context, as
// minio-go's providers implement it.
func (p *chainSource) Retrieve() (credentials.Value, error) { return p.RetrieveWithCredContext(nil) }

func (p *chainSource) RetrieveWithCredContext(cc *credentials.CredContext) (credentials.Value, error) {
	return p.note(p.Provider.RetrieveWithCredContext(cc))
}

func (p *chainSource) note(v credentials.Value, err error) (credentials.Value, error) {
	if err != nil {
		p.err.Store(&err)
	} else {
		p.err.Store(nil)
	}
	p.ok.Store(err == nil)
	return v, err
}

// used names where the chain's credentials came from, for messages.
func (p *chainSource) used() string {
	if p.ok.Load() {
		return p.source
	}
	return "the AWS shared credentials file" // the chain never asked p
}

// failure returns why the latest retrieval failed, or nil.
func (p *chainSource) failure() error {
	if p == nil {
		return nil
	}
	if err := p.err.Load(); err != nil {
		return *err
	}
	return nil
}

// WithCA trusts the CAs in a PEM file as well as the system's. The default
// is $AWS_CA_BUNDLE when set.
func WithCA(pemFile string) Option {
	return func(c *config) { c.edit(func(s *Settings) { s.CAFile, s.CABundle = pemFile, nil }) }
}

// WithInsecureSkipVerify accepts any server certificate (or, with false,
// verifies again). For tests only; the default is
// $LOCKSTEP_S3_INSECURE_SKIP_VERIFY == "true", else verify.
func WithInsecureSkipVerify(skip ...bool) Option {
	v := len(skip) == 0 || skip[0]
	return func(c *config) { c.edit(func(s *Settings) { s.InsecureSkipVerify = v }) }
}

// WithTLSConfig sets the whole TLS configuration, for client certificates and
// the like; WithCA and WithInsecureSkipVerify apply on top of it.
func WithTLSConfig(cfg *tls.Config) Option { return func(c *config) { c.tls = cfg.Clone() } }

// WithRetries caps how many times a request is tried in all (attempts 1
// disables retries; 0, the default, retries until the operation timeout) and
// sets the delay before the first retry (default 50ms), which doubles up to
// 5s; each wait is drawn uniformly from [0, delay] (full jitter), and is at
// least what a Retry-After header asked. Only transient failures are
// retried: 5xx, 429, 408, throttling, timeouts and connection errors; never a
// failed precondition, a missing object or a refused permission.
func WithRetries(attempts int, baseDelay time.Duration) Option {
	return func(c *config) { c.attempts, c.baseDelay = max(attempts, 0), baseDelay }
}

// WithRequestTimeout bounds each attempt of a request. The default is 30s.
func WithRequestTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithOperationTimeout bounds one operation with all its retries. The
// default is $LOCKSTEP_S3_OPERATION_TIMEOUT, else 2 minutes.
func WithOperationTimeout(d time.Duration) Option {
	return func(c *config) { c.edit(func(s *Settings) { s.OperationTimeout = d }) }
}

// WithStats counts the retries and the resolved uncertain writes of the
// store's operations into st, which may be shared by several stores.
func WithStats(st *Stats) Option { return func(c *config) { c.stats = st } }

// ReadOnly opens the store for reading only: Open does not write its
// scratch object, and Create, Put and Delete fail with
// checkpoint.ErrReadOnly. For inspection with read-only credentials.
func ReadOnly() Option { return func(c *config) { c.readOnly = true } }

func newConfig(opts []Option) (*config, error) {
	c := &config{baseDelay: DefaultBaseDelay, maxDelay: DefaultMaxDelay, timeout: DefaultRequestTimeout}
	for _, opt := range opts {
		opt(c)
	}
	var st Settings
	if !c.given {
		var err error
		if st, err = FromEnv(os.Getenv); err != nil {
			return nil, err
		}
	}
	for _, edit := range c.edits {
		edit(&st)
	}
	c.settings = st
	c.endpoint = st.EndpointOrDefault()
	c.region = st.RegionOrDefault()
	c.opTimeout = cmp.Or(st.OperationTimeout, DefaultOperationTimeout)
	if st.AccessKey != "" {
		c.creds = credentials.NewStaticV4(st.AccessKey, st.SecretKey, st.SessionToken)
		c.accessKey = st.AccessKey
	} else {
		c.creds, c.chain = standardChain(st)
	}
	return c, nil
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

// transports holds one HTTP transport per distinct TLS setting, shared by every store opened
// with it: a process that opens many locations (the controller polls one per query) keeps one
// pool of connections per endpoint, not one per location. Requests are signed one by one, so
// stores with different credentials share connections safely.
var transports sync.Map // transportKey → http.RoundTripper

type transportKey struct {
	secure, insecure bool
	ca               [sha256.Size]byte // of the CA bundle's contents; zero for none
}

// transport returns the HTTP transport for the TLS settings, shared unless the caller gave
// its own tls.Config. It records Retry-After answers for the retry loop.
func (c *config) transport(secure bool) (http.RoundTripper, error) {
	var pem []byte
	if secure {
		var err error
		if pem, err = c.settings.CAPEM(); err != nil {
			return nil, err
		}
	}
	if c.tls != nil {
		return c.newTransport(secure, pem)
	}
	key := transportKey{secure: secure, insecure: secure && c.settings.InsecureSkipVerify}
	if pem != nil {
		key.ca = sha256.Sum256(pem)
	}
	if tr, ok := transports.Load(key); ok {
		return tr.(http.RoundTripper), nil
	}
	tr, err := c.newTransport(secure, pem)
	if err != nil {
		return nil, err
	}
	shared, _ := transports.LoadOrStore(key, tr)
	return shared.(http.RoundTripper), nil
}

// newTransport builds an HTTP transport for the TLS settings, trusting the CA bundle pem
// besides the system's when it is not nil.
func (c *config) newTransport(secure bool, pem []byte) (http.RoundTripper, error) {
	tr, err := minio.DefaultTransport(secure)
	if err != nil {
		return nil, err
	}
	if secure {
		if c.tls != nil {
			tr.TLSClientConfig = c.tls.Clone()
		}
		if tr.TLSClientConfig == nil {
			tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		if c.settings.InsecureSkipVerify {
			tr.TLSClientConfig.InsecureSkipVerify = true
		}
		if pem != nil {
			pool, err := x509.SystemCertPool()
			if err != nil {
				pool = x509.NewCertPool()
			}
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("CA bundle %s holds no PEM certificate", cmp.Or(c.settings.CAFile, "(inline)"))
			}
			tr.TLSClientConfig.RootCAs = pool
		}
	}
	return retryAfterTransport{tr}, nil
}
