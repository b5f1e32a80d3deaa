// Package multicast holds the wire forms of GCT's gridftp_multicast disk
// stack driver (ferry's layer stack/forward), for the server that runs
// the layer and for a client that builds multicast trees itself (ferry's
// engine), so that neither imports the other: the layer's options and
// their GCT encoding in a SITE SETDISKSTACK (Options, ParseOptions,
// Spec), a destination "url?opts" (Hop, Show), how a hop splits its
// destinations among its children and what it sends each (Plan, Inner,
// Below, Child.Stack), and the failure report that names the destinations
// a file did not reach (Marker, Undelivered).
package multicast
