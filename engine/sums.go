package engine

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"

	"ferry/gridftp"
	"ferry/gridftp/client"
)

// Checksum lists: the checksums of many files at one end cost about a
// round trip, not one each. A ferry server computes them with its cksum
// layer, several files at once, in one transfer of a directory whose
// members are named (SITE MEMBERS); a GCT server whose popen whitelist
// holds md5sum runs it over the files, when the algorithm is MD5; any
// other server answers CKSM commands sent pipelined.

// sumMethod is how one end computes a list of checksums.
type sumMethod int

const (
	sumPipelined sumMethod = iota // CKSM after CKSM, without waiting
	sumLayer                      // ferry's cksum layer
	sumPopen                      // md5sum through GCT's popen
)

// cksumLayer is the name of ferry's checksum-list layer.
const cksumLayer = "cksum"

// popenMD5s are the names under which a GCT server's popen whitelist may
// hold md5sum.
var popenMD5s = []string{"md5sum", "/usr/bin/md5sum", "/bin/md5sum"}

// sumEnd is one end's way of computing checksum lists, found on first use.
type sumEnd struct {
	mu     sync.Mutex
	probed bool
	method sumMethod
	popen  string // for sumPopen: the program as the whitelist names it
}

// probe finds the end's method for alg.
func (e *sumEnd) probe(ctx context.Context, c *client.Conn, alg string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.probed {
		return
	}
	e.probed = true
	if names, ok := c.Feature("DISKSTACK"); ok {
		if offers(names, cksumLayer) {
			e.method = sumLayer
		}
		return
	}
	if !strings.EqualFold(alg, "MD5") {
		return
	}
	for _, prog := range popenMD5s {
		if c.SetDiskStack(ctx, "popen:argv=#"+prog) == nil {
			if c.SetDiskStack(ctx, "") == nil {
				e.method, e.popen = sumPopen, prog
			}
			return
		}
	}
}

// sums computes alg over the files rels below dir at the end c. errs
// holds each file's failure; err is a broken session. A list that fails
// as a whole is asked again with pipelined CKSM.
func (e *sumEnd) sums(ctx context.Context, c *client.Conn, alg, dir string, rels []string) (sums []string, errs []error, err error) {
	e.probe(ctx, c, alg)
	paths := make([]string, len(rels))
	for i, r := range rels {
		paths[i] = path.Join(dir, r)
	}
	switch e.method {
	case sumLayer:
		sums, errs, err = listSums(ctx, c, cksumLayer+":alg="+strings.ToLower(alg), dir, rels, rels)
	case sumPopen:
		safe := popenSafe(dir)
		for _, p := range paths {
			safe = safe && popenSafe(p)
		}
		if safe {
			sums, errs, err = listSums(ctx, c, "popen:argv=#"+e.popen+"#--#"+strings.Join(paths, "#"), dir, nil, paths)
			break
		}
		fallthrough
	default:
		return c.ChecksumAll(ctx, alg, paths)
	}
	if err != nil {
		if !errors.As(err, new(*gridftp.Error)) {
			return nil, nil, err
		}
		return c.ChecksumAll(ctx, alg, paths)
	}
	return sums, errs, nil
}

// listSums retrieves a checksum list of dir through the stack spec
// (members names, when the layer takes them) and picks the sum of each of
// want, as the list names them. A ferry layer stays set (its session's
// next transfer sets its own stack, and nothing else goes through it); a
// program's stack is reset to the default, as GCT may read files for
// other commands through it.
func listSums(ctx context.Context, c *client.Conn, spec, dir string, members, want []string) ([]string, []error, error) {
	out, gerr := c.GetMembers(ctx, spec, dir, members)
	if popenStack(spec) {
		if err := c.SetDiskStack(ctx, ""); gerr == nil && err != nil {
			return nil, nil, err
		}
	}
	if gerr != nil {
		return nil, nil, gerr
	}
	listed := parseSumList(out)
	sums, errs := make([]string, len(want)), make([]error, len(want))
	for i, w := range want {
		if s, ok := listed[w]; ok {
			sums[i] = s
		} else {
			errs[i] = fmt.Errorf("%s: not in the checksum list", w)
		}
	}
	return sums, errs, nil
}

// parseSumList reads md5sum's format: "<hex>  <name>" (or " *<name>"),
// a name with a backslash or newline escaped and its line begun with "\".
func parseSumList(b []byte) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		escaped := strings.HasPrefix(line, "\\")
		if escaped {
			line = line[1:]
		}
		sum, name, ok := strings.Cut(line, " ")
		if !ok || len(name) < 2 || (name[0] != ' ' && name[0] != '*') {
			continue
		}
		name = name[1:]
		if escaped {
			name = strings.NewReplacer("\\\\", "\\", "\\n", "\n", "\\r", "\r").Replace(name)
		}
		m[name] = strings.ToLower(sum)
	}
	return m
}
