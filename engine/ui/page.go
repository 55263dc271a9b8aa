package ui

import (
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/engine"
)

//go:embed assets
var assets embed.FS

// pageTemplate is parsed once per Handler; it is read-only after that.
const pageTemplate = "assets/page.html"

// tableRows is how many recent batches the table lists.
const tableRows = 25

// phaseOrder is the order of a batch's phases (the progress' durationMs keys);
// phases the engine adds later follow, sorted.
var phaseOrder = []string{"latestOffset", "walCommit", "getBatch", "transform", "addBatch", "commitOffsets"}

// Handler serves ring's page at /, its Snapshot at /api/progress and the page's
// assets under /assets/. Mount it at the root of a mux (patterns "GET /{$}",
// "GET /api/progress", "GET /assets/").
func Handler(ring *Ring) http.Handler {
	tmpl := template.Must(template.New("page.html").Funcs(template.FuncMap{
		"millis":   millis,
		"time":     clock,
		"rows":     rows,
		"rate":     rate,
		"duration": func(p engine.Progress) string { return millis(p.DurationMs[checkpoint.DurationTotal]) },
	}).ParseFS(assets, pageTemplate)) // the embedded template is part of the binary: a parse error is a bug
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if err := tmpl.Execute(w, newView(ring.Snapshot())); err != nil {
			// Headers are sent; all that is left is to end the page visibly.
			fmt.Fprintf(w, "<p class=error>render: %s</p>", template.HTMLEscapeString(err.Error()))
		}
	})
	mux.HandleFunc("GET /api/progress", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(ring.Snapshot()) // a failed write is the client's loss
	})
	mux.Handle("GET /assets/", http.FileServerFS(assets))
	return mux
}

// Register adds Handler's patterns to mux, so that the page shares a port
// with other endpoints (/metrics, /healthz).
func Register(mux *http.ServeMux, ring *Ring) {
	h := Handler(ring)
	for _, p := range []string{"GET /{$}", "GET /api/progress", "GET /assets/"} {
		mux.Handle(p, h)
	}
}

// view is what the template renders.
type view struct {
	Snapshot
	Guarantee *engine.Guarantee
	Trigger   string
	QueryID   string
	Charts    []chart
	// Recent are the newest batches, newest first.
	Recent []engine.Progress
}

func newView(s Snapshot) view {
	v := view{Snapshot: s, Guarantee: s.Query.Guarantee}
	if s.Start != nil {
		v.Guarantee, v.Trigger, v.QueryID = &s.Start.Guarantee, s.Start.Trigger, s.Start.QueryID
		if s.Start.Location != "" {
			v.Query.Location = s.Start.Location // resolved: absolute, or the URL the engine opened
		}
	}
	if v.Trigger == "" && s.Query.Shape != nil {
		v.Trigger = s.Query.Shape.Trigger.Name()
	}
	if v.QueryID == "" && len(s.Batches) > 0 {
		v.QueryID = s.Batches[len(s.Batches)-1].QueryID
	}
	for i := len(s.Batches) - 1; i >= 0 && len(v.Recent) < tableRows; i-- {
		v.Recent = append(v.Recent, s.Batches[i])
	}
	v.Charts = charts(s.Batches)
	return v
}

