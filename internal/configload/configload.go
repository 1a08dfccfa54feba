// Package configload loads a host.Config the way the CLI does: a YAML
// file, then WASMSTREAM_ environment variables, then command-line flags,
// merged in that order (later wins), then the config's defaults
// (host.Config.ApplyDefaults), its paths (ResolvePaths) and its checks
// (Validate). Every problem is reported with its field path. The public
// host package takes a Config and knows nothing of files, the
// environment or flags: koanf and pflag stay here.
package configload

import (
	"encoding"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/providers/posflag"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"

	"github.com/wasmstream/wasmstream/host"
)

// EnvPrefix starts every environment variable the config reads. After the
// prefix, "__" separates levels and the rest is lower-cased:
// WASMSTREAM_APP_ID=x sets app_id, WASMSTREAM_KAFKA__BROKERS=a:9092,b:9092
// sets kafka.brokers.
const EnvPrefix = "WASMSTREAM_"

// Flags registers the flags that override the config on fs. Only set
// flags override; their values are merged after the file and the
// environment.
func Flags(fs *pflag.FlagSet) {
	fs.String("app-id", "", "application id (config app_id)")
	fs.StringSlice("brokers", nil, "Kafka seed brokers, comma-separated (config kafka.brokers)")
	fs.String("state-dir", "", "state directory (config state.dir)")
	fs.String("admin-listen", "", "admin endpoint host:port (config admin.listen)")
	fs.String("log-level", "", "debug, info, warn or error (config log.level)")
	fs.String("log-format", "", "text or json (config log.format)")
}

// flagKeys maps each of Flags' flags to the config key it sets.
var flagKeys = map[string]string{
	"app-id":       "app_id",
	"brokers":      "kafka.brokers",
	"state-dir":    "state.dir",
	"admin-listen": "admin.listen",
	"log-level":    "log.level",
	"log-format":   "log.format",
}

// FlagOf returns the flag that sets the config key ("log.level" ->
// "log-level"), "" when none does (the config reference lists them).
func FlagOf(key string) string {
	for flag, k := range flagKeys {
		if k == key {
			return flag
		}
	}
	return ""
}

// Load reads path (YAML; may be "" for none), then the environment
// (environ, usually os.Environ(); passed in so tests need not touch the
// process environment), then the set flags of fs (may be nil), applies
// defaults and validates. The error lists every problem found, each a
// *host.ConfigError naming its field path.
//
// Every file path of the config (host.Config.ResolvePaths) is made
// absolute: one the file gives, or a default it leaves in place, relative
// to the file's directory; one an environment variable or a flag gives,
// relative to the working directory, like any path typed on a command
// line. Without a file, all are relative to the working directory.
func Load(path string, environ []string, fs *pflag.FlagSet) (*host.Config, error) {
	return load(path, environ, fs, (*host.Config).Validate)
}

// LoadKafka loads a config as Load does, but checks only what a tool that
// talks to the config's Kafka needs (host.Config.ValidateKafka): the topic
// commands work before the pipeline is complete.
func LoadKafka(path string, environ []string, fs *pflag.FlagSet) (*host.Config, error) {
	return load(path, environ, fs, (*host.Config).ValidateKafka)
}

