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
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// chromium runs Debian's headless Chromium on url with args (--dump-dom,
// --screenshot=…) and returns its standard output. A missing browser fails the
// test: the page is tested in a real one.
func chromium(t *testing.T, url string, args ...string) string {
	t.Helper()
	bin := testenv.Tool(t, "chromium") // make tools installs Debian's chromium
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

// TestUIServesHistory runs a query, stops it, and loads `lockstep ui`'s page of
// its checkpoint in a real browser: the table and charts are the commit log's.
func TestUIServesHistory(t *testing.T) {
	run := startRun(t, windowedTicks)
	run.scrapeUntil(t, 3)
	run.stop()
	c, err := loadCheckpoint(t.Context(), run.checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	logged, err := c.Batches(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	committed := map[int64]int64{} // batch → input rows
	for _, b := range logged {
		if b.Commit != nil {
			committed[b.ID] = b.Commit.Progress.NumInputRows
		}
	}

	ctx, cancel := context.WithCancel(t.Context())
	stderr := &lockedBuffer{}
	done := make(chan error, 1)
	go func() { done <- serveHistory(ctx, run.checkpoint, "127.0.0.1:0", stderr) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("lockstep ui: %v", err)
		}
	}()
	var url string
	for url == "" {
		if m := pageLine.FindStringSubmatch(stderr.String()); m != nil {
			url = m[1]
			break
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("lockstep ui ended: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	dom := pageDOM(t, url+"/", "history-page")
	for _, want := range []string{`data-live="false"`, `data-status="stopped"`, "history of a stopped query",
		c.Metadata().ID, "metrics-test/ticks-per-second", "<strong>none</strong>", "processingTime=100ms",
		"No stateful operator, or its state is not in this history."} {
		if !strings.Contains(dom, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(dom, `href="/metrics"`) {
		t.Errorf("the history page links /metrics, which it does not serve")
	}
	rows := regexp.MustCompile(`(?s)<tr data-batch="(\d+)"><td>\d+</td><td class="l">[^<]*</td><td>(\d+)</td>`).FindAllStringSubmatch(dom, -1)
	want := min(len(committed), 25)
	if len(rows) != want {
		t.Fatalf("the table lists %d batches, want %d of the %d committed", len(rows), want, len(committed))
	}
	for _, r := range rows {
		id, _ := strconv.ParseInt(r[1], 10, 64)
		in, _ := strconv.ParseInt(r[2], 10, 64)
		if logged, ok := committed[id]; !ok || logged != in {
			t.Errorf("table: batch %d with %d input rows; the commit log has %d (found %v)", id, in, logged, ok)
		}
	}
	for _, id := range []string{"rates", "durations", "watermark"} {
		if svg := svgOf(t, dom, id); !strings.Contains(svg, `data-batches="`+strconv.Itoa(len(committed))+`"`) {
			t.Errorf("chart %s does not draw the %d committed batches", id, len(committed))
		}
	}
}
