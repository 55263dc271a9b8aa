package spark_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine/crashtest"
)

// The CEL → Spark SQL property case of TestDifferential ("cel-properties"): random rows with
// nulls, extreme longs, doubles of every magnitude, strings of ASCII and not, and timestamps
// across two centuries, each projected by every construct the translator accepts; both runtimes
// must give each row the same value for each (doubles to 12 significant digits).

var celColumns = []v1.Column{
	{Name: "n", Type: v1.TypeLong},
	{Name: "id", Type: v1.TypeString},
	{Name: "qty", Type: v1.TypeLong},
	{Name: "amount", Type: v1.TypeDouble},
	{Name: "ok", Type: v1.TypeBoolean},
	{Name: "ts", Type: v1.TypeTimestamp},
}

// celExprs are the constructs the translator accepts (TestTranslateCEL), with nulls, overflow,
// division by zero and non-ASCII text in reach of the random rows.
var celExprs = []string{
	"qty > 3", "qty != 3", "qty == 3", "qty >= -1 && qty < 100", "amount > 0.5 && ok", "!ok || qty <= -2",
	"qty + 1", "qty - 1", "qty * qty", "-qty", "qty / 2", "qty % 3", "qty / (qty - qty)", "qty % 0",
	"amount * 2.0", "amount + amount", "amount - 1.5", "-amount", "amount > 0", "amount == 0.0",
	"id + 'x'", "id.size()", "id.upperAscii()", "id.lowerAscii()", "id.startsWith('a')", "id.endsWith('Z')",
	"id.contains('\\\\')", "id == 'a'", "id < 'b'",
	"ok ? qty : 0", "ok ? id : 'none'", "ok == true",
	"int(amount)", "double(qty)", "string(qty)", "string(ok)",
	"ts.getHours()", "ts.getMinutes()", "ts.getSeconds()", "ts.getMonth()", "ts.getFullYear()", "ts.getDayOfMonth()",
	"ts.getDayOfWeek()", "ts.getDayOfYear()",
	"ts > timestamp('2024-01-01T00:00:00Z')", "ts == timestamp('2024-01-01T00:00:00Z')",
	"timestamp(qty)", "timestamp(int(ts) / 10 * 10)",
	// Double division (±Infinity and NaN for a zero divisor, of either sign), NaN in comparisons,
	// and a timestamp plus or minus a duration (null beyond CEL's year 9999). A double output
	// is finite: the two runtimes' JSON writers differ on Infinity and NaN (docs/spark.md).
	"amount / 2.0", "amount / -3.0", "amount / (amount - amount) > 0.0", "1.0 / -amount < 0.0", "-amount / amount >= -1.0",
	"amount / amount == amount / amount", "amount / (amount - amount) != 0.0", "amount * amount - amount * amount > 0.0",
	"ts + duration('90m')", "ts - duration('1.5s')", "duration('1h') + ts > timestamp('2100-01-01T00:00:00Z')",
	"timestamp(253402300799 - qty) + duration('1s')",
}

func celProjections() []v1.Projection {
	ps := []v1.Projection{{Name: "n", Expr: "n"}}
	for i, e := range celExprs {
		ps = append(ps, v1.Projection{Name: fmt.Sprintf("e%d", i), Expr: e})
	}
	return ps
}

// writeRandomRows writes 300 random rows into in (the seed is logged with how to replay it).
func writeRandomRows(t *testing.T, in string) {
	rng := crashtest.Rand(t, "the CEL property rows")
	if err := os.MkdirAll(in, 0o755); err != nil {
		t.Fatal(err)
	}
	longs := []int64{0, 1, -1, 2, 3, -2, 100, math.MaxInt64, math.MinInt64, math.MaxInt64 - 1, math.MinInt64 + 1, 1 << 32, -(1 << 31)}
	doubles := []float64{0, 0.5, -0.5, 1.5, 1e300, -1e300, 5e-324, 1e-10, 2.5, 9007199254740993, -3}
	runes := []rune("aAbZz09 _-'\\\"éß漢")
	var b strings.Builder
	for n := range 300 {
		row := map[string]any{"n": n}
		maybe := func(name string, v func() any) {
			if rng.IntN(7) > 0 { // a null one time in seven
				row[name] = v()
			} else {
				row[name] = nil
			}
		}
		maybe("id", func() any {
			r := make([]rune, rng.IntN(5))
			for i := range r {
				r[i] = runes[rng.IntN(len(runes))]
			}
			return string(r)
		})
		maybe("qty", func() any {
			if rng.IntN(2) == 0 {
				return longs[rng.IntN(len(longs))]
			}
			return rng.Int64N(2001) - 1000
		})
		maybe("amount", func() any {
			if rng.IntN(2) == 0 {
				return doubles[rng.IntN(len(doubles))]
			}
			return (rng.Float64() - 0.5) * math.Pow(10, float64(rng.IntN(12)))
		})
		maybe("ok", func() any { return rng.IntN(2) == 0 })
		maybe("ts", func() any {
			base := time.Date(1950, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
			span := time.Date(2150, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli() - base
			return time.UnixMilli(base + rng.Int64N(span)).UTC().Format(time.RFC3339Nano)
		})
		line, err := json.Marshal(row)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(filepath.Join(in, "rows.json"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}
