package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"ferry/engine"
	"ferry/gridftp"
	"ferry/gridftp/client"
	"ferry/gridftp/server"
	"ferry/internal/plural"
	"ferry/internal/synclevel"
	"ferry/sshftp"
	"ferry/storage/posix"
)

func newCopyCmd() *cobra.Command {
	var (
		o                        engine.Options
		syncLevel, chunk, until  string
		tar                      string
		quiet, noVerify, verbose bool
		mc                       string
		via                      []string
		creds                    proxies
	)
	cmd := &cobra.Command{
		Use:   "copy [flags] SRC DST [DST...]",
		Short: "Copy files between GridFTP endpoints and local paths, verified, with no service",
		Long: `Copy SRC to DST directly, like globus-url-copy: each is ftp://[user[:pass]@]host[:port]/path,
gsiftp://, sshftp://[user@]host[:port]/path (ssh runs the remote's GridFTP server, as for
globus-url-copy; $FERRY_SSH_COMMAND replaces "ssh", $FERRY_REMOTE_SSHFTP or
$GLOBUS_REMOTE_SSHFTP the remote command) or a local path. Transfers between two servers are third-party: data flows server to
server. Directories need -r; a DST ending in / receives SRC under its own name.

ferry chooses concurrency, parallel streams, pipelining and chunk size itself from
the file mix and the round trip; the flags override it. Failed files are retried
with backoff; the exit status is 0 only when every file arrived intact.

With several destinations (DST arguments, or --mc FILE with a URL per line), the
source sends each file once: the nearest destination whose ferry server forwards
(ferry gridftp --multicast) writes it and passes every block on at once through a
chain or tree of the others (--fanout); each hop checks its children's copies.
Destinations the tree missed are then repaired from a verified copy, and servers
that cannot forward get ordinary copies.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if noVerify {
				if cmd.Flags().Changed("verify-checksum") && o.Verify {
					return usagef("--verify-checksum and --no-verify-checksum: give one")
				}
				o.Verify = false
			}
			if o.SyncLevel, err = synclevel.Parse(syncLevel); err != nil {
				return err
			}
			if o.Tar, err = engine.ParseTarMode(tar); err != nil {
				return fmt.Errorf("--tar: %w", err)
			}
			if chunk != "" {
				if o.ChunkSize, err = parseChunkSize(chunk); err != nil {
					return err
				}
			}
			if until != "" {
				if o.Deadline, err = parseDeadline(until, time.Now()); err != nil {
					return fmt.Errorf("--deadline: %w", err)
				}
			}
			dsts := args[1:]
			if mc != "" {
				more, err := readMC(mc)
				if err != nil {
					return err
				}
				dsts = append(dsts, more...)
			}
			if len(dsts) == 0 {
				return errors.New("no destination: give DST or --mc FILE")
			}
			routes, err := parseVia(via)
			if err != nil {
				return err
			}
			return runCopy(cmd.Context(), args[0], dsts, routes, creds, o, cmd.ErrOrStderr(), quiet, verbose)
		},
	}
	f := cmd.Flags()
	f.IntVarP(&o.Parallelism, "parallelism", "p", 0, "data streams per file (default: chosen)")
	f.IntVar(&o.Concurrency, "cc", 0, "concurrent session pairs (default: chosen)")
	f.IntVar(&o.Pipelining, "pp", 0, "files in flight per session pair (default: chosen, also for -pp alone, as in globus-url-copy)")
	f.BoolVarP(&o.Recursive, "recursive", "r", false, "copy directories and their contents")
	f.StringVarP(&syncLevel, "sync-level", "s", "", synclevel.Usage)
	f.BoolVar(&o.Verify, "verify-checksum", false, "compare checksums at both ends (per chunk for large files; default off, as globus-url-copy's -verify-checksum, where ferry transfer's tasks verify by default)")
	f.BoolVar(&noVerify, "no-verify-checksum", false, "do not compare checksums (the default here; as in ferry transfer)")
	f.StringVar(&o.Algorithm, "checksum-algorithm", "", "MD5, ADLER32, SHA1, SHA256, SHA512, CRC32C or XXH128 (default: the fastest both ends have)")
	f.StringVar(&chunk, "chunk-size", "", "split files larger than twice this across sessions, e.g. 256M (0: never; default: chosen)")
	f.StringVar(&until, "deadline", "", "retry until then: a duration (2h) or an RFC 3339 time (default: none, each file is tried 5 times)")
	f.DurationVar(&o.StallTimeout, "stall-timeout", 0, "end and retry a transfer whose data moves not at all for this long, from what arrived (default: the longer of 15s and 100 round trips; negative: never)")
	f.BoolVar(&o.PreserveMtime, "preserve-timestamp", false, "give copies the source's modification time (as ferry transfer's)")
	f.BoolVar(&o.PreserveMtime, "preserve-mtime", false, "the old name of --preserve-timestamp")
	f.MarkDeprecated("preserve-mtime", "use --preserve-timestamp, as ferry transfer does")
	f.BoolVar(&o.Encrypt, "encrypt", false, "encrypt the data channels (globus-url-copy's -dcpriv); both ends must be ferry servers, whose data channels are always authenticated")
	f.BoolVar(&o.Compress, "compress", false, "compress data in flight (zstd) where both ends are ferry servers; worth it only when the link, not the CPU, is the limit")
	f.BoolVar(&o.SkipSourceErrors, "skip-source-errors", false, "skip source files and directories that are missing or not readable when the copy reaches them, "+
		"instead of failing (as ferry transfer's); each is reported, and the exit status stays 0; default off")
	f.BoolVar(&o.DeleteExtra, "delete-destination-extra", false, "with -r, delete destination files and directories the source does not have "+
		"(as ferry transfer's); -v names each, the summary counts them; a destination that holds the source is refused")
	f.BoolVar(&o.InPlace, "inplace", false, "write each file under its final name as it arrives, for destinations that cannot rename (default: under a temporary name, .ferry-<hash>.part in its directory, renamed once the file is whole and verified)")
	f.StringVar(&tar, "tar", "auto", "move trees of small files as tar streams: auto (when the file mix favours it), always or never")
	f.BoolVarP(&quiet, "quiet", "q", false, "no progress bar")
	f.BoolVarP(&verbose, "verbose", "v", false, "say which settings the tuner chose and why, each change its optimizer makes, and each path deleted")
	f.StringVar(&mc, "mc", "", "more destinations, a URL per line (globus-url-copy's -MC file)")
	f.StringArrayVar(&via, "via", nil, "HOST[:PORT]=URL: reach destinations on HOST through the ferry server at URL (a head node in front of a private network), which forwards and writes nothing; repeatable")
	f.StringVar(&creds.src, "src-cred", "", "the grid proxy for a gsiftp:// source (default: $X509_USER_PROXY or /tmp/x509up_u<uid>)")
	f.StringVar(&creds.dst, "dst-cred", "", "the grid proxy for gsiftp:// destinations (default: as --src-cred); proxies of different identities at the two ends get a data channel credential of the copy's making (DCSC)")
	f.IntVar(&o.Fanout, "fanout", 0, "with several destinations: servers each one forwards to (1: a chain; default: chosen)")
	return cmd
}

// globusStyle rewrites globus-url-copy's one-dash long flags (-cc, -pp) to
// the two-dash form the flag parser expects. globus-url-copy's -pp is a
// switch, and ferry always pipelines: -pp (or --pp) without a number after
// it is dropped, which leaves the depth to ferry; -pp N sets it.
func globusStyle(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return append(out, args[i:]...)
		case a == "-pp" || a == "--pp":
			if i+1 < len(args) && isNumber(args[i+1]) {
				out = append(out, "--pp", args[i+1])
				i++
			}
		case a == "-cc" || strings.HasPrefix(a, "-cc=") || strings.HasPrefix(a, "-pp="):
			out = append(out, "-"+a)
		case a == "-dcpriv":
			out = append(out, "--encrypt")
		default:
			out = append(out, a)
		}
	}
	return out
}

// isNumber reports a non-empty string of decimal digits.
func isNumber(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// place is one side of a copy: an endpoint and a path on it.
type place struct {
	ep    engine.Endpoint
	path  string
	local string // the directory served, for a local path
}

// anonymousHint adds to a refused login at an ftp:// end whose URL names
// no user that the login was anonymous, and how to give a user.
func anonymousHint(err error, src place, dsts []place) error {
	he, ok := errors.AsType[*client.HandshakeError](err)
	if !ok || he.Stage != client.StageLogin {
		return err
	}
	for _, p := range append([]place{src}, dsts...) {
		if p.ep.Addr == he.Addr && p.ep.User == "" && p.ep.Auth == nil && p.ep.Dial == nil {
			return fmt.Errorf("%w (logged in as anonymous: the URL names no user; give one as ftp://USER:PASSWORD@%s/PATH)", err, he.Addr)
		}
	}
	return err
}

// proxies are the grid proxies of gsiftp:// ends; "" means the default.
type proxies struct{ src, dst string }

// parsePlace reads a URL or a local path; a gsiftp:// URL logs in with
// the grid proxy at proxy ("": the default).
func parsePlace(s, proxy string) (place, error) {
	if !strings.Contains(s, "://") {
		abs, err := filepath.Abs(s)
		if err != nil {
			return place{}, err
		}
		if strings.HasSuffix(s, "/") {
			return place{local: abs, path: "/"}, nil
		}
		return place{local: filepath.Dir(abs), path: "/" + filepath.Base(abs)}, nil
	}
	shown := gridftp.Redact(s) // the place as errors name it
	u, err := gridftp.Parse(s)
	var se *gridftp.SchemeError
	if errors.As(err, &se) {
		return place{}, fmt.Errorf("%s: %w, or a local path", shown, err)
	}
	if err != nil {
		return place{}, fmt.Errorf("%s: %w", shown, err)
	}
	p := cmp.Or(u.Path, "/")
	ep := engine.Endpoint{Addr: u.Addr(), User: u.User.Username()}
	ep.Password, _ = u.User.Password()
	if u.SSH() {
		// The user is ssh's; the session on the far side accepts any
		// login, and logs in anonymously as globus-url-copy's does.
		if ep.Password != "" {
			return place{}, fmt.Errorf("%s: sshftp:// takes no password: ssh logs in with keys (or an agent)", shown)
		}
		ep.Dial = sshDialer(ep.User, os.Getenv).Dial
		ep.User, ep.Password = "", ""
	}
	if u.GSI() {
		login, err := gridLogin(u.Host, ep.User, proxy)
		if err != nil {
			return place{}, fmt.Errorf("%s: %w", shown, err)
		}
		ep.Auth = login
	}
	return place{ep: ep, path: p}, nil
}

// sshDialer is how sshftp:// URLs reach their host: ssh, or the command
// line in $FERRY_SSH_COMMAND (split at spaces, no shell), runs the remote
// command in $FERRY_REMOTE_SSHFTP, else $GLOBUS_REMOTE_SSHFTP, else GCT's
// lookup of ~/.globus/sshftp and /etc/grid-security/sshftp.
func sshDialer(user string, getenv func(string) string) sshftp.Dialer {
	return sshftp.Dialer{
		Command: strings.Fields(getenv("FERRY_SSH_COMMAND")),
		User:    user,
		Remote:  cmp.Or(getenv("FERRY_REMOTE_SSHFTP"), getenv("GLOBUS_REMOTE_SSHFTP")),
	}
}

// serveLocal starts an endpoint server over a local directory for the
// length of the copy. It listens on loopback and takes only a random
// one-time password, so no other local user can reach the tree through it.
// Its data connections use the address that reaches peer; when peer logs
// in with the user's grid proxy (gsiftp://), they present that proxy too,
// so that the data channel between them is authenticated as
// globus-url-copy's own is.
func serveLocal(ctx context.Context, pl *place, peer engine.Endpoint) (stop func(), err error) {
	if err := os.MkdirAll(pl.local, 0o755); err != nil {
		return nil, err
	}
	fs, err := posix.New(pl.local)
	if err != nil {
		return nil, err
	}
	secret := make([]byte, 16)
	rand.Read(secret)
	pl.ep.User, pl.ep.Password = "ferry", hex.EncodeToString(secret)
	// Every session is the copy's own, from loopback, over the user's own
	// files: no per-address limit, no limit on their size or holes.
	srv := &server.Server{FS: fs, Auth: oneLogin{pl.ep.User, pl.ep.Password},
		MaxSessionsPerAddress: -1, MaxFileSize: -1, ChecksumHoles: -1, Layers: layers()}
	if ip := dataAddrFor(peer.Addr); ip.IsValid() {
		srv.DataInterface = ip
	}
	if g, ok := peer.Auth.(client.GSILogin); ok && g.DataCred != nil {
		srv.DataCred, pl.ep.DataIdentity = g.DataCred, g.Identity
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	pl.ep.Addr, pl.ep.Local = ln.Addr().String(), true
	go srv.Serve(ln)
	return func() { srv.Close() }, nil
}

// gridPeer is the destination a local source serves: the first that logs
// in with a grid proxy, else the first.
func gridPeer(dsts []place) engine.Endpoint {
	for _, d := range dsts {
		if _, ok := d.ep.Auth.(client.GSILogin); ok {
			return d.ep
		}
	}
	return dsts[0].ep
}

// dataAddrFor is the local address that reaches peer ("host:port"); for a
// loopback peer, loopback. No packet is sent.
func dataAddrFor(peer string) netip.Addr {
	if peer == "" {
		return netip.AddrFrom4([4]byte{127, 0, 0, 1})
	}
	c, err := net.Dial("udp", peer)
	if err != nil {
		return netip.Addr{}
	}
	defer c.Close()
	ap, err := netip.ParseAddrPort(c.LocalAddr().String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

type oneLogin struct{ user, pass string }

func (o oneLogin) Check(user, pass string) bool { return user == o.user && pass == o.pass }

// parseVia reads --via HOST[:PORT]=URL flags: destinations at HOST (port
// 21 when none is given) are reached through the server at URL.
func parseVia(flags []string) (map[string]engine.Endpoint, error) {
	routes := map[string]engine.Endpoint{}
	for _, f := range flags {
		host, head, ok := strings.Cut(f, "=")
		if !ok || host == "" || !strings.Contains(head, "://") {
			return nil, fmt.Errorf("--via %q: want HOST[:PORT]=ftp://head[:port]", f)
		}
		pl, err := parsePlace(head, "")
		if err != nil {
			return nil, fmt.Errorf("--via: %w", err)
		}
		if _, _, err := net.SplitHostPort(host); err != nil {
			host = net.JoinHostPort(host, gridftp.DefaultPort(gridftp.FTP))
		}
		routes[host] = pl.ep
	}
	return routes, nil
}

func runCopy(ctx context.Context, srcArg string, dstArgs []string, via map[string]engine.Endpoint, creds proxies, o engine.Options, out io.Writer, quiet, verbose bool) error {
	src, err := parsePlace(srcArg, creds.src)
	if err != nil {
		return err
	}
	dsts := make([]place, len(dstArgs))
	for i, a := range dstArgs {
		if dsts[i], err = parsePlace(a, creds.dst); err != nil {
			return err
		}
	}
	if src.local != "" {
		if _, err := os.Stat(filepath.Join(src.local, filepath.FromSlash(src.path))); err != nil {
			return fmt.Errorf("source: %w", err)
		}
		stop, err := serveLocal(ctx, &src, gridPeer(dsts))
		if err != nil {
			return err
		}
		defer stop()
	}
	for i := range dsts {
		if dsts[i].local != "" {
			stop, err := serveLocal(ctx, &dsts[i], src.ep)
			if err != nil {
				return err
			}
			defer stop()
		}
	}
	targets := make([]engine.Target, len(dsts))
	for i, dst := range dsts {
		if strings.HasSuffix(dstArgs[i], "/") && !strings.HasSuffix(dst.path, "/") {
			dst.path += "/"
		}
		if o.Recursive && strings.HasSuffix(dst.path, "/") && !strings.HasSuffix(srcArg, "/") {
			dst.path = path.Join(dst.path, path.Base(src.path)) // DST/ receives SRC by name
		}
		targets[i] = engine.Target{Endpoint: dst.ep, Items: []engine.Item{{Src: src.path, Dst: dst.path}}}
		if head, ok := via[dst.ep.Addr]; ok {
			targets[i].Via = &head
		}
	}
	one := len(targets) == 1 && targets[0].Via == nil
	if o.SkipSourceErrors && !one {
		return usagef("--skip-source-errors: with one destination only, reached directly (not through --via)")
	}
	bar := newProgress(out, !quiet && isTerminal(out, false))
	bar.verbose = verbose
	if one {
		res, err := engine.Copy(ctx, src.ep, targets[0].Endpoint, targets[0].Items, o, bar)
		bar.stop()
		bar.partial(res.Partial)
		if err != nil {
			return anonymousHint(err, src, dsts)
		}
		bar.summary(res)
		if res.Failed > 0 {
			return fmt.Errorf("%d of %s failed", res.Failed, plural.Count(res.Files, "file"))
		}
		return nil
	}
	res, err := engine.CopyMany(ctx, src.ep, targets, o, bar)
	bar.stop()
	bar.partial(res.Partial)
	if err != nil {
		return anonymousHint(err, src, dsts)
	}
	bar.summary(res.Result)
	bar.destinations(res, dstArgs)
	if res.Failed > 0 {
		return fmt.Errorf("%d of %s did not reach every destination", res.Failed, plural.Count(res.Files, "file"))
	}
	return nil
}

// readMC reads a multicast file in globus-url-copy's -MC format: a
// destination URL per line. Unlike globus-url-copy, a blank line does not
// end the list; lines starting with # are comments. A URL's "?options"
// (globus-url-copy's per-hop driver options) are refused: ferry builds
// the tree itself (--fanout).
func readMC(name string) ([]string, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("--mc: %w", err)
	}
	var out []string
	for n, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if strings.Contains(l, "?") {
			return nil, fmt.Errorf("--mc %s line %d: per-hop options (%q) are globus-url-copy's; ferry builds the tree itself (see --fanout)", name, n+1, l[strings.Index(l, "?"):])
		}
		out = append(out, l)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--mc %s: no destination in it", name)
	}
	return out, nil
}

// isTerminal reports whether w is a terminal: told (the SSH gateway
// knows its client has one), or a character device.
func isTerminal(w io.Writer, told bool) bool {
	if told {
		return true
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progress is the Reporter of ferry copy: a one-line bar on a terminal, a
// summary at the end, a line per failure.
type progress struct {
	*bar
	files, done  atomic.Int64
	bytes, moved atomic.Int64
	start        time.Time
	verbose      bool // say the tuner's choices (Started, Tuned) and each deletion
}

func newProgress(out io.Writer, live bool) *progress {
	p := &progress{start: time.Now()}
	p.bar = startBar(out, live, p.state)
	return p
}

// state is what the bar shows.
func (p *progress) state() barState {
	el := time.Since(p.start)
	moved := p.moved.Load()
	return barState{Done: p.done.Load(), Files: p.files.Load(), Moved: moved, Bytes: p.bytes.Load(),
		Rate: float64(moved) / max(el.Seconds(), 1e-3), Elapsed: el}
}

func (p *progress) Planned(files int, bytes int64) {
	p.files.Add(int64(files))
	p.bytes.Add(bytes)
}
func (p *progress) Progress(d int64) { p.moved.Add(d) }
func (p *progress) Fault(path string, err error, retry time.Duration) {
	p.line(fmt.Sprintf("retrying %s in %v: %v", path, retry.Round(time.Millisecond), err))
}

// Started says, with -v, the settings the tuner chose and why.
func (p *progress) Started(s engine.Settings) {
	if p.verbose {
		chunks := "no chunks"
		if s.ChunkSize > 0 {
			chunks = "chunks of " + plural.Bytes(s.ChunkSize)
		}
		p.line(fmt.Sprintf("tuner: --cc %d -p %d --pp %d, %s: %s", s.Concurrency, s.Parallelism, s.Pipelining, chunks, s.Why))
	}
}

// Tuned says, with -v, each change of the optimizer.
func (p *progress) Tuned(from, to int, prev, cur float64) {
	if p.verbose {
		p.line("tuner: " + engine.TuneNote(from, to, prev, cur))
	}
}

var _ engine.Deleter = (*progress)(nil)

// Deleted names, with -v, each path deleted at a destination because the
// source does not have it (--delete-destination-extra).
func (p *progress) Deleted(d engine.Deletion) {
	if p.verbose {
		if d.Dir {
			d.Path += "/"
		}
		p.line("DELETED " + d.Path)
	}
}

func (p *progress) Done(r engine.FileResult) {
	p.done.Add(1)
	switch r.Outcome {
	case engine.Failed:
		p.line(fmt.Sprintf("FAILED %s: %s", r.Src, gridftp.Told(r.Err)))
	case engine.SkippedError:
		p.line(fmt.Sprintf("SKIPPED %s: %s", r.Src, gridftp.Told(r.Err)))
	}
}

// destinations prints a line per destination of a multi-destination copy.
func (p *progress) destinations(r engine.MultiResult, args []string) {
	names := make([]string, len(args))
	for i, a := range args {
		names[i] = gridftp.Redact(a)
	}
	switch {
	case r.Head < 0:
		fmt.Fprintln(p.out, "tree: none (no destination's server forwards: ferry gridftp --multicast); copied to each")
	case r.Fanout == 0:
		fmt.Fprintf(p.out, "tree: none; %s received from the source, the others were copied to\n", names[r.Head])
	case r.Fanout == r.FanoutSmall:
		fmt.Fprintf(p.out, "tree: %s received from the source and forwarded, fan-out %d\n", names[r.Head], r.Fanout)
	default:
		fmt.Fprintf(p.out, "tree: %s received from the source and forwarded, fan-out %d (%d for small files)\n", names[r.Head], r.Fanout, r.FanoutSmall)
	}
	for i, d := range r.Dests {
		fmt.Fprintf(p.out, "  %s: %d delivered (%d repaired), %d skipped, %d failed\n", names[i], d.Delivered, d.Repaired, d.Skipped, d.Failed)
		for _, f := range d.FailedFiles {
			fmt.Fprintf(p.out, "    FAILED %s: %s\n", f.Dst, gridftp.Told(f.Err))
		}
	}
}

// partial says which temporary files a canceled or interrupted copy left
// for the same command to resume from.
func (p *progress) partial(paths []string) {
	if len(paths) == 0 {
		return
	}
	if p.verbose {
		for _, t := range paths {
			fmt.Fprintf(p.out, "PARTIAL %s\n", t)
		}
	}
	fmt.Fprintf(p.out, "%s kept as .ferry-*.part; run the same command again to resume\n", plural.Count(len(paths), "partial file"))
}

// summary says how the copy was done (the settings, tar batches), then
// what it did, last.
func (p *progress) summary(r engine.Result) {
	s := r.Settings
	chunks := "no chunks"
	if s.ChunkSize > 0 {
		chunks = "chunks " + plural.Bytes(s.ChunkSize)
	}
	fmt.Fprintf(p.out, "settings: --cc %d -p %d --pp %d, %s, rtt %v%s%s%s\n", s.Concurrency, s.Parallelism, s.Pipelining,
		chunks, s.RTT.Round(time.Microsecond), checksumNote(s), dataNote(s), wayNote(s)+growNote(s))
	if s.TarReason != "" {
		fmt.Fprintf(p.out, "tar: %s", s.TarReason)
		if s.Batches > 0 {
			fmt.Fprintf(p.out, " (%s)", plural.Count(s.Batches, "batch"))
		}
		fmt.Fprintln(p.out)
	}
	secs := max(r.Elapsed.Seconds(), 1e-3)
	skipped := fmt.Sprint(r.Skipped)
	if r.SkippedErrors > 0 {
		skipped += ", " + plural.Count(r.SkippedErrors, "source error")
	}
	fmt.Fprintf(p.out, "%s: %d transferred, %s skipped, %d failed; %s in %v (%s/s, %s/s); %s\n",
		plural.Count(r.Files, "file"), r.Transferred, skipped, r.Failed, plural.Bytes(r.Bytes), r.Elapsed.Round(time.Millisecond),
		plural.Bytes(int64(float64(r.Bytes)/secs)), plural.Count(int64(math.Round(float64(r.Transferred)/secs)), "file"),
		plural.Count(r.Faults, "fault"))
	if r.Deleted > 0 {
		fmt.Fprintf(p.out, "deleted %s at the destination that the source does not have\n", plural.Count(r.Deleted, "path"))
	}
}

// growNote says how many streams a pair's source could grow to.
func growNote(s engine.Settings) string {
	if s.MaxParallel <= s.Parallelism {
		return ""
	}
	return fmt.Sprintf(", streams may grow to %d a pair", s.MaxParallel)
}

// wayNote says how large files moved when not over one session pair.
func wayNote(s engine.Settings) string {
	switch s.Way {
	case engine.WayStriped:
		return ", large files striped over " + plural.Count(s.Stripes, "mover")
	case engine.WaySpread:
		return ", large files spread over the endpoints' servers"
	}
	return ""
}

// dataNote says how the data channels are protected and whether data
// moves compressed, for the settings line.
func dataNote(s engine.Settings) string {
	var note string
	switch {
	case s.Encrypted:
		note = ", data channels authenticated and encrypted"
	case s.Authenticated:
		note = ", data channels authenticated"
	}
	switch {
	case s.Compressed:
		note += ", compressed (zstd)"
	case s.CompressNote != "":
		note += ", " + s.CompressNote
	}
	return note
}

// checksumNote says how files are verified, for the settings line.
func checksumNote(s engine.Settings) string {
	switch {
	case s.Algorithm == "":
		return ""
	case s.Live:
		return ", checksum " + s.Algorithm + " (live, while data moves)"
	}
	return ", checksum " + s.Algorithm
}

// parseSize reads 1048576, 64K, 256M, 1G, 2T.
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(strings.ToUpper(strings.TrimSuffix(strings.TrimSuffix(s, "B"), "i")))
	mult := int64(1)
	if n := len(s); n > 0 {
		if i := strings.IndexByte("KMGT", s[n-1]); i >= 0 {
			mult = 1 << (10 * (i + 1))
			s = s[:n-1]
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 || v > (1<<62)/mult {
		return 0, errors.New("want a size such as 268435456, 256M or 1G")
	}
	return v * mult, nil
}

// parseDeadline reads a duration from now or an RFC 3339 time.
func parseDeadline(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, errors.New("want a duration (90m, 2h) or an RFC 3339 time")
	}
	return t, nil
}

// parseChunkSize reads --chunk-size, where 0 means never: the engine's
// "never" is negative, its 0 is "chosen".
func parseChunkSize(s string) (int64, error) {
	n, err := parseSize(s)
	if err != nil {
		return 0, fmt.Errorf("--chunk-size: %w", err)
	}
	if n == 0 {
		return -1, nil
	}
	return n, nil
}
