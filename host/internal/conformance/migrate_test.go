package conformance

import (
	"context"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
)

// TestConformanceMigrate runs the migration script (README.md, "Migration")
// in every language through engine.Instance.Migrate, after a record that
// writes the counter: a migration from "v1@0123456789ab" (kept) and one
// from "fail" (refused: its writes dropped). Every language must leave the
// same stores and fail with the same text as the Go SDK; the script's
// emit and timer_set are refused (EPHASE).
func TestConformanceMigrate(t *testing.T) {
	var want string
	for _, g := range guests {
		t.Run(g.lang, func(t *testing.T) {
			p := start(t, "conformance-"+g.lang, g.wasm(t), conformanceBinding)
			if !p.inst.Info().HasMigrate {
				t.Fatal("the module does not export wasmstream_migrate")
			}
			if s := p.process("cmd:state", abi.Record{Timestamp: 1000, Key: []byte("cmd:state")}); s.err != nil {
				t.Fatalf("cmd:state: %v", s.err)
			}
			var b strings.Builder
			for _, from := range []string{"v1@0123456789ab", "fail"} {
				p.sink.out = nil
				err := p.inst.Migrate(context.Background(), from)
				p.endCall(err == nil)
				b.WriteString("== migrate " + from + "\n")
				if err != nil {
					b.WriteString("fail " + failure(err) + "\n")
				}
				if len(p.sink.out) > 0 {
					t.Errorf("migrate %s emitted %d records", from, len(p.sink.out))
				}
			}
			state := p.state.dump(conformanceBinding.stores)
			got := b.String() + strings.Join(state, "\n")
			for _, w := range []string{`kv/"migrated-from"=15:"v1@0123456789ab"`, `kv/"migrate-emit"=6:"EPHASE"`,
				`kv/"migrate-timer"=6:"EPHASE"`, `kv/"migrate-counter"=7:"found:1"`,
				"conformance: migration refused"} {
				if !strings.Contains(got, w) {
					t.Errorf("no %q in:\n%s", w, got)
				}
			}
			if want == "" {
				want = got
				return
			}
			if got != want {
				t.Errorf("%s differs from go: %s", g.lang, firstDiff(want, got))
			}
		})
	}
}
