package delta_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
)

// A → delta → B with SIGKILL in both, each in a child process: a round per
// phase adds input, kills A at that phase of its next batch and runs it to
// the end, then does the same with B. After every round B's output equals
// A's input (content), and each of A's batches is one table commit.
func TestChainedThroughDeltaSIGKILL(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			p := newPipeline(t, kind)
			var nextA, nextB int64
			for _, phase := range engine.Phases() {
				p.add(t, 3)
				p.killAt(t, p.queryA(), phase, nextA)
				a := p.runToEnd(t, p.queryA())
				p.checkTable(t, a)
				p.killAt(t, p.queryB(), phase, nextB)
				b := p.runToEnd(t, p.queryB())
				nextA, nextB = a.LastCommitted+1, b.LastCommitted+1

				got := enginetest.OutputRows(t, p.folder(t, p.out))
				if diff := cmp.Diff(p.wantRows(), got); diff != "" {
					t.Fatalf("after SIGKILL at %s: B's output (-A's input, transformed +B's output):\n%s", phase, diff)
				}
			}
			t.Logf("A: %d batches, B: %d batches, %d rows", nextA, nextB, len(p.want))
		})
	}
}