func load(path string, environ []string, fs *pflag.FlagSet, validate func(*host.Config) error) (*host.Config, error) {
	k := koanf.New(".")
	if path != "" {
		if _, err := os.Stat(path); err != nil {
			abs, _ := filepath.Abs(path)
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("config file %s: not found", abs)
			}
			return nil, fmt.Errorf("config file %s: %w", abs, err)
		}
		if err := k.Load(file.Provider(path), yaml.Parser()); err != nil {
			return nil, fmt.Errorf("config file %s: %w", path, err)
		}
	}
	envMap := map[string]any{}
	// fromCommandLine holds the keys the environment or a flag sets: their
	// paths are relative to the working directory.
	fromCommandLine := map[string]bool{}
	for _, kv := range environ {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, EnvPrefix) {
			continue
		}
		key := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, EnvPrefix), "__", "."))
		envMap[key] = val
		fromCommandLine[key] = true
	}
	tree, err := envTree(envMap, k.Raw()) // lists by index: env.go
	if err != nil {
		return nil, err
	}
	if err := k.Load(confmap.Provider(tree, ""), nil); err != nil {
		return nil, fmt.Errorf("environment: %w", err)
	}
	if fs != nil {
		fk := koanf.New(".")
		err := fk.Load(posflag.ProviderWithFlag(fs, ".", nil, func(f *pflag.Flag) (string, any) {
			key, ok := flagKeys[f.Name]
			if !ok || !f.Changed {
				return "", nil
			}
			fromCommandLine[key] = true
			if sv, ok := f.Value.(pflag.SliceValue); ok {
				return key, sv.GetSlice()
			}
			return key, f.Value.String()
		}), nil)
		if err != nil {
			return nil, fmt.Errorf("flags: %w", err)
		}
		if err := k.Merge(fk); err != nil {
			return nil, fmt.Errorf("flags: %w", err)
		}
	}

	// Durations and sizes given explicitly are checked on the raw values:
	// after decoding, a 0 the user wrote looks like a field left out (and
	// would get its default), and a bare number of a duration would be
	// taken as nanoseconds.
	quantityErrs := checkQuantities(k.Raw())

	var cfg host.Config
	dc := &mapstructure.DecoderConfig{
		TagName:          "koanf",
		Result:           &cfg,
		WeaklyTypedInput: true,
		ErrorUnused:      false,
		Metadata:         &mapstructure.Metadata{},
		DecodeHook: mapstructure.ComposeDecodeHookFunc(
			mapstructure.StringToTimeDurationHookFunc(),
			mapstructure.StringToSliceHookFunc(","),
			scalarToText,
			mapstructure.TextUnmarshallerHookFunc(),
		),
	}
	// A value that does not decode is reported and its field left unset
	// (so it gets its default): the rest is still checked, and one run
	// names every problem.
	errs := quantityErrs
	decodeErr := k.UnmarshalWithConf("", &cfg, koanf.UnmarshalConf{Tag: "koanf", DecoderConfig: dc})
	decoded := map[string]bool{} // the paths decodeErr names
	if decodeErr != nil {
		for _, e := range decodeErrors(decodeErr) {
			errs = append(errs, e)
			decoded[e.Path] = true
		}
	}
	for _, u := range unusedKeys(dc.Metadata.Unused) {
		errs = append(errs, &host.ConfigError{Path: u, Problem: "unknown field (misspelled?)"})
	}
	cfg.ApplyDefaults()
	if err := cfg.ResolvePaths(path, func(key string) bool { return fromCommandLine[key] }); err != nil {
		return nil, err
	}
	if err := validate(&cfg); err != nil {
		for _, e := range unjoin(err) {
			// A field that did not decode is reported once.
			if ce, ok := e.(*host.ConfigError); !ok || !decoded[ce.Path] {
				errs = append(errs, e)
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &cfg, nil
}

// unjoin returns the errors errors.Join joined into err, or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// unusedKeys returns the keys the config had but no field took (a
// misspelling such as "kafka.brokerz"), sorted. Processor config maps take
// any key: they are the plugin's business.
func unusedKeys(keys []string) []string {
	out := append([]string(nil), keys...)
	sort.Strings(out)
	return out
}

// decodeErrors turns mapstructure's report ("decoding failed due to the
// following error(s):\n\n'kafka.commit_interval' time: invalid duration")
// into one ConfigError per field.
func decodeErrors(err error) []*host.ConfigError {
	var errs []*host.ConfigError
	for _, line := range strings.Split(err.Error(), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "decoding failed") {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "'"); ok {
			if path, problem, ok := strings.Cut(rest, "' "); ok {
				errs = append(errs, &host.ConfigError{Path: mapKeyRE.ReplaceAllString(path, ".$1"), Problem: problem})
				continue
			}
		}
		errs = append(errs, &host.ConfigError{Problem: line})
	}
	if len(errs) == 0 {
		return []*host.ConfigError{{Problem: err.Error()}}
	}
	return errs
}

// mapKeyRE matches a map key in mapstructure's paths
// ("processors[0].outputs[out].emit"), which Validate writes as a field
// ("processors[0].outputs.out.emit").
var mapKeyRE = regexp.MustCompile(`\[([^\]0-9][^\]]*)\]`)

// scalarToText hands a number or a bool a file gives to a field of a
// string or struct type that parses itself (encoding.TextUnmarshaler:
// max_failure_ratio: 0, state_cache: 0, guarantee: 1) as the text the
// environment or a flag would give. A ByteSize, a number itself, takes a
// number as it always did.
func scalarToText(from, to reflect.Type, data any) (any, error) {
	switch from.Kind() {
	case reflect.Int, reflect.Int64, reflect.Uint64, reflect.Float64, reflect.Bool:
	default:
		return data, nil
	}
	if k := to.Kind(); k != reflect.String && k != reflect.Struct {
		return data, nil
	}
	if _, ok := reflect.New(to).Interface().(encoding.TextUnmarshaler); !ok {
		return data, nil
	}
	return fmt.Sprint(data), nil
}

var (
	durationType = reflect.TypeOf(time.Duration(0))
	byteSizeType = reflect.TypeOf(host.ByteSize(0))
)

// quantityPaths lists the koanf paths of Config's duration and size fields
// with their types; a list of structs contributes "name.*.field" paths.
func quantityPaths(t reflect.Type, prefix string, out map[string]reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("koanf")
		if tag == "" || tag == "-" || !f.IsExported() {
			continue
		}
		path := prefix + tag
		switch ft := f.Type; {
		case ft == durationType || ft == byteSizeType:
			out[path] = ft
		case ft.Kind() == reflect.Struct:
			quantityPaths(ft, path+".", out)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			quantityPaths(ft.Elem(), path+".*.", out)
		}
	}
}

