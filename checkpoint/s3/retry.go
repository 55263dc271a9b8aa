package s3

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
)

// An op names a Store operation, for retry counts and messages.
type op int

const (
	opGet op = iota
	opCreate
	opPut
	opList
	opDelete
	numOps
)

var opNames = [numOps]string{"get", "create", "put", "list", "delete"}

func (o op) String() string { return opNames[o] }

// Stats counts what a store's operations did beyond the first attempt. It is
// safe for concurrent use and may be shared by several stores.
type Stats struct {
	retries   [numOps]atomic.Int64
	uncertain atomic.Int64
}

// StatsSnapshot is a copy of Stats at one instant.
type StatsSnapshot struct {
	// Retries counts retried requests by operation: get, create, put, list,
	// delete. Operations that needed none are absent.
	Retries map[string]int64 `json:"retries,omitempty"`
	// UncertainWrites counts creates whose outcome was unknown (a lost
	// reply, a timeout, a reset after sending) and that were resolved by
	// reading the object back.
	UncertainWrites int64 `json:"uncertainWrites,omitempty"`
}

// Snapshot returns the counts so far.
func (st *Stats) Snapshot() StatsSnapshot {
	var s StatsSnapshot
	if st == nil {
		return s
	}
	for o := range numOps {
		if n := st.retries[o].Load(); n > 0 {
			if s.Retries == nil {
				s.Retries = make(map[string]int64)
			}
			s.Retries[o.String()] = n
		}
	}
	s.UncertainWrites = st.uncertain.Load()
	return s
}

// Sub returns the counts of s since an earlier snapshot.
func (s StatsSnapshot) Sub(earlier StatsSnapshot) StatsSnapshot {
	d := StatsSnapshot{UncertainWrites: s.UncertainWrites - earlier.UncertainWrites}
	for k, v := range s.Retries {
		if n := v - earlier.Retries[k]; n > 0 {
			if d.Retries == nil {
				d.Retries = make(map[string]int64)
			}
			d.Retries[k] = n
		}
	}
	return d
}

// retryCountKey carries the counter of CountRetries in a context.
type retryCountKey struct{}

// CountRetries returns a context under which a Store operation adds the
// requests it retried to *n, so that a caller can tell the retries of one
// operation (Stats counts those of all). n is written by the goroutine that
// runs the operation, before the operation returns.
func CountRetries(ctx context.Context, n *int) context.Context {
	return context.WithValue(ctx, retryCountKey{}, n)
}

func (st *Stats) retried(o op) {
	if st != nil {
		st.retries[o].Add(1)
	}
}

func (st *Stats) resolved() {
	if st != nil {
		st.uncertain.Add(1)
	}
}

// retry runs f until it succeeds, fails for good, runs out of attempts or
// reaches the operation's deadline. Each attempt is bounded by the request
// timeout; between attempts it waits a delay drawn from [0, d] (full
// jitter), d doubling from the base delay up to the maximum, and at least
// what a Retry-After answer asked.
func (s *Store) retry(ctx context.Context, o op, f func(ctx context.Context) error) error {
	start := time.Now()
	opCtx, cancel := context.WithTimeout(ctx, s.cfg.opTimeout)
	defer cancel()
	backoff := s.cfg.baseDelay
	for attempt := 1; ; attempt++ {
		var hint retryHint
		actx, cancelAttempt := context.WithTimeout(context.WithValue(opCtx, retryHintKey{}, &hint), s.cfg.timeout)
		err := f(actx)
		cancelAttempt()
		if err == nil || !(transient(opCtx, err) || s.credentialsTransient(opCtx)) || (s.cfg.attempts > 0 && attempt >= s.cfg.attempts) {
			if err != nil && ctx.Err() == nil && opCtx.Err() != nil {
				return fmt.Errorf("gave up after %d attempts in %s (the operation timeout; set %s to wait longer): %w",
					attempt, time.Since(start).Round(time.Millisecond), EnvOperationTimeout, err)
			}
			return err
		}
		wait := rand.N(backoff + 1)
		if after := hint.after.Load(); after > int64(wait) {
			wait = time.Duration(after)
		}
		backoff = min(2*backoff, s.cfg.maxDelay)
		if dl, ok := opCtx.Deadline(); ok && time.Until(dl) < wait {
			if cdl, ok := ctx.Deadline(); ok && !cdl.After(dl) {
				// The caller's deadline, not the operation timeout, is the
				// one the wait would pass: say so the way a caller checks.
				return fmt.Errorf("gave up after %d attempts in %s: the next retry would pass the caller's deadline: %w (last error: %w)",
					attempt, time.Since(start).Round(time.Millisecond), context.DeadlineExceeded, err)
			}
			return fmt.Errorf("gave up after %d attempts in %s: the next retry would pass the operation timeout %s (set %s to wait longer): %w",
				attempt, time.Since(start).Round(time.Millisecond), s.cfg.opTimeout, EnvOperationTimeout, err)
		}
		s.cfg.stats.retried(o)
		if n, ok := ctx.Value(retryCountKey{}).(*int); ok {
			*n++
		}
		t := time.NewTimer(wait)
		select {
		case <-opCtx.Done():
			t.Stop()
			if ctx.Err() != nil {
				return fmt.Errorf("%w (after %d attempts; the last: %w)", ctx.Err(), attempt, err)
			}
			return fmt.Errorf("gave up after %d attempts in %s (the operation timeout; set %s to wait longer): %w",
				attempt, time.Since(start).Round(time.Millisecond), EnvOperationTimeout, err)
		case <-t.C:
		}
	}
}

