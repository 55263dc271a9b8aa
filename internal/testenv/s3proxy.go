package testenv

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Kind is a fault the S3 proxy injects.
type Kind string

// The faults an [S3Proxy] injects, the ones real object stores and the
// networks in front of them produce.
const (
	// LostReply forwards the request, so the server applies it, reads the
	// whole answer and then closes the client's connection without
	// replying. The client cannot tell whether its request took effect.
	LostReply Kind = "LostReply"
	// SlowDown answers 503 with an S3 error document, code SlowDown, and a
	// Retry-After header when the rule sets one. The request is not
	// forwarded.
	SlowDown Kind = "SlowDown"
	// InternalError answers 500 with an S3 error document, code
	// InternalError. The request is not forwarded.
	InternalError Kind = "InternalError"
	// Unavailable answers 503 with an S3 error document, code
	// ServiceUnavailable. The request is not forwarded.
	Unavailable Kind = "Unavailable"
	// Reset resets the client's connection (TCP RST) before forwarding:
	// the request is not applied.
	Reset Kind = "Reset"
	// Delay reads the request, waits for the rule's delay, then forwards
	// it. A client that gives up first (its timeout, a closed connection)
	// cancels the request: it is not forwarded.
	Delay Kind = "Delay"
	// Custom hands the request to the rule's Handler.
	Custom Kind = "Custom"
	// Outage is recorded once for every outage window, when it starts;
	// the requests an outage answers are recorded with their own kind
	// (Reset or Unavailable) and Fault.Outage set.
	Outage Kind = "Outage"
)

// OutageMode is what an S3 outage looks like to clients.
type OutageMode int

const (
	// OutageRefuse closes the proxy's listener and every open connection:
	// new connections are refused until the outage ends, when the proxy
	// listens on the same port again.
	OutageRefuse OutageMode = iota
	// OutageReset resets every request's connection.
	OutageReset
	// OutageUnavailable answers every request 503 ServiceUnavailable.
	OutageUnavailable
)

func (m OutageMode) String() string {
	switch m {
	case OutageRefuse:
		return "refuse"
	case OutageReset:
		return "reset"
	case OutageUnavailable:
		return "unavailable"
	}
	return "OutageMode(" + strconv.Itoa(int(m)) + ")"
}

// Always as a Rule's Times hits every matching request from the Nth on.
const Always = -1

// DefaultDelay is how long a Delay fault waits when its rule sets no delay.
const DefaultDelay = time.Second

// Match selects the requests a rule may hit. Every field that is set must
// match; the zero Match selects every request.
type Match struct {
	// Method is the HTTP method ("PUT", "GET", "HEAD", "DELETE", "POST");
	// empty for any.
	Method string
	// Key is a regular expression (unanchored, as in go test -run) that
	// the object key must match, or for a list request the listed
	// prefix; empty for any.
	Key string
	// List selects only list requests: a GET of the bucket with
	// list-type, prefix, delimiter, marker, continuation-token,
	// start-after, max-keys or no query at all.
	List bool
	// Object selects only requests on an object (a key), no bucket
	// requests such as lists.
	Object bool
	// IfNoneMatch selects only requests that carry If-None-Match, the
	// create-if-absent PUTs.
	IfNoneMatch bool
	// Func, when set, must also return true. It is called with the
	// proxy's lock held, so it must not call the proxy.
	Func func(*http.Request) bool
}

// Rule says which requests get which fault. Which of the matching requests
// it hits: with Rate, each one with that probability, drawn from the
// proxy's seeded source; else the Nth (default 1, the next one) and, with
// Times, that many in a row (default 1; [Always] for all that follow).
// Matching requests are counted from when the rule is added.
type Rule struct {
	Kind Kind
	// OneOf, when set, replaces Kind: each fault is one of these kinds,
	// drawn from the proxy's seeded source.
	OneOf []Kind
	Match Match
	Rate  float64
	Nth   int
	Times int
	// Delay is how long a Delay fault waits; default [DefaultDelay].
	Delay time.Duration
	// RetryAfter, when positive, is sent as a SlowDown fault's
	// Retry-After header (in whole seconds, at least 1).
	RetryAfter time.Duration
	// Handler answers the requests a Custom fault hits. forward sends a
	// request on to the server as the proxy does; [WriteS3Error] writes
	// an S3 error reply.
	Handler func(w http.ResponseWriter, r *http.Request, forward http.Handler)
}

