package engine

import (
	"fmt"
	"slices"
)

// A module may list the outputs and stores it names in custom sections
// called handlesSection (abi/ABI.md, section 2): the host checks them
// against the processor's declaration when an instance starts, before any
// plugin code runs, so a name the config lacks fails the start (and
// `validate`) rather than the first record that uses it. The Rust SDK's
// output! and store! macros write it; an SDK whose handles register
// themselves at start (Go, C, TypeScript) needs none.
//
// The payload is a sequence of entries: a kind byte ('o' output, 's'
// store), the name's length in one byte (1 to 255), the name. A linker
// concatenates the sections of its inputs, so a module can hold several.
const handlesSection = "wasmstream.handles"

// maxHandles bounds the distinct names a module may list: more than any
// processor declares, few enough that the check at start costs nothing.
const maxHandles = 1024

// Handle is an output or store a module names.
type Handle struct {
	Kind string // "output" or "store"
	Name string
}

// declaredHandles reads every handlesSection of a module, in order,
// without duplicates. A section that cannot be read refuses the module:
// it is written by an SDK, so a malformed one is a broken or forged build.
func declaredHandles(wasm []byte) ([]Handle, error) {
	if len(wasm) < 8 {
		return nil, nil
	}
	var out []Handle
	seen := map[Handle]bool{}
	r := reader{b: wasm, pos: 8}
	for r.pos < len(r.b) {
		id := r.byte()
		size := r.u32()
		if r.err != nil || uint64(size) > uint64(len(r.b)-r.pos) {
			return nil, nil // instrument refused the module already
		}
		p := r.b[r.pos : r.pos+int(size)]
		r.pos += int(size)
		if id != secCustom {
			continue
		}
		pr := reader{b: p}
		if name := pr.name(); pr.err != nil || name != handlesSection {
			continue
		}
		base := pr.pos // entries' bytes are counted from here
		for e := 0; pr.pos < len(p); e++ {
			at := pr.pos
			if len(p)-at < 2 {
				return nil, fmt.Errorf("custom section %s: entry %d at byte %d is cut short", handlesSection, e, at-base)
			}
			var kind string
			switch p[at] {
			case 'o':
				kind = "output"
			case 's':
				kind = "store"
			default:
				return nil, fmt.Errorf("custom section %s: entry %d at byte %d has kind %#x, want 'o' (output) or 's' (store)", handlesSection, e, at-base, p[at])
			}
			n := int(p[at+1])
			if n == 0 || n > len(p)-at-2 {
				return nil, fmt.Errorf("custom section %s: entry %d at byte %d has a name of %d bytes, with %d left", handlesSection, e, at-base, n, len(p)-at-2)
			}
			h := Handle{Kind: kind, Name: string(p[at+2 : at+2+n])}
			pr.pos = at + 2 + n
			if seen[h] {
				continue
			}
			if len(out) == maxHandles {
				return nil, fmt.Errorf("custom section %s: more than %d distinct names", handlesSection, maxHandles)
			}
			seen[h] = true
			out = append(out, h)
		}
	}
	return out, nil
}

// undeclaredHandles returns the handles of the module that b does not
// declare (a store may also be one of b's tables: reads of a table go
// through the same store_index).
func undeclaredHandles(hs []Handle, b Binding) []Undeclared {
	var out []Undeclared
	for _, h := range hs {
		var names []string
		switch h.Kind {
		case "output":
			names = b.Outputs
		default:
			names = append(b.Stores[:len(b.Stores):len(b.Stores)], b.Tables...)
		}
		if !slices.Contains(names, h.Name) && len(out) < maxUndeclared {
			out = append(out, Undeclared(h))
		}
	}
	return out
}
