package arch

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// moduleRoot is the repository root, two levels up.
const moduleRoot = "../.."

// pkg is one package directory of the module.
type pkg struct {
	path    string          // import path
	hasCode bool            // a file that is not a test
	codeDoc bool            // a package doc comment in such a file
	testDoc bool            // one in a test
	imports map[string]bool // of the files that are not tests
}

func loadPackages(t *testing.T) map[string]*pkg {
	t.Helper()
	out := map[string]*pkg{}
	err := filepath.WalkDir(moduleRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "bin") && p != moduleRoot {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ParseComments|parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(moduleRoot, filepath.Dir(p))
		ip := "ferry"
		if rel != "." {
			ip = "ferry/" + filepath.ToSlash(rel)
		}
		k := out[ip]
		if k == nil {
			k = &pkg{path: ip, imports: map[string]bool{}}
			out[ip] = k
		}
		doc := f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != ""
		if strings.HasSuffix(p, "_test.go") {
			k.testDoc = k.testDoc || doc
			return nil
		}
		k.hasCode, k.codeDoc = true, k.codeDoc || doc
		for _, im := range f.Imports {
			s, _ := strconv.Unquote(im.Path.Value)
			k.imports[s] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Every package has a doc comment, in a file that is not a test unless the
// package has only tests.
func TestEveryPackageHasADocComment(t *testing.T) {
	for _, p := range loadPackages(t) {
		if !p.codeDoc && (p.hasCode || !p.testDoc) {
			t.Errorf("package %s has no package doc comment", p.path)
		}
	}
}

// allowed lists, for each package of the module, the ferry packages it may
// import (a pattern "P/..." admits every package under P); anything else of
// ferry's is a layering violation. A package missing from it fails
// TestEveryPackageHasALayer.
var allowed = map[string][]string{
	"ferry/gridftp":                   {"ferry/gsi/gss"},                                                                                                                                                                              // data channels run a GSI security context
	"ferry/gsi/gss":                   {},                                                                                                                                                                                             // GSI's GSSAPI: TLS in tokens; who is trusted is the caller's
	"ferry/gridftp/server":            {"ferry/gridftp", "ferry/gridftp/client", "ferry/gsi/gss", "ferry/storage", "ferry/stack", "ferry/checksum", "ferry/internal/throttle", "ferry/internal/connlimit", "ferry/internal/partname"}, // a striped front end is its movers' client; SITE PARTSTOR's temporary names
	"ferry/gridftp/server/servertest": {"ferry/gridftp/server", "ferry/storage/posix"},
	"ferry/storage":                   {},
	// The storage side of a transfer as a stack of layers over a driver.
	"ferry/stack":          {"ferry/storage"},
	"ferry/stack/popen":    {"ferry/stack", "ferry/storage"},
	"ferry/stack/compress": {"ferry/stack"},
	"ferry/stack/forward":  {"ferry/stack", "ferry/storage", "ferry/gridftp", "ferry/gridftp/client", "ferry/gridftp/multicast", "ferry/gsi", "ferry/gsi/gsilogin", "ferry/internal/partname"}, // gsiftp:// children; a relay child's temporary names
	// The multicast layer's wire forms, which the engine shares: no server code.
	"ferry/gridftp/multicast": {"ferry/gridftp", "ferry/stack"},
	// Many-file layers: tar streams and checksum lists.
	"ferry/stack/tarstream":    {"ferry/stack", "ferry/storage", "ferry/checksum", "ferry/internal/partname"},
	"ferry/internal/partname":  {}, // the temporary names of files being written
	"ferry/internal/synclevel": {}, // when a file the destination has is skipped, and its encodings
	"ferry/internal/fault":     {}, // whether a failure is worth another try, and the wait before it
	"ferry/storage/posix":      {"ferry/storage"},
	"ferry/storage/synthetic":  {"ferry/storage"},                   // a generated source, for benchmarks
	"ferry/storage/sink":       {"ferry/storage", "ferry/checksum"}, // a destination that hashes and discards, for benchmarks
	"ferry/checksum":           {},
	"ferry/internal/plural":    {},
	"ferry/internal/passwd":    {},
	"ferry/internal/throttle":  {},
	"ferry/internal/connlimit": {}, // connections counted in all and by address
	"ferry/internal/netpolicy": {},
	"ferry/sshftp":             {}, // GridFTP control channels over ssh: pipes as a net.Conn
	"ferry/gsi":                {}, // GSI's PKI: credentials, proxies, chain checks, grid-mapfile
	"ferry/gridftp/client":     {"ferry/gridftp", "ferry/gsi/gss"},
	"ferry/engine":             {"ferry/gridftp", "ferry/gridftp/client", "ferry/gridftp/multicast", "ferry/internal/plural", "ferry/internal/partname", "ferry/internal/synclevel", "ferry/internal/fault"}, // builds multicast trees
	"ferry/service/domain":     {"ferry/internal/plural", "ferry/internal/synclevel"},
	"ferry/service/secret":     {"ferry/service/domain"},

	// The GridFTP login of a grid credential, shared by ferry copy and
	// the service.
	"ferry/gsi/gsilogin": {"ferry/gsi", "ferry/gsi/gss", "ferry/gridftp", "ferry/gridftp/client"},
	// A MyProxy client: GSI on a socket, a proxy fetched with a pass phrase.
	"ferry/gsi/myproxy": {"ferry/gsi", "ferry/gsi/gss"},

	// The REST API: its documents, server and client.
	"ferry/service/api":       {"ferry/service/domain"},
	"ferry/service/httpapi":   {"ferry/service/domain", "ferry/service/api"}, // decode, the service core (domain's interfaces), encode (see exceptions)
	"ferry/service/apiclient": {"ferry/service/api"},

	// The service's application layer: every rule of its use cases,
	// behind the service interfaces of domain.
	"ferry/service/core": {"ferry/service/domain", "ferry/service/secret", "ferry/gridftp", "ferry/gsi", "ferry/gsi/myproxy", "ferry/internal/netpolicy", "ferry/internal/throttle", "ferry/checksum", "ferry/internal/synclevel"},

	// The store: one adapter over database/sql, and its conformance suite.
	"ferry/service/sqlstore":  {"ferry/service/domain"},
	"ferry/service/storetest": {"ferry/service/domain", "ferry/internal/synclevel"},

	// Running tasks: file operations on endpoints, workers, notifications.
	"ferry/service/gridops": {"ferry/service/domain", "ferry/gridftp", "ferry/gridftp/client", "ferry/engine", "ferry/internal/netpolicy", "ferry/gsi", "ferry/gsi/gsilogin"},
	"ferry/service/worker":  {"ferry/service/domain", "ferry/service/secret", "ferry/service/gridops", "ferry/engine", "ferry/gridftp", "ferry/internal/netpolicy", "ferry/gsi", "ferry/internal/plural", "ferry/internal/synclevel", "ferry/internal/fault"},
	"ferry/service/notify":  {"ferry/service/domain", "ferry/internal/fault"},

	// ferry connect: the tunnel protocol, the agent, the service's CA and
	// relay, and the mesh that reaches agents connected to other processes
	// (the last three are the service's: serviceOnly).
	"ferry/connect/tunnel": {},
	"ferry/connect/agent":  {"ferry/connect/tunnel", "ferry/gridftp/server", "ferry/storage", "ferry/stack"},
	"ferry/connect/ca":     {"ferry/connect/tunnel"},
	"ferry/connect/relay":  {"ferry/service/domain", "ferry/connect/ca", "ferry/connect/tunnel"},
	"ferry/connect/mesh":   {"ferry/service/domain", "ferry/connect/ca", "ferry/connect/tunnel"},

	// The SSH command gateway: SSH and its policy; what a command line
	// does is given to it (cmd runs the CLI's commands through the API).
	"ferry/service/sshgw": {"ferry/service/domain", "ferry/internal/throttle", "ferry/internal/connlimit"},

	// The web app: embedded assets that reach the service only through
	// the REST API, from the browser.
	"ferry/web": {},

	// The program: only it reads flags and wires the parts together.
	"ferry/cmd/ferry": {"ferry/..."},

	// Benchmark programs beside the bench/ scripts.
	"ferry/bench/idle":          {"ferry/gridftp/server", "ferry/storage/posix"}, // idle sessions of one endpoint server
	"ferry/bench/wan/delayline": {},                                              // a delaying TCP relay, a WAN on loopback

	// Test helpers (testHelper), and the packages that are only tests.
	"ferry/internal/pgtest":      {"ferry/internal/interoptest"},
	"ferry/internal/smtptest":    {"ferry/internal/interoptest"},
	"ferry/internal/peertest":    {},
	"ferry/internal/interoptest": {}, // whether the tests that need the peers run
	"ferry/storage/storagetest":  {"ferry/storage"},
	"ferry/internal/arch":        {},
	"ferry/interop":              {},
}

// exceptions lists, for a package of allowed, the imports that break its
// layer's rule today, each with what is to take it away. TestLayering
// admits them, and fails on one that is no longer made: the list only
// shrinks.
var exceptions = map[string][]string{}

// testHelper lists the packages of allowed that serve tests: no other
// package imports them, whatever its row in allowed says.
var testHelper = map[string]bool{
	"ferry/gridftp/server/servertest": true,
	"ferry/service/storetest":         true,
	"ferry/storage/storagetest":       true,
	"ferry/internal/pgtest":           true,
	"ferry/internal/smtptest":         true,
	"ferry/internal/peertest":         true,
	"ferry/internal/interoptest":      true,
}

// matches reports whether the import path im is pattern, or, for a
// pattern that ends in "/...", is under its prefix.
func matches(pattern, im string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "/..."); ok {
		return strings.HasPrefix(im, prefix+"/")
	}
	return im == pattern
}

// speaksHTTP lists the packages of allowed that are HTTP adapters.
var speaksHTTP = map[string]bool{"ferry/cmd/ferry": true, "ferry/service/httpapi": true, "ferry/service/apiclient": true, "ferry/service/notify": true, "ferry/web": true}

// speaksSQL lists the packages of allowed that are database adapters.
var speaksSQL = map[string]bool{"ferry/service/sqlstore": true, "ferry/internal/pgtest": true}

// Every package of the module has a row in allowed: a package that is in
// no layer would go unchecked.
func TestEveryPackageHasALayer(t *testing.T) {
	for path := range loadPackages(t) {
		if _, ok := allowed[path]; !ok {
			t.Errorf("package %s is in no layer: add it to the table allowed in internal/arch/arch_test.go, with the ferry packages it may import", path)
		}
	}
}

func TestLayering(t *testing.T) {
	pkgs := loadPackages(t)
	for path, ok := range allowed {
		p := pkgs[path]
		if p == nil {
			t.Errorf("package %s is missing", path)
			continue
		}
		for im := range p.imports {
			if !strings.HasPrefix(im, "ferry/") && im != "ferry" {
				if strings.Contains(im, "sql") && !speaksSQL[path] || strings.HasPrefix(im, "net/http") && !speaksHTTP[path] {
					t.Errorf("%s imports %s: only the database adapters (speaksSQL) and the HTTP adapters (speaksHTTP) may", path, im)
				}
				continue
			}
			if testHelper[im] && !testHelper[path] {
				t.Errorf("%s imports %s, which serves only tests", path, im)
			}
			if !slices.ContainsFunc(ok, func(a string) bool { return matches(a, im) }) && !slices.Contains(exceptions[path], im) {
				t.Errorf("%s imports %s, which its layer may not", path, im)
			}
		}
	}
	for path, ims := range exceptions {
		for _, im := range ims {
			if p := pkgs[path]; p == nil || !p.imports[im] {
				t.Errorf("%s no longer imports %s: remove it from exceptions", path, im)
			}
		}
	}
	for path, p := range pkgs {
		if path == "ferry/cmd/ferry" {
			continue
		}
		for im := range p.imports {
			if strings.HasPrefix(im, "github.com/spf13/") {
				t.Errorf("%s imports %s: only cmd/ferry reads flags", path, im)
			}
		}
	}
}

// onLaptop lists the packages that run on a user's own machine (ferry
// connect's agent): neither they nor anything they import, at any depth, is
// the service's.
var onLaptop = []string{"ferry/connect/agent"}

// serviceOnly lists the packages outside service/ that are the service's
// all the same: ferry connect's CA, relay and mesh.
var serviceOnly = map[string]bool{"ferry/connect/ca": true, "ferry/connect/relay": true, "ferry/connect/mesh": true}

func TestLaptopCarriesNoServiceCode(t *testing.T) {
	pkgs := loadPackages(t)
	for _, root := range onLaptop {
		seen := map[string]bool{}
		// walk visits path, reached by the imports of chain (root first).
		var walk func(chain []string)
		walk = func(chain []string) {
			path := chain[len(chain)-1]
			if seen[path] {
				return
			}
			seen[path] = true
			if strings.HasPrefix(path, "ferry/service/") || serviceOnly[path] {
				t.Errorf("%s: code on a user's machine carries none of the service's", strings.Join(chain, " → "))
				return
			}
			p := pkgs[path]
			if p == nil {
				t.Errorf("package %s is missing", path)
				return
			}
			for im := range p.imports {
				if matches("ferry/...", im) {
					walk(append(chain[:len(chain):len(chain)], im))
				}
			}
		}
		walk([]string{root})
	}
}