// checkQuantities returns an error for each duration given as a bare
// number (no unit: "record_timeout: 5" would be 5ns) and for each duration
// or size explicitly set to 0, which would otherwise silently become the
// default. raw is the merged configuration before decoding (koanf Raw).
func checkQuantities(raw map[string]any) []error {
	paths := map[string]reflect.Type{}
	quantityPaths(reflect.TypeOf(host.Config{}), "", paths)
	var errs []error
	for path, typ := range paths {
		walkRaw(raw, strings.Split(path, "."), "", func(at string, v any) {
			if err := checkQuantity(typ, v); err != nil {
				errs = append(errs, &host.ConfigError{Path: at, Problem: err.Error()})
			}
		})
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return errs
}

// walkRaw calls fn with the display path ("processors[1].limits.memory")
// and the value of every element of node that path (with "*" for list
// indices) reaches.
func walkRaw(node any, path []string, at string, fn func(at string, v any)) {
	if len(path) == 0 {
		fn(at, node)
		return
	}
	if path[0] == "*" {
		list, ok := node.([]any)
		if !ok {
			return
		}
		for i, el := range list {
			walkRaw(el, path[1:], at+"["+strconv.Itoa(i)+"]", fn)
		}
		return
	}
	m, ok := node.(map[string]any)
	if !ok {
		return
	}
	v, ok := m[path[0]]
	if !ok {
		return
	}
	next := path[0]
	if at != "" {
		next = at + "." + path[0]
	}
	walkRaw(v, path[1:], next, fn)
}

// checkQuantity checks one explicitly given duration or size. Values that
// do not parse are left to the decoder, which reports them on the same
// field. (A setting whose 0 means something is a host.Optional, or a type
// of its own that parses itself: neither is checked here.)
func checkQuantity(typ reflect.Type, v any) error {
	const noUnit = "has no unit: write a duration such as 500ms, 5s or 1m"
	var zero bool
	switch x := v.(type) {
	case int, int64, uint64, float64:
		if typ == durationType {
			return fmt.Errorf("%v %s", x, noUnit)
		}
		zero = reflect.ValueOf(x).IsZero()
	case string:
		s := strings.TrimSpace(x)
		if typ == durationType {
			d, err := time.ParseDuration(s) // "5" fails here and in the decoder: "missing unit"
			if err != nil {
				return nil
			}
			zero = d == 0
		} else {
			var b host.ByteSize
			if b.UnmarshalText([]byte(s)) != nil {
				return nil
			}
			zero = b == 0
		}
	default:
		return nil
	}
	if zero {
		return errors.New("0 is not allowed (leave the field out for its default)")
	}
	return nil
}
