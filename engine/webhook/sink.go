package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/codec"
)

var (
	_ engine.Sink = (*Sink)(nil)
	_ io.Closer   = (*Sink)(nil)
)

// Defaults of the options.
const (
	// DefaultRetryFor is how long a chunk is retried before the batch fails.
	DefaultRetryFor = 2 * time.Minute
	// DefaultHeadersDir is where the Secret named by headersSecretName is
	// mounted: one file per header, named after it.
	DefaultHeadersDir = "/var/run/secrets/lockstep/webhook-headers"
)

// IdempotencyKeyHeader carries <query id>:<batch id>[:<chunk>].
const IdempotencyKeyHeader = "Idempotency-Key"

const (
	minBackoff = 200 * time.Millisecond
	maxBackoff = 10 * time.Second
)

// SinkSpec describes the webhook sink for the registry and the docs.
func SinkSpec() engine.ComponentSpec {
	return engine.ComponentSpec{
		Summary: "POSTs each batch as JSON ({queryId, batchId, chunk, chunks, rows}) to a URL, in chunks, with an Idempotency-Key header.",
		Fields: []engine.FieldSpec{
			{Name: "url", Description: "an http or https URL"},
			{Name: "headers", Description: "headers added to every request"},
			{Name: "headersSecretName", Description: "a Secret whose keys are header names and values header values, mounted for the engine"},
			{Name: "maxRowsPerRequest", Default: "1000", Description: "rows per request; a larger batch is sent in chunks"},
			{Name: "timeout", Default: "30s", Description: "bound of one request; a timeout is retried"},
		},
	}
}

// Opt configures the sinks that SinkWith builds.
type Opt interface {
	apply(*options)
}

type optFunc func(*options)

func (f optFunc) apply(o *options) { f(o) }

type options struct {
	retryFor   time.Duration
	headersDir string
	client     *http.Client
}

// WithRetryFor sets how long a chunk is retried, overriding DefaultRetryFor
// (2m).
func WithRetryFor(d time.Duration) Opt { return optFunc(func(o *options) { o.retryFor = d }) }

// WithHeadersDir sets where headersSecretName's Secret is mounted,
// overriding DefaultHeadersDir.
func WithHeadersDir(dir string) Opt { return optFunc(func(o *options) { o.headersDir = dir }) }

// WithHTTPClient sets the HTTP client (for its transport: proxies, TLS); the
// spec's timeout still bounds each request. The default is a client of its
// own with http.DefaultTransport's settings.
func WithHTTPClient(c *http.Client) Opt { return optFunc(func(o *options) { o.client = c }) }

// NewSink builds a webhook sink with the default options. It is an
// engine.SinkConstructor.
func NewSink(ctx context.Context, spec *v1.Sink, env engine.SinkEnv) (engine.Sink, error) {
	return SinkWith()(ctx, spec, env)
}

// SinkWith returns a constructor of webhook sinks with opts.
func SinkWith(opts ...Opt) engine.SinkConstructor {
	o := options{retryFor: DefaultRetryFor, headersDir: DefaultHeadersDir}
	for _, opt := range opts {
		opt.apply(&o)
	}
	return func(_ context.Context, spec *v1.Sink, env engine.SinkEnv) (engine.Sink, error) {
		return newSink(spec, env, o)
	}
}

// Sink POSTs batches to a URL. See the package documentation. The engine
// calls Write from one goroutine at a time.
type Sink struct {
	url      string
	header   http.Header
	maxRows  int
	timeout  time.Duration
	retryFor time.Duration
	client   *http.Client
	log      *slog.Logger
	reached  func(engine.Phase, int64)
}

