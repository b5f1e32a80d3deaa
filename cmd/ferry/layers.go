package main

import (
	"maps"

	"ferry/stack"
	"ferry/stack/compress"
	"ferry/stack/forward"
	"ferry/stack/tarstream"
)

// layers are the disk stack layers every ferry server offers: the file
// layer, ordering, the tar and checksum-list layers of many-file
// transfers, zstd, and multicast forwarding (gridftp_multicast). popen
// comes only with a whitelist (ferry gridftp).
func layers() stack.Registry {
	reg := stack.Kinds()
	maps.Copy(reg, tarstream.Kinds())
	maps.Copy(reg, compress.Kinds())
	maps.Copy(reg, forward.Kinds())
	return reg
}
