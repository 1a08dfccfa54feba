// Package abitest loads the shared record test vectors in abi/testdata so that
// the host, the Go SDK and any other SDK check the same bytes. Standard
// library only.
package abitest

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/wasmstream/wasmstream/abi"
)

// Vector is one record and its exact encoding.
type Vector struct {
	Name    string
	Record  abi.Record
	Encoded []byte
}

// file is the JSON shape of abi/testdata/records.json. Byte fields are hex;
// a null field is JSON null; an empty one is "".
type file struct {
	Vectors []struct {
		Name      string  `json:"name"`
		Timestamp int64   `json:"timestamp"`
		Offset    int64   `json:"offset"`
		Partition int32   `json:"partition"`
		Index     uint32  `json:"index"`
		Key       *string `json:"key"`
		Value     *string `json:"value"`
		Headers   []struct {
			Key   string  `json:"key"`
			Value *string `json:"value"`
		} `json:"headers"`
		Encoded string `json:"encoded"`
	} `json:"vectors"`
	Malformed []struct {
		Name    string `json:"name"`
		Encoded string `json:"encoded"`
	} `json:"malformed"`
}

// Path is the location of the vector file in this repository.
func Path() string {
	_, here, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(here), "..", "testdata", "records.json")
}

// Load reads the valid vectors and the malformed encodings (by name) from
// the JSON file at path.
func Load(path string) ([]Vector, map[string][]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var f file
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []Vector
	for _, v := range f.Vectors {
		r := abi.Record{Timestamp: v.Timestamp, Offset: v.Offset, Partition: v.Partition, Index: v.Index}
		if r.Key, err = optHex(v.Key); err != nil {
			return nil, nil, fmt.Errorf("%s: vector %q key: %w", path, v.Name, err)
		}
		if r.Value, err = optHex(v.Value); err != nil {
			return nil, nil, fmt.Errorf("%s: vector %q value: %w", path, v.Name, err)
		}
		for _, h := range v.Headers {
			hv, err := optHex(h.Value)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: vector %q header %q: %w", path, v.Name, h.Key, err)
			}
			r.Headers = append(r.Headers, abi.Header{Key: h.Key, Value: hv})
		}
		enc, err := hex.DecodeString(v.Encoded)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: vector %q encoded: %w", path, v.Name, err)
		}
		out = append(out, Vector{Name: v.Name, Record: r, Encoded: enc})
	}
	bad := make(map[string][]byte)
	for _, m := range f.Malformed {
		enc, err := hex.DecodeString(m.Encoded)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: malformed %q: %w", path, m.Name, err)
		}
		bad[m.Name] = enc
	}
	return out, bad, nil
}

func optHex(s *string) ([]byte, error) {
	if s == nil {
		return nil, nil
	}
	b, err := hex.DecodeString(*s)
	if err != nil {
		return nil, err
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

// Equal reports whether two records have the same fields, telling null from
// empty.
func Equal(a, b *abi.Record) bool {
	if a.Timestamp != b.Timestamp || a.Offset != b.Offset || a.Partition != b.Partition ||
		a.Index != b.Index || !sameBytes(a.Key, b.Key) || !sameBytes(a.Value, b.Value) ||
		len(a.Headers) != len(b.Headers) {
		return false
	}
	for i := range a.Headers {
		if a.Headers[i].Key != b.Headers[i].Key || !sameBytes(a.Headers[i].Value, b.Headers[i].Value) {
			return false
		}
	}
	return true
}

func sameBytes(a, b []byte) bool {
	if (a == nil) != (b == nil) {
		return false
	}
	return string(a) == string(b)
}
