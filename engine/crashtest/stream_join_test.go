package crashtest

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// streamJoinQuery is an impressions/clicks stream–stream join into files (its
// type and select filled in, left outer by default), one file of each side a
// batch: the clicks on the same ad up to 10s after an impression, both sides
// watermarked 5s behind.
const streamJoinQuery = `apiVersion: streaming.lockstep.dev/v1
kind: StreamingQuery
metadata: {name: crash-join, namespace: test}
spec:
  sources:
  - name: impressions
    files: {path: %q, format: json, maxFilesPerTrigger: 1}
    schema:
      columns:
      - {name: ad_id, type: string}
      - {name: user, type: string}
      - {name: imp_ts, type: timestamp}
  - name: clicks
    files: {path: %q, format: json, maxFilesPerTrigger: 1}
    schema:
      columns:
      - {name: ad_id, type: string}
      - {name: click_ts, type: timestamp}
      - {name: cost, type: double}
  transform:
  - watermark: {column: imp_ts, delay: 5s}
  - join:
      name: ad-clicks
      type: %s
      keys: [{left: ad_id, right: ad_id}]
      stream:
        source: clicks
        watermark: {column: click_ts, delay: 5s}
        timeBound: {leftColumn: imp_ts, rightColumn: click_ts, lowerBound: 0s, upperBound: 10s}
      select:
      - {side: left, column: ad_id}
      - {side: left, column: user}
      - {side: left, column: imp_ts}%s
  sink:
    files: {path: %q, format: json}
  outputMode: append
  stateStore: {partitions: 4}
  trigger: {availableNow: true}
`

// secondJoinStep makes a twice setup's query join the first join's rows again, left outer,
// with the clicks read a second time (as clicks-again, streamJoinQuery's clicks source renamed)
// up to 5s after the impression: two stream joins in a row.
const secondJoinStep = `  - join:
      name: ad-clicks-again
      type: leftOuter
      keys: [{left: ad_id, right: ad_id}]
      stream:
        source: clicks-again
        watermark: {column: click_ts, delay: 5s}
        timeBound: {leftColumn: imp_ts, rightColumn: click_ts, lowerBound: 0s, upperBound: 5s}
      rightPrefix: again_
`

// streamJoinSetup is one join scenario's locations, local or on S3.
type streamJoinSetup struct {
	t                  *testing.T
	dir                string // scratch folder for specs
	imps, clicks, out  string
	ckpt               string
	cfg                []s3.Option
	env                []string
	files, impressions int
	// typ is the join type, leftOuter unless set.
	typ string
	// twice adds a second stream join after the first (secondJoinStep).
	twice bool
}

// rightSelect is the select entries of the right side's columns, none for a left semi join.
func (s *streamJoinSetup) rightSelect() string {
	if s.typ == "leftSemi" {
		return ""
	}
	return `
      - {side: right, column: click_ts}
      - {side: right, column: cost}`
}

func (s *streamJoinSetup) joinType() string {
	if s.typ == "" {
		return "leftOuter"
	}
	return s.typ
}

func newStreamJoinLocal(t *testing.T) *streamJoinSetup {
	dir := t.TempDir()
	return &streamJoinSetup{t: t, dir: dir, imps: filepath.Join(dir, "impressions"), clicks: filepath.Join(dir, "clicks"),
		out: filepath.Join(dir, "out"), ckpt: filepath.Join(dir, "ckpt")}
}

func newStreamJoinS3(t *testing.T) *streamJoinSetup {
	s := testenv.S3(t)
	root := "s3://" + s.Bucket
	return &streamJoinSetup{t: t, dir: t.TempDir(), env: s.Env(), cfg: s.Options(),
		imps: root + "/impressions", clicks: root + "/clicks", out: root + "/out", ckpt: root + "/ckpt"}
}

