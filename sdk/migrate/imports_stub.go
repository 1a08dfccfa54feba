//go:build !wasip1

package migrate

import "github.com/wasmstream/wasmstream/sdk/internal/fakeabi"

// Outside Wasm the migration is handed to sdk/sdktest's host (Host.Migrate).
func init() {
	fakeabi.RegisterMigrateGuest(func(n uint32) int32 { return int32(run(n)) })
}
