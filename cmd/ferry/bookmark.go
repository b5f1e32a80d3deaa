package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"ferry/service/api"
	"ferry/service/apiclient"
)

// newBookmarkCmd is ferry bookmark: a user's names for paths on
// endpoints, as globus-cli's bookmark commands.
func newBookmarkCmd(c *cli) *cobra.Command {
	// run runs fn with the client and the bookmark named by the first
	// argument.
	run := func(fn func(cmd *cobra.Command, cl *apiclient.Client, b api.Bookmark, args []string) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			cl, err := c.client()
			if err != nil {
				return err
			}
			b, err := findBookmark(cmd.Context(), cl, args[0])
			if err != nil {
				return err
			}
			return fn(cmd, cl, b, args[1:])
		}
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List your bookmarks",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := c.client()
			if err != nil {
				return err
			}
			l, err := cl.Bookmarks(cmd.Context())
			if err != nil {
				return err
			}
			return c.table(cmd, l, []string{"NAME", "ID", "ENDPOINT", "PATH"}, func(w io.Writer) {
				for _, b := range l.Data {
					row(w, b.Name, b.ID, b.EndpointDisplayName, b.Path)
				}
			})
		},
	}
	create := &cobra.Command{
		Use:   "create NAME ENDPOINT:PATH",
		Short: "Name a path on an endpoint",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := parseEPPath(args[1], true)
			if err != nil {
				return err
			}
			cl, err := c.client()
			if err != nil {
				return err
			}
			b, err := cl.CreateBookmark(cmd.Context(), args[0], p.ep, p.path)
			if err != nil {
				return err
			}
			return c.showBookmark(cmd, b)
		},
	}
	show := &cobra.Command{
		Use:   "show NAME|ID",
		Short: "Print a bookmark as ENDPOINT_ID:PATH, for other commands (-F json: all of it)",
		Long: `Print a bookmark as ENDPOINT_ID:PATH, which the other commands take, so that
scripts can use it: ferry ls "$(ferry bookmark show runs)". -F json prints all
of it.`,
		Args: cobra.ExactArgs(1),
		RunE: run(func(cmd *cobra.Command, _ *apiclient.Client, b api.Bookmark, _ []string) error {
			return c.print(cmd, b, func(w io.Writer) { fmt.Fprintln(w, b.EndpointID+":"+b.Path) })
		}),
	}
	rename := &cobra.Command{
		Use:   "rename NAME|ID NEW_NAME",
		Short: "Rename a bookmark",
		Args:  cobra.ExactArgs(2),
		RunE: run(func(cmd *cobra.Command, cl *apiclient.Client, b api.Bookmark, args []string) error {
			b, err := cl.UpdateBookmark(cmd.Context(), b.ID, api.BookmarkUpdate{Name: &args[0]})
			if err != nil {
				return err
			}
			return c.showBookmark(cmd, b)
		}),
	}
	del := &cobra.Command{
		Use:     "delete NAME|ID",
		Aliases: []string{"rm"},
		Short:   "Delete a bookmark",
		Args:    cobra.ExactArgs(1),
		RunE: run(func(cmd *cobra.Command, cl *apiclient.Client, b api.Bookmark, _ []string) error {
			res, err := cl.DeleteBookmark(cmd.Context(), b.ID)
			return c.printResult(cmd, res, err)
		}),
	}
	return c.group("bookmark", "Name paths on endpoints: list, create, show, rename, delete", list, create, show, rename, del)
}

// showBookmark prints a bookmark made or changed: its name, ID, endpoint
// and path.
func (c *cli) showBookmark(cmd *cobra.Command, b api.Bookmark) error {
	return c.print(cmd, b, func(w io.Writer) {
		row(w, "Name:", b.Name)
		row(w, "ID:", b.ID)
		row(w, "Endpoint:", b.EndpointDisplayName+" ("+b.EndpointID+")")
		row(w, "Path:", b.Path)
	})
}

// findBookmark is the user's bookmark whose ID or name is ref.
func findBookmark(ctx context.Context, cl *apiclient.Client, ref string) (api.Bookmark, error) {
	l, err := cl.Bookmarks(ctx)
	if err != nil {
		return api.Bookmark{}, err
	}
	for _, b := range l.Data {
		if b.ID == ref || b.Name == ref {
			return b, nil
		}
	}
	return api.Bookmark{}, fmt.Errorf("you have no bookmark %q (ferry bookmark list shows them)", ref)
}