// addInput writes n more files to each side. Event time advances 5s a file
// with some disorder; 13 ads; a file has 8 impressions (each a distinct
// user) and 6 clicks, one of each a minute late.
func (s *streamJoinSetup) addInput(n int) {
	s.t.Helper()
	t0 := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	ts := func(sec int) string { return t0.Add(time.Duration(sec) * time.Second).Format(time.RFC3339) }
	for range n {
		f := s.files
		s.files++
		var imps, clicks bytes.Buffer
		for j := range 8 {
			sec := f*5 + j%4 - 2
			if j == 7 {
				sec = f*5 - 60
			}
			fmt.Fprintf(&imps, `{"ad_id":"ad-%d","user":"u-%d","imp_ts":%q}`+"\n", (f*8+j)%13, s.impressions, ts(sec))
			s.impressions++
		}
		for j := range 6 {
			sec := f*5 + j%5 + 1
			if j == 5 {
				sec = f*5 - 60
			}
			fmt.Fprintf(&clicks, `{"ad_id":"ad-%d","click_ts":%q,"cost":%d}`+"\n", (f*8+j*3)%13, ts(sec), f*10+j)
		}
		name := fmt.Sprintf("part-%04d.json", f)
		for _, side := range []struct {
			loc  string
			data []byte
		}{{s.imps, imps.Bytes()}, {s.clicks, clicks.Bytes()}} {
			putInput(s.t, side.loc, s.cfg, name, side.data, inputTime(f))
		}
	}
}

func (s *streamJoinSetup) command(ckpt, out string, env ...string) *exec.Cmd {
	spec := fmt.Sprintf(streamJoinQuery, s.imps, s.clicks, s.joinType(), s.rightSelect(), out)
	if s.twice {
		clicks := spec[strings.Index(spec, "  - name: clicks\n"):strings.Index(spec, "  transform:\n")]
		again := strings.Replace(clicks, "name: clicks", "name: clicks-again", 1)
		spec = strings.Replace(spec, "  transform:\n", again+"  transform:\n", 1)
		spec = strings.Replace(spec, "  sink:\n", secondJoinStep+"  sink:\n", 1)
	}
	return runCommand(s.t, s.dir, []byte(spec), ckpt, append(s.env, env...)...)
}

func (s *streamJoinSetup) runOnce(ckpt, out string, env ...string) Result {
	s.t.Helper()
	return Run(s.t, s.command(ckpt, out, env...))
}

func (s *streamJoinSetup) output(out string) []engine.Row {
	s.t.Helper()
	return enginetest.OutputRowsAt(s.t, out, s.cfg...)
}

// finish runs the query to its end and checks its output: equal to an
// uninterrupted run's, every impression there once without a click or
// only with clicks (outer rows once, never beside a match; a left semi join:
// each impression at most once), and `lockstep checkpoint describe` showing
// both sides' state and watermarks.
func (s *streamJoinSetup) finish() {
	s.t.Helper()
	got, want := finishRuns(s.t, s.runOnce, s.output, s.ckpt, s.out)
	if diff := cmp.Diff(fmt.Sprint(want), fmt.Sprint(got)); diff != "" {
		s.t.Errorf("output differs from an uninterrupted run (-uninterrupted +crashed):\n%s", diff)
	}
	matched, unmatched, clicksAlone := map[any]int{}, map[any]int{}, 0
	for _, r := range got {
		switch {
		case s.typ == "leftSemi":
			matched[r[1]]++
		case r[1] == nil: // a full outer join's click without an impression
			clicksAlone++
		case r[3] == nil:
			unmatched[r[1]]++
		default:
			matched[r[1]]++
		}
	}
	switch s.typ {
	case "leftSemi":
		for user, n := range matched {
			if n != 1 {
				s.t.Errorf("impression %v written %d times by a left semi join; want once", user, n)
			}
		}
		if len(matched) == 0 {
			s.t.Fatal("the left semi join wrote nothing")
		}
	case "fullOuter":
		if clicksAlone == 0 {
			s.t.Errorf("the full outer join wrote no click without an impression; the input has some")
		}
	}
	if s.typ != "leftSemi" && (len(matched) == 0 || len(unmatched) == 0) {
		s.t.Fatalf("the join wrote %d matched and %d unmatched impressions; the input should give both", len(matched), len(unmatched))
	}
	for user, n := range unmatched {
		if n != 1 || matched[user] > 0 {
			s.t.Errorf("impression %v written %d times without a click and %d times with one; want once, and never both", user, n, matched[user])
		}
	}
	d := exec.Command(lockstep, "checkpoint", "describe", s.ckpt)
	d.Env = Env(s.env...)
	out, err := d.CombinedOutput()
	if err != nil {
		s.t.Fatalf("checkpoint describe: %v\n%s", err, out)
	}
	lines := []string{"Join watermarks:  ad-clicks.left ", "  ad-clicks.left   join  ad_id,imp_ts", "  ad-clicks.right  join  ad_id,click_ts"}
	if s.twice { // the state table's columns are wider: the operators' names alone
		lines = []string{"Join watermarks:  ad-clicks-again.left ", "ad-clicks.left ", "ad-clicks.right ", "ad-clicks-again.left ", "ad-clicks-again.right "}
	}
	for _, line := range lines {
		if !strings.Contains(string(out), line) {
			s.t.Errorf("checkpoint describe does not show %q:\n%s", line, out)
		}
	}
}

