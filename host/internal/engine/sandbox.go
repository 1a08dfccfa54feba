package engine

import (
	"io"
	"math/rand/v2"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/sys"
)

// The sandbox (docs/design.md#i6). wazero's ModuleConfig defaults are already
// closed (no FS, env, args, sockets; fake clocks; a seeded random source),
// but the engine states every one of them explicitly so that a change of
// wazero default cannot open a hole, and so that the values are documented
// here:
//
//   - no filesystem: no WithFS/WithFSConfig, so no preopened directory;
//     path_open and friends fail with EBADF;
//   - no environment variables, no arguments;
//   - stdin is empty (EOF); stdout and stderr go to the Logger line by line;
//   - wall clock: starts at FakeEpoch (2022-01-01T00:00:00Z, wazero's own
//     fake epoch) and advances 1 ms per reading;
//   - monotonic clock: starts at 0 and advances 1 ms per reading;
//   - sleep and yield return at once;
//   - random bytes: ChaCha8 with a fixed seed (SandboxSeed), restarted with
//     every instance.
//
// Clock and random state belong to one instantiation: two instances, or an
// instance and its replacement after a trap, see the same sequences.

// FakeEpoch is the plugin's wall clock at its first reading.
var FakeEpoch = time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC)

// SandboxSeed seeds the plugin's random source.
var SandboxSeed = [32]byte{'w', 'a', 's', 'm', 's', 't', 'r', 'e', 'a', 'm'}

// sandboxState is the WASI clocks and random source of one instantiation:
// the last readings (ns) and the generator. A snapshot (snapshot.go) keeps
// a copy, so a restored instance goes on from where its init left them.
type sandboxState struct {
	wall, mono int64
	rng        *rand.ChaCha8
}

// newSandboxState is the state of an instantiation before its first
// reading.
func newSandboxState() *sandboxState {
	return &sandboxState{
		wall: FakeEpoch.UnixNano() - int64(time.Millisecond),
		mono: -int64(time.Millisecond),
		rng:  rand.NewChaCha8(SandboxSeed),
	}
}

// clone is an independent copy of s.
func (s *sandboxState) clone() *sandboxState {
	c := &sandboxState{wall: s.wall, mono: s.mono, rng: new(rand.ChaCha8)}
	b, err := s.rng.MarshalBinary()
	if err == nil {
		err = c.rng.UnmarshalBinary(b)
	}
	if err != nil {
		panic("engine: copying a ChaCha8 state: " + err.Error()) // its own encoding: cannot fail
	}
	return c
}

// sandboxConfig returns the ModuleConfig of one instantiation, whose
// clocks and random source are st's.
func sandboxConfig(stdout, stderr io.Writer, st *sandboxState) wazero.ModuleConfig {
	return wazero.NewModuleConfig().
		WithName("").         // anonymous: many instances of one module coexist
		WithStartFunctions(). // none: the host calls start/_initialize under the watchdog
		WithStdin(eofReader{}).
		WithStdout(stdout).
		WithStderr(stderr).
		WithWalltime(func() (int64, int32) {
			st.wall += int64(time.Millisecond)
			return st.wall / 1e9, int32(st.wall % 1e9)
		}, sys.ClockResolution(time.Millisecond)).
		WithNanotime(func() int64 {
			st.mono += int64(time.Millisecond)
			return st.mono
		}, sys.ClockResolution(time.Millisecond)).
		WithNanosleep(func(int64) {}).
		WithOsyield(func() {}).
		WithRandSource(st.rng)
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }
