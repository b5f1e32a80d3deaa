//go:build interop

package interop

// ferry connect end to end: the real `ferry server` with its relay (one
// process, or two on one PostgreSQL), the real `ferry connect` agents,
// each in a network namespace whose nftables firewall drops every inbound
// connection attempt, a real `ferry gridftp` as the ordinary endpoint, and
// the real CLI. Needs root, ip and nft.

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"ferry/internal/interoptest"
	"ferry/internal/pgtest"
	"ferry/service/api"
	"ferry/service/domain"
)

// needNetns skips the test (fails it under FERRY_INTEROP=required) unless
// it runs as root with ip and nft (Debian: iproute2, nftables).
func needNetns(t *testing.T) {
	t.Helper()
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	for _, tool := range []string{"ip", "nft", "ss"} {
		if _, err := toolPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) == 0 {
		return
	}
	msg := fmt.Sprintf("ferry connect tests need %s (network namespaces and an nftables firewall; Debian: iproute2 nftables)",
		strings.Join(missing, ", "))
	interoptest.Missing(t, msg)
}

// sh runs a command and fails the test if it fails.
func sh(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// firewall drops every inbound connection attempt: only packets of
// connections the namespace opened, and loopback, come in.
const firewall = `table inet f {
	chain in {
		type filter hook input priority 0; policy drop;
		ct state established,related accept
		iif lo accept
	}
}
`

// firewalledNS is a network namespace joined to this one by a veth pair
// (hostIP here, ip there, a default route back), behind firewall.
type firewalledNS struct {
	name, hostIP, ip string
}

// newFirewalledNS makes namespace name on 10.201.n.0/24 and removes it at
// cleanup (and first, if a crashed run left it).
func newFirewalledNS(t *testing.T, name string, n int) *firewalledNS {
	t.Helper()
	ns := &firewalledNS{name: name, hostIP: fmt.Sprintf("10.201.%d.1", n), ip: fmt.Sprintf("10.201.%d.2", n)}
	host, peer := fmt.Sprintf("fc%dh", n), fmt.Sprintf("fc%dn", n)
	exec.Command("ip", "netns", "del", name).Run()
	exec.Command("ip", "link", "del", host).Run()
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() }) // takes the veth pair with it
	sh(t, "ip", "netns", "add", name)
	sh(t, "ip", "link", "add", host, "type", "veth", "peer", "name", peer)
	sh(t, "ip", "link", "set", peer, "netns", name)
	sh(t, "ip", "addr", "add", ns.hostIP+"/24", "dev", host)
	sh(t, "ip", "link", "set", host, "up")
	for _, args := range [][]string{
		{"ip", "addr", "add", ns.ip + "/24", "dev", peer},
		{"ip", "link", "set", peer, "up"},
		{"ip", "link", "set", "lo", "up"},
		{"ip", "route", "add", "default", "via", ns.hostIP},
	} {
		sh(t, "ip", append([]string{"netns", "exec", name}, args...)...)
	}
	cmd := exec.Command("ip", "netns", "exec", name, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(firewall)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft: %v\n%s", err, out)
	}
	return ns
}

// exec runs a command inside the namespace.
func (ns *firewalledNS) exec(t *testing.T, name string, args ...string) string {
	t.Helper()
	return sh(t, "ip", append([]string{"netns", "exec", ns.name, name}, args...)...)
}

// connectAgent is a `ferry connect` child process inside a namespace.
type connectAgent struct {
	child
	ns                *firewalledNS
	service           string
	root, config      string
	endpoint, display string
}

func newConnectAgent(t *testing.T, ns *firewalledNS, service, endpoint string) *connectAgent {
	a := &connectAgent{child: child{t: t, name: "ferry connect (" + endpoint + ")", bin: "ip", log: &logBuffer{}},
		ns: ns, service: service, root: t.TempDir(), config: t.TempDir(), display: endpoint}
	t.Cleanup(func() { a.stop(10 * time.Second) })
	return a
}

