package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockstep-dev/lockstep/engine/ui"
)

// chromium runs Debian's headless Chromium on url with args (--dump-dom,
// --screenshot=…) and returns its standard output. A missing browser fails the
// test: the page is tested in a real one.
func chromium(t *testing.T, url string, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("the page test needs a real browser: apt-get update && apt-get install -y chromium")
	}
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--user-data-dir=" + t.TempDir(),
		"--window-size=1280,1400"}
	// The context bounds a hung browser, not the page's speed.
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(append(base, args...), url)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, errOut.String())
	}
	return out.String()
}

// pageDOM loads url in the browser, saves a screenshot as name.png in the test's
// artifact folder (go test -artifacts keeps it) and returns the rendered DOM.
func pageDOM(t *testing.T, url, name string) string {
	t.Helper()
	shot := filepath.Join(t.ArtifactDir(), name+".png")
	chromium(t, url, "--screenshot="+shot)
	if st, err := os.Stat(shot); err != nil || st.Size() == 0 {
		t.Fatalf("no screenshot at %s: %v", shot, err)
	}
	t.Logf("screenshot: %s", shot)
	return chromium(t, url, "--dump-dom")
}

// svgOf returns the rendered <svg data-chart=id …>…</svg> element.
func svgOf(t *testing.T, dom, id string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<svg[^>]*data-chart="` + id + `".*?</svg>`).FindString(dom)
	if m == "" {
		t.Fatalf("the page has no %s chart", id)
	}
	return m
}

// TestRunServesPage loads the page of a real run in a real browser: the charts
// draw the batches that /api/progress returns.
func TestRunServesPage(t *testing.T) {
	run := startRun(t, windowedTicks)
	run.scrapeUntil(t, 3)
	dom := pageDOM(t, run.url+"/", "run-page")
	// What the page showed is at most what the API says now.
	var snap ui.Snapshot
	if err := json.Unmarshal(run.get(t, "/api/progress"), &snap); err != nil {
		t.Fatal(err)
	}
	run.stop()

	if !strings.Contains(dom, `<h1 id="query">metrics-test/ticks-per-second</h1>`) {
		t.Errorf("no query identity in the page")
	}
	for _, want := range []string{`data-live="true"`, "processingTime=100ms", "<strong>none</strong>",
		"aggregate <code>per-second</code> keyed by window(timestamp, 1s)", "source <code>ticks</code>: rate",
		snap.Start.QueryID, `href="/metrics"`} {
		if !strings.Contains(dom, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	batchesOf := func(svg string) int {
		m := regexp.MustCompile(`data-batches="(\d+)"`).FindStringSubmatch(svg)
		n, _ := strconv.Atoi(m[1])
		return n
	}
	for _, c := range []struct {
		id, series string
		element    string
	}{
		{"rates", "processed rows/s", "<circle"},
		{"rates", "input rows/s", "<circle"},
		{"state", "per-second", "<circle"},
		{"watermark", "watermark", "<circle"},
	} {
		svg := svgOf(t, dom, c.id)
		n := batchesOf(svg)
		if n < 3 || n > len(snap.Batches) {
			t.Errorf("chart %s draws %d batches; want at least 3 and at most the %d of /api/progress", c.id, n, len(snap.Batches))
		}
		g := regexp.MustCompile(`(?s)<g class="series[^"]*" data-series="` + regexp.QuoteMeta(c.series) + `">(.*?)</g>`).FindStringSubmatch(svg)
		if g == nil || !strings.Contains(g[1], c.element) {
			t.Errorf("chart %s has no drawn series %q", c.id, c.series)
		}
	}
	// Phases of a few milliseconds round to 0 ms; some phase of some batch took longer.
	if !strings.Contains(svgOf(t, dom, "durations"), "<rect") {
		t.Errorf("the duration chart draws no bar")
	}
	// The lag chart says why it is empty: the rate source has no lag.
	if !strings.Contains(dom, "No source of this query reports its lag.") {
		t.Errorf("the lag chart does not say the source reports no lag")
	}
	// The table lists the batches newest first, as the API has them.
	rows := regexp.MustCompile(`<tr data-batch="(\d+)">`).FindAllStringSubmatch(dom, -1)
	if len(rows) < 3 {
		t.Fatalf("the table lists %d batches, want at least 3", len(rows))
	}
	byID := map[int64]bool{}
	for _, p := range snap.Batches {
		byID[p.Batch] = true
	}
	prev := int64(-1)
	for i, r := range rows {
		id, _ := strconv.ParseInt(r[1], 10, 64)
		if !byID[id] || (i > 0 && id >= prev) {
			t.Errorf("table row %d is batch %d: not newest first, or not in /api/progress", i, id)
		}
		prev = id
	}
}
