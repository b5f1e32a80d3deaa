// Package arch holds no code: its tests enforce the layering of the tree
// (the protocol knows nothing of storage adapters, databases or HTTP; the
// domain imports no adapter) and that every package has a doc comment.
package arch
