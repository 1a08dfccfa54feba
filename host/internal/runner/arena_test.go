package runner

import (
	"bytes"
	"testing"
)

// The arena's copies are the caller's alone: independent of the source,
// with no room to grow into a neighbour, null kept apart from empty, and
// every record distinct and zeroed.
func TestArena(t *testing.T) {
	var a arena
	if a.copyOf(nil) != nil {
		t.Fatal("copyOf(nil) is not nil: a null key or value would become empty")
	}
	if e := a.copyOf([]byte{}); e == nil || len(e) != 0 {
		t.Fatalf("copyOf(empty) = %#v, want empty and not nil", e)
	}
	src := []byte("hello")
	c1 := a.copyOf(src)
	c2 := a.copyOf([]byte("world"))
	src[0] = 'J'
	if string(c1) != "hello" {
		t.Fatalf("copy changed with its source: %q", c1)
	}
	if cap(c1) != len(c1) {
		t.Fatalf("copy has capacity %d for %d bytes: an append would write into the next copy", cap(c1), len(c1))
	}
	_ = append(c1, '!')
	if string(c2) != "world" {
		t.Fatalf("an append to one copy changed the next: %q", c2)
	}
	// Large requests are allocated alone; small ones keep being served
	// past a chunk's end.
	big := a.bytes(arenaLarge + 1)
	if len(big) != arenaLarge+1 || cap(big) != arenaLarge+1 {
		t.Fatalf("large request: len %d cap %d", len(big), cap(big))
	}
	seen := map[*byte]bool{}
	for i := 0; i < 3*arenaBytes/100; i++ {
		b := a.copyOf(bytes.Repeat([]byte{byte(i)}, 100))
		if seen[&b[0]] {
			t.Fatalf("copy %d shares its bytes with an earlier one", i)
		}
		seen[&b[0]] = true
	}
	recs := map[any]bool{}
	for i := 0; i < 3*arenaRecords; i++ {
		r := a.record()
		if recs[r] {
			t.Fatalf("record %d handed out twice", i)
		}
		if r.Topic != "" || r.Key != nil || r.Value != nil || r.Headers != nil {
			t.Fatalf("record %d is not zeroed: %+v", i, r)
		}
		recs[r] = true
		r.Topic = "used"
	}
}
