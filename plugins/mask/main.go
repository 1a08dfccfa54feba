// Command mask is a wasmstream plugin for PII: it replaces the values of
// named JSON fields with a fixed mask or with a deterministic hash, and
// emits the record with everything else byte for byte as it was. See
// README.md for the config.
package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"slices"
	"strconv"

	"github.com/wasmstream/wasmstream/plugins/internal/config"
	"github.com/wasmstream/wasmstream/plugins/internal/jsonx"
	"github.com/wasmstream/wasmstream/sdk"
)

// settings is the parsed config, assigned whole by setup.
type settings struct {
	paths   []jsonx.Path
	hash    bool
	mask    []byte    // the mask as a JSON string token
	hasher  hash.Hash // SHA-256, or HMAC-SHA256 keyed with the salt
	out     *sdk.OutputHandle
	invalid *sdk.OutputHandle // nil: a value that is not JSON fails the record
}

var cfg settings

// Per-record scratch, reused: spans found, the rewritten value, hashing.
var (
	spans   [][2]int
	outBuf  []byte
	hashIn  []byte
	hashSum []byte
)

func init() {
	sdk.OnInit(setup)
	sdk.Handle(process)
}

func setup() error {
	c, err := config.Parse("mask", sdk.Config())
	if err != nil {
		return err
	}
	var s settings
	if !c.Has("fields") {
		c.Fail("fields", "required")
	}
	fields := c.StringList("fields")
	if fields != nil && len(fields) == 0 {
		c.Fail("fields", "must name at least one field")
	}
	for i, f := range fields {
		p, err := jsonx.ParsePath(f)
		if err != nil {
			c.Fail("fields["+strconv.Itoa(i)+"]", err.Error())
		}
		s.paths = append(s.paths, p)
	}
	switch mode := c.String("mode", "mask"); mode {
	case "mask":
		if c.Has("salt") {
			c.Fail("salt", `only used with mode "hash"; remove it`)
		}
		s.mask = jsonx.AppendQuote(nil, c.String("mask", "***"))
	case "hash":
		s.hash = true
		if c.Has("mask") {
			c.Fail("mask", `only used with mode "mask"; remove it`)
		}
		if salt := c.String("salt", ""); salt != "" {
			s.hasher = hmac.New(sha256.New, []byte(salt))
		} else {
			s.hasher = sha256.New()
		}
	default:
		c.Fail("mode", `must be "mask" or "hash"; got `+strconv.Quote(mode))
	}
	s.out = c.Output("output", "out")
	s.invalid = c.Output("invalid_output", "")
	if err := c.Err(); err != nil {
		return err
	}
	cfg = s
	return nil
}

// errNotJSON fails a record that cannot be masked when no invalid_output
// is configured: emitting it would leak whatever it holds.
var errNotJSON = errors.New("mask: the value is not valid JSON, so it cannot be masked; not emitted (set invalid_output to route such records)")

func process(r *sdk.Record) error {
	if r.Value == nil {
		// A tombstone has no value to mask, and a compacted topic needs it
		// to delete the key downstream.
		return cfg.out.Emit(sdk.Out{Key: r.Key, Value: nil, Headers: r.Headers})
	}
	spans = spans[:0]
	for _, p := range cfg.paths {
		if !jsonx.Find(r.Value, p, addSpan) {
			if cfg.invalid == nil {
				return errNotJSON
			}
			return cfg.invalid.Emit(sdk.Out{Key: r.Key, Value: r.Value, Headers: r.Headers})
		}
	}
	if len(spans) == 0 {
		return cfg.out.Emit(sdk.Out{Key: r.Key, Value: r.Value, Headers: r.Headers})
	}
	// Fields named twice, or nested in one another ("user" and
	// "user.email"), give overlapping spans: keep the outermost.
	slices.SortFunc(spans, func(a, b [2]int) int {
		if a[0] != b[0] {
			return a[0] - b[0]
		}
		return b[1] - a[1]
	})
	outBuf = outBuf[:0]
	prev := 0
	for _, sp := range spans {
		if sp[0] < prev {
			continue // inside a span already replaced
		}
		outBuf = append(outBuf, r.Value[prev:sp[0]]...)
		outBuf = replacement(outBuf, r.Value[sp[0]:sp[1]])
		prev = sp[1]
	}
	outBuf = append(outBuf, r.Value[prev:]...)
	return cfg.out.Emit(sdk.Out{Key: r.Key, Value: outBuf, Headers: r.Headers})
}

func addSpan(start, end int) { spans = append(spans, [2]int{start, end}) }

// replacement appends what replaces the raw JSON value: the mask, or the
// lowercase hex hash as a JSON string. A string is hashed by its decoded
// text (so "a\u0062" and "ab" hash alike); any other value by its JSON
// text as it appears in the record.
func replacement(dst, raw []byte) []byte {
	if !cfg.hash {
		return append(dst, cfg.mask...)
	}
	in := raw
	if jsonx.KindOf(raw) == jsonx.String {
		hashIn, _ = jsonx.AppendUnquote(hashIn[:0], raw)
		in = hashIn
	}
	cfg.hasher.Reset()
	cfg.hasher.Write(in)
	hashSum = cfg.hasher.Sum(hashSum[:0])
	dst = append(dst, '"')
	dst = hex.AppendEncode(dst, hashSum)
	return append(dst, '"')
}

func main() {}
