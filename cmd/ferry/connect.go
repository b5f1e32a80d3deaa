package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"ferry/connect/agent"
	"ferry/service/apiclient"
	"ferry/service/domain"
	"ferry/storage/posix"
)

func newConnectCmd() *cobra.Command {
	var service, setupKey, root, dir, logLevel string
	cmd := &cobra.Command{
		Use:   "connect --service URL --root DIR [--setup-key KEY]",
		Short: "Serve a directory as a connect endpoint, through the service, with outbound connections only",
		Long: `Serve DIR as "/" of a connect endpoint (made with "ferry endpoint add NAME
--connect") on a machine that accepts no connections: a laptop, a lab server
behind a firewall. ferry connect keeps one outbound TLS connection to one
of the service's relays, through which the service drives transfers; every
data connection is one this machine opens. It learns the relays of all the
service's processes, and when it loses its relay it connects to another.

The first run pairs the machine with the endpoint: --setup-key gives the
one-time key that "ferry endpoint add --connect" (or "ferry endpoint
setup-key") printed, and the certificate the service issues for it is kept
in --config. Later runs need only --service and --root. Stop with SIGTERM or
Ctrl-C; tasks using the endpoint wait (INACTIVE) until it runs again.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if service == "" || root == "" {
				return usagef("--service and --root are required")
			}
			if dir == "" {
				conf, err := os.UserConfigDir()
				if err != nil {
					return err
				}
				dir = filepath.Join(conf, "ferry", "connect")
			}
			log, err := newLogger(logLevel)
			if err != nil {
				return err
			}
			fs, err := posix.New(root)
			if err != nil {
				return err
			}
			var secret, pin string
			if setupKey != "" {
				if secret, pin, err = domain.SplitSetupKey(setupKey); err != nil {
					return usagef("--setup-key: %s", domain.ErrorMessage(err))
				}
			}
			ctx := cmd.Context()
			r, err := apiclient.New(service, "", nil).Relay(ctx)
			if err == nil && len(r.Relays) == 0 {
				err = errors.New("it names none")
			}
			if err != nil {
				return fmt.Errorf("ask %s for its relays: %w", service, err)
			}
			if setupKey != "" {
				id, err := agent.Pair(ctx, r.Relays[0], secret, pin, dir)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "ferry connect: paired with endpoint %s; credentials in %s\n", id, dir)
			}
			a := &agent.Agent{Relays: r.Relays, Dir: dir, FS: fs, Layers: layers(), Logger: log, Connected: func(ep, relay string) {
				fmt.Fprintf(cmd.ErrOrStderr(), "ferry connect: serving %s as endpoint %s through %s\n", root, ep, relay)
			}}
			err = a.Run(ctx)
			if ctx.Err() != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), "ferry connect: stopped; tasks that use the endpoint wait (INACTIVE) until it runs again")
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&service, "service", "", "the ferry service, http(s)://host:port (required)")
	f.StringVar(&setupKey, "setup-key", "", "pair this machine with the endpoint of this one-time key")
	f.StringVar(&root, "root", "", "directory to serve as / (required)")
	f.StringVar(&dir, "config", "", "where the agent keeps its certificate and key (default: ferry/connect in your configuration directory)")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	return cmd
}
