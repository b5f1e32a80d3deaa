package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"ferry/service/api"
	"ferry/service/apiclient"
)

// lsPage is how many entries ls asks the service for at once.
const lsPage = 1000

// eachEntry calls fn with each entry of the directory q.Path, page by
// page as the service sends them (after each page, pageDone), and, down
// to depth levels of subdirectories, with the entries of each directory
// after it, named by their path under q.Path; begin is called once, with
// the first page. Only a page a level is held at once.
func eachEntry(ctx context.Context, cl *apiclient.Client, ep string, q api.ListQuery, depth int, prefix string,
	begin func(api.FileList), fn func(api.File), pageDone func() error) error {
	q.Limit, q.Offset = lsPage, 0
	for {
		page, err := cl.Ls(ctx, ep, q)
		if err != nil {
			return err
		}
		if begin != nil {
			begin(page)
			begin = nil
		}
		for _, f := range page.Data {
			name := f.Name
			f.Name = prefix + name
			fn(f)
			if f.Type != "dir" || depth == 0 {
				continue
			}
			sub := q
			sub.Path = path.Join(page.Path, name)
			if err := eachEntry(ctx, cl, ep, sub, depth-1, f.Name+"/", nil, fn, pageDone); err != nil {
				return err
			}
		}
		if err := pageDone(); err != nil {
			return err
		}
		if !page.HasNextPage {
			return nil
		}
		q.Offset += len(page.Data)
	}
}

// lsJSON writes a listing as one JSON document (an api.FileList) as its
// entries come: the counts, known at the end, follow them.
type lsJSON struct {
	w     *bufio.Writer
	n     int
	begun bool
}

func (j *lsJSON) begin(l api.FileList) {
	j.begun = true
	fmt.Fprintf(j.w, "{\n  \"DATA_TYPE\": \"file_list\",\n  \"endpoint\": %s,\n  \"path\": %s,\n  \"DATA\": [", jsonString(l.Endpoint), jsonString(l.Path))
}

func (j *lsJSON) entry(f api.File) {
	if j.n > 0 {
		j.w.WriteString(",")
	}
	j.n++
	b, _ := json.MarshalIndent(f, "    ", "  ") // an api.File always marshals
	j.w.WriteString("\n    ")
	j.w.Write(b)
}

func (j *lsJSON) end() error {
	if !j.begun {
		return j.w.Flush()
	}
	if j.n > 0 {
		j.w.WriteString("\n  ")
	}
	fmt.Fprintf(j.w, "],\n  \"length\": %d,\n  \"limit\": 0,\n  \"offset\": 0,\n  \"total\": %d\n}\n", j.n, j.n)
	return j.w.Flush()
}

// jsonString is s as a JSON string.
func jsonString(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return string(b)
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
		long, all, recursive, unsorted bool
		depth                          int
		filter                         string
	)
	cmd := &cobra.Command{
		Use:   "ls ENDPOINT[:PATH] [-l] [-a] [-r] [-U] [--filter PATTERN]",
		Short: "List a directory of an endpoint (by default its default directory)",
		Long: `List a directory of an endpoint (by default its default directory).

--filter PATTERN lists only the names that pass it: =NAME (that name),
!=NAME (all others), ~GLOB (the names the glob matches: * ? [...]), !~GLOB
(those it does not); several names or globs are comma-separated, and a
PATTERN without an operator is =NAME. With -r it applies at every level,
so a directory whose name does not pass is not entered.

Entries are sorted by name, so nothing prints until the endpoint has
listed the whole directory. -U does not sort: entries print in the order
the endpoint lists them, a page at a time as they come, which in a
directory of millions of entries starts at once.`,
		Example: `  ferry ls alice#lab:/proj --filter '~*.txt'
  ferry ls alice#lab:/proj --filter '!~tmp*'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := parseEPPath(args[0], false)
			if err != nil {
				return err
			}
			q := api.ListQuery{Path: p.path, ShowHidden: all, Unsorted: unsorted}
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
			return c.ls(cmd, cl, p.ep, q, depth, long)
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&long, "long", "l", false, "permissions, owner, group, size and time of each entry")
	f.BoolVarP(&all, "all", "a", false, "show names starting with a dot")
	f.BoolVarP(&recursive, "recursive", "r", false, "list subdirectories too")
	f.BoolVarP(&unsorted, "unsorted", "U", false, "do not sort: list entries in the order the endpoint lists them, as they come")
	f.IntVar(&depth, "recursive-depth-limit", 3, "with -r, descend at most this many levels")
	f.StringVar(&filter, "filter", "", "only names that pass PATTERN: =NAME, !=NAME, ~GLOB or !~GLOB")
	return c.flags(cmd)
}

// ls prints the listing q asks for (see eachEntry) page by page as it
// comes: as -F says, a table aligned a page at a time, or one JSON
// document.
func (c *cli) ls(cmd *cobra.Command, cl *apiclient.Client, ep string, q api.ListQuery, depth int, long bool) error {
	out := bufio.NewWriter(cmd.OutOrStdout())
	if c.format == "json" {
		j := &lsJSON{w: out}
		err := eachEntry(cmd.Context(), cl, ep, q, depth, "", j.begin, j.entry, out.Flush)
		if err != nil {
			out.Flush()
			return err
		}
		return j.end()
	}
	var w io.Writer = out
	flush := out.Flush
	if c.format != "unix" {
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		w = tw
		flush = func() error {
			if err := tw.Flush(); err != nil {
				return err
			}
			return out.Flush()
		}
	}
	err := eachEntry(cmd.Context(), cl, ep, q, depth, "", nil, func(f api.File) {
		name := f.Name
		if f.Type == "dir" {
			name += "/"
		}
		switch {
		case long && f.User == "" && f.Group == "": // the server names no owner (one server lists a directory: all or none)
			row(w, mode(f), f.Size, when(f.LastModified), name)
		case long:
			row(w, mode(f), cmp.Or(f.User, "-"), cmp.Or(f.Group, "-"), f.Size, when(f.LastModified), name)
		default:
			fmt.Fprintln(w, name)
		}
	}, flush)
	if ferr := flush(); err == nil {
		err = ferr
	}
	return err
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
