package main

import (
	"encoding/binary"
	"strings"
	"testing"
)

func count(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

func TestCheckPassesOnTheLatestCounts(t *testing.T) {
	o := NewOutput()
	// One record per update, as Kafka Streams without cache and wasmstream
	// write them: only the last per word counts.
	o.Add([]byte("cat"), count(1))
	o.Add([]byte("dog"), count(1))
	o.Add([]byte("cat"), count(2))
	o.Add([]byte("cat"), count(3))
	if err := o.Check(map[string]uint64{"cat": 3, "dog": 1}); err != nil {
		t.Fatal(err)
	}
	if o.Records != 4 {
		t.Fatalf("Records = %d, want 4", o.Records)
	}
}

func TestCheckFails(t *testing.T) {
	truth := map[string]uint64{"cat": 3, "dog": 1, "eel": 2}
	for name, tc := range map[string]struct {
		recs [][2][]byte
		want string
	}{
		"wrong count": {
			recs: [][2][]byte{{[]byte("cat"), count(3)}, {[]byte("dog"), count(1)}, {[]byte("eel"), count(2)}, {[]byte("cat"), count(2)}},
			want: "1 words with a wrong count (cat: 2, want 3)",
		},
		"missing": {
			recs: [][2][]byte{{[]byte("cat"), count(3)}, {[]byte("dog"), count(1)}},
			want: "1 words missing (eel)",
		},
		"extra": {
			recs: [][2][]byte{{[]byte("cat"), count(3)}, {[]byte("dog"), count(1)}, {[]byte("eel"), count(2)}, {[]byte("fox"), count(9)}},
			want: `1 keys that are not input words ("fox": 9)`,
		},
		"decimal value": {
			recs: [][2][]byte{{[]byte("cat"), count(3)}, {[]byte("dog"), count(1)}, {[]byte("eel"), count(2)}, {[]byte("dog"), []byte("1")}},
			want: "1 records with a value that is not an 8-byte count",
		},
	} {
		t.Run(name, func(t *testing.T) {
			o := NewOutput()
			for _, r := range tc.recs {
				o.Add(r[0], r[1])
			}
			err := o.Check(truth)
			if err == nil {
				t.Fatal("Check passed")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

// The examples in a failure are bounded and sorted, so the report of a
// badly wrong run stays short and reproducible.
func TestCheckBoundsExamples(t *testing.T) {
	truth := map[string]uint64{}
	for _, w := range []string{"k", "j", "i", "h", "g", "f", "e", "d", "c", "b", "a"} {
		truth[w] = 1
	}
	err := NewOutput().Check(truth)
	if err == nil {
		t.Fatal("Check passed on an empty output")
	}
	if want := "11 words missing (a; b; c; d; e)"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not contain %q", err, want)
	}
}
