package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"ferry/connect/mesh"
	"ferry/connect/tunnel"
	"ferry/gsi"
	"ferry/internal/netpolicy"
	"ferry/service/core"
	"ferry/service/domain"
	"ferry/service/gridops"
	"ferry/service/httpapi"
	"ferry/service/notify"
	"ferry/service/secret"
	"ferry/service/worker"
	"ferry/web"
)

// serverFlags are ferry server's settings.
type serverFlags struct {
	store                     storeFlags
	relay                     relayFlags
	ssh                       sshFlags
	listen, keyFile, logLevel string
	endpointNetworks          string
	gsiCADir                  string
	gsiCRLDir                 string
	workerID, publicURL       string
	smtpAddr, smtpFrom        string
	webhook, webhookSecret    string
	tasks, perUser            int
	noWorker                  bool
	lease, defaultDeadline    time.Duration
	endpointTimeout           time.Duration
}

func newServerCmd() *cobra.Command {
	var f serverFlags
	cmd := &cobra.Command{
		Use:   "server --data DIR [--listen HOST:PORT] [--db postgres://...]",
		Short: "Run the managed transfer service: REST API, web app and workers",
		Long: `Run the service. State lives in a SQLite file under --data, or in PostgreSQL
when --db gives a DSN; several ferry server processes on one PostgreSQL share
all work (give them the same --key-file). Add users with "ferry user add".

The service never carries data: its workers drive third-party transfers
between the endpoints' GridFTP servers. Each process also runs a relay for
connect endpoints (ferry connect), on the API's port (or on --relay-listen):
their agents accept no connections, so it carries the data they receive
from senders that cannot listen for them, and between agents. Any process
drives any agent, through the process it is connected to; an agent whose
process stops connects to another. Stop with SIGTERM or Ctrl-C; running
tasks go back to the queue and continue in another process or at restart.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runServer(cmd.Context(), cmd, f) },
	}
	f.store.register(cmd)
	f.relay.register(cmd)
	f.ssh.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.listen, "listen", "127.0.0.1:8080", "HTTP address of the API and web app")
	fl.StringVar(&f.endpointNetworks, "endpoint-networks", "", "the networks endpoints' servers may be in: CIDR prefixes or addresses, comma-separated, ! before one to refuse it (default: any address but link-local, cloud metadata, unspecified, multicast and reserved ones, and loopback unless --listen is on loopback; those stay refused unless named)")
	fl.StringVar(&f.gsiCADir, "gsi-ca-dir", "", "the grid CAs (an OpenSSL hashed directory) that gsi endpoints' servers and MyProxy servers are checked against (default $X509_CERT_DIR, else /etc/grid-security/certificates; without it gsi endpoints cannot be used); it is read again when its files change, as fetch-crl renews the CRLs in it")
	fl.StringVar(&f.gsiCRLDir, "gsi-crl-dir", "", "CRLs (<hash>.r0 files) kept apart from --gsi-ca-dir, read again when they change")
	fl.StringVar(&f.keyFile, "key-file", "", "key sealing endpoint credentials (default DIR/secret.key; created if missing)")
	fl.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fl.StringVar(&f.workerID, "worker-id", "", "this process's name, unique among the processes of one database, for the leases of its tasks and the agents connected to it; a process restarted under it takes back its running tasks at once (default HOST/LISTEN-ADDRESS)")
	fl.StringVar(&f.publicURL, "public-url", "", "this process's URL as users, agents and the other processes reach it: links in notifications, its relay, the origin the web app logs in from behind a proxy; https:// makes the web session cookie Secure (default: http://--listen)")
	fl.StringVar(&f.smtpAddr, "smtp", "", "SMTP server HOST:PORT for email notifications")
	fl.StringVar(&f.smtpFrom, "smtp-from", "ferry@localhost", "sender of email notifications")
	fl.StringVar(&f.webhook, "webhook", "", "URL that receives a JSON POST when a task ends or goes INACTIVE")
	fl.StringVar(&f.webhookSecret, "webhook-secret", "", "sign webhook posts with HMAC-SHA256 under this secret")
	fl.IntVar(&f.tasks, "tasks", 16, "tasks this process runs at once")
	fl.IntVar(&f.perUser, "per-user", 3, "active tasks per user across all processes; more wait queued, users taking turns (0: no limit)")
	fl.BoolVar(&f.noWorker, "no-worker", false, "serve the API only; run no tasks")
	fl.DurationVar(&f.lease, "lease", time.Minute, "how long a task stays claimed, and agents connected, by a process that stops heartbeating")
	fl.DurationVar(&f.defaultDeadline, "default-deadline", 24*time.Hour, "deadline of tasks submitted without one")
	fl.DurationVar(&f.endpointTimeout, "endpoint-timeout", gridops.DefaultTimeout, "how long ls, mkdir, rename, activation and rm's deletions wait for an endpoint's server to connect and to answer each command (ls, mkdir and rename then answer 504)")
	return cmd
}

func runServer(ctx context.Context, cmd *cobra.Command, f serverFlags) error {
	log, err := newLogger(f.logLevel)
	if err != nil {
		return err
	}
	st, err := f.store.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	if f.keyFile == "" {
		f.keyFile = filepath.Join(f.store.data, "secret.key")
	}
	box, err := secret.LoadOrCreate(f.keyFile)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return err
	}
	// Loopback endpoints are the embedded demo's, on one machine with the
	// service; a service that others reach must not reach its own host's
	// loopback services for them.
	local := false
	if ap, err := netip.ParseAddrPort(ln.Addr().String()); err == nil {
		local = ap.Addr().IsLoopback()
	}
	nets, err := netpolicy.New(f.endpointNetworks, local)
	if err != nil {
		ln.Close()
		return fmt.Errorf("--endpoint-networks: %w", err)
	}
	trust, err := gsiTrust(cmd, f.gsiCADir, f.gsiCRLDir, log)
	if err != nil {
		ln.Close()
		return err
	}
	ops := &gridops.Ops{Networks: nets, Trust: trust, Timeout: f.endpointTimeout}
	if f.workerID == "" {
		// One process at a time listens on an address of a host: a process
		// restarted there takes back its tasks at once (worker.Reclaim).
		host, _ := os.Hostname()
		f.workerID = host + "/" + ln.Addr().String()
	}
	base := f.publicURL
	if base == "" {
		base = "http://" + ln.Addr().String()
	}
	w := &worker.Worker{
		Store: st, Box: box, Ops: ops, ID: f.workerID, Logger: log.With("worker", f.workerID),
		Tasks: f.tasks, PerUser: f.perUser, Lease: f.lease, Networks: nets, Trust: trust,
		Notify: notifier(f, base),
	}
	reg.MustRegister(w.Collector())
	svc := &core.Service{
		Store: st, Ops: ops, Box: box, Logger: log,
		DefaultDeadline: f.defaultDeadline, Networks: nets, Trust: trust,
	}
	if !f.noWorker {
		svc.Queued = w.Wake
	}
	api := &httpapi.Server{
		Auth: svc, Users: svc, Endpoints: svc, Activations: svc, Files: svc, Tasks: svc, Bookmarks: svc,
		Logger: log, Registry: reg, PublicURL: f.publicURL,
	}
	// ferry connect: this process's relay, and the mesh through which it
	// reaches the agents connected to the service's other processes.
	c, err := serviceCA(ctx, st, box, f.store.data, log)
	if err != nil {
		return err
	}
	rl, relayURL, err := f.relay.start(st, c, f.workerID, ln, base, log.With("component", "relay"), w.Wake)
	if err != nil {
		return err
	}
	defer rl.Close()
	m := &mesh.Mesh{Store: st, CA: c, Local: rl, Self: domain.Process{ID: f.workerID, RelayURL: relayURL},
		Lease: f.lease, Logger: log.With("component", "mesh")}
	if err := m.Join(ctx); err != nil {
		return err
	}
	ops.Agents, w.Agents = m, m
	svc.Agents, svc.CAPin, svc.Revoked = m, c.Pin(), m.Drop
	api.RelayURL, api.RelayProtocol, api.RelayConn = relayURL, tunnel.Upgrade, rl.ServeUpgraded
	fmt.Fprintf(cmd.ErrOrStderr(), "ferry server: relay for ferry connect agents at %s\n", relayURL)
	// The web app at "/", beside the API and the operator's endpoints.
	mux := http.NewServeMux()
	mux.Handle("/", web.Handler())
	apiHandler := api.Handler()
	for _, p := range []string{"/api/", "/healthz", "/metrics"} {
		mux.Handle(p, apiHandler)
	}
	// Bodies have the API's own deadline (httpapi.Server.BodyTimeout); a
	// connection between requests is closed after IdleTimeout.
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The SSH gateway runs the service commands through the API, as the
	// user who logged in, on this process's own listener.
	if err := f.ssh.start(ctx, svc, svc, filepath.Join(f.store.data, "ssh_host_ed25519_key"), "http://"+selfAddr(ln.Addr()), base,
		log.With("component", "ssh"), cmd.ErrOrStderr()); err != nil {
		return err
	}
	werr := make(chan error, 1)
	if f.noWorker {
		werr <- nil
	} else {
		go func() { werr <- w.Serve(ctx) }()
	}
	merr := make(chan error, 1)
	go func() { merr <- m.Serve(ctx) }()
	herr := make(chan error, 1)
	go func() { herr <- hs.Serve(ln) }()
	log.Info("serving", "url", base, "worker", !f.noWorker, "store", storeName(f.store))
	fmt.Fprintf(cmd.ErrOrStderr(), "ferry server: web app on %s/, API on %s/api/v0.10/ (store: %s)\n", base, base, storeName(f.store))

	select {
	case err = <-herr:
		cancel()
	case <-ctx.Done():
	}
	shut, done := context.WithTimeout(context.Background(), 10*time.Second)
	defer done()
	hs.Shutdown(shut)
	cancel()
	if werr := <-werr; werr != nil && err == nil {
		err = werr
	}
	if merr := <-merr; merr != nil && err == nil {
		err = merr
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// selfAddr is where this process reaches its own listener at addr: on
// loopback when it listens on every address.
func selfAddr(addr net.Addr) string {
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil || !ap.Addr().IsUnspecified() {
		return addr.String()
	}
	lo := netip.IPv6Loopback()
	if ap.Addr().Unmap().Is4() {
		lo = netip.MustParseAddr("127.0.0.1")
	}
	return netip.AddrPortFrom(lo, ap.Port()).String()
}

// notifier builds the configured notifiers; nil when there are none.
func notifier(f serverFlags, base string) worker.Notifier {
	var m notify.Multi
	if f.smtpAddr != "" {
		m = append(m, &notify.SMTP{Addr: f.smtpAddr, From: f.smtpFrom,
			TaskURL: func(id string) string { return base + "/api/v0.10/task/" + id }})
	}
	if f.webhook != "" {
		m = append(m, &notify.Webhook{URL: f.webhook, Secret: f.webhookSecret})
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// storeName says which database a server uses, without its password.
func storeName(s storeFlags) string {
	if s.db == "" {
		return "SQLite " + s.sqlitePath()
	}
	return "PostgreSQL"
}

// gsiTrust loads the grid CAs of --gsi-ca-dir (default: gsi.DefaultCADir)
// and the CRLs of --gsi-crl-dir. A directory named by a flag must load;
// the default may be missing, and then gsi endpoints cannot be used
// (their activations say why).
func gsiTrust(cmd *cobra.Command, dir, crlDir string, log *slog.Logger) (*gsi.Trust, error) {
	named := cmd.Flags().Changed("gsi-ca-dir")
	if !named {
		dir = gsi.DefaultCADir()
	}
	trust, err := gsi.LoadCADir(dir)
	switch {
	case err != nil && named:
		return nil, fmt.Errorf("--gsi-ca-dir: %w", err)
	case err != nil && crlDir != "":
		return nil, fmt.Errorf("--gsi-crl-dir without grid CAs: %w", err)
	case err != nil:
		log.Info("no grid CAs: gsi endpoints cannot be used (set --gsi-ca-dir)", "dir", dir, "err", err)
		return nil, nil
	}
	if crlDir != "" {
		if trust, err = trust.WithCRLDir(crlDir); err != nil {
			return nil, fmt.Errorf("--gsi-crl-dir: %w", err)
		}
	}
	for _, p := range trust.Problems {
		log.Warn("grid CA directory: a file left out", "problem", p)
	}
	log.Info("grid CAs for gsi endpoints", "dir", dir, "cas", len(trust.Roots()))
	return trust, nil
}
