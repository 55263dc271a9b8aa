package main

import (
	"fmt"
	"net"
	"net/http"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/metrics"
)

// queryServer is what a running query serves over HTTP besides health: its
// Prometheus metrics at /metrics. `lockstep run --http` and the engine's port
// serve it.
type queryServer struct {
	metrics *metrics.Metrics
}

func newQueryServer(obj *v1.StreamingQuery, opts ...metrics.Option) *queryServer {
	return &queryServer{metrics: metrics.New(obj.Namespace, obj.Name, opts...)}
}

// observers returns the observers that feed the server.
func (s *queryServer) observers() []engine.Observer { return []engine.Observer{s.metrics} }

// register adds the server's endpoints to mux.
func (s *queryServer) register(mux *http.ServeMux) {
	mux.Handle("GET /metrics", s.metrics.Handler())
}

// observers tells each observer in turn; the engine takes one.
type observers []engine.Observer

var _ engine.IdleObserver = observers(nil)

func (o observers) Started(s engine.Start) {
	for _, obs := range o {
		obs.Started(s)
	}
}

func (o observers) Committed(p engine.Progress) {
	for _, obs := range o {
		obs.Committed(p)
	}
}

func (o observers) Idle(at time.Time) {
	for _, obs := range o {
		if idle, ok := obs.(engine.IdleObserver); ok {
			idle.Idle(at)
		}
	}
}

// serveHTTP serves h on addr until the returned stop is called; it returns
// the address it listens on (addr may have port 0).
func serveHTTP(addr string, h http.Handler) (string, func(), error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }() // ends when stop closes the server
	return l.Addr().String(), func() { _ = srv.Close() }, nil
}
