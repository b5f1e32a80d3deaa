// Package stack is the storage side of a transfer as a stack of layers,
// chosen per session, bottom first, as in GCT's disk stack (SITE
// SETDISKSTACK):
//
//	MODE E streams ──> [filters: ordering, …] ──> terminal: file | popen | tar | …
//
// The terminal layer at the bottom is where the bytes of a transfer come
// from and go to: the storage driver (file), a whitelisted program (popen),
// a tree packed or unpacked as a tar stream (tar), a checksum list. Filter
// layers above it see every transfer on its way: ordering puts out-of-order
// MODE E blocks in order for a terminal that cannot seek; forward sends
// each block on to other servers as it is written. A filter that may write
// nothing to the layers below it (a Deferrer: forward's relay-only hop)
// opens them itself, or never, so that an existing file is not truncated.
//
// A layer says what it can do through small interfaces, which the transfer
// code asks for instead of assuming a file: a Sink takes writes at any
// offset (io.WriterAt) or only in order (io.Writer); a Source is read at
// any offset with a known size (io.ReaderAt and Sizer) or only from start
// to end (io.Reader). Either may be an Aborter, to be told that the
// transfer failed (kill the program, drop the partial member). A layer that
// moves many files in one transfer (tar, checksum lists) reads the names
// from Transfer.Members and says how each fared through Transfer.Report.
//
// Stacks are written as GCT writes them (Parse): entries separated by ",",
// each "name" or "name:options", the options %XX-decoded once and then
// "key=value" pairs separated by ";"; a list-valued option (popen's argv)
// takes its first character as the delimiter of its elements.
package stack
