package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"ferry/service/api"
	"ferry/service/apiclient"
)

// list returns a whole directory listing, page by page.
func list(ctx context.Context, cl *apiclient.Client, ep string, q api.ListQuery) (api.FileList, error) {
	q.Limit = 1000
	all, err := cl.Ls(ctx, ep, q)
	for err == nil && len(all.Data) < all.Total {
		q.Offset = len(all.Data)
		var page api.FileList
		if page, err = cl.Ls(ctx, ep, q); err == nil && len(page.Data) == 0 {
			break
		}
		all.Data = append(all.Data, page.Data...)
	}
	all.Length, all.Limit = len(all.Data), 0
	return all, err
}

// listTree is list that, down to depth levels of subdirectories, adds the
// entries of each directory after it, named by their path under q.Path.
func listTree(ctx context.Context, cl *apiclient.Client, ep string, q api.ListQuery, depth int) (api.FileList, error) {
	l, err := list(ctx, cl, ep, q)
	if err != nil || depth == 0 {
		return l, err
	}
	var out []api.File
	for _, f := range l.Data {
		out = append(out, f)
		if f.Type != "dir" {
			continue
		}
		sub := q
		sub.Path = path.Join(l.Path, f.Name)
		sl, err := listTree(ctx, cl, ep, sub, depth-1)
		if err != nil {
			return l, err
		}
		for _, g := range sl.Data {
			g.Name = f.Name + "/" + g.Name
			out = append(out, g)
		}
	}
	l.Data, l.Length, l.Total = out, len(out), len(out)
	return l, nil
}

// mode is a listing's permissions as ls -l shows them: drwxr-xr-x.
func mode(f api.File) string {
	n, _ := strconv.ParseUint(f.Permissions, 8, 32) // 0 when absent
	m := fs.FileMode(n) & fs.ModePerm
	switch f.Type {
	case "dir":
		m |= fs.ModeDir
	case "link":
		m |= fs.ModeSymlink
	}
	return m.String()
}

