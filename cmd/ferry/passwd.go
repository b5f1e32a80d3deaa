package main

import (
	"errors"

	"github.com/spf13/cobra"

	"ferry/internal/passwd"
)

func newPasswdCmd() *cobra.Command {
	var file string
	var remove bool
	cmd := &cobra.Command{
		Use:   "passwd --file FILE USER",
		Short: "Add, change or remove a user of an endpoint server's password file",
		Long: `Add or change USER in FILE (used by ferry gridftp --password-file); the
password is read from the first line of standard input and only its bcrypt
hash is stored. With --remove, delete USER.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if file == "" {
				return errors.New("--file is required")
			}
			if remove {
				return passwd.Remove(file, args[0])
			}
			pw, err := readPassword(cmd.InOrStdin())
			if err != nil {
				return err
			}
			return passwd.Set(file, args[0], pw, 0)
		},
	}
	cmd.Flags().StringVar(&file, "file", "", "password file")
	cmd.Flags().BoolVar(&remove, "remove", false, "remove USER")
	return cmd
}