// Fault is one injected fault.
type Fault struct {
	N      int  // the request's number at the proxy, from 1; 0 for an Outage
	Kind   Kind // what was done
	Method string
	Key    string // the object key, or a list's prefix
	List   bool
	Outage bool // injected by an outage window
	Time   time.Time
}

// S3Request is one request the proxy received, as [S3Proxy.Log] reports it.
type S3Request struct {
	N           int // from 1, in order of arrival
	Method      string
	Key         string // the object key, or a list's prefix
	List        bool
	IfNoneMatch bool
	// Fault is the fault injected, "" for none.
	Fault Kind
	// Status is the HTTP status the client got, 0 when it got none
	// (LostReply, Reset, or a cancelled request).
	Status int
}

// Injection is a rule added to a proxy.
type Injection struct {
	p     *S3Proxy
	rule  Rule
	key   *regexp.Regexp
	seen  int // matching requests since the rule was added
	hits  int
	fired chan struct{}
}

// Hits returns how many faults the rule has injected.
func (i *Injection) Hits() int {
	i.p.mu.Lock()
	defer i.p.mu.Unlock()
	return i.hits
}

// Fired returns a channel that is closed once the rule's first fault is
// done: a LostReply's request has been applied, a Reset's connection reset.
func (i *Injection) Fired() <-chan struct{} { return i.fired }

// Remove stops the rule from injecting more faults.
func (i *Injection) Remove() {
	i.p.mu.Lock()
	defer i.p.mu.Unlock()
	i.p.rules = slices.DeleteFunc(i.p.rules, func(r *Injection) bool { return r == i })
}

// S3Proxy is an HTTP proxy on a loopback port in front of a real S3 server
// that injects faults: lost replies, SlowDown and other 5xx answers,
// connection resets, delays and outage windows. Requests without a fault
// pass through unchanged: the same Host header, which the client signed, and
// the body streamed byte for byte (aws-chunked streaming signatures
// included), so signed requests verify on the server.
//
// Faults are chosen by rules ([S3Proxy.Inject], [S3Proxy.Random]), tried in
// the order they were added; the first that fires answers the request.
// Random choices come from a PCG source seeded with the proxy's seed, so a
// run that sends the same requests in the same order gets the same faults.
// Every fault is logged with t.Logf and recorded. An S3Proxy is safe for
// concurrent use; its goroutines and connections end at the test's cleanup.
type S3Proxy struct {
	t        testing.TB
	upstream *S3Server
	seed     uint64
	forward  *httputil.ReverseProxy
	srv      *http.Server
	addr     string
	ctx      context.Context // cancelled at cleanup, ends delays and forwarded requests
	stop     context.CancelFunc
	serving  sync.WaitGroup // the Serve goroutines
	handlers sync.WaitGroup // requests in progress

	connMu sync.Mutex
	conns  map[net.Conn]struct{} // open client connections, closed by an OutageRefuse

	closed atomic.Bool // set at cleanup: no more logging, outages or requests

	mu       sync.Mutex
	listener net.Listener // nil during an OutageRefuse
	rng      *rand.Rand
	rules    []*Injection
	outage   *outage
	n        int
	log      []S3Request
	faults   []Fault
}

type outage struct {
	mode  OutageMode
	timer *time.Timer
}

