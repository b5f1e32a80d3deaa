// Command ferry is fire-and-forget, managed, high-performance data movement
// for research data. One binary holds every role: the GridFTP endpoint
// server (ferry gridftp) and its tools; the service, agent and clients
// follow. This package is the only place that reads flags and wires
// components together.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stopProfile := startProfile(os.Getenv(profileEnv), os.Stderr)
	stopMemProfile := startMemProfile(os.Getenv(memProfileEnv), os.Stderr)
	code := execute(ctx, newRoot(), os.Args[1:], os.Stderr)
	stop()
	stopProfile()
	stopMemProfile()
	os.Exit(code)
}

// execute runs root with args and returns the exit status; an error is
// one line on errOut.
func execute(ctx context.Context, root *cobra.Command, args []string, errOut io.Writer) int {
	root.SetArgs(globusStyle(args))
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(errOut, "ferry:", errorLine(err))
		return exitCode(err)
	}
	return 0
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "ferry",
		Short:         "Fire-and-forget, verified, fast data movement for research data",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       readVersion().String(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.Flags().BoolP("version", "v", false, "print ferry's version, VCS revision and Go version (as ferry version)")
	c := &cli{}
	root.AddCommand(newVersionCmd(c), newGridFTPCmd(), newConnectCmd(), newPasswdCmd(), newCopyCmd(), newServerCmd(), newUserCmd(),
		newLoginCmd(c), newLogoutCmd(c), newTokenCmd(c))
	root.AddCommand(serviceCommands(c)...)
	markErrors(root)
	return root
}

// serviceCommands are the client commands that act on the service
// through its API alone: the installed binary's, and those the SSH
// gateway serves (sshRoot).
func serviceCommands(c *cli) []*cobra.Command {
	return append([]*cobra.Command{newWhoamiCmd(c), newEndpointCmd(c), newLsCmd(c), newMkdirCmd(c), newRenameCmd(c), newRmCmd(c),
		newTransferCmd(c), newScpCmd(c), newTaskCmd(c), newBookmarkCmd(c)}, taskAliases(c)...)
}
