// Package engine turns "copy these paths from A to B with these options"
// into GridFTP control-channel work: it expands directories (MLSD), decides
// per file by sync level, runs many files at once over pipelined session
// pairs with parallel streams, chunks large files across sessions
// (ERET/ESTO), verifies chunks and files with checksums computed at both
// ends while other data moves, and retries transient failures with backoff,
// resuming from restart ranges and completed chunks.
//
// It reports progress and per-file outcomes through Reporter and knows
// nothing of databases: ferry copy and the service's workers both use it.
// Every endpoint is a GridFTP server; a local directory is served by an
// in-process endpoint server that the caller starts.
package engine
