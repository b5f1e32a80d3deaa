// Package tarstream is two terminal layers that move many files in one
// transfer (issue 12): tar packs a tree, or the members named for the
// transfer, into one POSIX tar stream on RETR and unpacks one on STOR; cksum
// lists the checksums of a tree in md5sum's format on RETR.
//
//	SITE SETDISKSTACK tar:cksm=md5     RETR dir: a tar stream of dir's tree
//	                                   STOR dir: unpack a tar stream below dir
//	SITE SETDISKSTACK cksum:alg=sha256 RETR dir: "<hex>  <name>" lines
//
// Both read and write through the session's storage driver only, whose
// root confines them. Each says how every member fared through
// Transfer.Report as soon as it knows: a member that cannot be read or may
// not be written is reported failed and skipped, and the transfer goes on.
//
// Packing (RETR). The members are Transfer.Members, relative to the
// transfer's path and in their order, or, when none are named, every
// directory and regular file below it, depth first: each directory is
// listed as a stream (storage.ListDir) and its entries go out in name order
// within each window of 4,096 as they are listed (a directory of millions
// of entries costs the memory of a window, so its members are not in name
// order overall); a directory whose listing fails part way is reported
// failed after the members listed before the failure. Symbolic
// links are never followed nor packed: they are reported failed. Up to four
// members are opened, and their first 256 KiB read, ahead of the one being
// sent, so that the latency of small files overlaps. A file that fits that
// buffer is sent as read, whatever its size was when listed; a larger one
// is sent with the size it had when listed: if it shrinks while it is read
// its end is padded with zeros, so that the stream stays a valid archive,
// and the member is reported failed (ErrChanged), as GNU tar does; if it
// grows, the bytes past that size are left out and it is reported failed
// too. The receiving side cannot tell such a member from a good one: the
// sender's report is what says it is bad.
//
// Unpacking (STOR). Regular files and directories are made below the
// transfer's path, which is made first if needed; every other kind of
// member (symbolic and hard links, devices, FIFOs), a name that is absolute
// or climbs out of the path, and a file larger than the server's maximum
// are refused: reported failed (storage.ErrPermission, or EFBIG for the
// size), their data skipped. A directory on the way to a member that is a
// symbolic link already in the tree is refused rather than followed; the
// driver keeps even a link swapped in while the transfer runs inside its
// root. Each file is written to a hidden temporary name in its directory
// (".ferry-<hash>.part") and renamed over its name once complete, so that
// no half-written file ever bears it; its mode is 0755 if the member's was
// executable (else as the driver creates files) and its modification time
// the member's. Without storage.Truncate in Transfer.Flag (the flag of a
// restart, which the server refuses for a layer that cannot seek) an
// existing file is kept and the member refused with storage.ErrExist.
// Nothing is synced to disk. The directory of the member before stays open
// (storage.OpenDir), so that members that come directory by directory, as
// tar writes them, are each written without resolving its path again. A
// stream that is not a tar archive, or ends
// before its end-of-archive marker, fails the transfer; the files renamed
// before that stay, and were reported.
//
// With cksm=<algorithm> (any of package checksum's), each member's
// checksum is computed from the bytes as they pass, and reported.
//
// Checksum lists (cksum, option alg=<algorithm>, MD5 by default) hash up to
// four files at once and write their lines in member order, names escaped
// as GNU md5sum escapes them. The layer cannot be written to.
package tarstream
