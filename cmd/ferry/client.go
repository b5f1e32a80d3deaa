package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"ferry/service/api"
	"ferry/service/apiclient"
	"ferry/service/domain"
)

// Exit statuses of ferry. A timeout of a wait exits with
// --timeout-exit-code, exitTimeout unless given.
const (
	exitFailure = 1 // the command ran and failed
	exitUsage   = 2 // bad input: arguments, flags, files named by them
	exitTimeout = 3 // a wait gave up before the task ended
	exitAuth    = 4 // not logged in, or the token is expired or revoked (HTTP 401)
)

// exitError is an error with the process's exit status.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usagef is a usage error: exit status 2.
func usagef(format string, args ...any) error {
	return &exitError{exitUsage, fmt.Errorf(format, args...)}
}

// exitCode is the exit status for err, as main returns it. Every error
// is an exitError (see markErrors) but cobra's own, for an unknown command:
// a usage error.
func exitCode(err error) int {
	var e *exitError
	if errors.As(err, &e) {
		return e.code
	}
	return exitUsage
}

// markErrors gives the errors of c and every command under it their exit
// status: bad flags and arguments are usage errors; a command's own
// exitErrors stay as they are, HTTP 401 is exitAuth, anything else
// exitFailure.
func markErrors(c *cobra.Command) {
	name := strings.TrimPrefix(c.CommandPath(), c.Root().Name()+" ")
	usage := func(cmd *cobra.Command, err error) error {
		return usagef("%s: %v (usage: %s)", name, err, cmd.UseLine())
	}
	c.SetFlagErrorFunc(usage)
	if args := c.Args; args != nil {
		c.Args = func(cmd *cobra.Command, a []string) error {
			if err := args(cmd, a); err != nil {
				return usage(cmd, err)
			}
			return nil
		}
	}
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			err := run(cmd, args)
			var e *exitError
			var ae *api.Error
			switch {
			case err == nil || errors.As(err, &e):
				return err
			case errors.As(err, &ae) && ae.Status == 401:
				return &exitError{exitAuth, err}
			}
			return &exitError{exitFailure, err}
		}
	}
	for _, sub := range c.Commands() {
		markErrors(sub)
	}
}

// errorLine is the one line main prints for err (after "ferry: "): an API
// error as api.Error words it (its message; the request ID of a failure
// of the service), anything else as it is.
func errorLine(err error) string {
	if ae, ok := errors.AsType[*api.Error](err); ok {
		return ae.Error()
	}
	return err.Error()
}

// cli is what the client commands share: the service, the credential and
// the output format, from the flags of the command that runs.
type cli struct {
	url, token, format string
	// remote is set when the SSH gateway runs the commands for one of
	// its users (sshRoot): the service and the credential are then its,
	// and nothing local to the service's host (files, environment,
	// saved login) is read.
	remote *remote
}

// remote is the setting of commands run by the SSH gateway.
type remote struct {
	api, public string // where the commands reach the API; where users do
	token, user string // the session's credential, and its user's name
	tty         bool   // the client asked for a terminal
}

// flags gives a client command (and its subcommands) --url, --token and
// -F, and checks -F before it runs. Over SSH the service and the
// credential are the gateway's: no --url or --token.
func (c *cli) flags(cmd *cobra.Command) *cobra.Command {
	f := cmd.PersistentFlags()
	if c.remote == nil {
		f.StringVar(&c.url, "url", "", "the ferry service, http(s)://host:port (default: $FERRY_URL, else the one ferry login saved)")
		f.StringVar(&c.token, "token", "", "API token (default: $FERRY_TOKEN, else the one ferry login saved)")
	}
	return c.formatFlag(cmd)
}

// formatFlag gives cmd (and its subcommands) -F, and checks it before
// cmd runs.
func (c *cli) formatFlag(cmd *cobra.Command) *cobra.Command {
	cmd.PersistentFlags().StringVarP(&c.format, "format", "F", "text", "output format: text, json, or unix (tab-separated, lists without their header)")
	cmd.PersistentPreRunE = func(*cobra.Command, []string) error {
		if !slices.Contains([]string{"text", "json", "unix"}, c.format) {
			return usagef("-F %q: want text, json or unix", c.format)
		}
		return nil
	}
	return cmd
}

