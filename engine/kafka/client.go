package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
)

// ConnectError means no broker answered within the connect timeout when a
// component started.
type ConnectError struct {
	Brokers []string
	Waited  time.Duration
	Err     error
	// SASL reports that the connection authenticates: a broker that closes
	// the connection may be refusing the credentials.
	SASL bool
}

func (e *ConnectError) Error() string {
	check := "bootstrapServers and that the brokers run"
	if e.SASL {
		check = "bootstrapServers, that the brokers run, and the SASL mechanism and credentials (a broker may close the connection on bad credentials)"
	}
	return fmt.Sprintf("no Kafka broker of %s answered within %s: %v; check %s",
		strings.Join(e.Brokers, ","), e.Waited.Round(time.Millisecond), e.Err, check)
}

func (e *ConnectError) Unwrap() error { return e.Err }

// conn is what a component needs to reach a cluster.
type conn struct {
	servers []string
	opts    []kgo.Opt
	sasl    bool
}

// newConn turns the connection settings of a spec into client options. It
// reads SASL credentials through getenv (the engine's environment; os.Getenv
// when nil) and TLS files from disk, and returns every problem it finds.
func newConn(servers []string, saslSpec *v1.KafkaSASL, tlsSpec *v1.KafkaTLS, o options, getenv func(string) string, log *slog.Logger) (conn, error) {
	c := conn{
		servers: servers,
		opts: []kgo.Opt{
			kgo.SeedBrokers(servers...),
			kgo.WithLogger(kgoLogger{log}),
			kgo.DialTimeout(10 * time.Second),
			// A running component waits for brokers that restart; the
			// components bound that wait themselves (brokerTimeout).
			kgo.RetryTimeout(o.brokerTimeout),
			kgo.MetadataMinAge(250 * time.Millisecond),
		},
	}
	var errs []error
	if saslSpec != nil {
		m, err := saslMechanism(saslSpec, getenv)
		if err != nil {
			errs = append(errs, err)
		} else {
			c.opts = append(c.opts, kgo.SASL(m))
			c.sasl = true
		}
	}
	if tlsSpec != nil {
		cfg, err := tlsConfig(tlsSpec)
		if err != nil {
			errs = append(errs, err)
		} else {
			c.opts = append(c.opts, kgo.DialTLSConfig(cfg))
		}
	}
	return c, errors.Join(errs...)
}

// credentials are a user name and a password read from the environment, and
// the variables they were read from (for errors, which never quote values).
type credentials struct {
	userEnv, passEnv string
	user, pass       string
}

// readCredentials reads the credentials in the variables userEnv and passEnv,
// or in defaultUserEnv and defaultPassEnv where a spec names none, with getenv
// (os.Getenv when nil).
func readCredentials(getenv func(string) string, userEnv, passEnv, defaultUserEnv, defaultPassEnv string) credentials {
	if getenv == nil {
		getenv = os.Getenv
	}
	if userEnv == "" {
		userEnv = defaultUserEnv
	}
	if passEnv == "" {
		passEnv = defaultPassEnv
	}
	return credentials{userEnv: userEnv, passEnv: passEnv, user: getenv(userEnv), pass: getenv(passEnv)}
}

// caPool reads the PEM CA bundle in file, which the spec's field names.
func caPool(field, file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s %s: no PEM certificate in it", field, file)
	}
	return pool, nil
}

func saslMechanism(s *v1.KafkaSASL, getenv func(string) string) (sasl.Mechanism, error) {
	c := readCredentials(getenv, s.UsernameEnv, s.PasswordEnv, v1.DefaultKafkaUsernameEnv, v1.DefaultKafkaPasswordEnv)
	user, pass := c.user, c.pass
	if user == "" || pass == "" {
		return nil, fmt.Errorf("sasl %s: set the user name in $%s and the password in $%s", s.Mechanism, c.userEnv, c.passEnv)
	}
	switch s.Mechanism {
	case v1.SASLPlain:
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case v1.SASLScramSHA256:
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism(), nil
	case v1.SASLScramSHA512:
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("sasl: unknown mechanism %q, want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", s.Mechanism)
}

func tlsConfig(s *v1.KafkaTLS) (*tls.Config, error) {
	cfg := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         s.ServerName,
		InsecureSkipVerify: s.InsecureSkipVerify, //nolint:gosec // the spec says it is for tests only
	}
	var errs []error
	if s.CAFile != "" {
		pool, err := caPool("tls caFile", s.CAFile)
		if err != nil {
			errs = append(errs, err)
		}
		cfg.RootCAs = pool
	}
	if (s.CertFile == "") != (s.KeyFile == "") {
		errs = append(errs, errors.New("tls: set both certFile and keyFile, or neither"))
	} else if s.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("tls client certificate: %w", err))
		} else {
			cfg.Certificates = []tls.Certificate{cert}
		}
	}
	return cfg, errors.Join(errs...)
}

// connect waits until a broker answers, at most timeout (or until ctx ends),
// and returns the cluster's id.
func connect(ctx context.Context, cl *kgo.Client, c conn, timeout time.Duration) (string, error) {
	servers := c.servers
	began := time.Now()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 2*time.Second) {
		m, err := kadm.NewClient(cl).BrokerMetadata(cctx)
		if err == nil {
			return m.Cluster, nil
		}
		if !isContextErr(err) || last == nil {
			last = err
		}
		if isAuthErr(err) {
			return "", fmt.Errorf("kafka brokers %s refused the credentials: %w", strings.Join(servers, ","), err)
		}
		select {
		case <-cctx.Done():
			if ctx.Err() != nil && last == nil {
				return "", ctx.Err()
			}
			return "", &ConnectError{Brokers: servers, Waited: time.Since(began), Err: last, SASL: c.sasl}
		case <-time.After(backoff):
		}
	}
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

func isAuthErr(err error) bool {
	return errors.Is(err, kerr.SaslAuthenticationFailed) || errors.Is(err, kerr.IllegalSaslState) ||
		errors.Is(err, kerr.UnsupportedSaslMechanism) || errors.Is(err, kerr.ClusterAuthorizationFailed)
}

// retryable reports whether err may go away when a broker comes back.
func retryable(err error) bool {
	if err == nil || isContextErr(err) {
		return false
	}
	if ke := (*kerr.Error)(nil); errors.As(err, &ke) {
		return ke.Retriable
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var se *kadm.ShardErrors
	if errors.As(err, &se) {
		for _, e := range se.Errs {
			if !retryable(e.Err) {
				return false
			}
		}
		return true
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// withRetry runs fn until it succeeds, fails with an error that a broker
// coming back would not fix, or wait has passed.
func withRetry(ctx context.Context, wait time.Duration, what string, log *slog.Logger, fn func(ctx context.Context) error) error {
	deadline := time.Now().Add(wait)
	var warned bool
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 2*time.Second) {
		err := fn(ctx)
		if err == nil || !retryable(err) || ctx.Err() != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: brokers did not answer for %s: %w", what, wait, err)
		}
		if !warned {
			log.Warn("Kafka brokers did not answer; retrying", "operation", what, "error", err)
			warned = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
	}
}

// kgoLogger passes franz-go's warnings and errors to the engine's logger.
type kgoLogger struct{ log *slog.Logger }

func (l kgoLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (l kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	switch level {
	case kgo.LogLevelError:
		l.log.Error(msg, keyvals...)
	case kgo.LogLevelWarn:
		l.log.Warn(msg, keyvals...)
	}
}
