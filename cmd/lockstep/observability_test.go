package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/lockstep-dev/lockstep/controller"
	"github.com/lockstep-dev/lockstep/engine/metrics"
)

// describing is a Registerer that records the names of the metrics registered on it.
type describing struct {
	prometheus.Registerer
	names []string
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (d *describing) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		// Desc has no name getter; its String form is the documented way to print it.
		if m := fqName.FindStringSubmatch(desc.String()); m != nil {
			d.names = append(d.names, m[1])
		}
	}
	return d.Registerer.Register(c)
}

// exported returns every metric name the engine and the controller register, each with its
// type (the controller's: gauge or counter, none is a histogram), from their registries.
func exported(t *testing.T) map[string]dto.MetricType {
	t.Helper()
	names := map[string]dto.MetricType{}
	for _, d := range metrics.New("ns", "q").Catalog() {
		names[d.Name] = d.Type
	}
	reg := &describing{Registerer: prometheus.NewRegistry()}
	if _, err := controller.NewMetrics(reg, nil); err != nil {
		t.Fatal(err)
	}
	if len(reg.names) == 0 {
		t.Fatal("the controller registered no metric")
	}
	for _, n := range reg.names {
		names[n] = dto.MetricType_UNTYPED
	}
	return names
}

// promqlNoise is what in a PromQL expression is not a metric name: strings, label
// matchers, ranges and subqueries, Grafana variables, label lists of by/without/on/…,
// numbers and durations.
var promqlNoise = []*regexp.Regexp{
	regexp.MustCompile(`"(?:[^"\\]|\\.)*"`),
	regexp.MustCompile(`\{[^}]*\}`),
	regexp.MustCompile(`\[[^\]]*\]`),
	regexp.MustCompile(`\$\{?\w+\}?`),
	regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`),
	regexp.MustCompile(`\b[0-9][0-9.eE+]*[a-z]*`),
}

var (
	promqlIdent    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*(\s*\()?`)
	promqlKeywords = []string{"and", "or", "unless", "bool", "offset", "inf", "nan", "Inf", "NaN"}
)

// metricNames returns the metric names a PromQL expression selects.
func metricNames(expr string) []string {
	for _, re := range promqlNoise {
		expr = re.ReplaceAllString(expr, " ")
	}
	var names []string
	for _, m := range promqlIdent.FindAllStringSubmatch(expr, -1) {
		if m[1] != "" || slices.Contains(promqlKeywords, m[0]) {
			continue // a function call, or a keyword
		}
		names = append(names, m[0])
	}
	return names
}

func TestMetricNames(t *testing.T) {
	got := metricNames(`sum by (le, phase) (rate(a_bucket{x="y}",q="$query"}[$__rate_interval])) / on(job) group_left(z) b offset 5m > 0 and time() - c{}`)
	if want := []string{"a_bucket", "b", "c"}; !slices.Equal(got, want) {
		t.Errorf("metricNames = %q, want %q", got, want)
	}
}

// known reports whether a series name belongs to an exported metric: the metric itself, or
// a histogram's _bucket, _sum or _count.
func known(names map[string]dto.MetricType, series string) bool {
	if _, ok := names[series]; ok {
		return names[series] != dto.MetricType_HISTOGRAM
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(series, suffix); ok && names[base] == dto.MetricType_HISTOGRAM {
			return true
		}
	}
	return false
}

// TestGrafanaDashboard: config/grafana's dashboards parse, and every PromQL expression in
// them (panel targets and template variables) selects only metrics that the engine or the
// controller registers.
func TestGrafanaDashboard(t *testing.T) {
	names := exported(t)
	files, err := filepath.Glob("../../config/grafana/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboard in config/grafana (%v)", err)
	}
	labelValues := regexp.MustCompile(`^label_values\(\s*(.*),\s*\w+\s*\)$`)
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var dash struct {
			Title  string `json:"title"`
			UID    string `json:"uid"`
			Panels []struct {
				Title   string `json:"title"`
				Type    string `json:"type"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
			Templating struct {
				List []struct {
					Name  string          `json:"name"`
					Type  string          `json:"type"`
					Query json.RawMessage `json:"query"`
				} `json:"list"`
			} `json:"templating"`
		}
		if err := json.Unmarshal(data, &dash); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if dash.Title == "" || dash.UID == "" {
			t.Errorf("%s: a dashboard needs a title and a uid", file)
		}
		type expr struct{ where, promql string }
		var exprs []expr
		for _, p := range dash.Panels {
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", file, p.Title)
			}
			for _, tg := range p.Targets {
				exprs = append(exprs, expr{"panel " + p.Title, tg.Expr})
			}
		}
		for _, v := range dash.Templating.List {
			if v.Type != "query" {
				continue
			}
			var q struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal(v.Query, &q); err != nil {
				t.Fatalf("%s: variable %s: %v", file, v.Name, err)
			}
			m := labelValues.FindStringSubmatch(q.Query)
			if m == nil {
				t.Errorf("%s: variable %s: query %q is not label_values(selector, label)", file, v.Name, q.Query)
				continue
			}
			exprs = append(exprs, expr{"variable " + v.Name, m[1]})
		}
		used := map[string]bool{}
		for _, e := range exprs {
			ns := metricNames(e.promql)
			if len(ns) == 0 {
				t.Errorf("%s: %s: %q selects no metric", file, e.where, e.promql)
			}
			for _, n := range ns {
				if !known(names, n) {
					t.Errorf("%s: %s: %q uses %s, which neither the engine nor the controller exports", file, e.where, e.promql, n)
				}
				used[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")] = true
			}
		}
		t.Logf("%s: %d expressions over %d of %d metrics", filepath.Base(file), len(exprs), len(used), len(names))
	}
}

// TestObservabilityDocListsEveryMetric: docs/observability.md has a table row for every metric
// the engine and the controller register, and no row for one they do not.
func TestObservabilityDocListsEveryMetric(t *testing.T) {
	names := exported(t)
	data, err := os.ReadFile("../../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(lockstep_\\w+)`").FindAllStringSubmatch(string(data), -1) {
		rows[m[1]] = true
	}
	for n := range names {
		if !rows[n] {
			t.Errorf("docs/observability.md has no row for %s", n)
		}
	}
	for n := range rows {
		if _, ok := names[n]; !ok {
			t.Errorf("docs/observability.md documents %s, which is not registered", n)
		}
	}
}