// credentialsTransient reports whether the credential chain's latest
// retrieval failed in a way that may pass: STS or the metadata endpoint
// unreachable, or answering 5xx. minio-go then sends the request unsigned
// and the server's refusal would read as final.
func (s *Store) credentialsTransient(ctx context.Context) bool {
	err := s.cfg.chain.failure()
	return err != nil && transient(ctx, err)
}

// transient reports whether a failed request may succeed when tried again.
// ctx is the operation's context: once it is done nothing is transient.
func transient(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var er minio.ErrorResponse
	if errors.As(err, &er) && er.StatusCode != 0 {
		switch er.Code {
		case "SlowDown", "RequestTimeout", "InternalError", "ServiceUnavailable", "Throttling", "RequestTimeTooSkewed":
			return true
		case "ConditionalRequestConflict":
			// A concurrent conditional write is in flight: AWS asks to
			// retry, and the retry gets 412 or succeeds.
			return true
		}
		return er.StatusCode >= 500 || er.StatusCode == http.StatusTooManyRequests ||
			er.StatusCode == http.StatusRequestTimeout || er.StatusCode == http.StatusConflict && er.Code != "BucketAlreadyExists"
	}
	// No HTTP answer: a network failure, unless the TLS setup is wrong.
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var certInvalid x509.CertificateInvalidError
	var recordHeader tls.RecordHeaderError
	if errors.As(err, &unknownCA) || errors.As(err, &hostname) || errors.As(err, &certInvalid) || errors.As(err, &recordHeader) {
		return false
	}
	var netErr net.Error
	return errors.Is(err, context.DeadlineExceeded) || // the attempt's own timeout
		errors.As(err, &netErr) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// uncertain reports whether a failed create may nevertheless have been
// applied: the request may have reached the server and only its answer was
// lost. A 5xx counts, since a server may fail after applying the write.
func uncertain(err error) bool {
	var er minio.ErrorResponse
	if errors.As(err, &er) && er.StatusCode != 0 {
		return er.StatusCode >= 500
	}
	// Refused before anything was sent: the write cannot have happened.
	return !errors.Is(err, syscall.ECONNREFUSED)
}

// retryHint carries a Retry-After answer from the transport to the retry
// loop, through the attempt's context.
type retryHint struct{ after atomic.Int64 }

type retryHintKey struct{}

// retryAfterTransport records the Retry-After header of 429 and 503 answers.
// minio-go's errors do not carry the header.
type retryAfterTransport struct{ http.RoundTripper }

// maxRetryAfter caps what a server may ask for one wait.
const maxRetryAfter = 30 * time.Second

func (t retryAfterTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.RoundTripper.RoundTrip(req)
	if err != nil || (resp.StatusCode != http.StatusServiceUnavailable && resp.StatusCode != http.StatusTooManyRequests) {
		return resp, err
	}
	if hint, ok := req.Context().Value(retryHintKey{}).(*retryHint); ok {
		if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			hint.after.Store(int64(min(d, maxRetryAfter)))
		}
	}
	return resp, nil
}

// parseRetryAfter reads a Retry-After value: seconds, or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.Atoi(v); err == nil && secs >= 0 {
		return time.Duration(secs) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}
