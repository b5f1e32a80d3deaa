package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"ferry/service/core"
	"ferry/service/domain"
	"ferry/service/sqlstore"
)

// storeFlags name the service's database: a PostgreSQL DSN, or the SQLite
// file under the data directory.
type storeFlags struct{ data, db string }

func (s *storeFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&s.data, "data", "", "data directory (SQLite database, keys); required")
	cmd.Flags().StringVar(&s.db, "db", "", "PostgreSQL DSN (postgres://...); default: SQLite under --data")
}

// open checks the flags, creates the data directory and opens the store.
func (s *storeFlags) open(ctx context.Context) (*sqlstore.DB, error) {
	if s.data == "" {
		return nil, errors.New("--data is required")
	}
	if err := os.MkdirAll(s.data, 0o700); err != nil {
		return nil, err
	}
	dsn := s.db
	if dsn == "" {
		dsn = s.sqlitePath()
	} else if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return nil, fmt.Errorf("--db %q: want a postgres:// DSN", dsn)
	}
	return sqlstore.Open(ctx, dsn)
}

// sqlitePath is the SQLite database under --data.
func (s *storeFlags) sqlitePath() string { return filepath.Join(s.data, "ferry.db") }

// fresh reports that open will create a new SQLite database: --data
// holds none.
func (s *storeFlags) fresh() bool {
	if s.db != "" || s.data == "" {
		return false
	}
	_, err := os.Stat(s.sqlitePath())
	return errors.Is(err, fs.ErrNotExist)
}

func newUserCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "user",
		Short: "Manage the service's user accounts (run beside ferry server)",
	}
	var sf storeFlags
	var email string
	add := &cobra.Command{
		Use:   "add NAME --data DIR [--db DSN] [--email ADDR]",
		Short: "Add a user; the password is read from the first line of standard input",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pw, err := readPassword(cmd.InOrStdin())
			if err != nil {
				return err
			}
			if sf.fresh() {
				fmt.Fprintf(cmd.ErrOrStderr(), "no database in %s: creating %s\n", sf.data, sf.sqlitePath())
			}
			st, err := sf.open(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			u, err := users(st).AddUser(cmd.Context(), args[0], email, pw)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "added user %s\n", u.Name)
			return nil
		},
	}
	sf.register(add)
	add.Flags().StringVar(&email, "email", "", "address for task notifications")

	var pwS userStore
	setpw := pwS.cmd("set-password NAME --data DIR [--db DSN]", "Change a user's password (read from standard input)", cobra.ExactArgs(1),
		func(cmd *cobra.Command, us domain.UserService, u domain.User, _ []string) error {
			pw, err := readPassword(cmd.InOrStdin())
			if err != nil {
				return err
			}
			return us.SetPassword(cmd.Context(), u, pw)
		})
	var listF storeFlags
	list := &cobra.Command{
		Use:   "list --data DIR [--db DSN]",
		Short: "List the users",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := listF.open(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			all, err := users(st).Users(cmd.Context())
			if err != nil {
				return err
			}
			return operatorTable(cmd, []string{"NAME", "EMAIL", "CREATED"}, func(w io.Writer) {
				for _, u := range all {
					row(w, u.Name, cmp.Or(u.Email, "-"), when(u.Created))
				}
			})
		},
	}
	listF.register(list)

	var rmS userStore
	rm := rmS.cmd("remove NAME --data DIR [--db DSN]", "Remove a user with their tokens, SSH keys, endpoints and ended tasks (refused while any is in use)", cobra.ExactArgs(1),
		func(cmd *cobra.Command, us domain.UserService, u domain.User, _ []string) error {
			if err := us.RemoveUser(cmd.Context(), u); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed user %s\n", u.Name)
			return nil
		})
	rm.Aliases = []string{"rm"}
	rm.Long = `Remove a user and all that is theirs: API tokens and web sessions (which stop
working at once), SSH keys, endpoint activations, ended tasks, and the endpoints
they own (with the others' activations of them). Refused, and nothing removed,
while a task of theirs has not ended (they cancel it, or it ends), while another
user's unfinished task uses one of their endpoints, or while one of their
endpoints is the head node (--via) of another user's endpoint.`
	cmd.AddCommand(add, list, rm, setpw, newUserKeyCmd())
	return cmd
}

