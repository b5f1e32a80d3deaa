package main

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"ferry/gridftp/server"
	"ferry/gsi"
	"ferry/passwd"
	"ferry/plural"
	"ferry/sshftp"
	"ferry/stack/popen"
	"ferry/storage/posix"
)

func newGridFTPCmd() *cobra.Command {
	var (
		root, listen, pwFile, dataIf, portRange, logLevel string
		maxFileSize, checksumHoles                        string
		anonymous, anonymousWrite, pasvAny                bool
		maxSessions, perAddress, maxStreams               int
		mcStreams, mcTotal                                int
		loginTimeout, idleTimeout                         time.Duration
		portAllow, popenEnv, popenArgs                    []string
		popenWhitelist, popenUser                         string
		popenAnonymous                                    bool
		multicast, mover                                  bool
		movers                                            []string
		moverKey                                          string
		useGSI, stdio                                     bool
		hostCert, hostKey, caDir, crlDir, gridmap         string
		metricsListen                                     string
	)
	cmd := &cobra.Command{
		Use:   "gridftp --root DIR [--listen HOST:PORT] [--movers HOST:PORT,... | --mover] [--mover-key FILE] | gridftp --stdio [--root DIR]",
		Short: "Serve a directory tree to GridFTP and FTP clients",
		Long: `Serve DIR as "/" to GridFTP clients (globus-url-copy, gfal2, FTS3, ferry copy) and
plain FTP clients (lftp, curl). Sessions can never reach outside DIR.
Logins: --anonymous accepts USER anonymous, read-only unless --anonymous-write;
--password-file accepts the users created with "ferry passwd". An account
that fails 10 password logins in a row, or a client address that fails 30,
waits 1 s before its next try, twice as long after each further failure, up
to 5 min (421). Stop with SIGTERM or Ctrl-C.

A striped endpoint is one front end and several data movers on hosts that
see the same storage at DIR: run "ferry gridftp --mover --mover-key FILE"
on each mover host and "ferry gridftp --movers HOST:PORT,... --mover-key
FILE" as the front end, which clients use. Each file then moves through
every mover at once (SPAS, globus-url-copy -stripe). FILE is a secret
shared by the front end and its movers (head -c 32 /dev/urandom > FILE):
a mover serves only a front end that proves it, and nobody else.

With --stdio it serves one session on stdin and stdout, as the remote
command of sshftp:// (globus-url-copy, ferry copy): sshd has logged the
user in, so any USER and PASS is accepted, and the session runs as that
user within --root (default: the home directory; --root / serves the
whole file system as GCT's -ssh mode does). Data channels are direct TCP.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if stdio {
				var other []string
				cmd.Flags().Visit(func(f *pflag.Flag) {
					if !slices.Contains([]string{"stdio", "root", "data-interface", "log-level"}, f.Name) {
						other = append(other, "--"+f.Name)
					}
				})
				if len(other) > 0 {
					return fmt.Errorf("--stdio serves one SSH login's session: %s do not apply", strings.Join(other, ", "))
				}
				if !cmd.Flags().Changed("log-level") {
					logLevel = "warn" // ssh shows the remote's stderr to the user
				}
				err := serveStdio(root, logLevel, dataIf)
				if err != nil {
					// The client reads stdout: tell it why, as a refusal.
					fmt.Fprintf(os.Stdout, "421 %s\r\n", strings.ReplaceAll(err.Error(), "\n", " "))
				}
				return err
			}
			if root == "" {
				return errors.New("--root is required")
			}
			if (mover || len(movers) > 0) && moverKey == "" {
				return errors.New("--mover and --movers need --mover-key")
			}
			if mover && len(movers) > 0 {
				return errors.New("a server is a data mover (--mover) or a front end (--movers), not both")
			}
			if !anonymous && pwFile == "" && !mover && !useGSI {
				return errors.New("no login allowed: give --anonymous, --password-file and/or --gsi")
			}
			if anonymousWrite && !anonymous {
				return errors.New("--anonymous-write needs --anonymous")
			}
			if loginTimeout <= 0 || idleTimeout <= 0 || maxSessions < 0 || perAddress < 0 || maxStreams < 1 || mcStreams < 0 || mcTotal < 0 {
				return errors.New("--login-timeout, --idle-timeout and --max-streams must be positive, session and multicast limits not negative")
			}
			sizeLimit, err := sizeFlag("--max-file-size", maxFileSize)
			if err != nil {
				return err
			}
			holes, err := sizeFlag("--max-checksum-holes", checksumHoles)
			if err != nil {
				return err
			}
			log, err := newLogger(logLevel)
			if err != nil {
				return err
			}
			fs, err := posix.New(root)
			if err != nil {
				return err
			}
			srv := &server.Server{FS: fs, Anonymous: anonymous, AnonymousWrite: anonymousWrite,
				MaxSessions: maxSessions, MaxSessionsPerAddress: noLimit(perAddress),
				LoginTimeout: loginTimeout, IdleTimeout: idleTimeout,
				MaxFileSize: sizeLimit, ChecksumHoles: holes, MaxStreams: maxStreams, Logger: log,
				MaxForwardStreams: noLimit(mcStreams), MaxForwardTotal: noLimit(mcTotal)}
			srv.PassiveFromAnywhere = pasvAny
			if moverKey != "" {
				if srv.MoverKey, err = server.LoadMoverKey(moverKey); err != nil {
					return err
				}
				srv.Mover, srv.Movers = mover, movers
			}
			srv.Layers = layers()
			if multicast {
				maps.Copy(srv.Layers, multicastLayers())
			}
			if popenWhitelist != "" {
				if srv.Layers[popen.Name], err = popenKind(popenWhitelist, popenArgs, popenEnv, popenUser, popenAnonymous); err != nil {
					return err
				}
			} else if f := popenFlagSet(cmd.Flags().Changed); f != "" {
				return fmt.Errorf("--%s needs --popen-whitelist", f)
			}
			for _, n := range portAllow {
				p, err := netip.ParsePrefix(strings.TrimSpace(n))
				if err != nil {
					return fmt.Errorf("--port-allow: %w", err)
				}
				srv.TargetPolicy.Allow = append(srv.TargetPolicy.Allow, p)
			}
			if useGSI {
				if srv.GSI, err = gsiServer(hostCert, hostKey, caDir, crlDir, gridmap, log); err != nil {
					return err
				}
			}
			if pwFile != "" {
				pw, err := passwd.Load(pwFile)
				if err != nil {
					return err
				}
				srv.Auth = pw
			}
			if srv.DataInterface, err = dataInterface(dataIf); err != nil {
				return err
			}
			if portRange != "" {
				if srv.PortLow, srv.PortHigh, err = parsePortRange(portRange); err != nil {
					return err
				}
			}
			if metricsListen != "" {
				if err := serveMetrics(cmd.Context(), metricsListen, srv, log, cmd.ErrOrStderr()); err != nil {
					return err
				}
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			log.Info("serving", "root", root, "listen", ln.Addr().String(), "anonymous", anonymous, "popen", popenWhitelist)
			switch {
			case mover:
				fmt.Fprintf(cmd.ErrOrStderr(), "ferry gridftp: data mover for %s on %s (its front end only)\n", root, ln.Addr())
			case len(movers) > 0:
				fmt.Fprintf(cmd.ErrOrStderr(), "ferry gridftp: serving %s on ftp://%s/ through %s\n", root, ln.Addr(), plural.Count(len(movers), "data mover"))
			case useGSI:
				fmt.Fprintf(cmd.ErrOrStderr(), "ferry gridftp: serving %s on gsiftp://%s/ (grid certificates)\n", root, ln.Addr())
			default:
				fmt.Fprintf(cmd.ErrOrStderr(), "ferry gridftp: serving %s on ftp://%s/\n", root, ln.Addr())
			}
			return serveUntilDone(cmd.Context(), srv, ln)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&portAllow, "port-allow", nil, "networks (CIDR,...) that unauthenticated PORT/EPRT may name besides the client (default: any but loopback (unless listening there), link-local and cloud metadata addresses; never ports below 1024)")
	f.BoolVar(&pasvAny, "pasv-any", false, "let passive data ports admit unauthenticated connections from any address, as GCT does (for globus-url-copy third-party transfers without GSI; a stranger who finds the port first could take or inject data)")
	f.StringVar(&root, "root", "", "directory to serve as / (required; with --stdio the default is your home directory)")
	f.StringVar(&listen, "listen", "127.0.0.1:2811", "control channel address")
	f.BoolVar(&anonymous, "anonymous", false, "allow anonymous logins (read-only)")
	f.BoolVar(&anonymousWrite, "anonymous-write", false, "let anonymous sessions write, delete and rename")
	f.StringVar(&pwFile, "password-file", "", "password file made with 'ferry passwd' (default: none; give it, --anonymous or --gsi)")
	f.StringVar(&dataIf, "data-interface", "", "IP address for data connections (default: the control connection's)")
	f.StringVar(&portRange, "port-range", "", "passive data ports LO-HI (default: any port the kernel gives)")
	f.IntVar(&maxSessions, "max-sessions", 0, "concurrent sessions (0: unlimited)")
	f.IntVar(&perAddress, "max-sessions-per-address", 64, "concurrent sessions from one client address, an IPv6 /64 (0: unlimited)")
	f.DurationVar(&loginTimeout, "login-timeout", 30*time.Second, "time a connection has to log in")
	f.DurationVar(&idleTimeout, "idle-timeout", 30*time.Minute, "a session with no command for this long is closed (transfers keep it open)")
	f.StringVar(&maxFileSize, "max-file-size", "16T", "largest file, size or offset a client may write, e.g. 500G (0: no limit)")
	f.StringVar(&checksumHoles, "max-checksum-holes", "4G", "most bytes of holes (of a sparse file) one checksum hashes (0: no limit)")
	f.IntVar(&maxStreams, "max-streams", 64, "parallel data streams of one transfer")
	f.BoolVar(&multicast, "multicast", false, "offer the multicast disk stack (globus-url-copy -MC): while a file arrives it is also sent on to the servers the client names, within --port-allow's rules for where this server may connect, its data streams included, and --multicast-max-streams and --multicast-max-total (default: off)")
	f.IntVar(&mcStreams, "multicast-max-streams", 256, "with --multicast: data streams one transfer may open to the servers it is sent on to (children × P); more is refused (0: no limit)")
	f.IntVar(&mcTotal, "multicast-max-total", 1024, "with --multicast: data streams all transfers may have open to the servers they are sent on to at once; more is refused until some end (0: no limit)")
	f.StringVar(&popenWhitelist, "popen-whitelist", "", "programs clients may run through the popen disk stack (globus-url-copy -src-pipe/-dst-pipe), [alias:]/full/path,... (default: none, no popen)")
	f.StringArrayVar(&popenEnv, "popen-env", nil, "KEY=VALUE in the environment of popen programs, repeatable (default: an empty environment)")
	f.StringArrayVar(&popenArgs, "popen-args", nil, `the arguments clients may give a whitelisted program, NAME=PATTERN, repeatable: NAME its alias or path; PATTERN "@tar" (a built-in profile: tar, cat, md5sum and sha*sum, gzip, xz, bzip2, zstd), or words in order: a literal, {path} (a path inside the root), {int}, each with ? (optional) or * (repeated), e.g. "-c {path}*"; "" none (default: the profile of the program's base name, else no arguments)`)
	f.StringVar(&popenUser, "popen-user", "", "when the server runs as root: the user popen programs run as for sessions that map to no local account (anonymous, password logins; GSI logins run them as their gridmap user); never root (default: nobody)")
	f.BoolVar(&popenAnonymous, "popen-anonymous", false, "let anonymous sessions, and sessions that may only read, run popen programs too (default: only sessions that log in and may write)")
	f.BoolVar(&useGSI, "gsi", false, "let clients log in with grid certificates (AUTH GSSAPI, gsiftp://), mapped to users by --gridmap")
	f.StringVar(&hostCert, "cert", "/etc/grid-security/hostcert.pem", "with --gsi: the host certificate (PEM)")
	f.StringVar(&hostKey, "key", "/etc/grid-security/hostkey.pem", "with --gsi: the host certificate's key (PEM, unencrypted)")
	f.StringVar(&caDir, "ca-dir", gsi.DefaultCADir(), "with --gsi: the trusted CAs, a hashed directory (HASH.0 certificates, HASH.r0 CRLs)")
	f.StringVar(&crlDir, "crl-dir", "", "with --gsi: CRLs kept apart from the CAs, a hashed directory (HASH.r0 files); the CA directory's own are read anyway")
	f.StringVar(&gridmap, "gridmap", "/etc/grid-security/grid-mapfile", `with --gsi: the grid-mapfile, "DN" user[,user] per line; a DN not in it cannot log in (read at each login)`)
	f.BoolVar(&mover, "mover", false, "be a data mover of a striped endpoint: serve only the front end that holds --mover-key (no logins of its own)")
	f.StringSliceVar(&movers, "movers", nil, "be the front end of a striped endpoint: move data through the data movers at HOST:PORT,... (run with --mover on hosts that see the same --root)")
	f.StringVar(&moverKey, "mover-key", "", "file with the secret a front end and its movers share (head -c 32 /dev/urandom > FILE)")
	f.StringVar(&metricsListen, "metrics-listen", "", "serve Prometheus metrics (sessions, bytes, transfers, errors) at http://HOST:PORT/metrics (default: none)")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error (--stdio: warn)")
	f.BoolVar(&stdio, "stdio", false, "serve one session on stdin and stdout as the SSH login user, for sshftp:// (what ~/.globus/sshftp or /etc/grid-security/sshftp runs): any USER and PASS is accepted, the client address is $SSH_CONNECTION's (or $SSH_CLIENT's), --root defaults to the home directory, logs go to stderr; only --root, --data-interface and --log-level apply")
	return cmd
}

func serveUntilDone(ctx context.Context, srv *server.Server, ln net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.Shutdown(shut)
	return nil
}

// sizeFlag reads a size flag that, like noLimit's, takes 0 for no limit.
func sizeFlag(name, value string) (int64, error) {
	n, err := parseSize(value)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return noLimit(n), nil
}

// noLimit turns a limit flag's 0, "no limit", into the server field's -1
// (a field's 0 is its default).
func noLimit[T int | int64](n T) T {
	if n == 0 {
		return -1
	}
	return n
}

func parsePortRange(s string) (lo, hi int, err error) {
	a, b, ok := strings.Cut(s, "-")
	lo, err1 := strconv.Atoi(a)
	hi, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || lo < 1 || hi > 65535 || lo > hi {
		return 0, 0, fmt.Errorf("--port-range %q: expected LO-HI within 1-65535", s)
	}
	return lo, hi, nil
}

func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}

// gsiServer is the GSI side of a server: the host credential, the CAs it
// trusts and the grid-mapfile, read again at each login so that an edit
// takes effect at once.
func gsiServer(certFile, keyFile, caDir, crlDir, gridmap string, log *slog.Logger) (*server.GSI, error) {
	cred, err := gsi.ReadCertKey(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("--gsi: %w", err)
	}
	trust, err := gsi.LoadCADir(caDir)
	if err != nil {
		return nil, fmt.Errorf("--gsi: --ca-dir: %w", err)
	}
	if crlDir != "" {
		if trust, err = trust.WithCRLDir(crlDir); err != nil {
			return nil, fmt.Errorf("--gsi: --crl-dir: %w", err)
		}
	}
	for _, p := range trust.Problems {
		log.Warn("CA directory: a file left out", "problem", p)
	}
	if _, err := gsi.ReadGridmap(gridmap); err != nil {
		return nil, fmt.Errorf("--gsi: --gridmap: %w", err)
	}
	return &server.GSI{
		Credential: cred.TLSCertificate(),
		Verify: func(chain []*x509.Certificate) (string, error) {
			id, err := trust.Verify(chain, time.Now())
			if err != nil {
				return "", err
			}
			return id.DN, nil
		},
		Map: func(dn, want string) (string, bool) {
			gm, err := gsi.ReadGridmap(gridmap)
			if err != nil {
				log.Error("grid-mapfile unreadable: GSI logins refused", "err", err)
				return "", false
			}
			users := gm.Users(dn)
			if len(users) == 0 {
				return "", false
			}
			if want == "" || want == ":globus-mapping:" {
				return users[0], true
			}
			return want, slices.Contains(users, want)
		},
		NewRequest: func(peer *x509.Certificate) ([]byte, crypto.Signer, error) {
			bits := 2048
			if k, ok := peer.PublicKey.(*rsa.PublicKey); ok {
				bits = k.N.BitLen() // as GCT: the delegated key as strong as the peer's
			}
			return gsi.NewRequest(bits)
		},
	}, nil
}

// serveStdio serves one sshftp session on stdin and stdout (--stdio).
func serveStdio(root, logLevel, dataIf string) error {
	log, err := newLogger(logLevel)
	if err != nil {
		return err
	}
	if root == "" {
		if root, err = os.UserHomeDir(); err != nil {
			return fmt.Errorf("--root not given and no home directory: %w", err)
		}
	}
	fs, err := posix.New(root)
	if err != nil {
		return err
	}
	conn, err := sshftp.Stdio(os.Getenv)
	if err != nil {
		return err
	}
	// The SSH login is the authentication, so every session is its
	// user's, and one at a time: no limits, no throttle to trip.
	srv := &server.Server{FS: fs, Auth: anyLogin{}, MaxSessionsPerAddress: -1, Layers: layers(), Logger: log}
	if srv.DataInterface, err = dataInterface(dataIf); err != nil {
		return err
	}
	log.Info("serving sshftp session", "root", root, "client", conn.RemoteAddr().String())
	return srv.ServeConn(conn)
}

// dataInterface reads --data-interface; "" is the invalid address, which
// means the control connection's.
func dataInterface(s string) (netip.Addr, error) {
	if s == "" {
		return netip.Addr{}, nil
	}
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return ip, fmt.Errorf("--data-interface: %w", err)
	}
	return ip, nil
}

// anyLogin accepts every USER and PASS: the SSH login already
// authenticated the user, as GCT's -ssh mode does.
type anyLogin struct{}

func (anyLogin) Check(string, string) bool { return true }
