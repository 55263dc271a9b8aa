package spark

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"slices"

	lplan "github.com/lockstep-dev/lockstep/plan"
)

// RequestPrefix begins a line on which the runner asks its Go parent something.
const RequestPrefix = requestPrefix

// FilesServer answers the requests of the runner's files sink for the plan p's sink, for the
// query queryID, as Query.Run does: the oracle's JVM, which runs plans without a Query, asks it.
func FilesServer(ctx context.Context, p *lplan.Plan, queryID string) (func(line string) []byte, error) {
	c, err := newFilesCommitter(ctx, p, queryID, os.Getenv, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	return func(line string) []byte {
		req, err := parseRequest(line)
		rep := reply{BatchID: req.BatchID}
		if err == nil {
			rep, _, err = c.serve(ctx, req)
		}
		if err != nil {
			rep.Error = err.Error()
		}
		data, _ := json.Marshal(rep)
		return append(data, '\n')
	}, nil
}

// ClassCommand returns the command that runs mainClass, compiled into classDir against the
// runner's libraries, in a JVM started as the runner's is (its options and class-data archive:
// classDir comes after the archive's classpath) with a heap of heapBytes: a plain Spark job for
// the benchmarks to compare the runner with.
func (r Runner) ClassCommand(classDir, mainClass string, heapBytes int64, args ...string) *exec.Cmd {
	cmd := r.Command("-", heapBytes)
	cmdArgs := slices.Clone(cmd.Args[1:])
	i := slices.Index(cmdArgs, "-cp")
	cmdArgs = append(cmdArgs[:i], "-cp", r.classpath()+string(os.PathListSeparator)+classDir, mainClass)
	cmdArgs = append(cmdArgs, args...)
	return exec.Command(r.Java, cmdArgs...)
}
