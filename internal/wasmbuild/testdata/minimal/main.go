// Command minimal is the smallest plugin: the SDK and a handler that does
// nothing. wasmbuild's test builds it.
package main

import "github.com/wasmstream/wasmstream/sdk"

func init() { sdk.Handle(func(*sdk.Record) error { return nil }) }

func main() {}
