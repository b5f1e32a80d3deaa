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
	ep := st.Endpoint
	doc := api.ActivationRequirements{DataType: "activation_requirements", Activated: st.Activated, ExpiresIn: st.ExpiresIn,
		Subject: st.Subject, Data: []api.ActivationRequirement{}}
	switch {
	case ep.Auth == domain.AuthGSI:
		doc.Data = []api.ActivationRequirement{
			{DataType: "activation_requirement", Type: "proxy", Name: "proxy", UIName: "Grid proxy",
				Description: "a grid proxy in PEM (certificate, key, chain), as grid-proxy-init or myproxy-logon writes it; " +
					"the activation lasts as long as the proxy", Required: true, Private: true},
			{DataType: "activation_requirement", Type: "proxy", Name: "username", UIName: "Username",
				Description: "the user to log in as on the endpoint's servers (default: their grid-mapfile's mapping of the proxy's identity)"},
		}
		if ep.MyProxyServer != "" {
			// Either a proxy, or a MyProxy username and pass phrase.
			doc.Data[0].Required = false
			doc.Data[0].Description += "; or give your MyProxy username and pass phrase instead"
			doc.Data = append(doc.Data,
				api.ActivationRequirement{DataType: "activation_requirement", Type: "myproxy", Name: "myproxy_username", UIName: "MyProxy username",
					Description: fmt.Sprintf("your username on the MyProxy server %s, which gives the service a proxy of yours "+
						"(instead of proxy); it activates every endpoint that names that server", ep.MyProxyServer)},
				api.ActivationRequirement{DataType: "activation_requirement", Type: "myproxy", Name: "myproxy_passphrase", UIName: "MyProxy pass phrase",
					Description: "the pass phrase of your credential on the MyProxy server: used once, never stored", Private: true})
		}
	case ep.NeedsActivation():
		doc.Data = []api.ActivationRequirement{
			{DataType: "activation_requirement", Type: "password", Name: "username", UIName: "Username",
				Description: "your user name on the endpoint's servers", Required: true},
			{DataType: "activation_requirement", Type: "password", Name: "password", UIName: "Password",
				Description: "your password on the endpoint's servers", Required: true, Private: true},
		}
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
