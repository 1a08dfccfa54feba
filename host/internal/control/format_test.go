package control

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestDecodeManifest: what another tool may have written is refused with
// the reason, never half-accepted.
func TestDecodeManifest(t *testing.T) {
	v := NewVersion([]byte("module"), "l")
	good := string(encodeManifest(Manifest{Format: 1, Processor: "p", Version: v, Reason: "deploy", History: []Version{v}}))
	if m, err := decodeManifest("p", []byte(good)); err != nil || m.Version != v || len(m.History) != 1 {
		t.Fatalf("good manifest: %+v %v", m, err)
	}
	// Unknown fields are allowed within format 1 (optional additions).
	if _, err := decodeManifest("p", []byte(strings.Replace(good, `"format":1`, `"format":1,"future":[1,2]`, 1))); err != nil {
		t.Fatalf("unknown field: %v", err)
	}
	for _, c := range []struct {
		name, value string
		is          error
		msg         string
	}{
		{"empty", ``, ErrCorrupt, "not a JSON object"},
		{"array", `[1]`, ErrCorrupt, "not a JSON object"},
		{"null", `null`, ErrCorrupt, "no format"},
		{"no format", `{"processor":"p"}`, ErrCorrupt, "no format"},
		{"format 0", `{"format":0}`, ErrFormat, "format 0"},
		{"format 2", `{"format":2,"hash":7}`, ErrFormat, "format 2"},
		{"trailing", good + `x`, ErrCorrupt, "not a JSON object"},
		{"wrong type", strings.Replace(good, `"size":6`, `"size":"6"`, 1), ErrCorrupt, "size"},
		{"other processor", strings.Replace(good, `"processor":"p"`, `"processor":"q"`, 1), ErrCorrupt, `"q" differs`},
		{"short hash", strings.Replace(good, v.Hash, "abc", 1), ErrCorrupt, "active version: hash"},
		{"upper hash", strings.Replace(good, v.Hash, strings.ToUpper(v.Hash), 1), ErrCorrupt, "active version: hash"},
		{"size 0", strings.Replace(good, `"size":6`, `"size":0`, 1), ErrCorrupt, "size 0"},
		{"no chunks", strings.Replace(good, `"chunks":1`, `"chunks":0`, 1), ErrCorrupt, "chunks 0"},
		{"huge chunks", strings.Replace(good, `"chunks":1`, `"chunks":1000000`, 1), ErrCorrupt, "chunks 1000000"},
		{"chunks > size", strings.Replace(good, `"chunks":1`, `"chunks":7`, 1), ErrCorrupt, "7 chunks for 6 bytes"},
		{"bad history", strings.Replace(good, `"history":[{"hash":"`+v.Hash, `"history":[{"hash":"x`, 1), ErrCorrupt, "history[0]"},
	} {
		_, err := decodeManifest("p", []byte(c.value))
		if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v; want %v containing %q", c.name, err, c.is, c.msg)
		}
	}
}

func TestParseChunkKey(t *testing.T) {
	h := NewVersion([]byte("x"), "").Hash
	if hash, i, ok := parseChunkKey(chunkKey(h, 12)); !ok || hash != h || i != 12 {
		t.Fatalf("round trip: %q %d %v", hash, i, ok)
	}
	for _, k := range []string{
		"chunk/" + h, "chunk/" + h + "/", "chunk/" + h + "/-1", "chunk/" + h + "/01", "chunk/" + h + "/+1",
		"chunk/" + h + "/4096", "chunk/" + h + "/1/2", "chunk/" + h[1:] + "/0", "chunk/" + strings.ToUpper(h) + "/0",
		"Chunk/" + h + "/0", "processor/p",
	} {
		if _, _, ok := parseChunkKey(k); ok {
			t.Errorf("%q parsed as a chunk key", k)
		}
	}
}

// TestAssemble: chunks are checked for presence, total size and hash.
func TestAssemble(t *testing.T) {
	mod := fakeModule(9, 2*ChunkSize+1)
	v := NewVersion(mod, "")
	if v.Chunks != 3 {
		t.Fatalf("%d chunks", v.Chunks)
	}
	parts := map[int][]byte{0: chunk(mod, 0), 1: chunk(mod, 1), 2: chunk(mod, 2)}
	if got, err := assemble(v, parts); err != nil || !bytes.Equal(got, mod) {
		t.Fatalf("assemble: %v", err)
	}
	for name, c := range map[string]struct {
		parts map[int][]byte
		msg   string
	}{
		"missing":   {map[int][]byte{1: parts[1]}, "2 of 3 chunks missing (0, 2)"},
		"truncated": {map[int][]byte{0: parts[0], 1: parts[1], 2: nil}, "chunks hold 524288 bytes, manifest says 524289"},
		"swapped":   {map[int][]byte{0: parts[1], 1: parts[0], 2: parts[2]}, "not to the manifest's hash"},
	} {
		if _, err := assemble(v, c.parts); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v; want ErrCorrupt containing %q", name, err, c.msg)
		}
	}
}
