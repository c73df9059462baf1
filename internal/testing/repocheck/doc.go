// Package repocheck holds tests of the repository itself rather than of
// one package: the public API listing under api/, which makes every change
// to an exported name a reviewed decision, and the size of tracked files.
// It has no code of its own.
package repocheck
