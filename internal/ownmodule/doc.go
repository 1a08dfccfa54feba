// Package ownmodule holds only a test: that docs/processor-module.md's
// steps — a processor in a Go module of its own, outside this repository —
// work as written.
package ownmodule
