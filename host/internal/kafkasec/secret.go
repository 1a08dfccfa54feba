package kafkasec

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
)

// Secret is a credential given in the config as one of
//
//	env:NAME     the value of environment variable NAME
//	file:PATH    the contents of the file at PATH (one trailing newline is dropped)
//	anything     the literal value (the config file then holds the secret)
//
// References are resolved when a client authenticates, not when the config
// is loaded, so a rotated file or variable is picked up by the next
// connection. A Secret never prints its literal value: String, GoString,
// MarshalText and LogValue give "[redacted]", or the reference (env:NAME,
// file:PATH) which names where the secret is, not what it is.
type Secret string

// Redacted is what a literal Secret prints as.
const Redacted = "[redacted]"

// IsSet reports whether the config gave the secret.
func (s Secret) IsSet() bool { return s != "" }

// ref splits a reference into its kind ("env", "file") and target; kind is
// "" for a literal.
func (s Secret) ref() (kind, target string) {
	str := string(s)
	for _, k := range []string{"env", "file"} {
		if t, ok := strings.CutPrefix(str, k+":"); ok {
			return k, t
		}
	}
	return "", str
}

// String shows where the secret comes from, never a literal value.
func (s Secret) String() string {
	switch kind, _ := s.ref(); {
	case s == "":
		return ""
	case kind != "":
		return string(s)
	}
	return Redacted
}

// GoString keeps %#v from printing the value.
func (s Secret) GoString() string { return fmt.Sprintf("%q", s.String()) }

// MarshalText makes JSON, YAML and text encodings redact the value.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// LogValue makes slog redact the value.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// ErrSecret marks a secret that cannot be read (variable unset, file
// missing or empty).
var ErrSecret = errors.New("kafkasec: secret unavailable")

// Resolve returns the secret's value, reading the variable or file now.
func (s Secret) Resolve() (string, error) {
	kind, target := s.ref()
	switch kind {
	case "env":
		v, ok := os.LookupEnv(target)
		if !ok || v == "" {
			return "", fmt.Errorf("%w: environment variable %s is not set", ErrSecret, target)
		}
		return v, nil
	case "file":
		b, err := os.ReadFile(target)
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrSecret, err)
		}
		v := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		if v == "" {
			return "", fmt.Errorf("%w: file %s is empty", ErrSecret, target)
		}
		return v, nil
	}
	return target, nil
}