// group is a command that only holds subcommands; alone, or with an
// unknown subcommand, it is a usage error.
func (c *cli) group(use, short string, subs ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("%s needs a command: see %s --help", cmd.CommandPath(), cmd.CommandPath())
		},
	}
	cmd.AddCommand(subs...)
	return c.flags(cmd)
}

// login is what ferry login saves: the service and the API token it gave.
type login struct {
	URL   string `json:"url"`
	Token string `json:"token"`
}

// loginPath is where ferry login saves the login: ferry/token in the
// user's configuration directory ($XDG_CONFIG_HOME or ~/.config).
func loginPath() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "ferry", "token"), nil
}

// savedLogin reads the saved login; none is no error.
func savedLogin() (login, error) {
	var l login
	p, err := loginPath()
	if err != nil {
		return l, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return l, nil
	}
	if err == nil {
		err = json.Unmarshal(b, &l)
	}
	if err != nil {
		return l, fmt.Errorf("saved login %s: %w (run ferry login again)", p, err)
	}
	return l, nil
}

// saveLogin writes l readable by the user only, and returns where.
func saveLogin(l login) (string, error) {
	p, err := loginPath()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return "", err
	}
	b, _ := json.Marshal(l)
	tmp := p + ".new"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return "", err
	}
	return p, os.Rename(tmp, p)
}

// forgetLogin removes the saved login.
func forgetLogin() error {
	p, err := loginPath()
	if err == nil {
		err = os.Remove(p)
	}
	if err != nil {
		return fmt.Errorf("forgetting the saved login: %w", err)
	}
	return nil
}

// service is the base URL and, if wantToken, the token to use: --url,
// $FERRY_URL or the saved login's URL; --token, $FERRY_TOKEN, or the saved
// token when the URL is the saved login's (a token is never sent to
// another service). saved reports that the token is the saved one.
func (c *cli) service(wantToken bool) (base, token string, saved bool, err error) {
	if r := c.remote; r != nil {
		return r.api, r.token, false, nil
	}
	base = cmp.Or(c.url, os.Getenv("FERRY_URL"))
	if wantToken {
		token = cmp.Or(c.token, os.Getenv("FERRY_TOKEN"))
	}
	if base == "" || wantToken && token == "" {
		l, err := savedLogin()
		if err != nil {
			return "", "", false, err
		}
		base = cmp.Or(base, l.URL)
		if wantToken && token == "" && strings.TrimRight(base, "/") == strings.TrimRight(l.URL, "/") {
			token, saved = l.Token, true
		}
	}
	base = strings.TrimRight(base, "/")
	if base == "" {
		return "", "", false, usagef("which service? give --url URL or set FERRY_URL (ferry login --url URL saves it)")
	}
	if u, err := url.Parse(base); err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", "", false, usagef("service URL %q: want http(s)://host:port", base)
	}
	return base, token, saved, nil
}

// publicURL is the service's URL as its users reach it: over SSH the
// gateway's public one, not the API address it uses itself.
func (c *cli) publicURL() (string, error) {
	if c.remote != nil {
		return c.remote.public, nil
	}
	base, _, _, err := c.service(false)
	return base, err
}

// client is an API client of the service, logged in.
func (c *cli) client() (*apiclient.Client, error) {
	base, token, _, err := c.service(true)
	if err != nil {
		return nil, err
	}
	if token == "" {
		return nil, &exitError{exitAuth, fmt.Errorf("not logged in to %s: run ferry login, or set FERRY_TOKEN", base)}
	}
	return apiclient.New(base, token, nil), nil
}

// json reports -F json.
func (c *cli) json() bool { return c.format == "json" }

// print writes doc as JSON with -F json, else runs text: on a tab-aligned
// writer, or with -F unix on the output itself, its cells tab-separated.
func (c *cli) print(cmd *cobra.Command, doc any, text func(w io.Writer)) error {
	switch c.format {
	case "json":
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(doc)
	case "unix":
		text(cmd.OutOrStdout())
		return nil
	}
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	text(tw)
	return tw.Flush()
}

