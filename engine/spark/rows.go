package spark

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/codec"
	"github.com/lockstep-dev/lockstep/engine/postgres"
	"github.com/lockstep-dev/lockstep/engine/webhook"
	lplan "github.com/lockstep-dev/lockstep/plan"
)

// Operation of the rows sink's requests (SinkRows): a chunk of a batch's rows, sent before
// the batch's commit (opCommit).
const opRows = "rows"

// rowsSinks are the sinks whose commit protocol the Spark runtime leaves to the built-in
// runtime's Go code: Spark computes a batch, the runner hands its rows over (RowsSink.java),
// and the sink writes and commits them as on the built-in runtime, with the same requests,
// Idempotency-Keys and retries (webhook), or statements and transaction (postgres).
var rowsSinks = map[v1.SinkKind]engine.SinkConstructor{
	v1.SinkWebhook:  webhook.NewSink,
	v1.SinkPostgres: postgres.NewSink,
}

// rowsCommitter serves the rows sink's requests of one runner, one batch at a time: it
// decodes each chunk of rows by the plan's output columns as it arrives, and writes the batch
// with the Go sink at its commit.
type rowsCommitter struct {
	sink    engine.Sink
	dec     *codec.Decoder
	queryID string
	cols    v1.Columns
	// batch is the batch whose rows are arriving, rows those rows; -1 between batches.
	batch int64
	rows  []engine.Row
}

// newRowsCommitter opens the plan's sink, one of rowsSinks, for the query queryID, as the
// built-in runtime opens it (engine.Query's SinkEnv).
func newRowsCommitter(ctx context.Context, p *lplan.Plan, queryID string, getenv func(string) string, logger *slog.Logger) (*rowsCommitter, error) {
	spec := &p.Spec.Sink
	open, ok := rowsSinks[spec.Kind()]
	if !ok {
		return nil, fmt.Errorf("sink %s: Go does not write its rows on Spark", spec.Kind())
	}
	keys, _ := p.Spec.UpsertKeys()
	cols := p.Output()
	s, err := open(ctx, spec, engine.SinkEnv{QueryID: queryID, Columns: cols, OutputMode: p.Spec.OutputMode, Keys: keys,
		Logger: logger, Getenv: getenv})
	if err != nil {
		return nil, fmt.Errorf("sink %s: %w", spec.Kind(), err)
	}
	return &rowsCommitter{sink: s, dec: codec.NewDecoder(cols), queryID: queryID, cols: cols, batch: -1}, nil
}

// serve answers a request of the runner's rows sink, and returns the rows a commit wrote.
func (c *rowsCommitter) serve(ctx context.Context, req request) (reply, int64, error) {
	rep := reply{BatchID: req.BatchID}
	if c.batch != req.BatchID {
		// A batch the runner started over (its earlier attempt failed): its rows so far go.
		c.batch, c.rows = req.BatchID, c.rows[:0]
	}
	var err error
	switch req.Op {
	case opRows:
		err = c.add(req.Rows)
	case opCommit:
		err = c.sink.Write(ctx, &engine.Batch{QueryID: c.queryID, ID: req.BatchID, Time: time.Now().UTC(), Columns: c.cols, Rows: c.rows})
		rep.Committed = err == nil
	default:
		err = fmt.Errorf("the runner asked %q of the rows sink", req.Op)
	}
	rows := int64(len(c.rows))
	if req.Op == opCommit {
		c.batch, c.rows = -1, nil
	}
	if err != nil {
		err = fmt.Errorf("sink: batch %d: %w", req.BatchID, err)
		rep.Error = err.Error()
		return rep, 0, err
	}
	return rep, rows, nil
}

// add decodes a chunk of rows, each the JSON object of the plan's last step.
func (c *rowsCommitter) add(chunk []json.RawMessage) error {
	for _, text := range chunk {
		row := make(engine.Row, len(c.cols))
		if err := c.dec.DecodeJSON(text, row, nil); err != nil {
			return fmt.Errorf("a row the runner sent, %.200s: %w", text, err)
		}
		c.rows = append(c.rows, row)
	}
	return nil
}

// Close closes the Go sink.
func (c *rowsCommitter) Close() error {
	if cl, ok := c.sink.(io.Closer); ok {
		return cl.Close()
	}
	return nil
}
