package sdk

import (
	"errors"

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
	// Kept in order as they are found, without duplicates; "output " sorts
	// before "store ". (No package sort or strings: every plugin links
	// this, and each package costs module bytes.)
	var missing []string
	for _, r := range declared {
		if r.declGen != 0 && r.declGen != generation {
			continue
		}
		if _, err := r.index(); err != nil {
			// A type assertion, not errors.Is, which links reflection.
			if he, ok := err.(*HostError); !ok || he.Errno != abi.ErrnoNoName {
				return err
			}
			kind := "output "
			if r.call == abi.ImportStoreIndex {
				kind = "store "
			}
			// Quoted as the C SDK does (strconv.Quote links unicode's tables).
			missing = insertSorted(missing, kind+`"`+r.name+`"`)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	msg := "sdk: not declared by the processor (add to its outputs or stores in the pipeline config): "
	for i, m := range missing {
		if i > 0 {
			msg += ", "
		}
		msg += m
	}
	return errors.New(msg)
}

// insertSorted inserts s into the sorted list, unless it is there.
func insertSorted(list []string, s string) []string {
	i := len(list)
	for i > 0 && list[i-1] > s {
		i--
	}
	if i > 0 && list[i-1] == s {
		return list
	}
	list = append(list, "")
	copy(list[i+1:], list[i:])
	list[i] = s
	return list
}
