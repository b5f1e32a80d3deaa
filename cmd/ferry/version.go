package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// buildVersion is what ferry --version and ferry version say of the
// binary: its module version, the VCS revision it was built from, and
// the Go release that built it.
type buildVersion struct {
	DataType string `json:"DATA_TYPE"`
	Version  string `json:"version"`                 // the module's; "(devel)" from a work tree
	Revision string `json:"revision,omitempty"`      // the VCS commit
	Time     string `json:"revision_time,omitempty"` // the commit's time
	Modified bool   `json:"modified,omitempty"`      // built with uncommitted changes
	Go       string `json:"go_version"`
}

// readVersion is the running binary's version.
func readVersion() buildVersion {
	v := buildVersion{DataType: "version", Version: "(unknown)", Go: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	v.Version = bi.Main.Version
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// String is the one line of ferry --version.
func (v buildVersion) String() string {
	parts := []string{"ferry", v.Version}
	if v.Revision != "" {
		rev := "revision " + v.Revision
		if v.Modified {
			rev += " (modified)"
		}
		parts = append(parts, rev)
	}
	if v.Time != "" {
		parts = append(parts, v.Time)
	}
	return strings.Join(append(parts, v.Go), " ")
}

func newVersionCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print ferry's version, VCS revision and Go version (as ferry --version)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := readVersion()
			return c.print(cmd, v, func(w io.Writer) { fmt.Fprintln(w, v) })
		},
	}
	return c.formatFlag(cmd)
}
