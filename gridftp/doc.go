// Package gridftp holds the GridFTP wire protocol as the deployed peers speak
// it: control-channel commands and replies (RFC 959, 2389, 3659), the
// extended block mode (MODE E) framing of GFD.20, restart range sets, range
// and performance markers, host-port encodings and OPTS parsing.
//
// It knows nothing of storage, scheduling, databases or HTTP; the server and
// client packages beside it build on it. Facts about the peers' behaviour are
// recorded in shared/reference/gridftp-wire.md.
package gridftp
