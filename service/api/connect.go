package api

import "time"

// Relay says where ferry connect agents reach the service's relays
// (DATA_TYPE relay): GET /relay, which needs no authentication. Relays are
// relay URLs: tcp://HOST:PORT, or the http(s) URL of a process's /relay
// route, where the connection is upgraded (Upgrade: ferry-relay/1). The
// answering process's relay comes first, then those of the service's
// other processes.
type Relay struct {
	DataType string   `json:"DATA_TYPE"`
	Relays   []string `json:"relays"`
}

// SetupKey is a new one-time setup key of a connect endpoint (DATA_TYPE
// setup_key), from POST /endpoint/{id}/setup_key or, the first, with the
// endpoint from POST /endpoint. ferry connect
// --setup-key trades it for the agent's certificate; issuing one revokes
// the certificates of the endpoint's earlier agents.
type SetupKey struct {
	DataType   string    `json:"DATA_TYPE"`
	EndpointID string    `json:"endpoint_id"`
	SetupKey   string    `json:"setup_key"`
	Expires    time.Time `json:"expires"`
}
