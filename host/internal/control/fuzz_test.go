package control

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// FuzzManifest feeds the control topic's manifest decoder what another
// tool, a torn write or an attacker with write access to the topic might
// leave there. It must never panic; whatever it accepts must be a manifest
// this build writes the same way (format 1, every version checked), and
// whatever it refuses must be classified as corrupt or of another format.
func FuzzManifest(f *testing.F) {
	v := NewVersion([]byte("module"), "l")
	f.Add([]byte(encodeManifest(Manifest{Format: 1, Processor: "p", Version: v, Reason: "deploy", History: []Version{v}})))
	f.Add([]byte(`{"format":1}`))
	f.Add([]byte(`{"format":2,"x":1}`))
	f.Add([]byte(`{"format":1,"processor":"p","hash":"` + v.Hash + `","size":6,"chunks":1000000}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, value []byte) {
		m, err := decodeManifest("p", value)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrFormat) {
				t.Fatalf("unclassified refusal: %v", err)
			}
			return
		}
		if m.Format != Format || m.Processor != "p" {
			t.Fatalf("accepted %+v", m)
		}
		for _, hv := range append([]Version{m.Version}, m.History...) {
			if err := hv.check(); err != nil {
				t.Fatalf("accepted a version that fails its check: %v", err)
			}
		}
		again, err := decodeManifest("p", encodeManifest(m))
		if err != nil || again.Version != m.Version || len(again.History) != len(m.History) {
			t.Fatalf("re-encoding an accepted manifest: %+v, %v", again, err)
		}
	})
}

// FuzzStoreApply runs arbitrary keys and values through the reader's
// record handling (chunk keys, manifests, tombstones) and then asks for
// every module: no panic, and no module is handed out whose bytes do not
// hash to its version.
func FuzzStoreApply(f *testing.F) {
	mod := []byte("a small module")
	v := NewVersion(mod, "x")
	f.Add([]byte(chunkKey(v.Hash, 0)), mod, []byte("processor/p"),
		encodeManifest(Manifest{Format: 1, Processor: "p", Version: v, Reason: "deploy"}))
	f.Add([]byte("chunk/zz/0"), []byte("x"), []byte("processor/"), []byte(nil))
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 []byte) {
		s := newStore("topic")
		s.fetch = func(context.Context, string, map[int]int64) (map[int][]byte, error) {
			return nil, errors.New("no broker here")
		}
		for i, kv := range [][2][]byte{{k1, v1}, {k2, v2}, {k1, nil}} {
			_, _, _, _ = s.apply(&kgo.Record{Key: kv[0], Value: kv[1], Offset: int64(i)})
		}
		for name := range s.manifests {
			m, ok, err := s.current(name)
			if err != nil || !ok {
				continue
			}
			got, err := s.loader(m.Version)(context.Background())
			if err == nil && NewVersion(got, m.Label).Hash != m.Hash {
				t.Fatalf("module of %s does not hash to it", m.Version)
			}
		}
		if hash, i, ok := parseChunkKey(string(k1)); ok {
			if !strings.HasPrefix(string(k1), chunkPrefix+hash+"/") || i < 0 || i >= maxChunks {
				t.Fatalf("parseChunkKey(%q) = %q, %d", k1, hash, i)
			}
		}
	})
}