func newSink(spec *v1.Sink, env engine.SinkEnv, o options) (*Sink, error) {
	w := spec.Webhook
	if w == nil {
		return nil, errors.New("not a webhook sink")
	}
	s := &Sink{
		url:      w.URL,
		header:   http.Header{},
		maxRows:  int(w.MaxRowsPerRequest),
		retryFor: o.retryFor,
		client:   o.client,
		log:      env.Logger,
		reached:  env.Reached,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.reached == nil {
		s.reached = func(engine.Phase, int64) {}
	}
	if s.maxRows <= 0 {
		s.maxRows = v1.DefaultWebhookRowsPerRequest
	}
	var errs []error
	if u, err := url.Parse(w.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("url %q: want an http or https URL", w.URL))
	}
	timeout := w.Timeout
	if timeout == "" {
		timeout = v1.DefaultWebhookTimeout
	}
	d, err := time.ParseDuration(string(timeout))
	if err != nil || d <= 0 {
		errs = append(errs, fmt.Errorf("timeout %q: want a positive duration", timeout))
	}
	s.timeout = d
	for k, v := range w.Headers {
		s.header.Set(k, v)
	}
	if w.HeadersSecretName != "" {
		if err := s.readHeaders(o.headersDir, w.HeadersSecretName); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if s.client == nil {
		s.client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	return s, nil
}

// readHeaders adds the headers of the Secret mounted in dir: one file per
// header. Kubernetes' ..data links and other dot files are skipped.
func (s *Sink) readHeaders(dir, secret string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("headersSecretName %s: read its mounted headers: %w", secret, err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || e.IsDir() {
			continue
		}
		v, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return fmt.Errorf("headersSecretName %s: %w", secret, err)
		}
		s.header.Set(e.Name(), strings.TrimRight(string(v), "\r\n"))
	}
	return nil
}

// Write POSTs the batch's rows, chunk after chunk, and returns once every
// chunk was accepted (a 2xx answer). It retries as the package documentation
// says; an error leaves the batch to be replayed by the next run.
func (s *Sink) Write(ctx context.Context, b *engine.Batch) error {
	if len(b.Rows) == 0 {
		s.reached(engine.PhaseSinkWrite, b.ID)
		return nil
	}
	chunks := (len(b.Rows) + s.maxRows - 1) / s.maxRows
	for c := range chunks {
		rows := b.Rows[c*s.maxRows : min(len(b.Rows), (c+1)*s.maxRows)]
		body, err := s.body(b, c, chunks, rows)
		if err != nil {
			return err
		}
		key := b.QueryID + ":" + strconv.FormatInt(b.ID, 10)
		if chunks > 1 {
			key += ":" + strconv.Itoa(c)
		}
		if err := s.post(ctx, key, body); err != nil {
			return fmt.Errorf("batch %d chunk %d of %d: %w", b.ID, c, chunks, err)
		}
	}
	s.reached(engine.PhaseSinkWrite, b.ID)
	return nil
}

// body is the JSON of one chunk.
func (s *Sink) body(b *engine.Batch, chunk, chunks int, rows []engine.Row) ([]byte, error) {
	lines, err := codec.Encode(v1.FormatJSON, b.Columns, rows)
	if err != nil {
		return nil, fmt.Errorf("encode batch %d: %w", b.ID, err)
	}
	buf := make([]byte, 0, len(lines)+128)
	qid, err := json.Marshal(b.QueryID)
	if err != nil {
		return nil, err
	}
	buf = append(buf, `{"queryId":`...)
	buf = append(buf, qid...)
	buf = append(buf, `,"batchId":`...)
	buf = strconv.AppendInt(buf, b.ID, 10)
	buf = append(buf, `,"chunk":`...)
	buf = strconv.AppendInt(buf, int64(chunk), 10)
	buf = append(buf, `,"chunks":`...)
	buf = strconv.AppendInt(buf, int64(chunks), 10)
	buf = append(buf, `,"rows":[`...)
	// Encode wrote one object per line; strings escape line breaks, so the
	// line breaks separate the objects.
	lines = bytes.TrimSuffix(lines, []byte{'\n'})
	for i, c := range lines {
		if c == '\n' {
			lines[i] = ','
		}
	}
	buf = append(buf, lines...)
	return append(buf, ']', '}'), nil
}

// statusError is an answer that is not 2xx.
type statusError struct {
	code       int
	status     string
	body       string
	retryAfter time.Duration
}

func (e *statusError) Error() string {
	msg := "the receiver answered " + e.status
	if e.body != "" {
		msg += ": " + e.body
	}
	return msg
}

func (e *statusError) retryable() bool {
	return e.code >= 500 || e.code == http.StatusTooManyRequests || e.code == http.StatusRequestTimeout
}

// post sends one chunk until it is accepted, refused, or retryFor passed.
func (s *Sink) post(ctx context.Context, key string, body []byte) error {
	deadline := time.Now().Add(s.retryFor)
	backoff := minBackoff
	for attempt := 1; ; attempt++ {
		err := s.attempt(ctx, key, body)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var se *statusError
		if errors.As(err, &se) && !se.retryable() {
			return fmt.Errorf("POST %s (Idempotency-Key %s): %w; not retried: the receiver refused the request", s.url, key, err)
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		if se != nil && se.retryAfter > 0 {
			wait = se.retryAfter
		}
		if time.Now().Add(wait).After(deadline) {
			return fmt.Errorf("POST %s (Idempotency-Key %s): %w; gave up after %d attempts in %s", s.url, key, err, attempt, s.retryFor)
		}
		s.log.Warn("Webhook request failed; retrying", "url", s.url, "key", key, "attempt", attempt, "in", wait, "error", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

func (s *Sink) attempt(ctx context.Context, key string, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, v := range s.header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(IdempotencyKeyHeader, key)
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // reuse the connection
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	se := &statusError{code: resp.StatusCode, status: resp.Status, body: strings.TrimSpace(string(snippet))}
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		if secs, err := strconv.Atoi(ra); err == nil && secs >= 0 {
			se.retryAfter = time.Duration(secs) * time.Second
		} else if t, err := http.ParseTime(ra); err == nil {
			se.retryAfter = time.Until(t)
		}
	}
	return se
}

// Close releases idle connections.
func (s *Sink) Close() error {
	s.client.CloseIdleConnections()
	return nil
}
