package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

const sample = `goos: linux
pkg: github.com/lockstep-dev/lockstep/engine/kafka
BenchmarkKafkaToKafka/ceiling-2         	       1	1000 ns/op	  900000 records/s
BenchmarkKafkaToKafka/lockstep-2        	       1	1000 ns/op	  810000 records/s	         4.000 allocs/record	0.9000 x-ceiling
BenchmarkKafkaToKafka/lockstep-2        	       1	1000 ns/op	  700000 records/s	         2.000 allocs/record	0.7000 x-ceiling
BenchmarkKafkaToKafka/lockstep-2        	       1	1000 ns/op	  820000 records/s	         3.000 allocs/record	0.8200 x-ceiling
PASS
pkg: github.com/lockstep-dev/lockstep/engine/stateful
BenchmarkAggregate/keys=1000 	       5	 0 ns/op	  4.1e+06 rows/cpu-s
`

func TestEvaluateTakesTheMedianAndNamesWhatDidNotRun(t *testing.T) {
	goals, err := parseGoals(`
engine/kafka BenchmarkKafkaToKafka/lockstep x-ceiling >= 0.8 ratio
engine/kafka BenchmarkKafkaToKafka/lockstep allocs/record <= 3 allocs
engine/stateful BenchmarkAggregate/keys=.* rows/cpu-s >= 5e6 aggregate
engine/kafka BenchmarkMissing ns/op <= 1 missing
`)
	if err != nil {
		t.Fatal(err)
	}
	results, err := parseResults(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	rows := evaluate(goals, results)
	want := []struct {
		fig      float64
		ran, met bool
	}{{0.82, true, true}, {3, true, true}, {4.1e6, true, false}, {0, false, false}}
	for i, w := range want {
		r := rows[i]
		if r.Ran != w.ran || r.Met != w.met || r.Figure != w.fig {
			t.Errorf("%s: figure %v ran %v met %v, want %v %v %v", r.Goal.Description, r.Figure, r.Ran, r.Met, w.fig, w.ran, w.met)
		}
	}
	var out bytes.Buffer
	writeTable(&out, rows)
	for _, s := range []string{"NOT MET", "not run", "2 of 4 goals met"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, out.String())
		}
	}
}

func TestParseGoalsRefusesBadLines(t *testing.T) {
	for _, line := range []string{"pkg Bench unit == 1 d", "pkg Bench unit >= x d", "pkg ( unit >= 1 d", "pkg Bench unit >= 1"} {
		if _, err := parseGoals(line); err == nil {
			t.Errorf("%q: no error", line)
		}
	}
}

// Every goal names a benchmark that exists, so that a renamed benchmark cannot leave a goal
// that silently never runs.
func TestEveryGoalNamesABenchmarkInItsPackage(t *testing.T) {
	goals, err := readGoals("goals.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range goals {
		top, _, _ := strings.Cut(g.Bench.String()[1:len(g.Bench.String())-1], "/")
		out, err := exec.Command("grep", "-rlw", "--include=*_test.go", "--include=*.go", "func "+top, "../../"+g.Pkg).CombinedOutput()
		if err != nil {
			t.Errorf("goal %q: no func %s in %s (%v: %s)", g.Description, top, g.Pkg, err, out)
		}
	}
}

// A goal on a sub-benchmark with parameters (shape=…/job=…) takes that sub-benchmark's figure
// only: BenchmarkSparkFiles's goals in goals.txt, against output of its form.
func TestGoalsOfParameterisedSubBenchmarks(t *testing.T) {
	const out = `pkg: github.com/lockstep-dev/lockstep/engine/spark
BenchmarkSparkFiles/shape=filter/job=hand-2         	       1	26820746744 ns/op	        26.49 cpu-s	       600.0 rows	        26.82 wall-s
BenchmarkSparkFiles/shape=filter/job=lockstep-2     	       1	35811752637 ns/op	        28.60 cpu-s	       600.0 rows	        35.80 wall-s	         1.080 x-hand-cpu	         1.335 x-hand-wall
BenchmarkSparkFiles/shape=filter/job=rows-2         	       1	35811752637 ns/op	        28.60 cpu-s	       600.0 rows	        35.80 wall-s	         1.01 x-files-cpu
BenchmarkSparkFiles/shape=aggregate/job=hand-2      	       1	26820746744 ns/op	        26.49 cpu-s	       600.0 rows	        26.82 wall-s
BenchmarkSparkFiles/shape=aggregate/job=lockstep-2  	       1	35811752637 ns/op	        28.60 cpu-s	       600.0 rows	        35.80 wall-s	         1.090 x-hand-cpu	         1.035 x-hand-wall
BenchmarkSparkFiles/shape=join/job=hand-2           	       1	27409629636 ns/op	        20.24 cpu-s	     18395 rows	        27.38 wall-s
BenchmarkSparkFiles/shape=join/job=lockstep-2       	       1	31991182192 ns/op	        20.77 cpu-s	     18395 rows	        31.90 wall-s	         1.026 x-hand-cpu	         1.165 x-hand-wall
`
	all, err := readGoals("goals.txt")
	if err != nil {
		t.Fatal(err)
	}
	var goals []Goal
	for _, g := range all {
		if strings.HasPrefix(g.Bench.String(), "^BenchmarkSparkFiles/") {
			goals = append(goals, g)
		}
	}
	results, err := parseResults(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"filter/x-hand-cpu": 1.080, "filter/x-hand-wall": 1.335, "aggregate/x-hand-cpu": 1.090,
		"aggregate/x-hand-wall": 1.035, "join/x-hand-cpu": 1.026, "join/x-hand-wall": 1.165,
	}
	if len(goals) != len(want) {
		t.Fatalf("goals.txt has %d BenchmarkSparkFiles goals, want %d (a CPU and a wall goal a shape)", len(goals), len(want))
	}
	for _, r := range evaluate(goals, results) {
		shape, _, _ := strings.Cut(strings.TrimPrefix(r.Bench, "BenchmarkSparkFiles/shape="), "/")
		w, ok := want[shape+"/"+r.Goal.Unit]
		if !r.Ran || !ok || r.Figure != w || r.Bench != "BenchmarkSparkFiles/shape="+shape+"/job=lockstep" {
			t.Errorf("%s: ran %v, figure %v of %s, want %v of shape %s's lockstep row", r.Goal.Description, r.Ran, r.Figure, r.Bench, w, shape)
		}
		delete(want, shape+"/"+r.Goal.Unit)
	}
	if len(want) != 0 {
		t.Errorf("no goal took %v", want)
	}
}
