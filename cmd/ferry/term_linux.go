package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// noEcho stops terminal f from echoing what is typed, until restore.
func noEcho(f *os.File) (restore func()) {
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return func() {}
	}
	quiet := *old
	quiet.Lflag &^= unix.ECHO
	quiet.Lflag |= unix.ICANON | unix.ISIG
	if unix.IoctlSetTermios(fd, unix.TCSETS, &quiet) != nil {
		return func() {}
	}
	return func() { unix.IoctlSetTermios(fd, unix.TCSETS, old) }
}
