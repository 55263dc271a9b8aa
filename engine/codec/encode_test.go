package codec

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestAppendDouble checks the shortcut for amounts against strconv: the
// same text for every value.
func TestAppendDouble(t *testing.T) {
	values := []float64{
		0, math.Copysign(0, -1), 0.01, -0.01, 0.05, 0.1, 0.25, 0.29, 1, -1, 12.5, 12.25, -12.75, 99.99,
		100, 1234.5, 999999.99, 1e6, -1e6, 1e6 + 0.5, 123456.78, 0.001, 1e-5, 1e21, 5e-324, math.MaxFloat64,
		math.Nextafter(12.25, 13), math.Nextafter(0.1, 1), 1.0 / 3,
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		cents := rng.Int64N(2e8) - 1e8
		values = append(values, float64(cents)/100, float64(cents)/1000, rng.NormFloat64()*1e4)
	}
	for _, v := range values {
		want := strconv.AppendFloat(nil, v, 'g', -1, 64)
		if got := appendDouble(nil, v); string(got) != string(want) {
			t.Errorf("appendDouble(%v) = %s, want %s", v, got, want)
		}
	}
	for _, v := range []float64{math.Inf(1), math.Inf(-1), math.NaN()} {
		if got := appendDouble(nil, v); string(got) != "null" {
			t.Errorf("appendDouble(%v) = %s, want null", v, got)
		}
	}
}
