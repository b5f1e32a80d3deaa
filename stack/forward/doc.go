// Package forward is the multilink layer: GCT's gridftp_multicast disk
// stack driver, under GCT's name and the alias "forward". A server that
// receives a file through it writes each block to the layer below and, at
// once, sends it with its offset to up to cc other GridFTP servers (its
// children), each of which does the same for its share of the remaining
// destinations. One upload so fans out over a chain (cc=1) or a tree.
//
//	client ──> A ─┬─> B ──> D
//	              └─> C
//
// The options are GCT's: urls (a list, each element a %-encoded
// "url?opts" whose opts are that hop's own cc, P and local_write), cc
// (fan-out, default 2), P (streams to each child, default 1), local_write
// (default true), tcpbs and subject (accepted, ignored). Children are
// planned front-first as GCT does (plan), and told their subtree in GCT's
// encoding, so that a GCT server can be a child.
//
// Unlike GCT, blocks travel with their offsets (MODE E) to the children,
// so parallel streams into the first hop cannot corrupt the copies; and a
// child that cannot be reached or dies is dropped without stopping its
// siblings or the local write: the transfer then fails at its end with a
// stack.ShownError naming every destination that did not get the file.
//
// Each child has a bounded queue of blocks (QueueBlocks). A child slower
// than the others fills its queue and then holds back the whole transfer,
// as GCT does; a child that stops reading is dropped when its control
// connection's reply timeout ends its transfer.
package forward
