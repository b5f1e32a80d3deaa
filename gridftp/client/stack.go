package client

import (
	"cmp"
	"context"
	"errors"
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

// SetDiskStackThen sets the stack as SetDiskStack does, always, with cmds
// pipelined behind it (DoAll): one round trip for both. A refused stack is
// err; the replies of cmds, or their refusals in errs, come as DoAll's.
func (c *Conn) SetDiskStackThen(ctx context.Context, spec string, cmds []string) (reps []gridftp.Reply, errs []error, err error) {
	if spec == "" {
		spec = "default"
	}
	reps, errs, err = c.DoAll(ctx, append([]string{"SITE SETDISKSTACK " + spec}, cmds...))
	if err != nil {
		return nil, nil, err
	}
	if errs[0] != nil {
		return nil, nil, errs[0]
	}
	if strings.EqualFold(spec, "default") {
		spec = ""
	}
	c.diskStack = spec
	return reps[1:], errs[1:], nil
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

// GetMembers retrieves path through the stack spec ("" for the default),
// naming members (SITE MEMBERS), into memory (at most 256 MiB): the
// checksum list of a directory's files, say. The stack, when it changes,
// and the names go out in one write; the stack stays set.
func (c *Conn) GetMembers(ctx context.Context, spec, path string, names []string) ([]byte, error) {
	var cmds []string
	if spec == "" {
		spec = "default"
	}
	change := spec != c.diskStack && !(spec == "default" && c.diskStack == "")
	if change {
		cmds = append(cmds, "SITE SETDISKSTACK "+spec)
	}
	cmds = append(cmds, membersCommands(names)...)
	if len(cmds) > 0 {
		if err := c.write(cmds...); err != nil {
			return nil, err
		}
		// Every reply is read, a refusal's too, so that none is left for
		// the next command.
		var first error
		for i := range cmds {
			_, err := c.Final(ctx, nil)
			if err != nil && !errors.As(err, new(*gridftp.Error)) {
				return nil, err
			}
			if i == 0 && change && err == nil {
				c.diskStack = strings.TrimPrefix(spec, "default")
			}
			first = cmp.Or(first, err)
		}
		if first != nil {
			return nil, first
		}
	}
	var m memFile
	if _, err := c.Get(ctx, path, &m, 0, -1); err != nil {
		return nil, err
	}
	return m.b, nil
}
