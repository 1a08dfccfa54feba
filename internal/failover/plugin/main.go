// Command plugin is the failover benchmark's processor (internal/failover):
// it keeps every record's value under its key in the store "latest", so
// the store holds as many bytes as the input's distinct keys and values.
package main

import "github.com/wasmstream/wasmstream/sdk"

var latest = sdk.Store("latest")

func init() {
	sdk.Handle(func(r *sdk.Record) error { return latest.Put(r.Key, r.Value) })
}

func main() {}
