// Package posix is the storage driver for a directory of a local (POSIX)
// file system.
//
// Every operation goes through an [os.Root] opened on the directory, so that
// no name — "..", absolute symlinks, relative symlinks that climb out, chains
// of symlinks, directories that are symlinks to elsewhere — can reach a file
// outside it. The kernel resolves each path one component at a time relative
// to descriptors held inside the root (openat with O_NOFOLLOW), so swapping a
// directory for a symlink while a request runs does not escape either.
// Attempts to leave the root are reported as [storage.ErrPermission].
//
// Symlinks are followed while they stay inside the root. Absolute symlinks
// are always treated as leaving it, even when the path they name happens to
// lie inside (os.Root does not know where the root sits in the host's tree).
// Stat and ReadDir describe a symlink that stays inside as the file it points
// to, with Info.Target set; a symlink that leads out (or dangles, or loops) is
// described as the symlink itself.
//
// Open and Create return the *os.File itself, so that the server can use
// sendfile and splice. Only regular files are opened: directories give
// [storage.ErrIsDir], and FIFOs, sockets and devices [storage.ErrPermission]
// (they are opened non-blocking, so a planted FIFO cannot hang a session).
//
// What os.Root does not prevent, and this driver does not either: hard links
// to files outside the root made by someone with shell access to the same
// file system, crossing mount points (bind mounts) inside the root, and a
// race in Chmod and Chtimes where a local user replaces the target with a
// symlink at the last moment (the change then applies to the link itself;
// Linux cannot chmod a symlink).
package posix
