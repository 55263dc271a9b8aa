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

// Write prints the batch: a header, then up to MaxConsoleRows rows as a table.
func (c *Console) Write(_ context.Context, b *engine.Batch) error {
	var sb strings.Builder
	fmt.Fprintf(&sb, "-------------------------------------------\nBatch: %d\n-------------------------------------------\n", b.ID)
	shown := b.Rows[:min(len(b.Rows), MaxConsoleRows)]
	cells := make([][]string, 0, len(shown)+1)
	cells = append(cells, b.Columns.Names())
	for _, r := range shown {
		line := make([]string, len(r))
		for i, v := range r {
			line[i] = cell(v)
		}
		cells = append(cells, line)
	}
	widths := make([]int, len(b.Columns))
	for _, line := range cells {
		for i, s := range line {
			widths[i] = max(widths[i], utf8.RuneCountInString(s))
		}
	}
	sep := "+"
	for _, w := range widths {
		sep += strings.Repeat("-", w) + "+"
	}
	sb.WriteString(sep + "\n")
	for n, line := range cells {
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
	if len(b.Rows) > len(shown) {
		fmt.Fprintf(&sb, "only showing top %d of %d rows\n", len(shown), len(b.Rows))
	}
	sb.WriteString("\n")
	_, err := io.WriteString(c.out, sb.String())
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
