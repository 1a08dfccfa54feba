// Package fakeabi joins the SDK's native (non-wasip1) build to an in-process
// host, sdk/sdktest. It is the seam that lets the same SDK code run under
// `go test`: the SDK routes every host call to the Host set here, and hands
// the host the same entry points its Wasm exports call.
//
// It is not part of the ABI and not a stable API; only sdk and sdk/sdktest
// use it. A Wasm build of the SDK does not import it.
package fakeabi

// Host is the native stand-in for the imports in module "wasmstream". Each
// method has the semantics of the import of the same name in abi/ABI.md:
// slices stand for pointer/length pairs into plugin memory (the host reads
// them, and writes only into out), and the result is the i32 the import
// returns: zero or positive, or -errno.
type Host interface {
	Emit(rec []byte) int32
	OutputIndex(name string) int32
	StoreIndex(name string) int32
	Config(out []byte) int32
	Log(level uint32, msg string) int32
	SetError(msg string) int32
	StateGet(store uint32, key, out []byte) int32
	StatePut(store uint32, key, value []byte) int32
	StateDelete(store uint32, key []byte) int32
	ScanOpen(store uint32, start, end []byte) int32
	ScanNext(cursor uint32, out []byte) int32
	ScanClose(cursor uint32) int32

	// Time (ABI.md section 8).
	TimerSet(kind uint32, ts int64, key []byte) int32
	TimerCancel(kind uint32, ts int64, key []byte) int32
	TimeNow(clock uint32) int64
	CommitMark(key []byte) int32
}

// Guest is what the SDK exports, as Go functions: the bodies of the Wasm
// exports wasmstream_input, wasmstream_process and wasmstream_init, plus
// Reset, which makes the SDK forget everything an instance learned (cached
// output and store indices, config) as a fresh Wasm instance would.
type Guest struct {
	Input   func(size uint32) []byte
	Process func(n uint32) int32
	Init    func() int32
	Reset   func()
}

// TimeGuest is what package sdk/timer exports, when a plugin links it: the
// bodies of wasmstream_on_timer and wasmstream_on_commit.
type TimeGuest struct {
	OnTimer  func(n uint32) int32
	OnCommit func(n uint32) int32
}

var (
	host      Host
	guest     Guest
	timeGuest TimeGuest
)

// RegisterTimeGuest is called by sdk/timer's native build from its init
// function.
func RegisterTimeGuest(g TimeGuest) { timeGuest = g }

// TimeEntry returns sdk/timer's entry points; their fields are nil if the
// plugin does not link sdk/timer (the host then has no callbacks to call,
// as a Wasm module without the exports).
func TimeEntry() TimeGuest { return timeGuest }

var migrateGuest func(n uint32) int32

// RegisterMigrateGuest is called by sdk/migrate's native build from its
// init function: the body of wasmstream_migrate.
func RegisterMigrateGuest(f func(n uint32) int32) { migrateGuest = f }

// MigrateEntry returns sdk/migrate's entry point; nil if the plugin does
// not link sdk/migrate.
func MigrateEntry() func(n uint32) int32 { return migrateGuest }

// SetHost makes h the host of every later SDK call; nil removes it.
func SetHost(h Host) { host = h }

// CurrentHost is the host set by SetHost, or nil.
func CurrentHost() Host { return host }

// RegisterGuest is called by the SDK's native build from its init function.
func RegisterGuest(g Guest) { guest = g }

// Entry returns the SDK's entry points; their fields are nil if the SDK
// package is not linked in.
func Entry() Guest { return guest }
