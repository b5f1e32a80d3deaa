package sshftp

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Stdio is the connection of a remote command that sshd started: it reads
// stdin (fd 0) and writes stdout (fd 1), and its addresses are those of
// the SSH connection, read from getenv: SSH_CONNECTION ("client-ip
// client-port server-ip server-port") or, lacking it, SSH_CLIENT
// ("client-ip client-port server-port"), which lacks the server's IP:
// LocalAddr is then 0.0.0.0, and a server should be told the address of
// its data channels. Without either it is not run by sshd and Stdio fails.
func Stdio(getenv func(string) string) (*Conn, error) {
	remote, local, err := sshAddrs(getenv)
	if err != nil {
		return nil, err
	}
	for _, fd := range []int{0, 1} {
		// Non-blocking, the descriptors are polled: deadlines work.
		if err := syscall.SetNonblock(fd, true); err != nil {
			return nil, fmt.Errorf("sshftp: fd %d: %w", fd, err)
		}
	}
	return &Conn{r: os.NewFile(0, "stdin"), w: os.NewFile(1, "stdout"), local: local, remote: remote}, nil
}

// sshAddrs reads the SSH connection's addresses from its environment.
func sshAddrs(getenv func(string) string) (remote, local *net.TCPAddr, err error) {
	if f := strings.Fields(getenv("SSH_CONNECTION")); len(f) == 4 {
		remote, err1 := tcpAddr(f[0], f[1])
		local, err2 := tcpAddr(f[2], f[3])
		if err1 == nil && err2 == nil {
			return remote, local, nil
		}
	}
	if f := strings.Fields(getenv("SSH_CLIENT")); len(f) == 3 {
		remote, err1 := tcpAddr(f[0], f[1])
		local, err2 := tcpAddr("0.0.0.0", f[2])
		if err1 == nil && err2 == nil {
			return remote, local, nil
		}
	}
	return nil, nil, fmt.Errorf("sshftp: neither SSH_CONNECTION nor SSH_CLIENT holds the SSH connection's addresses: not started by sshd")
}

func tcpAddr(ip, port string) (*net.TCPAddr, error) {
	a := net.ParseIP(ip)
	p, err := strconv.ParseUint(port, 10, 16)
	if a == nil || err != nil {
		return nil, fmt.Errorf("sshftp: bad address %q port %q", ip, port)
	}
	return &net.TCPAddr{IP: a, Port: int(p)}, nil
}
