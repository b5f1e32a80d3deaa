package client

import (
	"context"
	"strings"

	"ferry/gridftp"
)

// membersLine bounds the SITE MEMBERS lines a client sends: well inside
// the control-channel line limit of ferry's server.
const membersLine = 8 << 10

// SetDiskStack chooses the storage-side stack of the session's transfers
// (SITE SETDISKSTACK, in GCT's grammar; "" or "default" for the server's
// default), unless it is the one set last. It waits for the reply: a
// transfer pipelined after a refused stack would go to the wrong place.
func (c *Conn) SetDiskStack(ctx context.Context, spec string) error {
	if spec == "" {
		spec = "default"
	}
	if spec == c.diskStack || (spec == "default" && c.diskStack == "") {
		return nil
	}
	if _, err := c.Do(ctx, "SITE SETDISKSTACK %s", spec); err != nil {
		return err
	}
	if strings.EqualFold(spec, "default") {
		spec = ""
	}
	c.diskStack = spec
	return nil
}

// DiskStack is the stack SetDiskStack set last; "" for the default.
func (c *Conn) DiskStack() string { return c.diskStack }

// membersCommands are the SITE MEMBERS commands that name names for the
// next transfer.
func membersCommands(names []string) []string {
	return gridftp.MembersCommands(names, membersLine)
}
