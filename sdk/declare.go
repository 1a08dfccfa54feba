package sdk

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/wasmstream/wasmstream/abi"
)

// Declared handles. The outputs and stores a plugin makes while it starts
// (package variables, which its package initialization creates, and
// handles its OnInit hook makes) are resolved when the instance starts, in
// wasmstream_init: a deployment whose config lacks one of them fails to
// start, and `wasmstream validate` reports it, naming every missing name,
// instead of failing records at run time. A handle made later (in a
// record handler) is resolved on first use.
var (
	// declared are the handles to resolve at the start of an instance.
	declared []*ref
	// inInit is true while initialize runs the OnInit hook.
	inInit bool
)

// declare registers r if it is made while the plugin starts: during its
// package initialization (for every instance) or its OnInit hook (for
// that instance).
func declare(r *ref) {
	switch {
	case inPackageInit():
		r.declGen = 0
	case inInit:
		r.declGen = generation
	default:
		return
	}
	declared = append(declared, r)
}

// resolveDeclared resolves this instance's declared handles that are not
// resolved yet. The names the processor does not declare fail the start
// with one message that names them all (outputs first, then stores, each
// by name; the Rust and C SDKs say the same).
func resolveDeclared() error {
	var missing []string
	for _, r := range declared {
		if r.declGen != 0 && r.declGen != generation {
			continue
		}
		if _, err := r.index(); err != nil {
			if !errors.Is(err, abi.ErrnoNoName) {
				return err
			}
			kind := "output "
			if r.call == abi.ImportStoreIndex {
				kind = "store "
			}
			missing = append(missing, kind+strconv.Quote(r.name))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	slices.Sort(missing) // "output " < "store "
	missing = slices.Compact(missing)
	return errors.New("sdk: not declared by the processor (add to its outputs or stores in the pipeline config): " +
		strings.Join(missing, ", "))
}
