// Command countjson is the first version of the state-migration test pair:
// counter's logic with each count stored as JSON (countlib.CountJSON). Its
// successor, countmigrate, stores counts in a binary layout and migrates.
package main

import (
	"github.com/wasmstream/wasmstream/internal/testplugins/countlib"
	"github.com/wasmstream/wasmstream/sdk"
)

func init() { sdk.Handle(countlib.CountJSON) }

func main() {}