// NewS3Proxy starts a fault-injecting proxy in front of upstream, its
// random choices seeded with seed. It injects nothing until rules are
// added. The proxy stops at the test's cleanup.
func NewS3Proxy(t testing.TB, upstream *S3Server, seed uint64) *S3Proxy {
	t.Helper()
	target, err := url.Parse(upstream.URL)
	if err != nil || target.Host == "" {
		t.Fatalf("s3 proxy: upstream URL %q: %v", upstream.URL, err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("s3 proxy: listen: %v", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	p := &S3Proxy{
		t: t, upstream: upstream, seed: seed, addr: l.Addr().String(),
		ctx: ctx, stop: stop, listener: l,
		rng:   rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		conns: map[net.Conn]struct{}{},
	}
	errLog := log.New(logWriter{p}, "", 0)
	p.forward = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// Only the destination changes: the Host header, path and
			// query stay as the client sent and signed them.
			pr.Out.URL.Scheme, pr.Out.URL.Host = target.Scheme, target.Host
		},
		Transport: &http.Transport{
			Proxy:               nil, // never an HTTP_PROXY from the environment
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
			DisableCompression:  true, // pass answers through as the server sent them
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     30 * time.Second,
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the client is gone or the proxy stopped
			}
			p.logf("s3 proxy: forward %s %s: %v", r.Method, r.URL.Path, err)
			WriteS3Error(w, r, http.StatusBadGateway, "BadGateway", "the test proxy could not reach the server: "+err.Error())
		},
		ErrorLog: errLog,
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serveHTTP), ConnState: p.trackConn, ErrorLog: errLog}
	p.serve(l)
	t.Logf("s3 proxy %s in front of %s %s, seed %d", p.addr, upstream.Kind, upstream.URL, seed)
	t.Cleanup(p.close)
	return p
}

// Server returns the proxy as an S3 server: the upstream's kind, bucket,
// credentials and region, at the proxy's URL and endpoint. It stays valid
// across outages.
func (p *S3Proxy) Server() *S3Server {
	s := *p.upstream
	s.URL = "http://" + p.addr
	s.Endpoint = p.addr
	return &s
}

// Seed returns the seed of the proxy's random choices.
func (p *S3Proxy) Seed() uint64 { return p.seed }

// Inject adds a rule. A malformed rule (no kind, a bad Key regexp, a
// Custom rule without a Handler, Rate with Nth or Times) fails the test.
func (p *S3Proxy) Inject(r Rule) *Injection {
	p.t.Helper()
	if err := r.check(); err != nil {
		p.t.Fatalf("s3 proxy: %v", err)
	}
	inj := &Injection{p: p, rule: r, fired: make(chan struct{})}
	if r.Match.Key != "" {
		inj.key = regexp.MustCompile(r.Match.Key) // checked above
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = append(p.rules, inj)
	return inj
}

// Random adds a rule for soak tests: every request, with probability rate,
// gets a fault of one of kinds (by default LostReply, SlowDown,
// InternalError, Reset and Delay), drawn from the seeded source. Delays
// last DefaultDelay and SlowDown sends Retry-After: 1.
func (p *S3Proxy) Random(rate float64, kinds ...Kind) *Injection {
	p.t.Helper()
	if len(kinds) == 0 {
		kinds = []Kind{LostReply, SlowDown, InternalError, Reset, Delay}
	}
	return p.Inject(Rule{OneOf: kinds, Rate: rate, RetryAfter: time.Second})
}

// Clear removes every rule. It does not end an outage.
func (p *S3Proxy) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = nil
}

// Outage starts an outage window of d: until it ends every request is
// refused, reset or answered 503, as mode says. The outage ends after d or
// at [S3Proxy.EndOutage]; a new Outage replaces the one in progress.
// Outage returns at once; with OutageRefuse the listener and all open
// connections are closed when it returns.
func (p *S3Proxy) Outage(d time.Duration, mode OutageMode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() {
		return
	}
	p.endOutageLocked()
	o := &outage{mode: mode}
	o.timer = time.AfterFunc(d, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.outage == o {
			p.endOutageLocked()
		}
	})
	p.outage = o
	f := Fault{Kind: Outage, Outage: true, Time: time.Now()}
	p.faults = append(p.faults, f)
	p.logf("s3 proxy (seed %d): outage of %v, mode %v", p.seed, d, mode)
	if mode == OutageRefuse {
		if p.listener != nil {
			p.listener.Close()
			p.listener = nil
		}
		p.closeConns()
	}
}

// EndOutage ends the outage in progress, if any. After an OutageRefuse the
// proxy listens on its port again before EndOutage returns.
func (p *S3Proxy) EndOutage() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endOutageLocked()
}

