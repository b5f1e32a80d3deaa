package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"ferry/service/api"
	"ferry/service/apiclient"
)

func newLoginCmd(c *cli) *cobra.Command {
	var username string
	cmd := &cobra.Command{
		Use:   "login [--url URL] [--username USER]",
		Short: "Log in to a ferry service and save the API token for the other commands",
		Long: `Log in to the service at --url (or $FERRY_URL) as USER (default: your local user
name). The password is read from standard input, or prompted for on a terminal.
The service's URL and a new API token are saved, readable by you only, in
ferry/token under $XDG_CONFIG_HOME (or ~/.config); the other commands use them
unless given --url, --token, $FERRY_URL or $FERRY_TOKEN.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			base, _, _, err := c.service(false)
			if err != nil {
				return err
			}
			username = cmp.Or(username, c.osUser())
			pw, err := c.readSecret(cmd, fmt.Sprintf("Password for %s at %s: ", username, base))
			if err != nil {
				return err
			}
			host, _ := os.Hostname()
			tok, err := apiclient.New(base, "", nil).Login(cmd.Context(), api.Login{Username: username, Password: pw, Name: "ferry login on " + host})
			if err != nil {
				return err
			}
			where, err := saveLogin(login{URL: base, Token: tok.Value})
			if err != nil {
				return fmt.Errorf("saving the token: %w", err)
			}
			tok.Value = "" // saved, never shown
			return c.print(cmd, tok, func(w io.Writer) {
				fmt.Fprintf(w, "Logged in to %s as %s; the token is saved in %s\n", base, username, where)
			})
		},
	}
	cmd.Flags().StringVar(&username, "username", "", "user name on the service (default: your local user name)")
	return c.flags(cmd)
}

func newLogoutCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "logout",
		Short: "Revoke the API token in use and forget the saved login",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, _, saved, err := c.service(true)
			if err != nil {
				return err
			}
			cl, err := c.client()
			if err != nil {
				return err
			}
			res, err := cl.Logout(cmd.Context())
			var ae *api.Error
			switch {
			case saved && errors.As(err, &ae) && ae.Status == 401:
				res = api.Result{DataType: "result", Code: "LoggedOut", Message: "the token was no longer valid"}
			case err != nil:
				return err
			}
			if saved {
				if err := forgetLogin(); err != nil {
					return err
				}
				res.Message += "; the saved login is forgotten"
			}
			return c.printResult(cmd, res, nil)
		},
	}
	return c.flags(cmd)
}

func newTokenCmd(c *cli) *cobra.Command {
	list := &cobra.Command{
		Use:   "list",
		Short: "List your API tokens and web sessions",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := c.client()
			if err != nil {
				return err
			}
			l, err := cl.Tokens(cmd.Context())
			if err != nil {
				return err
			}
			return c.table(cmd, l, []string{"ID", "KIND", "NAME", "CREATED", "EXPIRES", "LAST USED", "STATE"}, func(w io.Writer) {
				for _, t := range l.Data {
					state := "valid"
					if t.Revoked {
						state = "revoked"
					}
					row(w, t.ID, t.Kind, t.Name, when(t.Created), when(t.Expires), when(t.LastUsed), state)
				}
			})
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke one of your tokens (see ferry token list)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil {
				return usagef("token ID %q: want a number from ferry token list", args[0])
			}
			cl, err := c.client()
			if err != nil {
				return err
			}
			res, err := cl.RevokeToken(cmd.Context(), id)
			return c.printResult(cmd, res, err)
		},
	}
	return c.group("token", "List and revoke API tokens", list, revoke)
}

// whoami is what ferry whoami prints: the caller and the service.
type whoami struct {
	api.Session
	URL string `json:"url"`
}

func newWhoamiCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "whoami",
		Short: "Show the user the API token in use belongs to, and the service",
		Long: `Show the user the API token in use belongs to, and the service's URL. Not
logged in (no token, or one expired or revoked): exit status 4.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := c.client()
			if err != nil {
				return err
			}
			s, err := cl.Session(cmd.Context())
			if err != nil {
				return err
			}
			base, err := c.publicURL()
			if err != nil {
				return err
			}
			s.CSRFToken = ""
			return c.print(cmd, whoami{s, base}, func(w io.Writer) {
				fmt.Fprintf(w, "%s at %s\n", s.Username, base)
			})
		},
	}
	return c.flags(cmd)
}
