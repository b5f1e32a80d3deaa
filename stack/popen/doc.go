// Package popen is the popen layer of a disk stack: a transfer's bytes go
// to a program's standard input (STOR) or come from its standard output
// (RETR), as GCT's popen driver does for globus-url-copy's -src-pipe,
// -dst-pipe and -pipe:
//
//	SITE SETDISKSTACK popen:argv=#tar#cf#-#-C#/data#dir
//	SITE SETDISKSTACK popen:argv=#tar#xf#-,ordering
//
// GCT checks only the program; a client that may run tar there may run
// anything (tar -I, --checkpoint-action=exec) and read any file (tar cf -
// /etc). Here a client gets no more than moving its session's own files:
//
//   - Only sessions that logged in and may write run programs, unless the
//     server lets anonymous and read-only sessions too (Config.Anonymous).
//   - Only programs the server whitelists run: argv[0] must be one's alias
//     or its full path, exactly, and becomes the full path.
//   - The other arguments must pass the program's Policy: a built-in
//     profile chosen by the program's base name (tar, md5sum and kin, cat,
//     the compressors; see args.go), or a pattern the operator declares
//     (ParsePattern); none at all otherwise. A profile accepts only the
//     options it knows to be safe, spelled in full, and hands the program
//     one spelling of them. Every path operand is a path of the session's
//     tree, checked through its storage driver (no "..", no symlink that
//     leads out), and absolute ones become their place on disk. Arguments
//     are approved when the stack is set and again at each transfer.
//   - tar x reads only plain archives, each checked on its way (guard):
//     no member absolute or holding "..", no link to such a name, so no
//     archive makes a symlink that a later one writes through.
//   - The program runs directly (no shell) in the served directory, with
//     an empty environment or the one the server gives, never the
//     client's: the options env and pass_env are refused, and so is
//     ignore_errors (a failing program always fails its transfer);
//     blocking, which only says how GCT's driver waits, has no effect.
//   - A server that runs as root runs programs as the session's local user
//     (stack.Env.User) or Config.User (default nobody), never as root.
//   - Each program is the init of a PID namespace of its own (see
//     isolator): when it ends or its transfer is aborted (ABOR, a lost
//     connection, a failure), the kernel kills every process it started,
//     also one that left its process group (setsid).
//
// A read-only session may read a program's output but not feed one. A
// program that exits non-zero or is killed fails its transfer with its
// exit status and the start of its standard error, shown to the client.
//
// What remains: a path is checked before the program opens it, so a local
// user who swaps a directory for a symlink in between wins the race; tar x
// follows symlinks that lead out if someone with shell access put them in
// the tree, and programs follow hard links to files outside made the same
// way, as the storage driver does.
package popen