// charts returns the page's charts over batches.
func charts(batches []engine.Progress) []chart {
	ids := make([]int64, len(batches))
	input := make([]float64, len(batches))
	processed := make([]float64, len(batches))
	watermark := make([]float64, len(batches))
	for i, p := range batches {
		ids[i] = p.Batch
		// Spark's inputRowsPerSecond: the rows over the time since the previous
		// batch began; unknown for the first batch shown.
		input[i] = math.NaN()
		if i > 0 {
			if d := p.Timestamp.Sub(batches[i-1].Timestamp).Seconds(); d > 0 {
				input[i] = float64(p.NumInputRows) / d
			}
		}
		processed[i] = p.ProcessedRowsPerSecond
		watermark[i] = math.NaN()
		if p.WatermarkMs != 0 {
			watermark[i] = float64(p.WatermarkMs)
		}
	}
	phases := seriesBy(batches, func(p engine.Progress) map[string]float64 {
		m := map[string]float64{}
		for k, ms := range p.DurationMs {
			if k != checkpoint.DurationTotal {
				m[k] = float64(ms)
			}
		}
		return m
	})
	slices.SortStableFunc(phases, func(a, b series) int { return phaseRank(a.Name) - phaseRank(b.Name) })
	lag := seriesBy(batches, func(p engine.Progress) map[string]float64 {
		m := map[string]float64{}
		for _, s := range p.Sources {
			if s.Lag != nil {
				m[s.Name] = float64(*s.Lag)
			}
		}
		return m
	})
	state := seriesBy(batches, func(p engine.Progress) map[string]float64 {
		m := map[string]float64{}
		for _, op := range p.StateOperators {
			m[op.Operator] = float64(op.NumRowsTotal)
		}
		return m
	})
	return []chart{
		{ID: "rates", Title: "Input rate and processing rate (rows/s)", Batches: ids, Format: rate,
			Series: []series{{"input rows/s", input}, {"processed rows/s", processed}}, Empty: "No batch yet."},
		{ID: "durations", Title: "Batch duration by phase", Batches: ids, Format: axisMillis,
			Series: phases, Stacked: true, Empty: "No batch yet."},
		{ID: "lag", Title: "Source lag (records beyond the batch's end, when planned)", Batches: ids, Format: rows,
			Series: lag, Empty: "No source of this query reports its lag."},
		{ID: "state", Title: "State rows per operator", Batches: ids, Format: rows,
			Series: state, Empty: "No stateful operator, or its state is not in this history."},
		{ID: "watermark", Title: "Event-time watermark (UTC)", Batches: ids, Format: clockFor(watermark),
			Series: []series{{"watermark", watermark}}, FromMin: true, Empty: "The query has no watermark, or it has not moved yet."},
	}
}

// seriesBy makes one series per name that of returns for any batch.
func seriesBy(batches []engine.Progress, of func(engine.Progress) map[string]float64) []series {
	var out []series
	index := map[string]int{}
	for i, p := range batches {
		for name, v := range of(p) {
			k, ok := index[name]
			if !ok {
				k = len(out)
				index[name] = k
				vals := make([]float64, len(batches))
				for j := range vals {
					vals[j] = math.NaN()
				}
				out = append(out, series{Name: name, Values: vals})
			}
			out[k].Values[i] = v
		}
	}
	slices.SortStableFunc(out, func(a, b series) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func phaseRank(name string) int {
	if i := slices.Index(phaseOrder, name); i >= 0 {
		return i
	}
	return len(phaseOrder)
}

func millis(ms int64) string {
	if ms < 1000 {
		return fmt.Sprintf("%d ms", ms)
	}
	return fmt.Sprintf("%.1f s", float64(ms)/1e3)
}

// axisMillis writes a duration in milliseconds, with a decimal below 10 ms
// so that a short batch's axis does not read 0, 0, 0.
func axisMillis(ms float64) string {
	if ms < 10 && ms != math.Trunc(ms) {
		return fmt.Sprintf("%.1f ms", ms)
	}
	return millis(int64(ms))
}

// clockFor returns the watermark axis' format: with milliseconds when the
// values span less than ten seconds.
func clockFor(values []float64) func(float64) string {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range values {
		if !math.IsNaN(v) {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if hi-lo >= 10_000 {
		return func(v float64) string { return clock(int64(v)) }
	}
	return func(v float64) string { return time.UnixMilli(int64(v)).UTC().Format("15:04:05.000") }
}

func clock(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format("15:04:05")
}

func rows(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.0fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

func rate(v float64) string { return rows(v) + "/s" }