// operatorTable writes a table of an operator command: header, then
// rows' (see row), aligned.
func operatorTable(cmd *cobra.Command, header []string, rows func(w io.Writer)) error {
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	rows(tw)
	return tw.Flush()
}

// users is the service's user administration over the store st.
func users(st domain.Store) domain.UserService { return &core.Service{Store: st} }

// userStore makes the commands that change a user in the store of
// --data/--db: the first argument names the user.
type userStore struct{ sf storeFlags }

// cmd is a command that runs fn on the user administration, the user,
// and the other arguments.
func (us *userStore) cmd(use, short string, args cobra.PositionalArgs, fn func(cmd *cobra.Command, users domain.UserService, u domain.User, args []string) error) *cobra.Command {
	c := &cobra.Command{
		Use: use, Short: short, Args: args,
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := us.sf.open(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			svc := users(st)
			u, err := svc.UserByName(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return fn(cmd, svc, u, args[1:])
		},
	}
	us.sf.register(c)
	return c
}

// newUserKeyCmd is ferry user key: the public keys with which users log
// in to the SSH command gateway.
func newUserKeyCmd() *cobra.Command {
	var addS, listS, rmS userStore
	add := addS.cmd("add NAME [KEY_FILE] --data DIR [--db DSN]", "Let a user log in over SSH with a public key (a .pub file's line; standard input without KEY_FILE)",
		cobra.RangeArgs(1, 2), func(cmd *cobra.Command, us domain.UserService, u domain.User, args []string) error {
			in := cmd.InOrStdin()
			if len(args) == 1 && args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return usagef("%v", err)
				}
				defer f.Close()
				in = f
			}
			line, err := bufio.NewReader(io.LimitReader(in, 64<<10)).ReadString('\n')
			if err != nil && line == "" {
				return usagef("reading the public key: %v", err)
			}
			k, err := us.AddSSHKey(cmd.Context(), u, line)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "added SSH key %d of %s: %s\n", k.ID, u.Name, k.Fingerprint)
			return nil
		})
	list := listS.cmd("list NAME --data DIR [--db DSN]", "List a user's SSH keys", cobra.ExactArgs(1),
		func(cmd *cobra.Command, us domain.UserService, u domain.User, _ []string) error {
			keys, err := us.SSHKeys(cmd.Context(), u)
			if err != nil {
				return err
			}
			return operatorTable(cmd, []string{"ID", "FINGERPRINT", "ADDED", "KEY"}, func(w io.Writer) {
				for _, k := range keys {
					row(w, k.ID, k.Fingerprint, when(k.Created), k.Line)
				}
			})
		})
	rm := rmS.cmd("remove NAME KEY_ID --data DIR [--db DSN]", "Remove one of a user's SSH keys (an ID of ferry user key list)", cobra.ExactArgs(2),
		func(cmd *cobra.Command, us domain.UserService, u domain.User, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil {
				return usagef("key ID %q: want a number from ferry user key list", args[0])
			}
			if err := us.DeleteSSHKey(cmd.Context(), u, id); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed SSH key %d of %s\n", id, u.Name)
			return nil
		})
	rm.Aliases = []string{"rm"}
	cmd := &cobra.Command{
		Use:   "key",
		Short: "Manage the public keys with which users log in to the SSH command gateway (ferry server --ssh-listen)",
	}
	cmd.AddCommand(add, list, rm)
	return cmd
}

// readPassword reads a password from the first line of r.
func readPassword(r io.Reader) (string, error) {
	line, err := bufio.NewReader(r).ReadString('\n')
	pw := strings.TrimRight(line, "\r\n")
	if pw == "" {
		if err != nil {
			return "", fmt.Errorf("reading password from stdin: %w", err)
		}
		return "", errors.New("empty password")
	}
	return pw, nil
}
