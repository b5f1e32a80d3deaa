package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/crypto/ssh"

	"ferry/service/domain"
	"ferry/service/httpapi"
	"ferry/service/sshgw"
)

// exitNotFound is the exit status of a line over SSH that names no
// command, as a shell's.
const exitNotFound = 127

// sshRoot is the command tree the SSH gateway serves: the service
// commands alone (serviceCommands), run for the user of r.
func sshRoot(r *remote) *cobra.Command {
	root := &cobra.Command{
		Use:   "ferry",
		Short: "ferry's service commands over SSH: ssh USER@HOST COMMAND [ARGS], or a prompt with ssh USER@HOST",
		Long: `ferry's service commands, run over SSH as the user who logged in, with the same
flags, output (-F json) and exit statuses as the installed ferry. Files of the
service's host are not read: --batch and --proxy take - (standard input).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.AddCommand(serviceCommands(&cli{remote: r})...)
	markErrors(root)
	return root
}

// sshCommand runs one command line over SSH for the user of r and returns
// its exit status. The line is split into words as a shell would (no
// expansion, no pipes), a leading "ferry" may be left out; a first word
// that is none of sshRoot's commands (a shell, a program's path) runs
// nothing.
func sshCommand(ctx context.Context, r remote, rw sshgw.IO, line string) int {
	args, err := shellWords(line)
	if err != nil {
		fmt.Fprintf(rw.Err, "ferry: %v\n", err)
		return exitUsage
	}
	if len(args) > 0 && args[0] == "ferry" {
		args = args[1:]
	}
	r.tty = rw.Terminal
	root := sshRoot(&r)
	if len(args) > 0 && !knownCommand(root, args[0]) {
		fmt.Fprintf(rw.Err, "ferry: %s: not a ferry command; only ferry's service commands run here (type help)\n", args[0])
		return exitNotFound
	}
	root.SetIn(&capped{r: rw.In, left: maxSSHInput})
	root.SetOut(rw.Out)
	root.SetErr(rw.Err)
	return execute(ctx, root, args, rw.Err)
}

// maxSSHInput bounds what a command over SSH reads from standard input
// (a --batch of items, a proxy): as much as the API takes in a submission.
const maxSSHInput = httpapi.DefaultMaxSubmitBody

// capped is a reader that fails past left bytes, so that the service's
// process keeps no more of a client's input than the API would.
type capped struct {
	r    io.Reader
	left int64
}

func (c *capped) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, fmt.Errorf("standard input over SSH is limited to %d MiB", maxSSHInput>>20)
	}
	n, err := c.r.Read(p[:min(int64(len(p)), c.left)])
	c.left -= int64(n)
	return n, err
}

// knownCommand reports whether name is a command of root, or help or a
// flag for it.
func knownCommand(root *cobra.Command, name string) bool {
	if slices.Contains([]string{"help", "-h", "--help"}, name) {
		return true
	}
	for _, c := range root.Commands() {
		if c.Name() == name || slices.Contains(c.Aliases, name) {
			return true
		}
	}
	return false
}

// sshFlags are ferry server's settings of the SSH gateway.
type sshFlags struct {
	listen          string
	sessions        int
	idle, handshake time.Duration
	unauthenticated int
	perAddress      int
}

func (f *sshFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.listen, "ssh-listen", "", "serve the service commands over SSH at HOST:PORT (ssh alice@host ls ep:/); users log in with the keys of ferry user key add (default: no SSH)")
	fl.IntVar(&f.sessions, "ssh-sessions", sshgw.DefaultSessions, "SSH sessions a user may have at once")
	fl.DurationVar(&f.idle, "ssh-idle", sshgw.DefaultIdle, "close an SSH connection after this long with no input and no command running")
	fl.DurationVar(&f.handshake, "ssh-handshake", sshgw.DefaultHandshake, "time an SSH client has to log in")
	fl.IntVar(&f.unauthenticated, "ssh-unauthenticated", sshgw.DefaultUnauthenticated, "SSH connections that have not logged in yet, at most; more are closed at once")
	fl.IntVar(&f.perAddress, "ssh-unauthenticated-per-address", sshgw.DefaultUnauthenticatedPerAddress, "SSH connections from one client address (an IPv6 /64) that have not logged in yet, at most; more are closed at once")
}

// sshSessionLifetime bounds the API token of an SSH session, revoked when
// the session ends: as long as the default deadline of a task that task
// wait may follow.
const sshSessionLifetime = 24 * time.Hour

// start listens at --ssh-listen, if given, and serves the gateway there
// until ctx ends. Its commands reach the API at apiURL with a token made
// for each session; public is where users reach the service. It says
// where it listens, with the host key's fingerprint.
func (f *sshFlags) start(ctx context.Context, users domain.UserService, auth domain.AuthService, keyPath, apiURL, public string, log *slog.Logger, out io.Writer) error {
	if f.listen == "" {
		return nil
	}
	hostKey, err := sshgw.LoadOrCreateHostKey(keyPath)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("--ssh-listen: %w", err)
	}
	s := &sshgw.Server{
		Users: users, HostKey: hostKey, Logger: log,
		Sessions: f.sessions, Idle: f.idle, Handshake: f.handshake, Unauthenticated: f.unauthenticated,
		UnauthenticatedPerAddress: f.perAddress,
		Login: func(ctx context.Context, u domain.User, from net.Addr) (sshgw.Runner, func(), error) {
			token, revoke, err := auth.MintToken(ctx, u, "ssh session from "+from.String(), sshSessionLifetime)
			if err != nil {
				return nil, nil, err
			}
			r := remote{api: apiURL, public: public, token: token, user: u.Name}
			return func(ctx context.Context, rw sshgw.IO, line string) int { return sshCommand(ctx, r, rw, line) }, revoke, nil
		},
	}
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	go func() {
		if err := s.Serve(ln); err != nil {
			log.Error("ssh: serving stopped", "err", err)
		}
	}()
	fmt.Fprintf(out, "ferry server: SSH command gateway on %s (host key %s)\n", ln.Addr(), ssh.FingerprintSHA256(hostKey.PublicKey()))
	return nil
}
