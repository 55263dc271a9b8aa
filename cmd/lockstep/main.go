// Command lockstep runs, plans and inspects streaming queries.
//
// One binary serves every role: `run` (a query on this machine), `plan` (judge a
// change against a checkpoint), `checkpoint` (inspect one), `engine` (the pod
// entrypoint) and `controller` (the Kubernetes manager).
package main

import (
	"errors"
	"fmt"
	"os"
)

func main() {
	err := newRootCommand().Execute()
	os.Exit(exitCode(err))
}

// exitError carries a process exit code with the error that caused it.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// withExitCode wraps err so that the process exits with code.
func withExitCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: code, err: err}
}

// Exit codes, documented in docs/cli.md.
const (
	exitOK      = 0
	exitFailure = 1 // a runtime failure
	exitInvalid = 2 // an invalid spec or unreadable input
	exitRefused = 3 // the checkpoint refuses this query
)

func exitCode(err error) int {
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
	}
	return codeOf(err)
}

// codeOf returns the exit code of a command that returned err: exitOK for nil, the code of
// an *exitError in its chain, else exitFailure.
func codeOf(err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	}
	return exitFailure
}
