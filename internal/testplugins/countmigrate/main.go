// Command countmigrate is the second version of the state-migration test
// pair: counter's logic with counts in a binary layout, which refuses a
// count it finds in countjson's JSON layout, and a migration
// (sdk/migrate) that rewrites the JSON counts as binary.
package main

import (
	"github.com/wasmstream/wasmstream/internal/testplugins/countlib"
	"github.com/wasmstream/wasmstream/sdk"
	"github.com/wasmstream/wasmstream/sdk/migrate"
)

func init() {
	sdk.Handle(countlib.CountBinary)
	migrate.Handle(countlib.MigrateJSON)
}

func main() {}
