package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// openTUN creates (or attaches to) the TUN device name, in the current
// thread's network namespace, without packet information headers: one
// packet per Read or Write. The fd is non-blocking, so the file goes through
// the runtime's poller: a goroutine waiting for a packet parks instead of
// holding a thread in a blocking read (which made the runtime's sysmon wake
// constantly to retake the processor, about 12 % of the delay line's CPU).
func openTUN(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("TUNSETIFF %s: %w", name, err)
	}
	return os.NewFile(uintptr(fd), name), nil
}

// openTUNIn creates the TUN device inside the network namespace ns (a name
// under /run/netns, or a path), or in our own namespace when ns is "".
// The device lives in the namespace of the thread that opened /dev/net/tun,
// so the open runs on a locked thread that enters ns; that goroutine never
// unlocks, so the runtime retires the thread instead of reusing it.
func openTUNIn(ns, name string) (*os.File, error) {
	if ns == "" {
		return openTUN(name)
	}
	if !strings.Contains(ns, "/") {
		ns = "/run/netns/" + ns
	}
	type result struct {
		f   *os.File
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		nsfd, err := unix.Open(ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ch <- result{nil, fmt.Errorf("open netns %s: %w", ns, err)}
			return
		}
		defer unix.Close(nsfd)
		if err := unix.Setns(nsfd, unix.CLONE_NEWNET); err != nil {
			ch <- result{nil, fmt.Errorf("setns %s: %w", ns, err)}
			return
		}
		f, err := openTUN(name)
		ch <- result{f, err}
	}()
	r := <-ch
	return r.f, r.err
}
