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
// (default true), tcpbs and subject (accepted, ignored); and ferry's own
// part (default false), with which each child that writes stores its copy
// under its temporary name (internal/partname) and the hop renames it over
// its name once the copy is checked, so that it never bears its name short
// (a relay's child, which the relay's client cannot reach to rename).
// Children are planned front-first as GCT does, and told their subtree in
// GCT's encoding, so that a GCT server can be a child. These wire forms,
// which a client that builds trees shares, are package gridftp/multicast's.
//
// Unlike GCT, a hop puts the blocks in order (a bounded window of blocks
// ahead of a gap, as the ordering layer does) before it sends them on,
// with their offsets, so that parallel streams into the first hop cannot
// corrupt the copies and every hop below gets each stream's blocks in
// increasing offsets. (It relies on that of its own sender, as the
// ordering layer does: guc, GCT and ferry send so; a stream that goes
// backwards past the window stalls it until the data timeout ends the
// transfer.) On the way it hashes them (MD5), and once a child
// has stored the file it asks the child for the MD5 of its copy (CKSM MD5
// 0 -1, which GCT answers too; a ferry child hashes while it writes, OPTS
// CKSM Live): a copy that differs, or a child that cannot say, counts as
// failed. So every copy in the tree is checked by the hop that sent it.
//
// A child that cannot be reached, dies or fails is dropped without
// stopping its siblings or the local write: the transfer then fails at its
// end with a stack.ShownError naming every destination that did not get a
// good copy — the child's own report of its subtree when it sent one,
// else the child and its whole subtree.
//
// Every connection to a child, control and data (to wherever its PASV
// answer points), is opened through stack.Env.Dial, under the server's
// rules for where it may connect, and a transfer's children and their
// streams are counted against the server's limits (stack.Env.Reserve)
// before any is opened: over them, the transfer is refused.
//
// A child is given the directories its destination needs (MKD of each
// parent, when MLST finds the parent missing) before the STOR. A relay-only
// hop (local_write=n) never opens the layer below (stack.Deferrer), so a
// file of that name there stays as it was.
//
// Each child has a bounded queue of blocks (QueueBlocks). A child slower
// than the others fills its queue and then holds back the whole transfer,
// as GCT does. A child that dies is dropped at once; one that hangs holds
// the transfer back until its control connection's reply timeout drops it
// (when it sends no markers meanwhile) or the hop's own data timeout ends
// the transfer, whichever comes first. While a hop waits for its
// children after the data, its server goes on sending 112 markers, so
// that its own parent's wait for the reply goes on too; the wait ends
// with the transfer (an ABOR, or the session's end when the server
// stops), which drops the children still at work.
package forward