// start runs the agent; with a setup key it pairs first.
func (a *connectAgent) start(setupKey string) {
	a.t.Helper()
	args := []string{"netns", "exec", a.ns.name, ferryBin, "connect", "--service", a.service,
		"--root", a.root, "--config", a.config, "--log-level", "debug"}
	if setupKey != "" {
		args = append(args, "--setup-key", setupKey)
	}
	a.args = args
	a.launch()
}

// waitConnected waits until the service shows the agent connected (or
// not, with want false).
func (a *connectAgent) waitConnected(c *serviceCLI, want bool) {
	a.t.Helper()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var ep api.Endpoint
		c.decode(&ep, "endpoint", "show", a.display)
		if ep.Connected == want {
			return
		}
		if p := a.current(); want && p.exited() {
			a.t.Fatalf("ferry connect exited: %v\n%s", p.err, a.log)
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("agent of %s connected %v after 15 s, want %v\n%s", a.display, ep.Connected, want, a.log)
		}
	}
}

// addConnectEndpoint creates a connect endpoint with the CLI and returns
// its setup key.
func addConnectEndpoint(c *serviceCLI, name string) string {
	c.t.Helper()
	var k api.SetupKey
	c.decode(&k, "endpoint", "add", name, "--connect")
	if k.SetupKey == "" {
		c.t.Fatalf("ferry endpoint add %s --connect gave no setup key", name)
	}
	return k.SetupKey
}

// freePortOn returns a TCP port on ip that was free a moment ago.
func freePortOn(t *testing.T, ip string) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// startConnectService starts ferry server on host, which the namespaces
// reach, with the given flags.
func startConnectService(t *testing.T, host string, cfg serviceConfig) *ferryService {
	t.Helper()
	svc := &ferryService{child: child{t: t, name: "ferry server", log: &logBuffer{}}, cfg: cfg, addr: net.JoinHostPort(host, freePortOn(t, host))}
	svc.args = append(append([]string{"server", "--listen", svc.addr, "--lease", serviceLease.String()}, storeArgs(cfg)...), cfg.Args...)
	if cfg.KeyFile != "" {
		svc.args = append(svc.args, "--key-file", cfg.KeyFile)
	}
	if cfg.WorkerID != "" {
		svc.name += " " + cfg.WorkerID
		svc.args = append(svc.args, "--worker-id", cfg.WorkerID)
	}
	t.Cleanup(svc.stop)
	svc.start()
	return svc
}

