package main

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"ferry/internal/plural"
	"ferry/service/api"
	"ferry/service/domain"
)

// endpointOpts are the flags that describe an endpoint, for add and update.
type endpointOpts struct {
	name, auth, dir, description string
	via                          string
	myproxy, myproxyDN           string
	servers                      []string
	public                       bool
	maxConcurrent                int
}

func (o *endpointOpts) register(f *pflag.FlagSet) {
	f.StringArrayVar(&o.servers, "server", nil, "a GridFTP server (data mover) of the endpoint, ftp://host:port, or gsiftp://host:port for a GSI server; repeat for several")
	f.StringVar(&o.auth, "auth", "", "how users log in to the servers: anonymous (the default), password, or gsi (a grid proxy; the default for gsiftp:// servers)")
	f.StringVar(&o.dir, "default-dir", "", "the directory ls shows when given no path (default /)")
	f.BoolVar(&o.public, "public", false, "let every user of the service see and use it")
	f.IntVar(&o.maxConcurrent, "max-concurrent", 0, "tasks using the endpoint at once; more wait (0: no limit)")
	f.StringVar(&o.description, "description", "", "what the endpoint holds")
	f.StringVar(&o.via, "via", "", "the endpoint (a head node's ferry gridftp --multicast) through which alone this one is reached; "+
		`the service then never connects to it: transfers to it only ("" in update: reached directly)`)
	f.StringVar(&o.myproxy, "myproxy", "", "a gsi endpoint: the MyProxy server, HOST[:PORT] (port 7512 by default), from which the service "+
		`fetches your proxy when you activate with --myproxy-user; endpoints naming one server are activated together ("" in update: none)`)
	f.StringVar(&o.myproxyDN, "myproxy-dn", "", "the MyProxy server's identity (a one-line DN) if its certificate does not name its host")
}

// spec is the endpoint document of the flags set on the command line;
// false if none is.
func (o *endpointOpts) spec(f *pflag.FlagSet) (api.EndpointSpec, bool) {
	var s api.EndpointSpec
	changed := false
	set := func(name string) bool {
		changed = changed || f.Changed(name)
		return f.Changed(name)
	}
	if set("name") {
		s.Name = &o.name
	}
	if set("server") {
		for _, u := range o.servers {
			s.Servers = append(s.Servers, api.Server{URI: u})
		}
	}
	if set("auth") {
		s.AuthMethod = &o.auth
	}
	if set("default-dir") {
		s.DefaultDirectory = &o.dir
	}
	if set("public") {
		s.Public = &o.public
	}
	if set("max-concurrent") {
		s.MaxConcurrent = &o.maxConcurrent
	}
	if set("description") {
		s.Description = &o.description
	}
	if set("via") {
		s.Via = &o.via
	}
	if set("myproxy") {
		s.MyProxyServer = &o.myproxy
	}
	if set("myproxy-dn") {
		s.MyProxyServerDN = &o.myproxyDN
	}
	return s, changed
}

// showEndpoint prints an endpoint document.
// searchEndpoints prints the endpoints q finds: what ferry endpoint list
// and ferry endpoint search show.
func (c *cli) searchEndpoints(cmd *cobra.Command, q api.EndpointQuery) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	l, err := cl.EndpointSearch(cmd.Context(), q)
	if err != nil {
		return err
	}
	return c.table(cmd, l, []string{"NAME", "ID", "AUTH", "ACTIVATED", "SERVERS"}, func(w io.Writer) {
		for _, ep := range l.Data {
			row(w, ep.DisplayName, ep.ID, ep.AuthMethod, activation(ep.Activated, ep.ExpiresIn), serverURIs(ep))
		}
	})
}

func (c *cli) showEndpoint(cmd *cobra.Command, ep api.Endpoint) error {
	return c.print(cmd, ep, func(w io.Writer) { endpointRows(w, ep) })
}

