package copartition

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strings"
	"testing"
)

func TestUserDataRoundTrip(t *testing.T) {
	for _, groups := range [][][]string{
		nil,
		{{"a", "b"}},
		{{"a", "b", "c"}, {"d", "e"}},
		{{strings.Repeat("x", maxTopicLen), "y"}},
	} {
		b := encodeGroups(groups)
		got, ok := decodeGroups(b)
		if !ok || !slices.EqualFunc(got, groups, slices.Equal) {
			t.Errorf("%v: encoded %x, decoded %v, %v", groups, b, got, ok)
		}
	}
}

func TestNormalize(t *testing.T) {
	got := normalize([][]string{{"c", "b", "b"}, {"z"}, {"b", "c"}, {}, {"a", "b"}})
	want := [][]string{{"a", "b"}, {"b", "c"}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("normalize: %v, want %v", got, want)
	}
	// Equal declarations in any order are equal bytes: a member that
	// restarts does not change its metadata, so no rebalance follows.
	a := Balancer([][]string{{"b", "a"}, {"d", "c"}}).(*balancer).userData
	b := Balancer([][]string{{"c", "d"}, {"a", "b", "a"}}).(*balancer).userData
	if !bytes.Equal(a, b) {
		t.Errorf("equal declarations encode differently: %x and %x", a, b)
	}
}

func TestValidate(t *testing.T) {
	many := make([][]string, maxGroups+1)
	for i := range many {
		many[i] = []string{"a" + strings.Repeat("x", i%200) + string(rune('A'+i/200)), "b"}
	}
	big := make([]string, maxGroupTopics+1)
	for i := range big {
		big[i] = string(rune(0x100 + i))
	}
	// 1024 groups of 5 topics of 249 bytes: within the counts, over 1 MiB.
	huge := make([][]string, maxGroups)
	for i := range huge {
		for j := range 5 {
			name := []byte(strings.Repeat("t", maxTopicLen))
			binary.BigEndian.PutUint16(name, uint16(i*5+j))
			huge[i] = append(huge[i], string(name))
		}
	}
	for _, tc := range []struct {
		name   string
		groups [][]string
		ok     bool
	}{
		{"none", nil, true},
		{"singletons only", [][]string{{"a"}, {"b"}}, true},
		{"empty topic", [][]string{{"", "a"}}, false},
		{"long topic", [][]string{{strings.Repeat("x", maxTopicLen+1), "a"}}, false},
		{"too many groups", many, false},
		{"too many topics", [][]string{big}, false},
		{"over 1 MiB", huge, false},
	} {
		err := Validate(tc.groups)
		if (err == nil) != tc.ok {
			t.Errorf("%s: Validate: %v", tc.name, err)
		}
		func() {
			defer func() {
				if r := recover(); (r == nil) != tc.ok {
					t.Errorf("%s: Balancer panicked: %v", tc.name, r)
				}
			}()
			Balancer(tc.groups)
		}()
	}
}

// Every malformed declaration decodes as no groups, without a panic.
func TestUserDataCorrupt(t *testing.T) {
	valid := encodeGroups([][]string{{"a", "b"}})
	uv := func(n uint64) []byte { return binary.AppendUvarint(nil, n) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"unknown version", cat([]byte{2}, valid[1:])},
		{"version 0", cat([]byte{0}, valid[1:])},
		{"version only", []byte{1}},
		{"truncated", valid[:len(valid)-1]},
		{"trailing byte", cat(valid, []byte{0})},
		{"group count overflows", cat([]byte{1}, bytes.Repeat([]byte{0xff}, 11))},
		{"too many groups", cat([]byte{1}, uv(maxGroups+1))},
		{"count beyond the bytes", cat([]byte{1}, uv(maxGroups), uv(2), uv(1), []byte("a"))},
		{"empty group", cat([]byte{1}, uv(1), uv(0))},
		{"too many topics", cat([]byte{1}, uv(1), uv(maxGroupTopics+1))},
		{"empty topic", cat([]byte{1}, uv(1), uv(1), uv(0))},
		{"long topic", cat([]byte{1}, uv(1), uv(1), uv(maxTopicLen+1), bytes.Repeat([]byte("x"), maxTopicLen+1))},
		{"topic beyond the bytes", cat([]byte{1}, uv(1), uv(1), uv(10), []byte("abc"))},
		{"oversized", cat(valid, make([]byte, maxUserData))},
	} {
		if groups, ok := decodeGroups(tc.b); ok || groups != nil {
			t.Errorf("%s: decoded %v, %v; want nothing, false", tc.name, groups, ok)
		}
	}
}

// FuzzDecodeGroups: decoding never panics, and what it accepts is within
// the bounds and survives encoding and decoding again.
func FuzzDecodeGroups(f *testing.F) {
	f.Add([]byte(nil))
	f.Add(encodeGroups([][]string{{"a", "b"}, {"c", "d", "e"}}))
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		groups, ok := decodeGroups(b)
		if !ok {
			if groups != nil {
				t.Fatalf("rejected %x but returned %v", b, groups)
			}
			return
		}
		if len(groups) == 0 {
			return // empty data, or version 1 with zero groups
		}
		if err := validate(groups); err != nil {
			t.Fatalf("decoded %x as %v, beyond the bounds: %v", b, groups, err)
		}
		again, ok := decodeGroups(encodeGroups(groups))
		if !ok || !slices.EqualFunc(again, groups, slices.Equal) {
			t.Fatalf("decoded %x as %v, which round-trips as %v, %v", b, groups, again, ok)
		}
	})
}
