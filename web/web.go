// Package web serves ferry's web app: a single page of plain JavaScript
// modules and CSS, written by hand and embedded in the binary, that talks
// only to the REST API (service/httpapi) with the session cookie and the
// X-CSRF-Token header. ferry server mounts it at "/" beside the API.
//
// Handler serves the page at "/" and its files under /assets/. Every
// answer forbids framing, sniffing, inline scripts and other origins
// (Content-Security-Policy); files carry a strong ETag made from their
// content, so a browser revalidates them with one cheap request, and are
// sent gzipped to clients that accept it.
package web

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed assets
var assets embed.FS

// securityHeaders go on every answer. The app needs nothing but its own
// origin: no inline script or style, no frames, no third parties.
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
		"connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
	"X-Content-Type-Options":       "nosniff",
	"X-Frame-Options":              "DENY",
	"Referrer-Policy":              "same-origin",
	"Cross-Origin-Opener-Policy":   "same-origin",
	"Cross-Origin-Resource-Policy": "same-origin",
}

// types are the content types of the assets, written down rather than
// taken from the system's table, which varies.
var types = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

// file is one asset, ready to send.
type file struct {
	ctype    string
	body, gz []byte // gz is nil when compressing does not pay
	etag     string // of body; the gzipped form's has a -gz suffix
}

// Handler returns the app's handler: the page at "/", its files at
// /assets/NAME, 404 for anything else.
func Handler() http.Handler {
	files := map[string]*file{}
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		ctype, ok := types[path.Ext(p)]
		if !ok {
			return fmt.Errorf("%s: no content type", p)
		}
		sum := sha256.Sum256(b)
		f := &file{ctype: ctype, body: b, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		var z bytes.Buffer
		w, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
		w.Write(b)
		w.Close()
		if z.Len() < len(b)*9/10 {
			f.gz = z.Bytes()
		}
		files["/"+p] = f
		return nil
	})
	if err != nil {
		panic("web: embedded assets: " + err.Error()) // a test proves it cannot happen
	}
	files["/"] = files["/assets/index.html"]
	delete(files, "/assets/index.html")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		for k, v := range securityHeaders {
			h.Set(k, v)
		}
		f := files[r.URL.Path]
		switch {
		case f == nil:
			http.NotFound(w, r)
			return
		case r.Method != http.MethodGet && r.Method != http.MethodHead:
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h.Set("Content-Type", f.ctype)
		h.Set("Cache-Control", "no-cache") // revalidate: the ETag makes that one small request
		h.Set("Vary", "Accept-Encoding")
		body, etag := f.body, f.etag
		if f.gz != nil && acceptsGzip(r) {
			body, etag = f.gz, strings.TrimSuffix(etag, `"`)+`-gz"`
			h.Set("Content-Encoding", "gzip")
		}
		h.Set("ETag", etag)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
	})
}

// acceptsGzip reports whether the request's Accept-Encoding lists gzip
// without refusing it (q=0).
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			q := strings.ReplaceAll(params, " ", "")
			return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
		}
	}
	return false
}
