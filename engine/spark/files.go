package spark

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/sink"
	"github.com/lockstep-dev/lockstep/internal/storeconn"
	lplan "github.com/lockstep-dev/lockstep/plan"
)

// requestPrefix begins a line on which the runner asks its Go parent something and waits for
// the answer: one JSON object (request), answered by one JSON line on the runner's standard
// input (reply).
const requestPrefix = "@@lockstep-request "

// request is what the runner asks. The files sink (Sink "files") asks "begin" before it writes
// a batch, and "commit" with the data files its one Spark job wrote; the rows sink (Sink
// "rows", rows.go) sends a batch's rows in chunks, then asks "commit".
type request struct {
	Sink    string `json:"sink"`
	Op      string `json:"op"`
	BatchID int64  `json:"batchId"`
	// Files are the data files of a commit: each path relative to the output folder, with the
	// rows and bytes the Spark task that wrote it counted.
	Files []sink.DataFile `json:"files,omitempty"`
	// Rows are a chunk of the rows sink's batch: each the JSON object of the plan's last step.
	Rows []json.RawMessage `json:"rows,omitempty"`
}

// Operations of the requests.
const (
	opBegin  = "begin"
	opCommit = "commit"
)

// committer commits what a sink of the runner wrote or hands over: *filesCommitter,
// *rowsCommitter. serve answers one request and returns the rows a commit committed.
type committer interface {
	serve(ctx context.Context, req request) (reply, int64, error)
}

// reply answers a request: for begin, Skip (the batch is committed: compute it, write nothing)
// or Prefix (how the name of every data file of this attempt begins); for commit, Committed.
// Error fails the runner's batch with its text.
type reply struct {
	BatchID   int64  `json:"batchId"`
	Skip      bool   `json:"skip,omitempty"`
	Prefix    string `json:"prefix,omitempty"`
	Committed bool   `json:"committed,omitempty"`
	Error     string `json:"error,omitempty"`
}

// filesCommitter commits the files sink's batches that the runner writes, with the built-in
// runtime's own manifest code (engine/sink.Files): the Spark job writes a batch's data files,
// Go creates its manifest entry, conditionally on S3 as on a local folder. It serves one
// runner, one batch at a time.
type filesCommitter struct {
	files   *sink.Files
	queryID string
	cols    v1.Columns
	logger  *slog.Logger
	// prefixes holds the prefix given to each batch begun and not committed yet.
	prefixes map[int64]string
	// now is the batch time of a manifest entry.
	now func() time.Time
}

// newFilesCommitter opens the files sink of the plan p, with the plan's output columns, for the
// query queryID; its location's S3 settings are the sink's own spec.s3, else the
// environment's (read with getenv), as the built-in runtime's.
func newFilesCommitter(ctx context.Context, p *lplan.Plan, queryID string, getenv func(string) string, logger *slog.Logger) (*filesCommitter, error) {
	spec, cols := p.Spec, p.Output()
	st, stErr := storeconn.Resolve(getenv, storeconn.From{Conn: spec.Sink.S3Connection()})
	open := func(location string) (checkpoint.Store, error) {
		if stErr != nil {
			return nil, stErr
		}
		return s3.OpenFolder(location, s3.WithSettings(st))
	}
	f, err := sink.OpenFiles(ctx, &spec.Sink, engine.SinkEnv{QueryID: queryID, Columns: cols, Open: open, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("files sink: %w", err)
	}
	return &filesCommitter{files: f, queryID: queryID, cols: cols, logger: logger, prefixes: map[int64]string{}, now: time.Now}, nil
}

// serve answers a request of the runner's files sink, and returns the rows a commit listed.
// An error is also in the reply, which fails the runner's batch.
func (c *filesCommitter) serve(ctx context.Context, req request) (reply, int64, error) {
	rep := reply{BatchID: req.BatchID}
	var (
		rows int64
		err  error
	)
	switch req.Op {
	case opBegin:
		rep.Skip, rep.Prefix, err = c.begin(ctx, req.BatchID)
	case opCommit:
		rows, err = c.commit(ctx, req.BatchID, req.Files)
		rep.Committed = err == nil
	default:
		err = fmt.Errorf("the runner asked %q of the files sink", req.Op)
	}
	if err != nil {
		err = fmt.Errorf("files sink: batch %d: %w", req.BatchID, err)
		rep.Error = err.Error()
	}
	return rep, rows, err
}

// begin says whether batch is committed, and else the prefix of its data files' names.
func (c *filesCommitter) begin(ctx context.Context, batch int64) (bool, string, error) {
	done, err := c.files.Committed(ctx, c.queryID, batch)
	if err != nil || done {
		return done, "", err
	}
	prefix := sink.DataFilePrefix(c.queryID, batch, sink.NewAttempt())
	c.prefixes[batch] = prefix
	return false, prefix, nil
}

// commit lists the data files the runner wrote for batch in its manifest entry. Files of no
// rows (Spark's first task writes one for an empty batch) are deleted, not listed.
func (c *filesCommitter) commit(ctx context.Context, batch int64, files []sink.DataFile) (int64, error) {
	prefix, ok := c.prefixes[batch]
	if !ok {
		return 0, fmt.Errorf("the runner committed a batch it did not begin")
	}
	delete(c.prefixes, batch)
	m := sink.Manifest{QueryID: c.queryID, BatchID: batch, BatchTime: c.now().UTC(), Columns: c.cols}
	var rows int64
	for _, f := range files {
		if !strings.HasPrefix(f.Path, prefix) || strings.Contains(f.Path, "/") || f.Rows < 0 {
			return 0, fmt.Errorf("the runner reported data file %q (%d rows), not one of %s*", f.Path, f.Rows, prefix)
		}
		if f.Rows == 0 {
			if err := c.files.Delete(ctx, f.Path); err != nil {
				c.logger.Warn("Left an empty data file in place", "file", f.Path, "error", err)
			}
			continue
		}
		m.Files = append(m.Files, f)
		rows += f.Rows
	}
	if err := c.files.Commit(ctx, m); err != nil {
		return 0, err
	}
	return rows, nil
}

// parseRequest reads a request line's JSON (after requestPrefix).
func parseRequest(line string) (request, error) {
	var req request
	if err := json.Unmarshal([]byte(line), &req); err != nil {
		return req, fmt.Errorf("read the runner's request %q: %w", line, err)
	}
	return req, nil
}