// TestConnect: agents behind firewalls that drop every inbound connection
// attempt take part in transfers with an ordinary endpoint, both ways (the
// agent connects out to ferry gridftp either way; GCT connects to the
// relay), and with each other through the relay; an agent stopped mid-transfer leaves
// its task INACTIVE until it is back; a setup key pairs once; a new one
// revokes the agent paired before.
func TestConnect(t *testing.T) {
	needNetns(t)
	needFerry(t)
	nsA, nsB := newFirewalledNS(t, "ferryC1", 1), newFirewalledNS(t, "ferryC2", 2)
	host := nsA.hostIP // the service's host, as both namespaces reach it

	// The relay runs on the API's port: the agents need only its URL. The
	// GCT server below listens on loopback only, which endpoints of a
	// service that is not local may use only when the operator opens it.
	svc := startConnectService(t, host, serviceConfig{Data: t.TempDir(),
		Args: []string{"--endpoint-networks", "0.0.0.0/0,::/0,127.0.0.0/8"}})
	c := newServiceUser(t, svc, "")

	plainRoot := t.TempDir()
	plain := &ferryServer{child: child{t: t, name: "ferry gridftp", log: &logBuffer{}}, root: plainRoot, addr: net.JoinHostPort(host, freePortOn(t, host))}
	plain.args = []string{"gridftp", "--root", plainRoot, "--listen", plain.addr, "--anonymous", "--anonymous-write"}
	t.Cleanup(plain.stop)
	plain.start()
	c.addEndpoint("dtn", plain)

	a := newConnectAgent(t, nsA, svc.URL(), "laptopA")
	b := newConnectAgent(t, nsB, svc.URL(), "laptopB")
	keyA, keyB := addConnectEndpoint(c, "laptopA"), addConnectEndpoint(c, "laptopB")
	a.start(keyA)
	b.start(keyB)
	a.waitConnected(c, true)
	b.waitConnected(c, true)

	t.Run("firewall", func(t *testing.T) {
		// A listener inside the namespace answers there, and not from here.
		probe := nsA.ip + ":" + "2811"
		p, err := startProc("ip", []string{"netns", "exec", nsA.name, ferryBin, "gridftp", "--root", t.TempDir(),
			"--listen", probe, "--anonymous"}, &logBuffer{})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { p.signalGroup(syscall.SIGKILL); p.wait(5 * time.Second) }()
		var banner string
		for deadline := time.Now().Add(10 * time.Second); !strings.HasPrefix(banner, "220"); time.Sleep(50 * time.Millisecond) {
			out, _ := exec.Command("ip", "netns", "exec", nsA.name, "bash", "-c",
				"exec 3<>/dev/tcp/"+strings.ReplaceAll(probe, ":", "/")+" && head -c 3 <&3").Output()
			if banner = string(out); time.Now().After(deadline) {
				t.Fatalf("the probe server in %s does not answer there", nsA.name)
			}
		}
		conn, err := net.DialTimeout("tcp", probe, 2*time.Second)
		var ne net.Error
		if err == nil {
			conn.Close()
			t.Fatalf("connected from outside to %s inside the firewalled namespace", probe)
		}
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("connecting into the namespace: %v; want a timeout (dropped by the firewall)", err)
		}
		// The agents listen on nothing.
		if out := nsB.exec(t, "ss", "-Hltn"); strings.TrimSpace(out) != "" {
			t.Fatalf("something listens in %s:\n%s", nsB.name, out)
		}
	})

	makeServiceTree(t, filepath.Join(a.root, "src"), 60, 1)
	for _, leg := range []struct {
		name, from, to string
		want, got      string // trees
	}{
		{"agent to ordinary", "laptopA:/src", "dtn:/a2o", filepath.Join(a.root, "src"), filepath.Join(plainRoot, "a2o")},
		{"ordinary to agent", "dtn:/a2o", "laptopB:/o2a", filepath.Join(plainRoot, "a2o"), filepath.Join(b.root, "o2a")},
		{"agent to agent", "laptopB:/o2a", "laptopA:/a2a", filepath.Join(b.root, "o2a"), filepath.Join(a.root, "a2a")},
	} {
		t.Run(leg.name, func(t *testing.T) {
			id := c.transfer(leg.from, leg.to, "-r", "--verify-checksum")
			task := c.succeeded(id, time.Minute)
			if err := compareTrees(leg.want, leg.got); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d files, %d bytes", leg.name, task.FilesTransferred, task.BytesTransferred)
		})
	}

	// GCT cannot listen as a MODE E sender: the agent's passive address is
	// the relay's, which GCT connects to.
	t.Run("GCT to agent", func(t *testing.T) {
		needTools(t)
		gct := startGCTServer(t)
		makeServiceTree(t, gct.Path("fromgct"), 20, 1)
		c.addEndpoint("gct", gct)
		id := c.transfer("gct:"+epPath(gct, "fromgct"), "laptopB:/fromgct", "-r", "--verify-checksum")
		c.succeeded(id, time.Minute)
		if err := compareTrees(gct.Path("fromgct"), filepath.Join(b.root, "fromgct")); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("agent away", func(t *testing.T) {
		files := makeServiceTree(t, filepath.Join(a.root, "tree"), 300, 1)
		th := startThrottle(t, plain, time.Millisecond, 40*time.Millisecond)
		id := c.transfer("laptopA:/tree", "dtn:/tree", "-r")
		c.waitFor(id, "files recorded done", 30*time.Second, func(t api.Task) bool { return t.FilesTransferred > 0 })
		d := snapshotDone(t, c, id, nil, plain, "")
		a.kill9()
		d.logEnd = len(a.log.Bytes())
		th.release()
		task := c.waitFor(id, "INACTIVE", 15*time.Second, func(t api.Task) bool { return t.Status == domain.StatusInactive })
		if task.NiceStatus != domain.NiceEndpointOffline || !strings.Contains(c.events(id), "endpoint alice#laptopA's agent is not connected") {
			t.Fatalf("task INACTIVE (%s); events:\n%s", task.NiceStatus, c.events(id))
		}
		t.Logf("agent stopped: %d of %d files recorded done", len(d.paths), files)
		a.start("") // no key: the saved certificate
		task = c.succeeded(id, time.Minute)
		if task.Files != int64(files) {
			t.Errorf("task counts %d files, want %d", task.Files, files)
		}
		if err := compareTrees(filepath.Join(a.root, "tree"), filepath.Join(plainRoot, "tree")); err != nil {
			t.Fatal(err)
		}
		checkNotResent(t, d, &ferryServer{child: child{log: a.log}, root: a.root}, plain)
	})

	t.Run("setup keys", func(t *testing.T) {
		// Used once already, by b.
		r := runFerryCLI(t, 30*time.Second, nil, "", "connect", "--service", svc.URL(), "--setup-key", keyB,
			"--root", t.TempDir(), "--config", t.TempDir())
		if r.code == 0 || !strings.Contains(r.stderr, "not valid") {
			t.Fatalf("second use of a setup key:\n%s", r)
		}
		// A new key revokes b's certificate: b is dropped and refused.
		var k api.SetupKey
		c.decode(&k, "endpoint", "setup-key", "laptopB")
		if !b.current().wait(15 * time.Second) {
			t.Fatalf("the revoked agent still runs\n%s", b.log)
		}
		if !strings.Contains(b.log.String(), "revoked") || b.current().err == nil {
			t.Fatalf("revoked agent: exit %v\n%s", b.current().err, b.log)
		}
		b.waitConnected(c, false)
		// The new key pairs, and the agent serves again.
		b.start(k.SetupKey)
		b.waitConnected(c, true)
		id := c.transfer("laptopB:/o2a", "dtn:/again", "-r")
		c.succeeded(id, time.Minute)
	})
}

// waitLog waits until the child's log since offset from holds want, and
// says how long that took.
func waitLog(t *testing.T, c *child, from int, want string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for !strings.Contains(string(c.log.Bytes()[from:]), want) {
		if time.Since(start) > within {
			t.Fatalf("%s did not log %q within %v\n%s", c.name, want, within, c.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// TestConnectProcesses: two ferry server processes on one PostgreSQL, each
// with its own --data (one connect CA, kept in the database); an agent is
// connected to A, and A is killed mid-transfer: the agent connects to B
// (whose relay has a port of its own, --relay-listen) within seconds, and
// the task goes on and succeeds, re-sending nothing recorded done. Either
// B drives the task through A, which runs none (B also lists the agent's
// files through A), or A runs it and B, started only then, claims it once
// A's lease lapses (the agent learns of B's relay from A meanwhile).
func TestConnectProcesses(t *testing.T) {
	needNetns(t)
	needFerry(t)
	ns := newFirewalledNS(t, "ferryC3", 3)
	for _, c := range []struct {
		name  string
		aRuns bool
	}{
		{"driven through the agent's process", false},
		{"run by the agent's process", true},
	} {
		t.Run(c.name, func(t *testing.T) { connectProcesses(t, ns, c.aRuns) })
	}
}

func connectProcesses(t *testing.T, ns *firewalledNS, aRuns bool) {
	host := ns.hostIP
	dsn := pgtest.DSN(t)
	key := filepath.Join(t.TempDir(), "secret.key")
	var aArgs []string
	if !aRuns {
		aArgs = []string{"--no-worker"}
	}
	a := startConnectService(t, host, serviceConfig{Data: t.TempDir(), DB: dsn, KeyFile: key, WorkerID: "server-a", Args: aArgs})
	bRelay := net.JoinHostPort(host, freePortOn(t, host))
	var b *ferryService
	var viaB *serviceCLI
	startB := func() {
		b = startConnectService(t, host, serviceConfig{Data: t.TempDir(), DB: dsn, KeyFile: key, WorkerID: "server-b",
			Args: []string{"--relay-listen", bRelay}})
		viaB = &serviceCLI{t: t, home: t.TempDir()}
		viaB.login(b)
	}
	viaA := newServiceUser(t, a, "")
	if !aRuns {
		startB()
	}
	plainRoot := t.TempDir()
	plain := &ferryServer{child: child{t: t, name: "ferry gridftp", log: &logBuffer{}}, root: plainRoot, addr: net.JoinHostPort(host, freePortOn(t, host))}
	plain.args = []string{"gridftp", "--root", plainRoot, "--listen", plain.addr, "--anonymous", "--anonymous-write"}
	t.Cleanup(plain.stop)
	plain.start()
	viaA.addEndpoint("dtn", plain)

	// Made through A, paired with A's relay, the first it is told of.
	laptop := newConnectAgent(t, ns, a.URL(), "laptop")
	laptop.start(addConnectEndpoint(viaA, "laptop"))
	laptop.waitConnected(viaA, true)
	waitLog(t, &a.child, 0, `msg="relay: agent connected"`, 5*time.Second)
	files := makeServiceTree(t, filepath.Join(laptop.root, "tree"), 300, 1)
	driver := viaA
	if !aRuns {
		driver = viaB
		laptop.waitConnected(viaB, true) // B sees it connected to A
		if out := viaB.ok("", "ls", "laptop:/tree"); !strings.Contains(out, "f-0000.dat") {
			t.Fatalf("ls through B:\n%s", out)
		}
	}

	th := startThrottle(t, plain, time.Millisecond, 40*time.Millisecond)
	id := driver.transfer("laptop:/tree", "dtn:/tree", "-r")
	driver.waitFor(id, "files recorded done", 30*time.Second, func(t api.Task) bool { return t.FilesTransferred > 0 })
	th.freeze() // nothing moves until A is killed
	if aRuns {
		if !a.claimedBy(id, 0) {
			t.Fatalf("A did not claim task %s", id)
		}
		startB()
		took := waitLog(t, &laptop.child, 0, "tcp://"+bRelay, 15*time.Second)
		t.Logf("the agent learned of B's relay %v after B started", took.Round(time.Millisecond))
	}
	d := snapshotDone(t, viaB, id, nil, plain, "")
	from := len(b.log.Bytes())
	a.kill9()
	d.logEnd = len(laptop.log.Bytes())
	th.release()
	took := waitLog(t, &b.child, from, `msg="relay: agent connected"`, 15*time.Second)
	t.Logf("the agent connected to B %v after A was killed; %d of %d files were recorded done", took.Round(time.Millisecond), len(d.paths), files)
	if took > 5*time.Second {
		t.Errorf("the agent took %v to connect to B", took)
	}
	task := viaB.succeeded(id, time.Minute)
	if task.Files != int64(files) {
		t.Errorf("task counts %d files, want %d", task.Files, files)
	}
	if err := compareTrees(filepath.Join(laptop.root, "tree"), filepath.Join(plainRoot, "tree")); err != nil {
		t.Fatal(err)
	}
	checkNotResent(t, d, &ferryServer{child: child{log: laptop.log}, root: laptop.root}, plain)
	if a.claimedBy(id, 0) != aRuns || !b.claimedBy(id, 0) {
		t.Errorf("task claimed by A: %v, by B: %v; want by A %v, and by B", a.claimedBy(id, 0), b.claimedBy(id, 0), aRuns)
	}
}