func newLsCmd(c *cli) *cobra.Command {
	var (
		long, all, recursive bool
		depth                int
		filter               string
	)
	cmd := &cobra.Command{
		Use:   "ls ENDPOINT[:PATH] [-l] [-a] [-r] [--filter PATTERN]",
		Short: "List a directory of an endpoint (by default its default directory)",
		Long: `List a directory of an endpoint (by default its default directory).

--filter PATTERN lists only the names that pass it: =NAME (that name),
!=NAME (all others), ~GLOB (the names the glob matches: * ? [...]), !~GLOB
(those it does not); several names or globs are comma-separated, and a
PATTERN without an operator is =NAME. With -r it applies at every level,
so a directory whose name does not pass is not entered.`,
		Example: `  ferry ls alice#lab:/proj --filter '~*.txt'
  ferry ls alice#lab:/proj --filter '!~tmp*'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := parseEPPath(args[0], false)
			if err != nil {
				return err
			}
			q := api.ListQuery{Path: p.path, ShowHidden: all}
			if filter != "" {
				nf, err := api.ParseNameFilter(filter)
				if err != nil {
					return usagef("--filter: %v", err)
				}
				q.Names = []api.NameFilter{nf}
			}
			if !recursive {
				depth = 0
			}
			cl, err := c.client()
			if err != nil {
				return err
			}
			l, err := listTree(cmd.Context(), cl, p.ep, q, depth)
			if err != nil {
				return err
			}
			return c.print(cmd, l, func(w io.Writer) {
				for _, f := range l.Data {
					name := f.Name
					if f.Type == "dir" {
						name += "/"
					}
					if long {
						row(w, mode(f), cmp.Or(f.User, "-"), cmp.Or(f.Group, "-"), f.Size, when(f.LastModified), name)
					} else {
						fmt.Fprintln(w, name)
					}
				}
			})
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&long, "long", "l", false, "permissions, owner, group, size and time of each entry")
	f.BoolVarP(&all, "all", "a", false, "show names starting with a dot")
	f.BoolVarP(&recursive, "recursive", "r", false, "list subdirectories too")
	f.IntVar(&depth, "recursive-depth-limit", 3, "with -r, descend at most this many levels")
	f.StringVar(&filter, "filter", "", "only names that pass PATTERN: =NAME, !=NAME, ~GLOB or !~GLOB")
	return c.flags(cmd)
}

func newMkdirCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mkdir ENDPOINT:PATH",
		Short: "Make a directory on an endpoint",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := parseEPPath(args[0], true)
			if err != nil {
				return err
			}
			cl, err := c.client()
			if err != nil {
				return err
			}
			res, err := cl.Mkdir(cmd.Context(), p.ep, p.path)
			return c.printResult(cmd, res, err)
		},
	}
	return c.flags(cmd)
}

func newRenameCmd(c *cli) *cobra.Command {
	var overwrite bool
	cmd := &cobra.Command{
		Use:   "rename ENDPOINT:OLD_PATH [ENDPOINT:]NEW_PATH [--overwrite]",
		Short: "Rename a file or directory on an endpoint",
		Long: `Rename a file or directory on an endpoint. A NEW_PATH that exists, a file
or a directory, is refused unless --overwrite: then the endpoint's server
decides (a file is replaced; most servers refuse a directory).`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			from, err := parseEPPath(args[0], true)
			if err != nil {
				return err
			}
			to := epPath{from.ep, args[1]}
			if before, _, ok := strings.Cut(args[1], ":"); ok && !strings.Contains(before, "/") {
				if to, err = parseEPPath(args[1], true); err != nil {
					return err
				}
				if to.ep != from.ep {
					return usagef("rename stays on one endpoint: %s and %s differ (use ferry transfer)", from.ep, to.ep)
				}
			}
			cl, err := c.client()
			if err != nil {
				return err
			}
			res, err := cl.Rename(cmd.Context(), from.ep, from.path, to.path, overwrite)
			return c.printResult(cmd, res, err)
		},
	}
	cmd.Flags().BoolVar(&overwrite, "overwrite", false, "replace NEW_PATH if it exists")
	return c.flags(cmd)
}

func newRmCmd(c *cli) *cobra.Command {
	var (
		recursive, ignoreMissing, noWait bool
		label                            string
		wait                             waitOpts
	)
	cmd := &cobra.Command{
		Use:   "rm [-r] [--ignore-missing] ENDPOINT:PATH...",
		Short: "Delete files or directories on an endpoint, and wait until they are gone",
		Long: `Submit a delete task for the paths, all on one endpoint, and wait for it as
ferry task wait does (with --no-wait, print the task ID instead). Directories
need -r.`,
		Aliases: []string{"delete"},
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w, err := wait.parse()
			if err != nil {
				return err
			}
			d := api.Delete{DataType: "delete", Label: label, Recursive: recursive, IgnoreMissing: ignoreMissing}
			for _, a := range args {
				p, err := parseEPPath(a, true)
				if err != nil {
					return err
				}
				if d.Endpoint != "" && p.ep != d.Endpoint {
					return usagef("rm deletes on one endpoint at a time: %s and %s differ", d.Endpoint, p.ep)
				}
				d.Endpoint = p.ep
				d.Data = append(d.Data, api.DeleteItem{DataType: "delete_item", Path: p.path})
			}
			cl, err := c.client()
			if err != nil {
				return err
			}
			res, err := cl.Delete(cmd.Context(), d)
			if err != nil {
				return err
			}
			if noWait {
				return c.print(cmd, res, func(w io.Writer) { fmt.Fprintln(w, res.TaskID) })
			}
			return c.wait(cmd, cl, res.TaskID, w)
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&recursive, "recursive", "r", false, "delete directories and everything under them")
	f.BoolVar(&ignoreMissing, "ignore-missing", false, "a path that does not exist is no error")
	f.StringVar(&label, "label", "", "a label for the task")
	f.BoolVar(&noWait, "no-wait", false, "print the task ID and do not wait")
	wait.register(f)
	return c.flags(cmd)
}
