package crashtest

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/checkpoint/storetest"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// The rebuild's queries: a keyed count per country; then per id, which the checkpoint
// refuses, with spec.onIncompatibleChange: rebuild, so that lockstep run rebuilds the state
// first and runs on.
const (
	rebuildOld = `
  - aggregate:
      groupBy: [{column: country}]
      aggregates: [{name: orders, function: count}, {name: revenue, function: sum, column: amount}]`
	rebuildNew = `
  - aggregate:
      groupBy: [{column: id}]
      aggregates: [{name: orders, function: count}, {name: revenue, function: sum, column: amount}]`
)

// rebuildCommand is a run of the new query, which rebuilds, on ckpt into out.
func (s *statefulSetup) rebuildCommand(ckpt, out string, env ...string) *exec.Cmd {
	manifest := fmt.Sprintf(statefulQuery, s.in, strings.TrimPrefix(rebuildNew, "\n"), fmt.Sprintf("files: {path: %q, format: json}", out), "update")
	manifest = strings.Replace(manifest, "  trigger:", "  onIncompatibleChange: rebuild\n  trigger:", 1)
	return runCommand(s.t, s.dir, []byte(manifest), ckpt, env...)
}

// rebuildKills runs the old query over 6 files, adds 3, and kills the new query's rebuild with
// SIGKILL at every phase of its batches 0 and 2 (and at random instants) — the checkpoint
// on ckpt(name), through env. After each kill the old generation is still current and
// unchanged; the run that finishes rebuilds and runs on, and its output equals that of a
// rebuild never killed.
func rebuildKills(t *testing.T, ckpt func(name string) string, objects func(loc string) map[string]string, env ...string) {
	s := newStateful(t, rebuildOld, "update")
	s.addInput(6)
	// run runs a command again while a fault of the proxy failed it (exit 1), at most 5 times.
	run := func(cmd func() *exec.Cmd) Result {
		var r Result
		for range 5 {
			if r = Run(t, cmd()); r.Code != 1 {
				break
			}
		}
		return r
	}
	old := func(loc, out string) {
		if r := run(func() *exec.Cmd { return s.command(loc, out, env...) }); r.Code != 0 {
			t.Fatalf("old query: exit %d\n%s", r.Code, r.Stderr)
		}
	}
	finish := func(loc, out string) {
		if r := run(func() *exec.Cmd { return s.rebuildCommand(loc, out, env...) }); r.Code != 0 {
			t.Fatalf("the rebuild run on %s: exit %d\n%s", loc, r.Code, r.Stderr)
		}
	}
	ref, refOut := ckpt("reference"), s.out+"-reference"
	old(ref, refOut)
	var points []Point
	for _, p := range []engine.Phase{engine.PhaseOffsetsWritten, engine.PhaseSinkCommitted, engine.PhaseCommitted} {
		points = append(points, Point{p, 0}, Point{p, 2})
	}
	type place struct{ loc, out string }
	places := make([]place, len(points))
	for i := range points {
		places[i] = place{ckpt(fmt.Sprintf("killed-%d", i)), fmt.Sprintf("%s-%d", s.out, i)}
		old(places[i].loc, places[i].out)
	}
	random := place{ckpt("random"), s.out + "-random"}
	old(random.loc, random.out)
	s.addInput(3)
	finish(ref, refOut)
	want := s.output(refOut)
	for i, p := range points {
		at := places[i]
		before := objects(at.loc)
		r := run(func() *exec.Cmd { return s.rebuildCommand(at.loc, at.out, append(slices.Clone(env), p.Env())...) })
		if !r.Killed {
			t.Fatalf("the rebuild was not killed at %s: exit %d\n%s", p, r.Code, r.Stderr)
		}
		if diff := cmp.Diff(before, objects(at.loc)); diff != "" {
			t.Fatalf("killed at %s, the rebuild changed the old generation (-before +after):\n%s", p, diff)
		}
		finish(at.loc, at.out)
		if diff := cmp.Diff(fmt.Sprint(want), fmt.Sprint(s.output(at.out))); diff != "" {
			t.Errorf("killed at %s: output differs from a rebuild never killed (-never killed +killed):\n%s", p, diff)
		}
	}

	// At random instants, until a run got to the end.
	loc, out := random.loc, random.out
	killed := 0
	for range 20 {
		cmd := s.rebuildCommand(loc, out, env...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil && len(env) == 0 {
				t.Fatalf("a rebuild run failed: %v", err)
			}
		case <-time.After(time.Duration(50+killed*37%400) * time.Millisecond):
			_ = cmd.Process.Kill()
			<-done
			killed++
			continue
		}
		break
	}
	finish(loc, out)
	t.Logf("%d runs killed at random instants", killed)
	if diff := cmp.Diff(fmt.Sprint(want), fmt.Sprint(s.output(out))); diff != "" {
		t.Errorf("after random kills: output differs from a rebuild never killed (-never killed +killed):\n%s", diff)
	}
}

// TestRebuildKillsLocal: rebuildKills with the checkpoint in a folder.
func TestRebuildKillsLocal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rebuildKills(t, func(name string) string { return dir + "/" + name }, func(loc string) map[string]string {
		st, err := checkpoint.OpenDir(loc)
		if err != nil {
			t.Fatal(err)
		}
		return storetest.Objects(t, st, storetest.GenerationZero)
	})
}

// TestRebuildKillsS3: rebuildKills with the checkpoint on S3 behind the fault proxy, which
// gives 3% of the requests a fault (a lost reply, 503 SlowDown, 500, a reset, a delay).
func TestRebuildKillsS3(t *testing.T) {
	t.Parallel()
	srv := testenv.S3(t)
	proxy := testenv.NewS3Proxy(t, srv, uint64(time.Now().UnixNano()))
	proxy.Random(0.03)
	proxied := proxy.Server()
	root := "s3://" + srv.Bucket + "/rebuild"
	rebuildKills(t, func(name string) string { return root + "/" + name }, func(loc string) map[string]string {
		prefix := strings.TrimPrefix(loc, "s3://"+srv.Bucket+"/")
		st, err := s3.Open(context.Background(), srv.Bucket, prefix, srv.Options()...) // upstream: no faults

		if err != nil {
			t.Fatal(err)
		}
		return storetest.Objects(t, st, storetest.GenerationZero)
	}, proxied.Env()...)
	t.Logf("the proxy saw %d requests, faults: %v", proxy.Requests(), proxy.Counts())
}
