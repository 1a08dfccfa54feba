package host

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// A config names files: plugins, the state and cache directories, TLS
// files, trusted keys and file: secrets. ResolvePaths makes each absolute, by one rule:
// a path the config file gives (or a default the file leaves in place) is
// relative to the file's directory, so a config means the same whichever
// directory wasmstream runs from; a path an environment variable or a
// flag gives is relative to the working directory, as any path typed on
// a command line. Absolute paths also make every "not found" name the
// path that was tried.

// pathField is one file path of the config: its key (as the environment
// and flags name it) and the field.
type pathField struct {
	key string
	p   *string
	// secret: only a "file:PATH" value is a path.
	secret bool
	// list is the key of the list the path is an element of ("" for
	// none): the environment may set the whole list at once.
	list string
}

// pathFields lists the config's file paths.
func (c *Config) pathFields() []pathField {
	sasl := &c.Kafka.SASL
	f := []pathField{
		{key: "state.dir", p: &c.State.Dir},
		{key: "runtime.cache_dir", p: &c.Runtime.CacheDir},
		{key: "kafka.tls.ca_file", p: &c.Kafka.TLS.CAFile},
		{key: "kafka.tls.cert_file", p: &c.Kafka.TLS.CertFile},
		{key: "kafka.tls.key_file", p: &c.Kafka.TLS.KeyFile},
		{key: "kafka.sasl.password", p: (*string)(&sasl.Password), secret: true},
		{key: "kafka.sasl.token", p: (*string)(&sasl.Token), secret: true},
		{key: "kafka.sasl.access_key", p: (*string)(&sasl.AccessKey), secret: true},
		{key: "kafka.sasl.secret_key", p: (*string)(&sasl.SecretKey), secret: true},
		{key: "kafka.sasl.session_token", p: (*string)(&sasl.SessionToken), secret: true},
	}
	for i := range c.Processors {
		f = append(f, pathField{key: fmt.Sprintf("processors.%d.plugin", i), p: &c.Processors[i].Plugin})
		if c.Processors[i].Shadow != "" {
			f = append(f, pathField{key: fmt.Sprintf("processors.%d.shadow", i), p: &c.Processors[i].Shadow})
		}
	}
	for i := range c.Runtime.TrustedKeys {
		f = append(f, pathField{key: fmt.Sprintf("runtime.trusted_keys.%d", i), p: &c.Runtime.TrustedKeys[i], list: "runtime.trusted_keys"})
	}
	return f
}

// ResolvePaths makes the config's file paths absolute: against the
// directory of file, the config file the values came from ("" for none:
// the working directory), or against the working directory for the keys
// fromCommandLine reports (the environment's and the flags': "state.dir",
// "processors.0.plugin"). Call it after ApplyDefaults, so that a default
// path is the file's too. It remembers where a relative state.dir of the
// file resolved before this rule (OldStateDir).
func (c *Config) ResolvePaths(file string, fromCommandLine func(key string) bool) error {
	wd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("resolving the config's relative paths: %w", err)
	}
	fileDir := wd
	if file != "" {
		abs, err := filepath.Abs(file)
		if err != nil {
			return fmt.Errorf("config file %s: %w", file, err)
		}
		fileDir = filepath.Dir(abs)
	}
	for _, f := range c.pathFields() {
		base := fileDir
		if fromCommandLine(f.key) || (f.list != "" && fromCommandLine(f.list)) {
			base = wd
		}
		v := *f.p
		switch {
		case f.secret:
			if p, ok := strings.CutPrefix(v, "file:"); ok && p != "" {
				*f.p = "file:" + absolute(p, base)
			}
		case v == "", f.key == "runtime.cache_dir" && v == "off":
		default:
			if f.key == "state.dir" && !filepath.IsAbs(v) && base != wd {
				c.oldStateDir = filepath.Join(wd, v)
			}
			*f.p = absolute(v, base)
		}
	}
	return nil
}

func absolute(p, base string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(base, p)
}

// OldStateDir returns the directory where a wasmstream before this
// release kept this app's state, when that is not StateDir and holds it
// while StateDir does not: those versions resolved a relative state.dir
// (the default included) against the working directory, not against the
// config file's directory. The state there is still good: move it to
// StateDir, or set state.dir to its parent. "" when there is none.
func (c *Config) OldStateDir() string {
	if c.oldStateDir == "" || c.AppID == "" {
		return ""
	}
	old := filepath.Join(c.oldStateDir, c.AppID)
	if old == c.StateDir() || !isDir(old) || isDir(c.StateDir()) {
		return ""
	}
	return old
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// oldStateDirAdvice says what to do about OldStateDir's directory, or ""
// when there is none.
func (c *Config) oldStateDirAdvice() string {
	old := c.OldStateDir()
	if old == "" {
		return ""
	}
	return fmt.Sprintf("state.dir is relative to the config file's directory since this release, so this app's state is now %s; "+
		"an earlier wasmstream, which resolved it against the working directory, kept it in %s. "+
		"To use that state, move it (mv %s %s) or set state.dir: %s",
		c.StateDir(), old, old, c.StateDir(), filepath.Dir(old))
}
