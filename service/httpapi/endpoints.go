package httpapi

import (
	"cmp"
	"fmt"
	"net/http"

	"ferry/service/api"
	"ferry/service/domain"
)

// endpointDoc is the document of an endpoint as the caller sees it.
func endpointDoc(v domain.EndpointView) api.Endpoint {
	d := api.Endpoint{
		DataType: "endpoint", ID: v.ID, DisplayName: v.DisplayName(), Owner: v.Owner, Name: v.Name,
		Description: v.Description, DefaultDirectory: cmp.Or(v.DefaultDir, "/"), Public: v.Public,
		AuthMethod: v.Auth, MaxConcurrent: v.MaxConcurrent, Activated: v.Activated, ExpiresIn: v.ExpiresIn,
		Created: v.Created, Servers: make([]api.Server, len(v.Addrs)), Via: v.Via, ViaDisplayName: v.ViaName,
		MyProxyServer: v.MyProxyServer, MyProxyServerDN: v.MyProxyServerDN, Connected: v.Connected,
	}
	for i, a := range v.Addrs {
		d.Servers[i] = api.Server{DataType: "server", URI: a.URI, Scheme: a.Scheme, Hostname: a.Host, Port: a.Port}
	}
	if k := v.SetupKey; k != nil {
		d.SetupKey = keyDoc(*k)
	}
	return d
}

// keyDoc is the document of a setup key.
func keyDoc(k domain.SetupKey) *api.SetupKey {
	return &api.SetupKey{DataType: "setup_key", EndpointID: k.EndpointID, SetupKey: k.Key, Expires: k.Expires}
}

// endpointSpec decodes a request's endpoint spec.
func endpointSpec(r *http.Request) (domain.EndpointSpec, error) {
	var spec api.EndpointSpec
	if err := decode(r, &spec, false); err != nil {
		return domain.EndpointSpec{}, err
	}
	if err := dataType(spec.DataType, "endpoint"); err != nil {
		return domain.EndpointSpec{}, err
	}
	d := domain.EndpointSpec{
		Name: spec.Name, Description: spec.Description, DefaultDir: spec.DefaultDirectory, AuthMethod: spec.AuthMethod,
		Public: spec.Public, MaxConcurrent: spec.MaxConcurrent, Via: spec.Via,
		MyProxyServer: spec.MyProxyServer, MyProxyServerDN: spec.MyProxyServerDN,
	}
	if spec.Servers != nil {
		d.Servers = make([]domain.ServerSpec, len(spec.Servers))
	}
	for i, sv := range spec.Servers {
		if err := dataType(sv.DataType, "server"); err != nil {
			return domain.EndpointSpec{}, err
		}
		d.Servers[i] = domain.ServerSpec{URI: sv.URI, Scheme: sv.Scheme, Host: sv.Hostname, Port: sv.Port}
	}
	return d, nil
}

func (s *Server) endpoint(w http.ResponseWriter, r *http.Request, c *call) error {
	v, err := s.Endpoints.FindEndpoint(r.Context(), c.user, r.PathValue("id"))
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, endpointDoc(v))
}

func (s *Server) endpointSearch(w http.ResponseWriter, r *http.Request, c *call) error {
	q, err := api.ParseEndpointQuery(r.URL.Query())
	if err != nil {
		return err
	}
	page := domain.Page{Limit: q.Limit, Offset: q.Offset}.Normal()
	vs, total, err := s.Endpoints.SearchEndpoints(r.Context(), c.user, q.Text, q.Scope == api.ScopeMine, page)
	if err != nil {
		return err
	}
	doc := api.EndpointList{DataType: "endpoint_list", PageInfo: pageInfo(page, len(vs), total), Data: make([]api.Endpoint, len(vs))}
	for i, v := range vs {
		doc.Data[i] = endpointDoc(v)
	}
	return reply(w, http.StatusOK, doc)
}

func (s *Server) createEndpoint(w http.ResponseWriter, r *http.Request, c *call) error {
	spec, err := endpointSpec(r)
	if err != nil {
		return err
	}
	v, err := s.Endpoints.CreateEndpoint(r.Context(), c.user, spec)
	if err != nil {
		return err
	}
	return reply(w, http.StatusCreated, endpointDoc(v))
}

func (s *Server) updateEndpoint(w http.ResponseWriter, r *http.Request, c *call) error {
	spec, err := endpointSpec(r)
	if err != nil {
		return err
	}
	v, err := s.Endpoints.UpdateEndpoint(r.Context(), c.user, r.PathValue("id"), spec)
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, endpointDoc(v))
}

func (s *Server) deleteEndpoint(w http.ResponseWriter, r *http.Request, c *call) error {
	ep, err := s.Endpoints.DeleteEndpoint(r.Context(), c.user, r.PathValue("id"))
	if err != nil {
		return err
	}
	return result(w, r, "result", "Deleted", fmt.Sprintf("endpoint %s is deleted", ep.DisplayName()))
}

// setupKey gives one of the caller's connect endpoints a new one-time
// setup key.
func (s *Server) setupKey(w http.ResponseWriter, r *http.Request, c *call) error {
	k, err := s.Endpoints.NewSetupKey(r.Context(), c.user, r.PathValue("id"))
	if err != nil {
		return err
	}
	return reply(w, http.StatusCreated, keyDoc(k))
}
