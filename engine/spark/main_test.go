package spark_test

import (
	"sync"
	"testing"

	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// TestMain stops the shared services (the Kafka broker) the tests started, and the oracle's
// JVM, the Spark application the differential corpora and the planner's oracle share.
//
// The long Spark tests that set no environment variable (t.Setenv) call t.Parallel: after the
// others, they run two at a time (-parallel, GOMAXPROCS), a JVM each or their plans side by
// side in the oracle's, so that this package, the suite's longest, does not end a run alone on
// one core.
func TestMain(m *testing.M) { testenv.Main(thenStopOracle{m}) }

// thenStopOracle runs the tests, then stops the oracle's JVM if one of them started it.
type thenStopOracle struct{ m *testing.M }

func (r thenStopOracle) Run() int {
	code := r.m.Run()
	stopOracle()
	return code
}

// casesAtOnce runs f(t, i, cases[i]) for each case as a subtest named name(case), n at a
// time: a Spark case waits on JVM starts, triggers and file listings as much as it computes,
// and the oracle's JVM runs the plans it is given side by side. The subtests are not
// t.Parallel: they take no -parallel slot from the package's other long tests.
func casesAtOnce[C any](t *testing.T, n int, cases []C, name func(C) string, f func(t *testing.T, i int, c C)) {
	t.Helper()
	turns := make(chan struct{}, n)
	var wg sync.WaitGroup
	for i, c := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			turns <- struct{}{}
			defer func() { <-turns }()
			t.Run(name(c), func(t *testing.T) { f(t, i, c) })
		}()
	}
	wg.Wait()
}
