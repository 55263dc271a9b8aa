// Command benchtable reads `go test -bench` output and prints one table of the project's
// performance goals: each goal's figure, the goal and whether it is met. `make bench` pipes the
// benchmarks into it; the goals live in goals.txt beside this file.
//
//	go test -run '^$' -bench . ./... | go run ./hack/benchtable [-goals hack/benchtable/goals.txt]
//
// A goal whose benchmark did not run is listed as "not run", never as met. With several results
// for one benchmark (-count), the median is compared.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

func main() {
	goalsPath := flag.String("goals", "hack/benchtable/goals.txt", "the goals file")
	echo := flag.Bool("echo", true, "copy the benchmark output to stdout as it is read")
	flag.Parse()
	goals, err := readGoals(*goalsPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(2)
	}
	var in io.Reader = os.Stdin
	if *echo {
		in = io.TeeReader(os.Stdin, os.Stdout)
	}
	results, err := parseResults(in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(2)
	}
	fmt.Println()
	writeTable(os.Stdout, evaluate(goals, results))
}

// Goal is one line of goals.txt:
//
//	<package suffix> <benchmark name regexp> <unit> <>=|<=> <value> <description…>
type Goal struct {
	Pkg         string
	Bench       *regexp.Regexp
	Unit        string
	Op          string
	Value       float64
	Description string
}

// Result is one benchmark line: the package it ran in, its full name (without the -N CPU
// suffix) and its figures by unit.
type Result struct {
	Pkg     string
	Name    string
	Figures map[string]float64
}

// Row is one line of the table.
type Row struct {
	Goal   Goal
	Figure float64
	Ran    bool
	Met    bool
	Bench  string
}

func readGoals(path string) ([]Goal, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseGoals(string(data))
}

func parseGoals(text string) ([]Goal, error) {
	var goals []Goal
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 6 {
			return nil, fmt.Errorf("goals line %d: want <pkg> <bench regexp> <unit> <op> <value> <description>, got %q", n+1, line)
		}
		re, err := regexp.Compile("^" + f[1] + "$")
		if err != nil {
			return nil, fmt.Errorf("goals line %d: benchmark pattern: %w", n+1, err)
		}
		if f[3] != ">=" && f[3] != "<=" {
			return nil, fmt.Errorf("goals line %d: operator %q: use >= or <=", n+1, f[3])
		}
		v, err := strconv.ParseFloat(f[4], 64)
		if err != nil {
			return nil, fmt.Errorf("goals line %d: value %q: %w", n+1, f[4], err)
		}
		goals = append(goals, Goal{Pkg: f[0], Bench: re, Unit: f[2], Op: f[3], Value: v, Description: strings.Join(f[5:], " ")})
	}
	return goals, nil
}

var cpuSuffix = regexp.MustCompile(`-\d+$`)

// parseResults reads the standard benchmark format: "pkg: …" lines name the package of the
// "Benchmark… N value unit [value unit]…" lines after them.
func parseResults(r io.Reader) ([]Result, error) {
	var out []Result
	pkg := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimSpace(p)
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		res := Result{Pkg: pkg, Name: cpuSuffix.ReplaceAllString(f[0], ""), Figures: map[string]float64{}}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			res.Figures[f[i+1]] = v
		}
		out = append(out, res)
	}
	return out, sc.Err()
}

func evaluate(goals []Goal, results []Result) []Row {
	rows := make([]Row, 0, len(goals))
	for _, g := range goals {
		var vals []float64
		bench := ""
		for _, r := range results {
			v, ok := r.Figures[g.Unit]
			if !ok || !strings.HasSuffix(r.Pkg, g.Pkg) || !g.Bench.MatchString(r.Name) {
				continue
			}
			vals = append(vals, v)
			bench = r.Name
		}
		if bench == "" {
			bench = strings.TrimSuffix(strings.TrimPrefix(g.Bench.String(), "^"), "$")
		}
		row := Row{Goal: g, Bench: bench}
		if len(vals) > 0 {
			slices.Sort(vals)
			row.Ran, row.Figure = true, vals[len(vals)/2]
			row.Met = g.Op == ">=" && row.Figure >= g.Value || g.Op == "<=" && row.Figure <= g.Value
		}
		rows = append(rows, row)
	}
	return rows
}

func writeTable(w io.Writer, rows []Row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GOAL\tFIGURE\tTARGET\tRESULT\tBENCHMARK")
	met := 0
	for _, r := range rows {
		fig, verdict := "-", "not run"
		if r.Ran {
			fig = strconv.FormatFloat(r.Figure, 'g', 4, 64) + " " + r.Goal.Unit
			verdict = "NOT MET"
			if r.Met {
				verdict, met = "met", met+1
			}
		}
		target := r.Goal.Op + " " + strconv.FormatFloat(r.Goal.Value, 'g', -1, 64) + " " + r.Goal.Unit
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s %s\n", r.Goal.Description, fig, target, verdict, r.Goal.Pkg, r.Bench)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d of %d goals met\n", met, len(rows))
}
