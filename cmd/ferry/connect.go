package main

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"ferry/agent"
	"ferry/service/apiclient"
	"ferry/service/ca"
	"ferry/service/domain"
	"ferry/service/relay"
	"ferry/storage/posix"
)

func newConnectCmd() *cobra.Command {
	var service, setupKey, root, dir, logLevel string
	cmd := &cobra.Command{
		Use:   "connect --service URL --root DIR [--setup-key KEY]",
		Short: "Serve a directory as a connect endpoint, through the service, with outbound connections only",
		Long: `Serve DIR as "/" of a connect endpoint (made with "ferry endpoint add NAME
--connect") on a machine that accepts no connections: a laptop, a lab server
behind a firewall. ferry connect keeps one outbound TLS connection to the
service's relay, through which the service drives transfers; every data
connection is one this machine opens.

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
			if err != nil {
				return fmt.Errorf("ask %s for its relay: %w", service, err)
			}
			if setupKey != "" {
				id, err := agent.Pair(ctx, r.Address, secret, pin, dir)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "ferry connect: paired with endpoint %s; credentials in %s\n", id, dir)
			}
			a := &agent.Agent{Relay: r.Address, Dir: dir, FS: fs, Logger: log, Connected: func(id string) {
				fmt.Fprintf(cmd.ErrOrStderr(), "ferry connect: serving %s as endpoint %s through %s\n", root, id, r.Address)
			}}
			return a.Run(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&service, "service", "", "the ferry service, http(s)://host:port")
	f.StringVar(&setupKey, "setup-key", "", "pair this machine with the endpoint of this one-time key")
	f.StringVar(&root, "root", "", "directory to serve as /")
	f.StringVar(&dir, "config", "", "where the agent keeps its certificate and key (default: ferry/connect in your configuration directory)")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	return cmd
}

// relayFlags are ferry server's settings of the relay for connect agents.
type relayFlags struct{ listen, address string }

func (f *relayFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.listen, "relay-listen", "", "where the relay for ferry connect agents listens, HOST:PORT (default: no relay)")
	fl.StringVar(&f.address, "relay-address", "", "the relay's address as agents and GridFTP servers reach it, IPv4:PORT (default: --relay-listen)")
}

// start starts the relay, with the CA under dataDir, when --relay-listen
// asks for one; nil when not. resumed wakes the workers.
func (f relayFlags) start(st domain.Store, dataDir string, log *slog.Logger, resumed func()) (*relay.Relay, error) {
	if f.listen == "" {
		return nil, nil
	}
	c, err := ca.LoadOrCreate(dataDir)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return nil, fmt.Errorf("--relay-listen: %w", err)
	}
	public := cmp.Or(f.address, ln.Addr().String())
	ap, err := netip.ParseAddrPort(public)
	if err != nil || !ap.Addr().Unmap().Is4() || ap.Addr().IsUnspecified() {
		ln.Close()
		return nil, errors.New("--relay-address: want the IPv4:PORT at which agents and GridFTP servers reach the relay")
	}
	r := &relay.Relay{Store: st, CA: c, Public: ap, Logger: log.With("component", "relay"), Resumed: resumed}
	go r.Serve(ln)
	return r, nil
}