// Faults returns the faults injected so far, in order of request number,
// outages where they started.
func (p *S3Proxy) Faults() []Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	faults := slices.Clone(p.faults)
	// Time is taken when the request is numbered, so it orders by N too.
	slices.SortStableFunc(faults, func(a, b Fault) int { return a.Time.Compare(b.Time) })
	return faults
}

// Counts returns how many faults of each kind were injected.
func (p *S3Proxy) Counts() map[Kind]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	counts := map[Kind]int{}
	for _, f := range p.faults {
		counts[f.Kind]++
	}
	return counts
}

// Requests returns how many requests the proxy has received (connections
// refused during an outage are not requests).
func (p *S3Proxy) Requests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// Log returns every request the proxy has received, in order of arrival.
// A request still in progress has Status 0.
func (p *S3Proxy) Log() []S3Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.log)
}

// WriteS3Error answers r with an S3 error document, as S3 does.
func WriteS3Error(w http.ResponseWriter, r *http.Request, status int, code, message string) {
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("X-Amz-Request-Id", "testenv-s3-proxy")
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
		`<Error><Code>%s</Code><Message>%s</Message><Resource>%s</Resource><RequestId>testenv-s3-proxy</RequestId></Error>`,
		xmlEscape(code), xmlEscape(message), xmlEscape(r.URL.Path))
}

// action is what the proxy does with one request.
type action struct {
	kind   Kind
	outage bool
	rule   *Injection // nil for an outage
}

func (p *S3Proxy) serveHTTP(w http.ResponseWriter, r *http.Request) {
	req := p.describe(r)
	p.mu.Lock()
	if p.closed.Load() {
		p.mu.Unlock()
		resetConn(w)
		return
	}
	p.handlers.Add(1)
	defer p.handlers.Done()
	p.n++
	req.N = p.n
	arrived := time.Now()
	act := p.decideLocked(r, req)
	req.Fault = act.kind
	idx := len(p.log)
	p.log = append(p.log, req)
	p.mu.Unlock()

	// The request ends when the client goes away or the proxy stops; a
	// LostReply's forward ends only when the proxy stops, because the
	// server must apply it even if an outage closes the client's
	// connection meanwhile.
	base := r.Context()
	if act.kind == LostReply {
		base = context.WithoutCancel(base)
	}
	ctx, cancel := context.WithCancel(base)
	defer cancel()
	defer context.AfterFunc(p.ctx, cancel)()
	r = r.WithContext(ctx)
	sw := &statusWriter{ResponseWriter: w}
	act.kind = p.act(sw, r, act)

	p.mu.Lock()
	defer p.mu.Unlock()
	p.log[idx].Fault = act.kind
	p.log[idx].Status = sw.status
	if act.kind == "" {
		return
	}
	p.faults = append(p.faults, Fault{
		N: req.N, Kind: act.kind, Method: req.Method, Key: req.Key, List: req.List,
		Outage: act.outage, Time: arrived,
	})
	during := ""
	if act.outage {
		during = " (outage)"
	}
	p.logf("s3 proxy (seed %d): request %d %s %s: %s%s", p.seed, req.N, r.Method, r.URL.RequestURI(), act.kind, during)
	if act.rule != nil && act.rule.hits == 0 {
		close(act.rule.fired)
	}
	if act.rule != nil {
		act.rule.hits++
	}
}

// decideLocked picks the fault for a request: the outage's, else the first
// rule that fires. Every rule tried counts the request and draws from the
// seeded source only when the request matches, so the same requests in the
// same order get the same faults.
func (p *S3Proxy) decideLocked(r *http.Request, req S3Request) action {
	if o := p.outage; o != nil {
		switch o.mode {
		case OutageReset, OutageRefuse: // a request on a connection that slipped through
			return action{kind: Reset, outage: true}
		case OutageUnavailable:
			return action{kind: Unavailable, outage: true}
		}
	}
	for _, inj := range p.rules {
		if !inj.matches(r, req) {
			continue
		}
		inj.seen++
		rule := inj.rule
		var fire bool
		if rule.Rate > 0 {
			fire = p.rng.Float64() < rule.Rate
		} else {
			nth, times := max(rule.Nth, 1), rule.Times
			if times == 0 {
				times = 1
			}
			fire = inj.seen >= nth && (times == Always || inj.seen < nth+times)
		}
		if !fire {
			continue
		}
		kind := rule.Kind
		if len(rule.OneOf) > 0 {
			kind = rule.OneOf[p.rng.IntN(len(rule.OneOf))]
		}
		return action{kind: kind, rule: inj}
	}
	return action{}
}

