package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at link time: -ldflags "-X main.version=v1.2.3" (the Makefile's build and
// the image build do).
var version = ""

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of lockstep",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "lockstep %s\n", buildVersion())
			return err
		},
	}
}

// buildVersion is the binary's version: the linked one, else the module version `go install
// …@v1.2.3` records, else the commit `go build` in a checkout records (devel+<commit>[-dirty]),
// else (devel).
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	return versionOf(version, bi, ok)
}

func versionOf(linked string, bi *debug.BuildInfo, ok bool) string {
	if linked != "" {
		return linked
	}
	if !ok {
		return "(devel)"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "(devel)"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return "devel+" + rev
}
