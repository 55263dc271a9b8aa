package sink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
)

var (
	_ engine.Sink = (*Console)(nil)
)

// ConsoleSpec describes the console sink for the registry and the docs.
func ConsoleSpec() engine.ComponentSpec {
	return engine.ComponentSpec{
		Summary: "Prints each batch's rows as a table on standard output, like Spark's console sink (at most 20 rows per batch).",
	}
}

// MaxConsoleRows is how many rows of a batch the console sink prints.
const MaxConsoleRows = 20

// Console prints batches. It is used by one goroutine at a time.
type Console struct {
	out io.Writer
}

// NewConsole returns the console sink, printing to env.Stdout.
func NewConsole(_ context.Context, spec *v1.Sink, env engine.SinkEnv) (engine.Sink, error) {
	if spec.Console == nil {
		return nil, errors.New("not a console sink")
	}
	out := env.Stdout
	if out == nil {
		out = os.Stdout
	}
	return &Console{out: out}, nil
}

var _ engine.ChunkWriter = (*Console)(nil)

// Write prints the batch: a header, then up to MaxConsoleRows rows as a table.
func (c *Console) Write(ctx context.Context, b *engine.Batch) error {
	return engine.WriteWhole(ctx, c, b)
}

// Open begins printing batch b a chunk at a time (engine.ChunkWriter): the
// first MaxConsoleRows rows are formatted as they come, and Commit prints
// the table.
func (c *Console) Open(_ context.Context, b *engine.Batch) (engine.BatchWriter, error) {
	return &consoleBatch{out: c.out, b: b, cells: [][]string{b.Columns.Names()}}, nil
}

// consoleBatch is the table of one batch being printed.
type consoleBatch struct {
	out io.Writer
	b   *engine.Batch
	// cells are the header and the rows shown, formatted; rows counts every
	// row written.
	cells [][]string
	rows  int
}

func (w *consoleBatch) Write(_ context.Context, rows []engine.Row) error {
	for _, r := range rows[:min(len(rows), max(0, MaxConsoleRows+1-len(w.cells)))] {
		line := make([]string, len(r))
		for i, v := range r {
			line[i] = cell(v)
		}
		w.cells = append(w.cells, line)
	}
	w.rows += len(rows)
	return nil
}

func (w *consoleBatch) Abort(context.Context) {}

// Commit prints the batch: a header, then the rows shown as a table.
func (w *consoleBatch) Commit(context.Context) error {
	var sb strings.Builder
	fmt.Fprintf(&sb, "-------------------------------------------\nBatch: %d\n-------------------------------------------\n", w.b.ID)
	widths := make([]int, len(w.b.Columns))
	for _, line := range w.cells {
		for i, s := range line {
			widths[i] = max(widths[i], utf8.RuneCountInString(s))
		}
	}
	sep := "+"
	for _, n := range widths {
		sep += strings.Repeat("-", n) + "+"
	}
	sb.WriteString(sep + "\n")
	for n, line := range w.cells {
		sb.WriteString("|")
		for i, s := range line {
			sb.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(s)) + s + "|")
		}
		sb.WriteString("\n")
		if n == 0 {
			sb.WriteString(sep + "\n")
		}
	}
	sb.WriteString(sep + "\n")
	if shown := len(w.cells) - 1; w.rows > shown {
		fmt.Fprintf(&sb, "only showing top %d of %d rows\n", shown, w.rows)
	}
	sb.WriteString("\n")
	_, err := io.WriteString(w.out, sb.String())
	return err
}

// cell formats one value for the table; long strings are cut at 20
// characters, as Spark's show does.
func cell(v any) string {
	var s string
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		s = v
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	case time.Time:
		return v.UTC().Format("2006-01-02 15:04:05.000")
	default:
		s = fmt.Sprint(v)
	}
	if utf8.RuneCountInString(s) > 20 {
		return string([]rune(s)[:17]) + "..."
	}
	return s
}
