// Package arch holds no code: its tests enforce the layering of the tree
// (the protocol knows nothing of storage adapters, databases or HTTP; the
// domain imports no adapter; only cmd/ferry wires; no package but a test
// helper imports a test helper), that every package has a row in the
// layer table, and that every package has a doc comment.
package arch
