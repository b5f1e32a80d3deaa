// Command ferry is fire-and-forget, managed, high-performance data movement
// for research data. One binary holds every role: the GridFTP endpoint
// server (ferry gridftp) and its tools; the service, agent and clients
// follow. This package is the only place that reads flags and wires
// components together.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRoot()
	root.SetArgs(globusStyle(os.Args[1:]))
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "ferry:", errorLine(err))
		os.Exit(exitCode(err))
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "ferry",
		Short:         "Fire-and-forget, verified, fast data movement for research data",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	c := &cli{}
	root.AddCommand(newGridFTPCmd(), newConnectCmd(), newPasswdCmd(), newCopyCmd(), newServerCmd(), newUserCmd(),
		newLoginCmd(c), newLogoutCmd(c), newTokenCmd(c), newEndpointCmd(c),
		newLsCmd(c), newMkdirCmd(c), newRenameCmd(c), newRmCmd(c),
		newTransferCmd(c), newScpCmd(c), newTaskCmd(c))
	root.AddCommand(taskAliases(c)...)
	markErrors(root)
	return root
}
