package popen

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
)

// isolator starts programs each in a PID namespace of its own, whose
// processes the kernel kills all at once when the program (its init)
// ends or is killed: whatever a program starts, also in a session of its
// own (setsid), dies with its transfer. A server that runs as root makes
// the namespace; one that does not makes a user namespace for it too,
// mapping only its own user, where the kernel allows; where it does not,
// programs run in a process group of their own, which is killed on an
// abort, and the server says so once in its log.
type isolator struct {
	mu       sync.Mutex
	noUserNS bool // the kernel refused a user namespace: groups only
}

// Each program also leads a process group (killed whole on an abort) and
// is killed if the server dies first.
func baseAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: cred}
}

// startTree starts the command command makes, with cred (nil: the
// server's user), in a process tree of its own; isolated is false when it
// leads only a process group.
func (iso *isolator) startTree(command func(*syscall.SysProcAttr) *exec.Cmd, cred *syscall.Credential, log *slog.Logger) (cmd *exec.Cmd, isolated bool, err error) {
	attr := baseAttr(cred)
	attr.Cloneflags = syscall.CLONE_NEWPID
	if os.Geteuid() == 0 {
		cmd := command(attr)
		if err := cmd.Start(); err != nil {
			return nil, false, fmt.Errorf("start in a PID namespace of its own: %w", err)
		}
		return cmd, true, nil
	}
	iso.mu.Lock()
	groupsOnly := iso.noUserNS
	iso.mu.Unlock()
	if !groupsOnly {
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getuid(), HostID: os.Getuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getgid(), HostID: os.Getgid(), Size: 1}}
		cmd := command(attr)
		err := cmd.Start()
		if err == nil || !refusedNS(err) {
			return cmd, err == nil, err
		}
		iso.mu.Lock()
		if !iso.noUserNS {
			iso.noUserNS = true
			log.Warn("popen: the kernel gives this user no namespaces; programs run in a process group of their own, and a process that leaves it (setsid) may outlive its transfer: run as root, or allow user namespaces", "err", err)
		}
		iso.mu.Unlock()
	}
	cmd = command(baseAttr(cred))
	return cmd, false, cmd.Start()
}

// refusedNS reports whether the kernel refused to make a namespace.
func refusedNS(err error) bool {
	return errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) ||
		errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EUSERS)
}