func streamJoinPhaseKills(t *testing.T, newSetup func(*testing.T) *streamJoinSetup) {
	for _, p := range Points() {
		t.Run(p.String(), func(t *testing.T) {
			t.Parallel()
			s := newSetup(t)
			s.addInput(6)
			r := s.runOnce(s.ckpt, s.out, p.Env())
			if !r.Killed {
				t.Fatalf("the run was not killed at %s: exit %d\n%s", p, r.Code, r.Stderr)
			}
			s.finish()
		})
	}
}

// streamJoinRandomKills kills the join at 50 random instants, adding input
// whenever a run got to the end, then lets a run finish.
func streamJoinRandomKills(t *testing.T, s *streamJoinSetup) {
	s.addInput(20)
	began := time.Now()
	if r := s.runOnce(s.ckpt+"-timing", s.out+"-timing"); r.Code != 0 {
		t.Fatalf("timing run: exit %d\n%s", r.Code, r.Stderr)
	}
	span := max(time.Since(began), 200*time.Millisecond)
	const kills = 50
	finished := KillRandomly(t, kills, span, func(finishedLast bool) *exec.Cmd {
		if finishedLast {
			s.addInput(3)
		}
		return s.command(s.ckpt, s.out)
	})
	t.Logf("%d runs killed at random instants within %s, %d ran to the end; %d input files a side", kills, span, finished, s.files)
	s.finish()
}

// TestStreamJoinPhaseKillsLocal kills the stream–stream join at every phase
// boundary of batches 0 and 2, with a local checkpoint, input and output.
func TestStreamJoinPhaseKillsLocal(t *testing.T) { streamJoinPhaseKills(t, newStreamJoinLocal) }

// TestStreamJoinPhaseKillsS3 does the same on S3.
func TestStreamJoinPhaseKillsS3(t *testing.T) { streamJoinPhaseKills(t, newStreamJoinS3) }

// TestStreamJoinTwicePhaseKillsLocal kills a query of two stream joins in a row at every
// phase boundary of batches 0 and 2, with a local checkpoint, input and output.
func TestStreamJoinTwicePhaseKillsLocal(t *testing.T) {
	streamJoinPhaseKills(t, func(t *testing.T) *streamJoinSetup {
		s := newStreamJoinLocal(t)
		s.twice = true
		return s
	})
}

func TestStreamJoinRandomKillsLocal(t *testing.T) {
	t.Parallel()
	streamJoinRandomKills(t, newStreamJoinLocal(t))
}

// TestStreamJoinTypesRandomKillsLocal kills a full outer and a left semi join
// at random instants, with a local checkpoint, input and output.
func TestStreamJoinTypesRandomKillsLocal(t *testing.T) {
	for _, typ := range []string{"fullOuter", "leftSemi"} {
		t.Run(typ, func(t *testing.T) {
			t.Parallel()
			s := newStreamJoinLocal(t)
			s.typ = typ
			streamJoinRandomKills(t, s)
		})
	}
}

func TestStreamJoinRandomKillsS3(t *testing.T) {
	t.Parallel()
	streamJoinRandomKills(t, newStreamJoinS3(t))
}
