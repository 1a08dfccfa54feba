package follower

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/host/internal/control"
	"github.com/wasmstream/wasmstream/host/internal/plugin"
	"github.com/wasmstream/wasmstream/host/internal/runner"
	"github.com/wasmstream/wasmstream/host/internal/versions"
	"github.com/wasmstream/wasmstream/internal/testutil"
	"github.com/wasmstream/wasmstream/internal/wasmgen"
)

func testdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "engine", "testdata", name+".wasm"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// variant is wasm with a custom section appended (id 0, 3 bytes: a
// one-byte name and a one-byte payload; wazero refuses an empty payload):
// the same code, another hash (another version).
func variant(wasm []byte, tag byte) []byte {
	return append(append([]byte(nil), wasm...), 0x00, 0x03, 0x01, tag, 0x00)
}

// bytesOf is a control.Load of b.
func bytesOf(b []byte) control.Load {
	return func(context.Context) ([]byte, error) { return b, nil }
}

// newFollower is a follower of one processor "p" running the passthrough
// plugin, without Kafka: onManifest is fed by hand.
func newFollower(t testing.TB, maxSize uint64) (*Follower, *runner.Versions, []byte) {
	t.Helper()
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	lim := plugin.Limits{MaxModuleSize: maxSize}
	p, err := plugin.New(ctx, plugin.Spec{Name: "p", Outputs: map[string]string{"out": "t"},
		Memory: 16 << 20, RecordTimeout: time.Second}, lim, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.RT.Close(ctx) })
	wasm := testdata(t, "passthrough")
	if p.Module, err = p.Compile(ctx, wasm); err != nil {
		t.Fatal(err)
	}
	p.Version = control.NewVersion(wasm, "config")
	reg := runner.NewVersions()
	reg.Start("p", plugin.Info(p.Version), p.Factory(p.Module, plugin.Info(p.Version).ID))
	f := &Follower{log: log, cfg: Config{Processors: []*plugin.Processor{p}, Limits: lim, Versions: reg,
		Canary: versions.Canary{Window: time.Minute, MaxFailureRatio: 0.5, MinRecords: 3}, Logger: log, Timeout: 10 * time.Second}}
	return f, reg, wasm
}

// A deployed version is compiled and proposed under the canary; a
// rollback's is proposed without one; a manifest naming the version the
// processor already runs or is headed for proposes nothing.
func TestOnManifestProposes(t *testing.T) {
	f, reg, wasm := newFollower(t, 1<<20)
	ctx := context.Background()
	v2 := variant(wasm, '2')
	f.onManifest(ctx, control.Manifest{Processor: "p", Version: control.NewVersion(v2, "v2"), Reason: control.ReasonDeploy}, bytesOf(v2), nil)
	_, to := reg.TakePending("p")
	if to == nil || to.Label != "v2" || reg.Current("p").Canary != f.cfg.Canary || to.Plugin == nil {
		s, _ := reg.Snapshot("p")
		t.Fatalf("after a deploy: %+v (refused %+v)", to, s.Refused)
	}
	// The same version again: already running.
	f.onManifest(ctx, control.Manifest{Processor: "p", Version: control.NewVersion(v2, "v2"), Reason: control.ReasonDeploy}, bytesOf(v2), nil)
	if _, to := reg.TakePending("p"); to != nil {
		t.Fatalf("the running version was proposed again: %+v", to)
	}
	// A rollback to the version before: held, proposed again without a
	// compile and without a canary.
	config := reg.Current("p").Back
	rt := f.cfg.Processors[0].RT
	compiled := rt.Counts().Modules
	f.onManifest(ctx, control.Manifest{Processor: "p", Version: control.NewVersion(wasm, "config"), Reason: control.ReasonRollback}, bytesOf(wasm), nil)
	_, to = reg.TakePending("p")
	if to == nil || to != config || reg.Current("p").Canary != (versions.Canary{}) {
		t.Fatalf("after a rollback: %+v, want the held config version without a canary", to)
	}
	if n := rt.Counts().Modules; n != compiled {
		t.Fatalf("%d modules after rolling back to a held version, want %d (no compile)", n, compiled)
	}
	// Two more deploys release the config version; a rollback to it then
	// compiles it again from the bytes the control topic holds.
	for _, tag := range []byte{'3', '4'} {
		v := variant(wasm, tag)
		f.onManifest(ctx, control.Manifest{Processor: "p", Version: control.NewVersion(v, "v"+string(tag)), Reason: control.ReasonDeploy}, bytesOf(v), nil)
		reg.TakePending("p")
	}
	if n := rt.Counts().Modules; n != 2 {
		t.Fatalf("%d modules open after 4 versions, want 2 (active and back)", n)
	}
	f.onManifest(ctx, control.Manifest{Processor: "p", Version: control.NewVersion(wasm, "config"), Reason: control.ReasonRollback}, bytesOf(wasm), nil)
	if _, to = reg.TakePending("p"); to == nil || to.Label != "config" || to == config {
		t.Fatalf("rollback to a released version: %+v, want config compiled anew", to)
	}
	if n := rt.Counts().Modules; n != 2 {
		t.Fatalf("%d modules open after the rollback, want 2", n)
	}
	// A processor this config does not have is ignored.
	f.onManifest(ctx, control.Manifest{Processor: "other", Version: control.NewVersion(v2, "v2"), Reason: control.ReasonDeploy}, bytesOf(v2), nil)
	if s, _ := reg.Snapshot("p"); s.Refusals != 0 {
		t.Fatalf("refusals %d, want none", s.Refusals)
	}
}

