package api

import "time"

// Relay says where ferry connect agents reach the service's relay
// (DATA_TYPE relay): GET /relay, which needs no authentication.
type Relay struct {
	DataType string `json:"DATA_TYPE"`
	Address  string `json:"address"` // host:port
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
