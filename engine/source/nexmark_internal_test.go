package source

import (
	"math"
	"testing"
)

func TestDecadeSteps(t *testing.T) {
	for i, v := range decadeSteps {
		want := math.Pow(10, float64(i)/256) * 1e15
		if math.Abs(float64(v)-want)/want > 1e-12 {
			t.Errorf("decadeSteps[%d] = %d, want %.0f", i, v, want)
		}
	}
}

func TestNextPriceFollowsTheCurve(t *testing.T) {
	r := rng{s: 1}
	for range 100_000 {
		// Replay the draw to know u, then compare with Nexmark's formula.
		before := r
		k := before.intn(6 << 24)
		p := nextPrice(&r)
		want := math.Pow(10, float64(k)/(1<<24)) * 100
		if math.Abs(float64(p)-want) > 1+want*1.1e-5 {
			t.Fatalf("nextPrice for 6u = %v is %d, want %.2f", float64(k)/(1<<24), p, want)
		}
		if p < 100 || p > 100_000_000 {
			t.Fatalf("price %d outside $1..$1M", p)
		}
	}
}
