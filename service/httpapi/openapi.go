package httpapi

import (
	_ "embed"
	"net/http"
)

// openAPI describes the routes; a test keeps it and routes() in step.
//
//go:embed openapi.json
var openAPI []byte

func serveOpenAPI(w http.ResponseWriter, r *http.Request, _ *call) error {
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write(openAPI)
	return err
}
