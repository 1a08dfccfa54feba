package host

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

// compileCache is the compilation cache the package's tests share
// (runtime.cache_dir): a plugin compiled by one test is loaded by the next
// instead of compiled again. Most tests start hosts of the same few
// plugins, and under the race detector wazero's compiler runs about ten
// times slower (a Go SDK plugin: seconds per compile), which made most of
// the package's time under -race. Caching changes nothing a test checks:
// a module is compiled or loaded from the cache by the same host code,
// and the cache holds only modules that compiled. It is removed when the
// tests end.
var compileCache = sync.OnceValue(func() string {
	dir, err := os.MkdirTemp("", "wasmstream-host-tests-cache-")
	if err != nil {
		panic(fmt.Sprintf("a compilation cache for the host tests: %v", err))
	}
	return dir
})

// testCache is the runtime.cache_dir of a test's host: the package's
// shared compilation cache.
func testCache() string { return compileCache() }

func TestMain(m *testing.M) {
	code := m.Run()
	if dir := compileCache(); dir != "" {
		_ = os.RemoveAll(dir)
	}
	os.Exit(code)
}
