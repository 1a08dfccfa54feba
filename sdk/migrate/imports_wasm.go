//go:build wasip1

package migrate

// The optional export (abi/ABI.md section 13). It is in this package, not
// in package sdk, so that only plugins that import it carry it.

// exportMigrate is abi.ExportMigrate.
//
//go:wasmexport wasmstream_migrate
//lint:ignore U1000 exported to the host by go:wasmexport, which staticcheck does not count as a use
func exportMigrate(n uint32) int32 { return int32(run(n)) }
