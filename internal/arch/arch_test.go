package arch

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// moduleRoot is the repository root, two levels up.
const moduleRoot = "../.."

// pkg is one package directory of the module.
type pkg struct {
	path    string // import path
	hasDoc  bool
	imports map[string]bool
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
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
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
		if f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != "" {
			k.hasDoc = true
		}
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

func TestEveryPackageHasADocComment(t *testing.T) {
	for _, p := range loadPackages(t) {
		if !p.hasDoc {
			t.Errorf("package %s has no package doc comment", p.path)
		}
	}
}

// allowed lists, for each protocol-layer package prefix, the ferry packages
// it may import; anything else of ferry's is a layering violation.
var allowed = map[string][]string{
	"ferry/gridftp":                   {"ferry/gsi/gss"},                                                                                                                                                                     // data channels run a GSI security context
	"ferry/gsi/gss":                   {},                                                                                                                                                                                    // GSI's GSSAPI: TLS in tokens; who is trusted is the caller's
	"ferry/gridftp/server":            {"ferry/gridftp", "ferry/gridftp/client", "ferry/gsi/gss", "ferry/storage", "ferry/stack", "ferry/checksum", "ferry/throttle", "ferry/internal/connlimit", "ferry/internal/partname"}, // a striped front end is its movers' client; SITE PARTSTOR's temporary names
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
	"ferry/storage/posix":      {"ferry/storage"},
	"ferry/storage/synthetic":  {"ferry/storage"},                   // a generated source, for benchmarks
	"ferry/storage/sink":       {"ferry/storage", "ferry/checksum"}, // a destination that hashes and discards, for benchmarks
	"ferry/checksum":           {},
	"ferry/plural":             {},
	"ferry/passwd":             {},
	"ferry/throttle":           {},
	"ferry/internal/connlimit": {}, // connections counted in all and by address
	"ferry/netpolicy":          {},
	"ferry/sshftp":             {}, // GridFTP control channels over ssh: pipes as a net.Conn
	"ferry/gsi":                {}, // GSI's PKI: credentials, proxies, chain checks, grid-mapfile
	"ferry/gridftp/client":     {"ferry/gridftp", "ferry/gsi/gss"},
	"ferry/engine":             {"ferry/gridftp", "ferry/gridftp/client", "ferry/gridftp/multicast", "ferry/plural", "ferry/internal/partname"}, // builds multicast trees
	"ferry/service/domain":     {},
	"ferry/service/secret":     {"ferry/service/domain"},

	// The GridFTP login of a grid credential, shared by ferry copy and
	// the service.
	"ferry/gsi/gsilogin": {"ferry/gsi", "ferry/gsi/gss", "ferry/gridftp", "ferry/gridftp/client"},
	// A MyProxy client: GSI on a socket, a proxy fetched with a pass phrase.
	"ferry/gsi/myproxy": {"ferry/gsi", "ferry/gsi/gss"},

	// The REST API: its documents, server and client.
	"ferry/service/api":       {"ferry/service/domain"},
	"ferry/service/httpapi":   {"ferry/service/domain", "ferry/service/secret", "ferry/service/api", "ferry/passwd", "ferry/checksum", "ferry/tunnel", "ferry/netpolicy", "ferry/throttle", "ferry/gsi", "ferry/gsi/myproxy", "ferry/gridftp"}, // gridftp: server URLs (gridftp.URL)
	"ferry/service/apiclient": {"ferry/service/api"},

	// The store: one adapter over database/sql, and its conformance suite.
	"ferry/service/sqlstore":  {"ferry/service/domain"},
	"ferry/service/storetest": {"ferry/service/domain"},

	// Running tasks: file operations on endpoints, workers, notifications.
	"ferry/service/gridops": {"ferry/service/domain", "ferry/gridftp", "ferry/gridftp/client", "ferry/engine", "ferry/netpolicy", "ferry/gsi", "ferry/gsi/gsilogin"},
	"ferry/service/worker":  {"ferry/service/domain", "ferry/service/secret", "ferry/service/gridops", "ferry/engine", "ferry/gridftp", "ferry/netpolicy", "ferry/gsi", "ferry/plural"},
	"ferry/service/notify":  {"ferry/service/domain"},

	// ferry connect: the tunnel protocol, the agent, the service's CA and
	// relay, and the mesh that reaches agents connected to other processes.
	"ferry/tunnel":        {},
	"ferry/agent":         {"ferry/tunnel", "ferry/gridftp/server", "ferry/storage", "ferry/service/ca", "ferry/stack"},
	"ferry/service/ca":    {},
	"ferry/service/relay": {"ferry/service/domain", "ferry/service/ca", "ferry/tunnel"},
	"ferry/service/mesh":  {"ferry/service/domain", "ferry/service/ca", "ferry/tunnel"},

	// The SSH command gateway: SSH and its policy; what a command line
	// does is given to it (cmd runs the CLI's commands through the API).
	"ferry/service/sshgw": {"ferry/service/domain", "ferry/throttle", "ferry/internal/connlimit"},

	// The web app: embedded assets that reach the service only through
	// the REST API, from the browser.
	"ferry/web": {},
}

// speaksHTTP lists the packages of allowed that are HTTP adapters.
var speaksHTTP = map[string]bool{"ferry/service/httpapi": true, "ferry/service/apiclient": true, "ferry/service/notify": true, "ferry/web": true}

// speaksSQL lists the packages of allowed that are database adapters.
var speaksSQL = map[string]bool{"ferry/service/sqlstore": true}

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
					t.Errorf("%s imports %s: the protocol layer knows nothing of databases or HTTP", path, im)
				}
				continue
			}
			permitted := false
			for _, a := range ok {
				permitted = permitted || im == a
			}
			if !permitted {
				t.Errorf("%s imports %s, which its layer may not", path, im)
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
