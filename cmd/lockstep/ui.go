package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
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

var (
	_ engine.IdleObserver    = observers(nil)
	_ engine.StoreObserver   = observers(nil)
	_ engine.RebuildObserver = observers(nil)
)

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

func (o observers) Rebuilt(done, total int64, p engine.Progress) {
	for _, obs := range o {
		if r, ok := obs.(engine.RebuildObserver); ok {
			r.Rebuilt(done, total, p)
		}
	}
}

func (o observers) StoreOperation(op engine.StoreOperation) {
	for _, obs := range o {
		if so, ok := obs.(engine.StoreObserver); ok {
			so.StoreOperation(op)
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

func newUICommand() *cobra.Command {
	var location, addr string
	cmd := &cobra.Command{
		Use:   "ui --checkpoint LOCATION",
		Short: "Serve the query page of a stopped query, from its checkpoint",
		Long: `Serve the page that 'lockstep run --http' and the engine's port show (see docs/observability.md) for
the query whose checkpoint is at --checkpoint: the batches still in its commit log with their
rows, durations per phase, source lag and watermark, the query's shape and the delivery
guarantee of its sink. The checkpoint is only read. State rows are not in the commit log, so
that chart stays empty; /metrics is not served (there is no running query).

The page is at http://--http/ and the history as JSON at /api/progress, until SIGINT or SIGTERM.

Exit codes: 0 stopped by a signal, 1 unreadable or damaged checkpoint, 2 malformed location.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return serveHistory(ctx, location, addr, cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&location, "checkpoint", "", "the checkpoint location: a path, file:///path or s3://bucket/prefix")
	cmd.Flags().StringVar(&addr, "http", "127.0.0.1:4040", "the address to serve the page on")
	_ = cmd.MarkFlagRequired("checkpoint")
	return cmd
}

// serveHistory serves the page of the checkpoint at location on addr until ctx ends.
func serveHistory(ctx context.Context, location, addr string, stderr io.Writer) error {
	ring, err := historyRing(ctx, location)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	ui.Register(mux, ring)
	at, stop, err := serveHTTP(addr, mux)
	if err != nil {
		return withExitCode(exitInvalid, fmt.Errorf("--http: %w", err))
	}
	defer stop()
	snap := ring.Snapshot()
	fmt.Fprintf(stderr, "lockstep: query page on http://%s/ (%d batches of %s/%s; Ctrl-C stops)\n",
		at, len(snap.Batches), snap.Query.Namespace, snap.Query.Name)
	<-ctx.Done()
	return nil
}

// historyRing reads the commit log of the checkpoint at location into a ring:
// every retained committed batch, with the watermark and timestamp of its
// offsets entry.
func historyRing(ctx context.Context, location string) (*ui.Ring, error) {
	c, err := loadCheckpoint(ctx, location)
	if err != nil {
		return nil, err
	}
	meta := c.Metadata()
	q := ui.Query{Namespace: meta.Owner.Namespace, Name: meta.Owner.Name, Location: c.Location()}
	switch s, _, err := compat.ReadShape(ctx, c); {
	case err == nil:
		q.Shape = &s
		level, reason := s.Guarantee()
		q.Guarantee = &engine.Guarantee{Level: level, Reason: reason}
	case errors.Is(err, checkpoint.ErrNotFound), errors.Is(err, compat.ErrNewerShape):
		// No shape yet, or a newer Lockstep's: the page shows the batches without it.
	default:
		return nil, fmt.Errorf("read the checkpoint's shape: %w", err)
	}
	batches, err := c.Batches(ctx)
	if err != nil {
		return nil, err
	}
	var committed []engine.Progress
	for _, b := range batches {
		if b.Commit != nil {
			committed = append(committed, historyProgress(meta.ID, b))
		}
	}
	ring := ui.NewRing(q, max(len(committed), 1))
	for _, p := range committed {
		ring.Add(p)
	}
	return ring, nil
}

// historyProgress is the progress of a committed batch as its log entries
// recorded it: no state operators, no S3 counts.
func historyProgress(queryID string, b checkpoint.Batch) engine.Progress {
	cp := b.Commit.Progress
	p := engine.Progress{QueryID: queryID, Batch: b.ID, Timestamp: cp.Timestamp, NumInputRows: cp.NumInputRows,
		NumOutputRows: cp.NumOutputRows, DurationMs: cp.DurationMs}
	if b.Offsets != nil {
		p.Timestamp = time.UnixMilli(b.Offsets.BatchTimestampMs).UTC()
		p.WatermarkMs = b.Offsets.BatchWatermarkMs
	}
	p.Duration = time.Duration(cp.DurationMs[checkpoint.DurationTotal]) * time.Millisecond
	if s := p.Duration.Seconds(); s > 0 {
		p.ProcessedRowsPerSecond = float64(p.NumInputRows) / s
	}
	for _, s := range cp.Sources {
		p.NumMalformedRows += s.NumMalformedRows
		p.Sources = append(p.Sources, engine.SourceProgress{Name: s.Source, StartOffset: s.StartOffset,
			EndOffset: s.EndOffset, NumInputRows: s.NumInputRows, NumMalformedRows: s.NumMalformedRows, Lag: s.Lag, LagMs: s.LagMs})
	}
	return p
}
