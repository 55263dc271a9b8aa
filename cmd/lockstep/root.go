package main

import "github.com/spf13/cobra"

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "lockstep",
		Short:         "Streaming queries as declarative infrastructure",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// Every subcommand is listed here; nothing registers itself.
	root.AddCommand(
		newCheckpointCommand(),
		newVersionCommand(),
		newRunCommand(),
		newPlanCommand(),
		newEngineCommand(),
		newExecutorCommand(),
		newControllerCommand(),
		newUICommand(),
	)
	return root
}
