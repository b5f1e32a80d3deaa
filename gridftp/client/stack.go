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

// sendStack sends SITE SETDISKSTACK without waiting for the reply, which
// the caller reads, and takes the stack as set.
func (c *Conn) sendStack(spec string) error {
	if err := c.Send("SITE SETDISKSTACK %s", spec); err != nil {
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

// GetMembers retrieves, through the session's stack, a transfer of path
// that names members (SITE MEMBERS), into memory (at most 256 MiB): the
// checksum list of a directory's files, say.
func (c *Conn) GetMembers(ctx context.Context, path string, names []string) ([]byte, error) {
	if len(names) > 0 {
		cmds := membersCommands(names)
		if err := c.write(cmds...); err != nil {
			return nil, err
		}
		if _, err := c.finals(ctx, len(cmds)); err != nil {
			return nil, err
		}
	}
	var m memFile
	if _, err := c.Get(ctx, path, &m, 0, -1); err != nil {
		return nil, err
	}
	return m.b, nil
}
