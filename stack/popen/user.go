package popen

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// defaultUser is who programs run as, by default, when the server runs
// as root and the session maps to no local account.
const defaultUser = "nobody"

// runAs is who a program runs as: cred nil, the server's own user.
type runAs struct{ cred *syscall.Credential }

// runAsFor is who a session's programs run as. A server that runs as root
// runs them as the session's local account (session, e.g. the gridmap's
// user), else as configured ("": nobody), never as root; any other server
// as itself.
func runAsFor(session, configured string) (runAs, error) {
	if os.Geteuid() != 0 {
		return runAs{}, nil
	}
	name := session
	if name == "" {
		name = configured
	}
	if name == "" {
		name = defaultUser
	}
	cred, err := credential(name)
	if err != nil {
		return runAs{}, err
	}
	if cred.Uid == 0 {
		return runAs{}, fmt.Errorf("programs never run as root (user %s)", name)
	}
	return runAs{cred: cred}, nil
}

// credential is the user name's ids and groups.
func credential(name string) (*syscall.Credential, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("programs run as %s: %w", name, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("programs run as %s: ids %s:%s are not numbers", name, u.Uid, u.Gid)
	}
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	groups, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("programs run as %s: %w", name, err)
	}
	for _, g := range groups {
		if id, err := strconv.ParseUint(g, 10, 32); err == nil {
			cred.Groups = append(cred.Groups, uint32(id))
		}
	}
	return cred, nil
}