// act does what act says with the request and returns the fault it did:
// act.kind, except for a LostReply whose client went away before its body
// arrived, which the server never got: to the client that was a Reset.
func (p *S3Proxy) act(w http.ResponseWriter, r *http.Request, act action) Kind {
	var rule Rule
	if act.rule != nil {
		rule = act.rule.rule
	}
	switch act.kind {
	case "":
		p.forward.ServeHTTP(w, r)
	case LostReply:
		// Take the body first: an outage may close the client's
		// connection while the request is forwarded.
		if err := bufferBody(r); err != nil {
			resetConn(w)
			return Reset
		}
		p.forward.ServeHTTP(&discardWriter{}, r)
		closeConn(w)
	case SlowDown:
		drain(r)
		if rule.RetryAfter > 0 {
			secs := max(1, int((rule.RetryAfter+time.Second-1)/time.Second))
			w.Header().Set("Retry-After", strconv.Itoa(secs))
		}
		WriteS3Error(w, r, http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate. (injected by the test proxy)")
	case InternalError:
		drain(r)
		WriteS3Error(w, r, http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again. (injected by the test proxy)")
	case Unavailable:
		drain(r)
		WriteS3Error(w, r, http.StatusServiceUnavailable, "ServiceUnavailable", "Service is unable to handle request. (injected by the test proxy)")
	case Reset:
		resetConn(w)
	case Delay:
		d := rule.Delay
		if d <= 0 {
			d = DefaultDelay
		}
		// Take the body first: the server notices a client that gives up
		// only once the body has been read.
		if err := bufferBody(r); err != nil {
			return act.kind // the client is gone
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-r.Context().Done():
			return act.kind
		case <-t.C:
		}
		p.forward.ServeHTTP(w, r)
	case Custom:
		rule.Handler(w, r, p.forward)
	}
	return act.kind
}

// bufferBody reads r's body into memory, so that forwarding it no longer
// needs the client's connection.
func bufferBody(r *http.Request) error {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return nil
}

// describe classifies a request by its path-style URL (/bucket/key).
func (p *S3Proxy) describe(r *http.Request) S3Request {
	req := S3Request{Method: r.Method, IfNoneMatch: r.Header.Get("If-None-Match") != ""}
	path := strings.TrimPrefix(r.URL.Path, "/")
	_, key, _ := strings.Cut(path, "/")
	req.Key = key
	if key == "" && r.Method == http.MethodGet {
		q := r.URL.Query()
		list := len(q) == 0
		for _, name := range []string{"list-type", "prefix", "delimiter", "marker", "continuation-token", "start-after", "max-keys"} {
			list = list || q.Has(name)
		}
		if list {
			req.List, req.Key = true, q.Get("prefix")
		}
	}
	return req
}

func (i *Injection) matches(r *http.Request, req S3Request) bool {
	m := i.rule.Match
	switch {
	case m.Method != "" && !strings.EqualFold(m.Method, req.Method),
		m.List && !req.List,
		m.Object && (req.List || req.Key == ""),
		m.IfNoneMatch && !req.IfNoneMatch,
		i.key != nil && !i.key.MatchString(req.Key),
		m.Func != nil && !m.Func(r):
		return false
	}
	return true
}

func (r Rule) check() error {
	kinds := r.OneOf
	if len(kinds) == 0 {
		kinds = []Kind{r.Kind}
	}
	for _, k := range kinds {
		switch k {
		case LostReply, SlowDown, InternalError, Unavailable, Reset, Delay:
		case Custom:
			if r.Handler == nil {
				return errors.New("a Custom rule needs a Handler")
			}
		case "":
			return errors.New("rule without a Kind")
		default:
			return fmt.Errorf("rule kind %q: not a fault a rule can inject", k)
		}
	}
	if r.Match.Key != "" {
		if _, err := regexp.Compile(r.Match.Key); err != nil {
			return fmt.Errorf("rule key: %w", err)
		}
	}
	if r.Rate < 0 || r.Rate > 1 {
		return fmt.Errorf("rule rate %v: want a probability in [0, 1]", r.Rate)
	}
	if r.Rate > 0 && (r.Nth != 0 || r.Times != 0) {
		return errors.New("a rule takes a Rate or Nth and Times, not both")
	}
	if r.Nth < 0 || r.Times < Always {
		return fmt.Errorf("rule Nth %d, Times %d: want Nth >= 0 and Times >= 0 or Always", r.Nth, r.Times)
	}
	return nil
}

func (p *S3Proxy) serve(l net.Listener) {
	p.serving.Go(func() {
		// Serve returns when its listener closes, at an outage or cleanup.
		_ = p.srv.Serve(l)
	})
}

// endOutageLocked ends the outage in progress; after OutageRefuse it
// listens on the proxy's port again.
func (p *S3Proxy) endOutageLocked() {
	o := p.outage
	if o == nil {
		return
	}
	o.timer.Stop()
	p.outage = nil
	p.logf("s3 proxy (seed %d): outage ended", p.seed)
	if o.mode != OutageRefuse || p.closed.Load() {
		return
	}
	// The port was ours a moment ago; another process may take it in
	// between, so try for a while before giving up.
	var err error
	for range 50 {
		var l net.Listener
		if l, err = net.Listen("tcp", p.addr); err == nil {
			p.listener = l
			p.serve(l)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.t.Errorf("s3 proxy: listen again on %s after the outage: %v", p.addr, err)
}

func (p *S3Proxy) trackConn(c net.Conn, state http.ConnState) {
	p.connMu.Lock()
	defer p.connMu.Unlock()
	switch state {
	case http.StateNew:
		p.conns[c] = struct{}{}
	case http.StateHijacked, http.StateClosed:
		delete(p.conns, c)
	}
}

// closeConns closes every open client connection, requests in progress
// included, as a server that goes down does.
func (p *S3Proxy) closeConns() {
	p.connMu.Lock()
	defer p.connMu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

func (p *S3Proxy) close() {
	p.mu.Lock()
	p.closed.Store(true)
	if p.outage != nil {
		p.outage.timer.Stop()
		p.outage = nil
	}
	p.mu.Unlock()
	p.stop()
	p.srv.Close()
	p.serving.Wait()
	p.handlers.Wait()
	p.forward.Transport.(*http.Transport).CloseIdleConnections()
}

// logf logs to the test unless the proxy has stopped (the test may be over).
func (p *S3Proxy) logf(format string, args ...any) {
	if !p.closed.Load() {
		p.t.Logf(format, args...)
	}
}

// logWriter sends the net/http servers' complaints to the test log.
type logWriter struct{ p *S3Proxy }

func (w logWriter) Write(b []byte) (int, error) {
	w.p.logf("s3 proxy: %s", strings.TrimSpace(string(b)))
	return len(b), nil
}

// statusWriter records the status the client got. Unwrap lets
// http.ResponseController reach the connection (Hijack, Flush).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 && status >= 200 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// discardWriter takes a LostReply's answer, which the client never sees.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header {
	if d.h == nil {
		d.h = http.Header{}
	}
	return d.h
}
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) WriteHeader(int)             {}

// closeConn closes the client's connection without an answer.
func closeConn(w http.ResponseWriter) {
	// HTTP/1 connections can always be hijacked; one that an outage
	// closed already needs nothing more.
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		conn.Close()
	}
}

// resetConn resets the client's connection: closed with SO_LINGER 0, the
// kernel sends RST, not FIN.
func resetConn(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return // see closeConn
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	conn.Close()
}

// drain reads the request's body before an error answer, so a client still
// sending it reads the answer instead of a broken pipe.
func drain(r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
}

func xmlEscape(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder does not fail
	return b.String()
}
