// Package sshftp carries GridFTP control channels over SSH (sshftp://), as
// the Grid Community Toolkit does: the client runs
// "ssh [-p port] [user@]host <remote>" and speaks GridFTP over the ssh
// process's stdin and stdout (Dialer), and the remote command serves one
// session on its own stdin and stdout as the SSH login user (Stdio). The
// data channels are direct TCP connections, not tunnelled.
//
// Both ends are a Conn: a net.Conn over two pipes, whose addresses are
// the TCP addresses of the SSH connection, so that a GridFTP client and
// server treat it as they treat a TCP control connection (PASV and PORT
// addresses, the data channel rules).
package sshftp
