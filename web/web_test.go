package web_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"ferry/web"
)

func get(t *testing.T, h http.Handler, method, path string, header ...string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w.Result()
}

func body(t *testing.T, r *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Every answer carries the security headers; the page and its files are
// there, anything else is not.
func TestHandler(t *testing.T) {
	h := web.Handler()
	for _, tc := range []struct {
		method, path string
		status       int
		ctype        string
	}{
		{"GET", "/", 200, "text/html; charset=utf-8"},
		{"HEAD", "/", 200, "text/html; charset=utf-8"},
		{"GET", "/assets/app.js", 200, "text/javascript; charset=utf-8"},
		{"GET", "/assets/app.css", 200, "text/css; charset=utf-8"},
		{"GET", "/assets/favicon.svg", 200, "image/svg+xml"},
		{"GET", "/assets/index.html", 404, ""},
		{"GET", "/assets/", 404, ""},
		{"GET", "/nope", 404, ""},
		{"POST", "/", 405, ""},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			r := get(t, h, tc.method, tc.path)
			if r.StatusCode != tc.status || tc.ctype != "" && r.Header.Get("Content-Type") != tc.ctype {
				t.Fatalf("%d %q, want %d %q", r.StatusCode, r.Header.Get("Content-Type"), tc.status, tc.ctype)
			}
			csp := r.Header.Get("Content-Security-Policy")
			for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
				if !strings.Contains(csp, want) {
					t.Errorf("CSP %q lacks %q", csp, want)
				}
			}
			if strings.Contains(csp, "unsafe") || strings.Contains(csp, "http") {
				t.Errorf("CSP %q allows inline code or other origins", csp)
			}
			if r.Header.Get("X-Content-Type-Options") != "nosniff" || r.Header.Get("X-Frame-Options") != "DENY" {
				t.Errorf("headers %v", r.Header)
			}
		})
	}
}

// Files carry a strong ETag of their content: a revalidation is a 304,
// and the gzipped form has its own.
func TestCaching(t *testing.T) {
	h := web.Handler()
	r := get(t, h, "GET", "/assets/files.js")
	plain := body(t, r)
	etag := r.Header.Get("ETag")
	if !regexp.MustCompile(`^"[0-9a-f]{24}"$`).MatchString(etag) || r.Header.Get("Cache-Control") != "no-cache" || r.Header.Get("Content-Encoding") != "" {
		t.Fatalf("ETag %q, Cache-Control %q, Content-Encoding %q", etag, r.Header.Get("Cache-Control"), r.Header.Get("Content-Encoding"))
	}
	if r := get(t, h, "GET", "/assets/files.js", "If-None-Match", etag); r.StatusCode != http.StatusNotModified || body(t, r) != "" {
		t.Errorf("revalidation: %d", r.StatusCode)
	}

	r = get(t, h, "GET", "/assets/files.js", "Accept-Encoding", "br, gzip")
	gzEtag := r.Header.Get("ETag")
	if r.Header.Get("Content-Encoding") != "gzip" || gzEtag == etag || !strings.Contains(r.Header.Get("Vary"), "Accept-Encoding") {
		t.Fatalf("gzip: Content-Encoding %q, ETag %q, Vary %q", r.Header.Get("Content-Encoding"), gzEtag, r.Header.Get("Vary"))
	}
	zr, err := gzip.NewReader(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	unzipped, err := io.ReadAll(zr)
	if err != nil || string(unzipped) != plain {
		t.Fatalf("gzipped form differs: %v", err)
	}
	if r := get(t, h, "GET", "/assets/files.js", "Accept-Encoding", "gzip", "If-None-Match", gzEtag); r.StatusCode != http.StatusNotModified {
		t.Errorf("gzip revalidation: %d", r.StatusCode)
	}
	if r := get(t, h, "GET", "/assets/files.js", "Accept-Encoding", "gzip;q=0"); r.Header.Get("Content-Encoding") != "" {
		t.Error("gzip sent although refused")
	}
}

// The page loads nothing that is not embedded, and nothing inline that
// the Content-Security-Policy would block.
func TestAssetsAreComplete(t *testing.T) {
	assets := os.DirFS("assets")
	index, err := fs.ReadFile(assets, "index.html")
	if err != nil {
		t.Fatal(err)
	}
	if regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]|\sstyle=|\son[a-z]+=|<style`).Match(index) {
		t.Error("index.html has inline script, style or event handlers")
	}
	refs := regexp.MustCompile(`(?:href|src)="/assets/([^"]+)"`).FindAllSubmatch(index, -1)
	modules, _ := fs.Glob(assets, "*.js")
	for _, m := range modules {
		b, err := fs.ReadFile(assets, m)
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, regexp.MustCompile(`(?m)^import .* from '\./([^']+)';$`).FindAllSubmatch(b, -1)...)
		if !bytes.Contains(index, []byte(`"/assets/`+m+`"`)) {
			t.Errorf("index.html neither loads nor preloads %s", m)
		}
	}
	h := web.Handler()
	for _, ref := range refs {
		if r := get(t, h, "GET", "/assets/"+string(ref[1])); r.StatusCode != 200 {
			t.Errorf("%s: %d", ref[1], r.StatusCode)
		}
	}
	if len(refs) < len(modules) {
		t.Errorf("found %d references for %d modules", len(refs), len(modules))
	}
}