// showEndpointStates prints an endpoint document and the state of its
// servers (and their movers), or why they could not be probed; with
// --json, both documents.
func (c *cli) showEndpointStates(cmd *cobra.Command, ep api.Endpoint, states api.ServerStateList, err error) error {
	doc := struct {
		api.Endpoint
		ServerState *api.ServerStateList `json:"server_state,omitempty"`
	}{Endpoint: ep}
	if err == nil {
		doc.ServerState = &states
	}
	return c.print(cmd, doc, func(w io.Writer) {
		endpointRows(w, ep)
		if err != nil {
			row(w, "Server State:", "unknown: "+err.Error())
			return
		}
		for _, st := range states.Data {
			row(w, "Server "+st.URI+":", serverState(st))
			for _, m := range st.Movers {
				state := "up"
				if !m.Up {
					state = "down: " + m.Reason
				}
				row(w, fmt.Sprintf("  Mover %d:", m.Index), m.Address+" "+state)
			}
		}
	})
}

// serverState says whether a server is up, and striped.
func serverState(st api.ServerState) string {
	switch {
	case !st.Up:
		return "down: " + st.Error
	case len(st.Movers) > 0:
		up := 0
		for _, m := range st.Movers {
			if m.Up {
				up++
			}
		}
		return fmt.Sprintf("up, striped front end: %s, %d of %s up", plural.Count(st.Stripes, "stripe"), up, plural.Count(len(st.Movers), "mover"))
	case st.Stripes > 1:
		return fmt.Sprintf("up, striped: %s (SPAS)", plural.Count(st.Stripes, "stripe"))
	}
	return "up"
}

// maxConcurrent is an endpoint's limit on its running tasks: 0 is none.
func maxConcurrent(n int) string {
	if n == 0 {
		return "no limit"
	}
	return fmt.Sprint(n)
}

// endpointRows are an endpoint document's fields, one a row.
func endpointRows(w io.Writer, ep api.Endpoint) {
	for _, f := range [][2]string{
		{"Display Name", ep.DisplayName},
		{"ID", ep.ID},
		{"Description", ep.Description},
		{"Servers", serverURIs(ep)},
		{"Auth Method", ep.AuthMethod},
		{"Default Directory", ep.DefaultDirectory},
		{"Public", fmt.Sprint(ep.Public)},
		{"Max Concurrent Tasks", maxConcurrent(ep.MaxConcurrent)},
		{"Activated", activation(ep.Activated, ep.ExpiresIn)},
		{"Agent", agentState(ep)},
		{"Reached Through", cmp.Or(ep.ViaDisplayName, "none (reached directly)")},
		{"MyProxy Server", myproxyRow(ep)},
		{"Created", when(ep.Created)},
	} {
		row(w, f[0]+":", f[1])
	}
}

// myproxyRow describes a gsi endpoint's MyProxy server.
func myproxyRow(ep api.Endpoint) string {
	switch {
	case ep.MyProxyServer == "":
		return "none"
	case ep.MyProxyServerDN != "":
		return ep.MyProxyServer + " (" + ep.MyProxyServerDN + ")"
	}
	return ep.MyProxyServer
}

// agentState says whether a connect endpoint's agent is connected.
func agentState(ep api.Endpoint) string {
	switch {
	case ep.AuthMethod != domain.AuthConnect:
		return "none (not a connect endpoint)"
	case ep.Connected:
		return "connected"
	}
	return "not connected"
}

// serverURIs lists an endpoint's servers.
func serverURIs(ep api.Endpoint) string {
	var uris []string
	for _, s := range ep.Servers {
		uris = append(uris, s.URI)
	}
	return strings.Join(uris, ",")
}

// activation describes an activation state and its time left.
func activation(activated bool, expiresIn int64) string {
	switch {
	case expiresIn < 0:
		return "not needed"
	case activated:
		return "yes, for " + (time.Duration(expiresIn) * time.Second).String()
	}
	return "no"
}

