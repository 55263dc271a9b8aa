package s3

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
)

// transient reports whether a failed request may succeed when tried again.
// ctx is the caller's context: once it is done nothing is transient.
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
		return er.StatusCode >= 500 || er.StatusCode == http.StatusTooManyRequests || er.StatusCode == http.StatusRequestTimeout
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

// jitter returns a random duration in [d/2, d].
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d/2 + rand.N(d/2+1)
}