// A version the process cannot run is refused, recorded and the running
// version stays: over the size limit, not a module, or an unreadable
// manifest.
func TestOnManifestRefuses(t *testing.T) {
	wasm := testdata(t, "passthrough")
	f, reg, _ := newFollower(t, uint64(len(wasm))+4)
	ctx := context.Background()
	big := variant(variant(wasm, 'b'), 'c')
	garbage := []byte("\x00asm\x01\x00\x00\x00garbage")
	f.onManifest(ctx, control.Manifest{Processor: "p", Version: control.NewVersion(big, "big"), Reason: control.ReasonDeploy}, bytesOf(big), nil)
	f.onManifest(ctx, control.Manifest{Processor: "p", Version: control.NewVersion(garbage, "bad"), Reason: control.ReasonDeploy}, bytesOf(garbage), nil)
	f.onManifest(ctx, control.Manifest{Processor: "p", Version: control.Version{}}, nil, control.ErrCorrupt)
	s, _ := reg.Snapshot("p")
	if s.Refusals != 3 || s.Refused[0].Label != "big" || s.Refused[1].Label != "bad" || s.Refused[2].ID != "(unreadable)" {
		t.Fatalf("refusals %d: %+v", s.Refusals, s.Refused)
	}
	if s.Active.Label != "config" {
		t.Fatalf("active %+v, want the config version kept", s.Active)
	}
	if _, to := reg.TakePending("p"); to != nil {
		t.Fatalf("a refused version was proposed: %+v", to)
	}
}

func TestMain(m *testing.M) {
	testutil.RunChild(map[string]func() int{"bomb": bombChild})
	os.Exit(m.Run())
}

// TestCompileBombRefused: a process following the control topic refuses
// a deployed compile bomb (99,990 functions of 49,990 locals in
// 800 KB, which wazero's decoder alone would expand to 40 GB) by its
// compile budget, records the refusal with the reason and keeps running
// its version. The follower runs in a child under a 3 GB address-space
// cap, so a bomb that got past the budget would kill only the child.
func TestCompileBombRefused(t *testing.T) {
	res := testutil.Child(t, "bomb", 3<<30, 2*time.Minute)
	t.Logf("%v", res)
	if res.Code != 0 || !strings.Contains(res.Stdout, "over the compile budget of 512 MiB") || !strings.Contains(res.Stdout, "active config") {
		t.Fatalf("%v; stdout %q", res, res.Stdout)
	}
}

// bombChild deploys the bomb to a follower and prints the refusal and the
// active version.
func bombChild() int {
	t := &childT{}
	f, reg, _ := newFollower(t, 64<<20)
	bomb := wasmgen.Module(wasmgen.Shape{Funcs: 99987, Locals: 49990, Plugin: true})
	f.onManifest(context.Background(), control.Manifest{Processor: "p", Version: control.NewVersion(bomb, "bomb"), Reason: control.ReasonDeploy}, bytesOf(bomb), nil)
	s, _ := reg.Snapshot("p")
	if _, to := reg.TakePending("p"); to != nil || s.Refusals != 1 || t.failed {
		fmt.Printf("refusals %d, pending %+v\n", s.Refusals, to)
		return 1
	}
	fmt.Printf("refused %s: %s\nactive %s\n", s.Refused[0].Label, s.Refused[0].Reason, s.Active.Label)
	return 0
}

// childT is the testing.TB of a child: newFollower's failures end it.
type childT struct {
	testing.TB
	failed bool
}

func (c *childT) Helper()           {}
func (c *childT) Cleanup(func())    {}
func (c *childT) Fatal(args ...any) { fmt.Fprintln(os.Stderr, args...); os.Exit(1) }
func (c *childT) Errorf(f string, a ...any) {
	fmt.Fprintf(os.Stderr, f+"\n", a...)
	c.failed = true
}
