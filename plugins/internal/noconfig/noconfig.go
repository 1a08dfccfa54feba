// Package noconfig is the init of a bundled plugin that takes no config
// and writes to one output (passthrough, split). It links nothing beyond
// the SDK: not even package config's JSON reader, which adds about 180 KB
// to a module, so the passthrough stays the baseline of the benchmarks.
package noconfig

import (
	"errors"

	"github.com/wasmstream/wasmstream/sdk"
)

// Setup is the init of plugin: it fails unless the config is empty, null
// or {} and out is declared.
func Setup(plugin string, out *sdk.OutputHandle) error {
	if !Empty(sdk.Config()) {
		return errors.New(plugin + ": config: takes no config; got " + string(sdk.Config()))
	}
	if err := out.Check(); err != nil {
		return errors.New(plugin + ": " + err.Error())
	}
	return nil
}

// Empty reports whether c is empty, null or {} (JSON whitespace allowed),
// written out to keep package bytes and its Unicode tables out.
func Empty(c []byte) bool {
	var s []byte
	for _, b := range c {
		if b != ' ' && b != '\t' && b != '\n' && b != '\r' {
			s = append(s, b)
		}
	}
	switch string(s) {
	case "", "null", "{}":
		return true
	}
	return false
}