func newEndpointCmd(c *cli) *cobra.Command {
	var add endpointOpts
	var connect bool
	addCmd := &cobra.Command{
		Use:   "add NAME (--server ftp://host:port [--server ...] | --connect) [flags]",
		Short: "Create an endpoint of yours, named owner#NAME",
		Long: `Create an endpoint served by GridFTP servers (--server), or a connect endpoint
(--connect): one that ferry connect serves from a machine that accepts no
connections. For a connect endpoint this prints a one-time setup key, and the
ferry connect command that pairs the machine with it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case connect && (len(add.servers) > 0 || add.auth != ""):
				return usagef("--connect takes no --server or --auth: the agent serves the endpoint")
			case !connect && len(add.servers) == 0:
				return usagef("--server is required: the endpoint's GridFTP server, ftp://host:port (or --connect)")
			}
			s, _ := add.spec(cmd.Flags())
			s.Name = &args[0]
			if connect {
				s.AuthMethod = new(domain.AuthConnect)
			}
			cl, err := c.client()
			if err != nil {
				return err
			}
			ep, err := cl.CreateEndpoint(cmd.Context(), s)
			if err != nil {
				return err
			}
			if connect && ep.SetupKey == nil {
				return fmt.Errorf("the service made endpoint %s but gave no setup key", ep.DisplayName)
			}
			if connect {
				return c.showSetupKey(cmd, ep.DisplayName, *ep.SetupKey)
			}
			return c.showEndpoint(cmd, ep)
		},
	}
	add.register(addCmd.Flags())
	addCmd.Flags().BoolVar(&connect, "connect", false, "a connect endpoint, served by ferry connect; prints its one-time setup key")

	var (
		all    bool
		filter string
		limit  int
	)
	listCmd := &cobra.Command{
		Use:   "list [--all] [--filter TEXT]",
		Short: "List your endpoints (with --all, the public ones too)",
		Long: `List your endpoints (with --all, the public ones of others too), as
ferry endpoint search TEXT --filter-scope my-endpoints (or all) does.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := api.EndpointQuery{Page: api.Page{Limit: limit}, Text: filter, Scope: api.ScopeMine}
			if all {
				q.Scope = api.ScopeAll
			}
			return c.searchEndpoints(cmd, q)
		},
	}
	listCmd.Flags().BoolVar(&all, "all", false, "public endpoints of others too")
	listCmd.Flags().StringVar(&filter, "filter", "", "only endpoints whose owner#name or description holds TEXT")
	listCmd.Flags().IntVar(&limit, "limit", 100, "at most this many (up to 1000)")

	var scope string
	var searchLimit int
	searchCmd := &cobra.Command{
		Use:   "search [TEXT] [--filter-scope all|my-endpoints] [--limit N]",
		Short: "Find endpoints whose owner#name or description holds TEXT",
		Long: `Find the endpoints whose owner#name or description holds TEXT (any case):
yours and the public ones of others (--filter-scope all, the default), or
yours only (--filter-scope my-endpoints). Without TEXT, every endpoint of
the scope.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := api.CheckScope(scope); err != nil {
				return usagef("--filter-scope: %v", err)
			}
			q := api.EndpointQuery{Page: api.Page{Limit: searchLimit}, Scope: scope}
			if len(args) == 1 {
				q.Text = args[0]
			}
			return c.searchEndpoints(cmd, q)
		},
	}
	searchCmd.Flags().StringVar(&scope, "filter-scope", api.ScopeAll, "all (yours and public ones) or my-endpoints")
	searchCmd.Flags().IntVar(&searchLimit, "limit", 25, "at most this many (up to 1000)")

	// byName runs fn on the endpoint named by the only argument.
	byName := func(use, short string, fn func(cmd *cobra.Command, ep string) error) *cobra.Command {
		return &cobra.Command{
			Use:   use + " ENDPOINT",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE:  func(cmd *cobra.Command, args []string) error { return fn(cmd, args[0]) },
		}
	}

	showCmd := byName("show", "Show an endpoint", func(cmd *cobra.Command, ep string) error {
		cl, err := c.client()
		if err != nil {
			return err
		}
		e, err := cl.Endpoint(cmd.Context(), ep)
		if err != nil {
			return err
		}
		states, err := cl.ServerStates(cmd.Context(), e.ID)
		return c.showEndpointStates(cmd, e, states, err)
	})

	var upd endpointOpts
	updateCmd := byName("update", "Change an endpoint of yours: only the flags given", func(cmd *cobra.Command, ep string) error {
		s, changed := upd.spec(cmd.Flags())
		if !changed {
			return usagef("nothing to change: give at least one flag (see --help)")
		}
		cl, err := c.client()
		if err != nil {
			return err
		}
		e, err := cl.UpdateEndpoint(cmd.Context(), ep, s)
		if err != nil {
			return err
		}
		return c.showEndpoint(cmd, e)
	})
	upd.register(updateCmd.Flags())
	updateCmd.Flags().StringVar(&upd.name, "name", "", "rename the endpoint")
	updateCmd.Flags().Lookup("server").Usage = "replace the servers (repeat for several)"

	var (
		username, lifetime, proxy, myproxyUser string
	)
	activateCmd := byName("activate", "Give the service your login for an endpoint's servers", func(cmd *cobra.Command, ep string) error {
		life, err := parseDuration("--lifetime", lifetime)
		if err != nil {
			return err
		}
		cl, err := c.client()
		if err != nil {
			return err
		}
		req, err := cl.ActivationRequirements(cmd.Context(), ep)
		if err != nil {
			return err
		}
		a := api.Activate{Lifetime: int64(life / time.Second)}
		takesProxy := slices.ContainsFunc(req.Data, func(r api.ActivationRequirement) bool { return r.Type == "proxy" })
		takesMyProxy := slices.ContainsFunc(req.Data, func(r api.ActivationRequirement) bool { return r.Type == "myproxy" })
		switch {
		case cmd.Flags().Changed("myproxy-user") && cmd.Flags().Changed("proxy"):
			return usagef("--myproxy-user and --proxy: give one")
		case cmd.Flags().Changed("myproxy-user") && !takesMyProxy:
			return usagef("--myproxy-user: endpoint %s names no MyProxy server (ferry endpoint update %s --myproxy HOST[:PORT])", ep, ep)
		case cmd.Flags().Changed("myproxy-user"):
			// The pass phrase is read, never a flag: it goes to the
			// service, which hands it to the MyProxy server alone.
			if !cmd.Flags().Changed("lifetime") {
				a.Lifetime = 0
			}
			a.Username, a.MyProxyUsername = username, myproxyUser
			if a.MyProxyUsername == "" {
				return usagef("--myproxy-user: want your MyProxy username")
			}
			if a.MyProxyPassphrase, err = c.readSecret(cmd, fmt.Sprintf("MyProxy pass phrase of %s: ", myproxyUser)); err != nil {
				return err
			}
		case takesProxy:
			// A grid proxy lasts as long as it does, unless --lifetime
			// asks for less.
			if !cmd.Flags().Changed("lifetime") {
				a.Lifetime = 0
			}
			a.Username = username
			if a.Proxy, err = c.proxyPEM(cmd, proxy); err != nil {
				return err
			}
		case cmd.Flags().Changed("proxy"):
			return usagef("--proxy: endpoint %s is not activated with a grid proxy", ep)
		case len(req.Data) > 0:
			a.Username = cmp.Or(username, c.osUser())
			if a.Password, err = c.readSecret(cmd, fmt.Sprintf("Password of %s on %s: ", a.Username, ep)); err != nil {
				return err
			}
		}
		res, err := cl.Activate(cmd.Context(), ep, a)
		if err != nil {
			return err
		}
		return c.print(cmd, res, func(w io.Writer) {
			fmt.Fprint(w, res.Message)
			if res.Resumed > 0 {
				fmt.Fprintf(w, "; %s resumed", plural.Count(res.Resumed, "waiting task"))
			}
			fmt.Fprintln(w)
			if len(res.Endpoints) > 1 {
				for _, e := range res.Endpoints {
					fmt.Fprintf(w, "  activated: %s (%s resumed)\n", e.DisplayName, plural.Count(e.Resumed, "waiting task"))
				}
			}
		})
	})
	activateCmd.Long = `Give the service USER's password on the endpoint's servers (read from standard
input, or prompted for on a terminal). The service checks it by logging in,
keeps it encrypted until --lifetime ends, and resumes your tasks that waited
for it. An anonymous endpoint needs no activation.

A gsi endpoint (gsiftp:// servers) is activated with your grid proxy instead
(--proxy, default $X509_USER_PROXY or /tmp/x509up_u<uid>, as grid-proxy-init
or myproxy-logon write it): the service checks it by logging in, keeps it
encrypted until the proxy expires, and delegates it to the servers. Tasks
that need it longer go INACTIVE when it expires; activate again with a new
proxy to resume them.

A gsi endpoint that names a MyProxy server (endpoint add/update --myproxy)
can be activated with your MyProxy username instead (--myproxy-user; the
pass phrase is read from standard input, or prompted for on a terminal):
the service fetches a proxy of yours from the server (for --lifetime, 12h
by default, or less if the server allows less) and activates with it this
endpoint and every other gsi endpoint you may use that names the same
MyProxy server. The pass phrase is not stored anywhere.`
	activateCmd.Flags().StringVar(&username, "username", "", "user name on the endpoint's servers (default: your local user name; a gsi endpoint: the servers' grid-mapfile mapping)")
	activateCmd.Flags().StringVar(&proxy, "proxy", "", "a gsi endpoint: the grid proxy file to activate it with (default $X509_USER_PROXY, else /tmp/x509up_u<uid>)")
	activateCmd.Flags().StringVar(&myproxyUser, "myproxy-user", "", "a gsi endpoint with a MyProxy server: your username there; the pass phrase is read from standard input or the terminal")
	activateCmd.Flags().StringVar(&lifetime, "lifetime", "12h", "how long the service may use the login (at most 168h; a grid proxy: its own lifetime unless this is given and shorter)")

	deactivateCmd := byName("deactivate", "Make the service forget your login for an endpoint", func(cmd *cobra.Command, ep string) error {
		cl, err := c.client()
		if err != nil {
			return err
		}
		res, err := cl.Deactivate(cmd.Context(), ep)
		return c.printResult(cmd, res, err)
	})
	removeCmd := byName("remove", "Delete an endpoint of yours", func(cmd *cobra.Command, ep string) error {
		cl, err := c.client()
		if err != nil {
			return err
		}
		res, err := cl.DeleteEndpoint(cmd.Context(), ep)
		return c.printResult(cmd, res, err)
	})
	removeCmd.Aliases = []string{"rm", "delete"}
	setupKeyCmd := byName("setup-key", "Give a connect endpoint of yours a new one-time setup key", func(cmd *cobra.Command, ep string) error {
		cl, err := c.client()
		if err != nil {
			return err
		}
		k, err := cl.SetupKey(cmd.Context(), ep)
		if err != nil {
			return err
		}
		return c.showSetupKey(cmd, ep, k)
	})
	setupKeyCmd.Long = `Give a connect endpoint a new one-time setup key, to pair a machine with it
(again) with ferry connect --setup-key. The certificates of the agents paired
before are revoked: their ferry connect stops.`

	return c.group("endpoint", "Add, list, show, change, activate and remove endpoints",
		addCmd, listCmd, searchCmd, showCmd, updateCmd, activateCmd, deactivateCmd, removeCmd, setupKeyCmd)
}

// showSetupKey shows a new setup key of connect endpoint ep, with the
// ferry connect command that uses it.
func (c *cli) showSetupKey(cmd *cobra.Command, ep string, k api.SetupKey) error {
	base, err := c.publicURL()
	if err != nil {
		return err
	}
	return c.print(cmd, k, func(w io.Writer) {
		fmt.Fprintf(w, "Endpoint %s: setup key (usable once, until %s):\n\n  %s\n\n", ep, when(k.Expires), k.SetupKey)
		fmt.Fprintf(w, "On the machine to serve, run:\n\n  ferry connect --service %s --setup-key %s --root DIR\n", base, k.SetupKey)
	})
}

// proxyPEM is the grid proxy file at path ("": the default one) to send
// to the service, checked here first so that a missing or expired proxy
// is told with what to do. Over SSH the proxy is read from standard
// input (--proxy -): the service host's files are not the user's.
func (c *cli) proxyPEM(cmd *cobra.Command, path string) (string, error) {
	if c.remote != nil {
		if path != "-" {
			return "", usagef("--proxy: over SSH, give --proxy - and send the proxy file on standard input")
		}
		b, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), 1<<20))
		return string(b), err
	}
	_, path, err := readProxy(path)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(path)
	return string(b), err
}
