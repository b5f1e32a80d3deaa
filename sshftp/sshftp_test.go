package sshftp

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestArgs(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    Dialer
		want []string
	}{
		{"defaults", Dialer{}, []string{"ssh", "-o", "BatchMode=yes", "-p", "22", "--", "h", DefaultRemote}},
		{"all", Dialer{Command: []string{"ssh", "-F", "cfg"}, User: "alice", Remote: "ferry gridftp --stdio"},
			[]string{"ssh", "-F", "cfg", "-o", "BatchMode=yes", "-p", "22", "-l", "alice", "--", "h", "ferry gridftp --stdio"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.d.args("h", 22); !slices.Equal(got, tc.want) {
				t.Fatalf("args = %q, want %q", got, tc.want)
			}
		})
	}
	d := Dialer{Command: []string{"ssh"}}
	d.args("h", 1)
	if len(d.Command) != 1 {
		t.Fatal("args changed the dialer's command")
	}
}

func TestDialBadAddr(t *testing.T) {
	for _, addr := range []string{"nohost", "-oProxyCommand=x:22", "h:port", ":22"} {
		if c, err := (Dialer{Command: []string{"true"}}).Dial(context.Background(), "tcp", addr); err == nil {
			c.Close()
			t.Errorf("%s: dialled", addr)
		}
	}
}

// shell is a Dialer whose "ssh" is sh running script (ssh's arguments
// become its $0, $1...).
func shell(script string) Dialer { return Dialer{Command: []string{"sh", "-c", script}} }

func TestConnOverProcess(t *testing.T) {
	c, err := shell("exec cat").Dial(context.Background(), "tcp", "127.0.0.1:22")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.RemoteAddr().String(); got != "127.0.0.1:22" {
		t.Errorf("RemoteAddr %s", got)
	}
	if got := c.LocalAddr().String(); !strings.HasPrefix(got, "127.0.0.1:") {
		t.Errorf("LocalAddr %s", got)
	}
	io.WriteString(c, "220 hello\r\n")
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "220 hello\r\n" {
		t.Fatalf("read %q, %v", line, err)
	}
	c.SetReadDeadline(time.Now().Add(-time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("close did not end the process")
	}
}

func TestCloseKillsAStuckProcess(t *testing.T) {
	c, err := shell("trap '' HUP; exec sleep 60").Dial(context.Background(), "tcp", "127.0.0.1:22")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c.Close()
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("close took %v", d)
	}
}

func TestSSHErrorReachesReader(t *testing.T) {
	for _, tc := range []struct {
		name, script, want string
	}{
		{"stderr", "echo 'alice@127.0.0.1: Permission denied (publickey).' >&2; exit 255", "ssh 127.0.0.1: alice@127.0.0.1: Permission denied (publickey)."},
		{"silent", "exit 3", "ssh 127.0.0.1: exit status 3"},
		{"clean end", "exit 0", "EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := shell(tc.script).Dial(context.Background(), "tcp", "127.0.0.1:22")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			_, err = io.ReadAll(c)
			if err == nil {
				err = io.EOF // ReadAll hides a clean end
			}
			if err.Error() != tc.want {
				t.Fatalf("error %q, want %q", err, tc.want)
			}
		})
	}
}

func TestSSHAddrs(t *testing.T) {
	for _, tc := range []struct {
		name          string
		env           map[string]string
		remote, local string
		bad           bool
	}{
		{name: "connection", env: map[string]string{"SSH_CONNECTION": "10.0.0.5 51000 10.0.0.1 22", "SSH_CLIENT": "10.9.9.9 1 22"},
			remote: "10.0.0.5:51000", local: "10.0.0.1:22"},
		{name: "ipv6", env: map[string]string{"SSH_CONNECTION": "::1 51000 ::1 2222"}, remote: "[::1]:51000", local: "[::1]:2222"},
		{name: "client only", env: map[string]string{"SSH_CLIENT": "10.0.0.5 51000 22"}, remote: "10.0.0.5:51000", local: "0.0.0.0:22"},
		{name: "bad connection, good client", env: map[string]string{"SSH_CONNECTION": "x 1 y 2", "SSH_CLIENT": "10.0.0.5 51000 22"},
			remote: "10.0.0.5:51000", local: "0.0.0.0:22"},
		{name: "none", env: map[string]string{}, bad: true},
		{name: "bad port", env: map[string]string{"SSH_CLIENT": "10.0.0.5 99999 22"}, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, l, err := sshAddrs(func(k string) string { return tc.env[k] })
			if tc.bad {
				if err == nil {
					t.Fatalf("read %v %v", r, l)
				}
				return
			}
			if err != nil || r.String() != tc.remote || l.String() != tc.local {
				t.Fatalf("remote %v local %v, %v", r, l, err)
			}
		})
	}
}

// TestDefaultRemote runs DefaultRemote as sshd would (sh -c in the home
// directory): ~/.globus/sshftp when it exists, else
// /etc/grid-security/sshftp, else a 500 reply.
func TestDefaultRemote(t *testing.T) {
	_, err := os.Stat("/etc/grid-security/sshftp")
	system := err == nil
	for _, tc := range []struct {
		name, script, want string
	}{
		{"user's", "#!/bin/sh\nprintf '220 the user s server\\r\\n'\n", "220 the user s server\r\n"},
		{"none", "", "500 Server is not configured for SSHFTP connections.\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			if tc.script != "" {
				os.Mkdir(filepath.Join(home, ".globus"), 0o755)
				if err := os.WriteFile(filepath.Join(home, ".globus", "sshftp"), []byte(tc.script), 0o755); err != nil {
					t.Fatal(err)
				}
			} else if system {
				t.Skip("/etc/grid-security/sshftp exists here")
			}
			// "ssh" runs its last argument in home, as sshd runs the
			// remote command.
			d := Dialer{Command: []string{"sh", "-c", `for a; do last=$a; done; cd "` + home + `" && eval "$last"`}}
			c, err := d.Dial(context.Background(), "tcp", "127.0.0.1:22")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			line, err := bufio.NewReader(c).ReadString('\n')
			if line != tc.want {
				t.Fatalf("read %q, %v; want %q", line, err, tc.want)
			}
		})
	}
}
