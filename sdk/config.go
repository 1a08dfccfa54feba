package sdk

// configCache is the processor's config as read from the host, and
// configGen the instance generation it was read in (0 = not read).
var (
	configCache []byte
	configGen   uint32
)

// Config returns the processor's configuration: the `config` map of the
// processor in the host's config file, as JSON text. It is read from the
// host once per instance and cached; do not modify the returned slice.
// A processor without config gets empty bytes or "null" (host-dependent);
// treat both as an empty object.
//
// The SDK does not decode it: encoding/json adds about 1.4 MB to a plugin
// (1.9 MB -> 3.3 MB measured with Go 1.26), so a plugin chooses whether to
// pay for it.
func Config() []byte {
	if configGen == generation {
		return configCache
	}
	var small [512]byte
	n := hostConfig(small[:])
	if n < 0 {
		return nil // only in a phase without config; not cached
	}
	c := make([]byte, n)
	if int(n) <= len(small) {
		copy(c, small[:n])
	} else if m := hostConfig(c); m != n {
		return nil // the config changed under us: not a host this SDK knows
	}
	configCache, configGen = c, generation
	return c
}
