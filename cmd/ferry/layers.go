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
// transfers, and zstd. Multicast forwarding (gridftp_multicast), which
// makes the server connect to other hosts, and popen, which runs
// programs, come only when ferry gridftp is told (--multicast,
// --popen-whitelist), as GCT's -fs-whitelist does.
func layers() stack.Registry {
	reg := stack.Kinds()
	maps.Copy(reg, tarstream.Kinds())
	maps.Copy(reg, compress.Kinds())
	return reg
}

// multicastLayers are the layers --multicast adds.
func multicastLayers() stack.Registry { return forward.Kinds() }
