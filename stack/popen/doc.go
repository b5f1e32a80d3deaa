// Package popen is the popen layer of a disk stack: a transfer's bytes go
// to a program's standard input (STOR) or come from its standard output
// (RETR), as GCT's popen driver does for globus-url-copy's -src-pipe,
// -dst-pipe and -pipe:
//
//	SITE SETDISKSTACK popen:argv=#tar#cf#-#-C#/data#dir
//	SITE SETDISKSTACK popen:argv=#tar#xf#-,ordering
//
// Only programs the server whitelists run: argv[0] must be one's alias or
// its full path, exactly, and becomes the full path; the other arguments
// are the client's. The program is run directly (no shell) in the served
// directory, with an empty environment or the one the server gives, never
// the client's: the options env and pass_env are refused, and so is
// ignore_errors (a failing program always fails its transfer); blocking,
// which only says how GCT's driver waits, is accepted and has no effect.
//
// A program writes anywhere its user may, whatever the path the command
// named, so a read-only session may read a program's output but not feed
// one. A program that exits non-zero or is killed fails its transfer with
// its exit status and the start of its standard error, shown to the
// client. Each program leads a process group of its own: an aborted
// transfer (ABOR, a lost connection, a failure) kills the whole group and
// reaps the program, also while it waits for data that never comes.
package popen
