package httpapi

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"ferry/service/api"
	"ferry/service/domain"
)

// relay hands a connection that asks for an upgrade to the relay, and
// else tells agents where the service's relays are: this process's first.
func (s *Server) relay(w http.ResponseWriter, r *http.Request, _ *call) error {
	if s.RelayURL == "" {
		return domain.Errorf(domain.ENotFound, "this service runs no relay for connect endpoints")
	}
	if up := r.Header.Get("Upgrade"); up != "" && (s.RelayConn == nil || strings.EqualFold(up, s.RelayProtocol)) {
		return s.upgrade(w)
	}
	urls, err := s.Endpoints.Relays(r.Context(), s.RelayURL)
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, api.Relay{DataType: "relay", Relays: urls})
}

// upgrade takes the connection from the HTTP server and hands it to the
// relay, with what the client sent after its request.
func (s *Server) upgrade(w http.ResponseWriter) error {
	if s.RelayConn == nil {
		return domain.Errorf(domain.ENotFound, "this process's relay is not on the API's port")
	}
	c, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return err
	}
	c.SetDeadline(time.Time{})                      // a body's deadline (serve) is not the relay's
	head, _ := rw.Reader.Peek(rw.Reader.Buffered()) // sent before the answer
	go s.RelayConn(c, slices.Clone(head))
	return nil
}
