package sshftp

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultRemote is the remote command when none is configured: the same
// lookup as GCT's gridftp-ssh, so that a host set up for globus-url-copy
// (an executable ~/.globus/sshftp or /etc/grid-security/sshftp that starts
// a GridFTP server on its stdin and stdout) serves ferry too. A host with
// neither answers with a 500 banner that says so.
const DefaultRemote = `( test -f .globus/sshftp && .globus/sshftp ) || ( test -f /etc/grid-security/sshftp && /etc/grid-security/sshftp ) || printf '500 Server is not configured for SSHFTP connections.\r\n'`

// Dialer opens GridFTP control connections through ssh. Each Dial is an
// ssh process of its own.
type Dialer struct {
	// Command is the ssh program and its first arguments, e.g. "ssh", "-F",
	// "FILE"; nil means "ssh". Dial adds -o BatchMode=yes (no password
	// prompt: keys or an agent only), -p PORT, -l USER, the host and the
	// remote command.
	Command []string
	// User is the login name; "" means ssh's choice (its configuration,
	// else the local user).
	User string
	// Remote is the command ssh runs on the host; "" means DefaultRemote.
	Remote string
}

// stderrLimit bounds the ssh error output kept for messages.
const stderrLimit = 4 << 10

// Dial starts ssh to addr (host:port) and returns the connection over its
// stdin and stdout; network is ignored (always an SSH connection over
// TCP). The connection's RemoteAddr is addr's first IP address and its
// LocalAddr the local address that reaches it, so the host must resolve
// here as it does for ssh. When ssh fails, reading the connection returns
// an error with what ssh printed ("Permission denied (publickey).").
// Closing it ends ssh.
func (d Dialer) Dial(ctx context.Context, _, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if host == "" || strings.HasPrefix(host, "-") {
		return nil, fmt.Errorf("sshftp: bad host %q", host)
	}
	pn, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("sshftp: bad port %q", port)
	}
	remote, local, err := endpoints(ctx, host, int(pn))
	if err != nil {
		return nil, err
	}
	args := d.args(host, int(pn))
	cmd := exec.Command(args[0], args[1:]...)
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	stderr := &capture{limit: stderrLimit}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, stderr
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("sshftp: start %s: %w", args[0], err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	c := &Conn{r: outR, w: inW, local: local, remote: remote}
	c.explain = func() error {
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			return nil
		}
		if cmd.ProcessState.Success() {
			return nil
		}
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = cmd.ProcessState.String()
		}
		return fmt.Errorf("ssh %s: %s", host, msg)
	}
	c.done = func() {
		select {
		case <-exited:
		case <-time.After(2 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	}
	return c, nil
}

// args is the ssh command line for host and port.
func (d Dialer) args(host string, port int) []string {
	args := append([]string(nil), d.Command...)
	if len(args) == 0 {
		args = []string{"ssh"}
	}
	args = append(args, "-o", "BatchMode=yes", "-p", strconv.Itoa(port))
	if d.User != "" {
		args = append(args, "-l", d.User)
	}
	remote := d.Remote
	if remote == "" {
		remote = DefaultRemote
	}
	return append(args, "--", host, remote)
}

// endpoints are the TCP addresses of an SSH connection to host:port: the
// host's first address, and the local address that reaches it (no packet
// is sent).
func endpoints(ctx context.Context, host string, port int) (remote, local *net.TCPAddr, err error) {
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return nil, nil, fmt.Errorf("sshftp: %w", err)
	}
	remote = &net.TCPAddr{IP: ips[0].IP, Port: port, Zone: ips[0].Zone}
	u, err := net.DialUDP("udp", nil, &net.UDPAddr{IP: remote.IP, Port: port, Zone: remote.Zone})
	if err != nil {
		return nil, nil, fmt.Errorf("sshftp: no route to %s: %w", host, err)
	}
	defer u.Close()
	la := u.LocalAddr().(*net.UDPAddr)
	return remote, &net.TCPAddr{IP: la.IP, Zone: la.Zone}, nil
}

// capture keeps the first limit bytes written to it; safe for concurrent use.
type capture struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	limit int
}

func (t *capture) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if room := t.limit - t.buf.Len(); room > 0 {
		t.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (t *capture) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}
