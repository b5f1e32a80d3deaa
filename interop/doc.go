// Package interop drives ferry against the real Grid Community Toolkit
// programs: the tests start `ferry gridftp` and the GCT globus-gridftp-server
// on loopback and move data between them with globus-url-copy, gfal2
// (gfal-copy, gfal-ls, gfal-sum), lftp and curl, comparing every copy byte for
// byte.
//
// The package holds only tests, built with the interop tag (`go test -tags
// interop ./interop/`; `make test`): without it only TestInterop is, which
// skips, saying so (internal/interoptest). They skip when globus-url-copy
// or globus-gridftp-server is missing, unless FERRY_INTEROP=required (as
// .ci/run sets), in which case they fail. Tests named TestGCT... run the same
// scenarios against GCT alone and prove the harness and the expectations;
// tests named TestFerry... are the ones ferry must pass.
package interop
