package httpapi

import (
	"fmt"
	"net/http"

	"ferry/service/api"
	"ferry/service/domain"
)

func (s *Server) activationRequirements(w http.ResponseWriter, r *http.Request, c *call) error {
	st, err := s.Activations.ActivationStatus(r.Context(), c.user, r.PathValue("id"))
	if err != nil {
		return err
	}
	doc := api.ActivationRequirements{DataType: "activation_requirements", Activated: st.Activated, ExpiresIn: st.ExpiresIn,
		Subject: st.Subject, Data: make([]api.ActivationRequirement, len(st.Requirements))}
	for i, q := range st.Requirements {
		doc.Data[i] = api.ActivationRequirement{DataType: "activation_requirement", Type: q.Type, Name: q.Name, UIName: q.UIName,
			Description: q.Description, Required: q.Required, Private: q.Private}
	}
	return reply(w, http.StatusOK, doc)
}

// activate activates an endpoint with the caller's login.
func (s *Server) activate(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.Activate
	if err := decode(r, &req, false); err != nil {
		return err
	}
	if err := dataType(req.DataType, "activation"); err != nil {
		return err
	}
	res, err := s.Activations.Activate(r.Context(), c.user, r.PathValue("id"), domain.ActivateRequest{
		Username: req.Username, Password: req.Password, Proxy: req.Proxy,
		MyProxyUsername: req.MyProxyUsername, MyProxyPassphrase: req.MyProxyPassphrase, Lifetime: req.Lifetime,
	})
	if err != nil {
		return err
	}
	doc := api.ActivationResult{DataType: "activation_result", RequestID: c.id, Resource: r.URL.Path,
		Code: res.Code, Message: res.Message, ExpiresIn: res.ExpiresIn, Subject: res.Subject, Resumed: res.Resumed}
	for _, e := range res.Endpoints {
		doc.Endpoints = append(doc.Endpoints, api.ActivatedEndpoint{DataType: "activated_endpoint", ID: e.ID, DisplayName: e.DisplayName,
			ExpiresIn: e.ExpiresIn, Resumed: e.Resumed})
	}
	return reply(w, http.StatusOK, doc)
}

// deactivate forgets the caller's activation and pauses its tasks on the
// endpoint.
func (s *Server) deactivate(w http.ResponseWriter, r *http.Request, c *call) error {
	ep, n, err := s.Activations.Deactivate(r.Context(), c.user, r.PathValue("id"))
	if err != nil {
		return err
	}
	return result(w, r, "result", "Deactivated", fmt.Sprintf("endpoint %s is deactivated; %d waiting tasks paused", ep.DisplayName(), n))
}