// table prints a list: doc as JSON with -F json, else a row of header
// and rows' (see row): aligned, or with -F unix tab-separated and without
// the header, one record a line.
func (c *cli) table(cmd *cobra.Command, doc any, header []string, rows func(w io.Writer)) error {
	return c.print(cmd, doc, func(w io.Writer) {
		if c.format != "unix" {
			fmt.Fprintln(w, strings.Join(header, "\t"))
		}
		rows(w)
	})
}

// printResult prints the result of a call that only succeeds or fails,
// or returns its error.
func (c *cli) printResult(cmd *cobra.Command, res api.Result, err error) error {
	if err != nil {
		return err
	}
	return c.print(cmd, res, func(w io.Writer) { fmt.Fprintln(w, res.Message) })
}

// row writes cells as one tab-separated line of a table.
func row(w io.Writer, cells ...any) {
	for i, c := range cells {
		if i > 0 {
			fmt.Fprint(w, "\t")
		}
		fmt.Fprint(w, c)
	}
	fmt.Fprintln(w)
}

// when formats a time as everything the CLI prints does, and as the
// service's messages do: UTC, RFC 3339; "-" for none.
func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// epPath is an endpoint and a path on it, written EP:PATH. EP is an
// endpoint's UUID, owner#name, or the name of one's own.
type epPath struct{ ep, path string }

func (p epPath) String() string { return p.ep + ":" + p.path }

// parseEPPath reads EP:PATH; with needPath false EP alone (or EP:) stands
// for the endpoint's default directory.
func parseEPPath(s string, needPath bool) (epPath, error) {
	ep, p, _ := strings.Cut(s, ":")
	switch {
	case ep == "":
		return epPath{}, usagef("%q: want ENDPOINT:PATH", s)
	case strings.HasPrefix(p, "//"):
		return epPath{}, usagef("%q is a URL: want ENDPOINT:PATH (ferry copy takes URLs)", s)
	case needPath && p == "":
		return epPath{}, usagef("%q: no path: want ENDPOINT:PATH", s)
	}
	owner, name := domain.SplitName(ep, "")
	if strings.Contains(ep, "#") {
		if err := domain.ValidName(owner); err != nil {
			return epPath{}, usagef("%q: endpoint owner: %v", s, err)
		}
	}
	if err := domain.ValidName(name); err != nil {
		return epPath{}, usagef("%q: endpoint: %v", s, err)
	}
	return epPath{ep, p}, nil
}

// parseDuration reads a number of seconds (30, 0.5) or a duration (2m, 1h30m).
func parseDuration(flag, s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		d, err = time.ParseDuration(s + "s")
	}
	if err != nil || d < 0 {
		return 0, usagef("%s %q: want seconds (30) or a duration (2m, 1h30m)", flag, s)
	}
	return d, nil
}

// osUser is the local user's name, the default user name for logins;
// over SSH, the name the user logged in with.
func (c *cli) osUser() string {
	if c.remote != nil {
		return c.remote.user
	}
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return os.Getenv("USER")
}

// readSecret reads a password from the first line of standard input. On
// a terminal it prompts on standard error and does not echo (over SSH the
// gateway's terminal echoes nothing). Ctrl-C ends the wait.
func (c *cli) readSecret(cmd *cobra.Command, prompt string) (string, error) {
	in := cmd.InOrStdin()
	if f, ok := in.(*os.File); ok && isTerminal(f, false) {
		fmt.Fprint(cmd.ErrOrStderr(), prompt)
		defer fmt.Fprintln(cmd.ErrOrStderr())
		restore := noEcho(f)
		defer restore()
	} else if c.remote != nil && c.remote.tty {
		fmt.Fprint(cmd.ErrOrStderr(), prompt)
		defer fmt.Fprintln(cmd.ErrOrStderr())
	}
	type answer struct {
		pw  string
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		pw, err := readPassword(in)
		ch <- answer{pw, err}
	}()
	select {
	case a := <-ch:
		return a.pw, a.err
	case <-cmd.Context().Done():
		return "", context.Cause(cmd.Context())
	}
}
