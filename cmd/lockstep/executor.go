package main

import (
	"fmt"
	"os"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/lockstep-dev/lockstep/engine/spark"
)

// newExecutorCommand is the entrypoint of a spark query's executor pods: Spark's Kubernetes
// backend starts Lockstep's Spark image with the argument "executor", and this replaces the
// process with the executor JVM, so that the kubelet's signals reach it directly.
func newExecutorCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "executor",
		Short:  "Run a Spark executor (the entrypoint of the executor pods Spark creates for a spark query)",
		Hidden: true,
		Args:   cobra.ArbitraryArgs,
		RunE: func(*cobra.Command, []string) error {
			runner, err := spark.FindRunner()
			if err != nil {
				return withExitCode(exitFailure, err)
			}
			argv, err := runner.ExecutorCommand(os.Environ())
			if err != nil {
				return withExitCode(exitInvalid, err)
			}
			if err := syscall.Exec(argv[0], argv, os.Environ()); err != nil {
				return withExitCode(exitFailure, fmt.Errorf("start the Spark executor %s: %w", argv[0], err))
			}
			return nil
		},
	}
}
