package main

import (
	"fmt"
	"net"
	"net/http"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/compat"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/metrics"
	"github.com/lockstep-dev/lockstep/engine/ui"
)

// queryServer is what a running query serves over HTTP besides health: its
// Prometheus metrics at /metrics, its page at / and its recent progress at
// /api/progress. `lockstep run --http` and the engine's port serve it.
type queryServer struct {
	metrics *metrics.Metrics
	ring    *ui.Ring
}

// newQueryServer returns the server of obj, whose checkpoint is at location
// ("" for the spec's).
func newQueryServer(obj *v1.StreamingQuery, location string, opts ...metrics.Option) *queryServer {
	if location == "" {
		location = obj.Spec.Checkpoint.Location
	}
	q := ui.Query{Namespace: obj.Namespace, Name: obj.Name, Location: location, Live: true}
	if shape, err := compat.ShapeOf(&obj.Spec); err == nil { // else the engine reports the spec's error
		q.Shape = &shape
	}
	return &queryServer{metrics: metrics.New(obj.Namespace, obj.Name, opts...), ring: ui.NewRing(q, ui.DefaultSize)}
}

// observers returns the observers that feed the server.
func (s *queryServer) observers() []engine.Observer { return []engine.Observer{s.metrics, s.ring} }

// register adds the server's endpoints to mux.
func (s *queryServer) register(mux *http.ServeMux) {
	mux.Handle("GET /metrics", s.metrics.Handler())
	ui.Register(mux, s.ring)
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
