package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"ferry/passwd"
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
		dsn = filepath.Join(s.data, "ferry.db")
	} else if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return nil, fmt.Errorf("--db %q: want a postgres:// DSN", dsn)
	}
	return sqlstore.Open(ctx, dsn)
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
			hash, err := readPasswordHash(cmd.InOrStdin())
			if err != nil {
				return err
			}
			st, err := sf.open(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			u := domain.User{Name: args[0], Email: email, PasswordHash: string(hash)}
			if err := domain.ValidName(u.Name); err != nil {
				return err
			}
			if err := st.CreateUser(cmd.Context(), &u); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "added user %s\n", u.Name)
			return nil
		},
	}
	sf.register(add)
	add.Flags().StringVar(&email, "email", "", "address for task notifications")

	var sf2 storeFlags
	setpw := &cobra.Command{
		Use:   "set-password NAME --data DIR [--db DSN]",
		Short: "Change a user's password (read from standard input)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			hash, err := readPasswordHash(cmd.InOrStdin())
			if err != nil {
				return err
			}
			st, err := sf2.open(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			u, err := st.UserByName(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return st.SetPassword(cmd.Context(), u.ID, string(hash))
		},
	}
	sf2.register(setpw)
	cmd.AddCommand(add, setpw)
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

// readPasswordHash reads a password from the first line of r and hashes it.
func readPasswordHash(r io.Reader) ([]byte, error) {
	pw, err := readPassword(r)
	if err != nil {
		return nil, err
	}
	return passwd.Hash(pw, 0)
}
