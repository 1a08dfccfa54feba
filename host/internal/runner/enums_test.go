package runner

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// Every value's config name parses back to it; names are the ones the
// config file uses; the zero value is the documented default; a bad name is
// refused with an error that names it.
func TestEnums(t *testing.T) {
	type enum interface{ String() string }
	cases := []struct {
		what   string
		values []enum
		names  []string
		parse  func(string) (enum, error)
		zero   enum
	}{
		{"guarantee", []enum{AtLeastOnce, ExactlyOnce}, []string{"at_least_once", "exactly_once"},
			func(s string) (enum, error) { return ParseGuarantee(s) }, Guarantee(0)},
		{"error policy", []enum{Fail, Skip, DeadLetter}, []string{"fail", "skip", "dead_letter"},
			func(s string) (enum, error) { return ParseErrorPolicy(s) }, ErrorPolicy(0)},
		{"start offset", []enum{Earliest, Latest}, []string{"earliest", "latest"},
			func(s string) (enum, error) { return ParseStartOffset(s) }, StartOffset(0)},
		{"group protocol", []enum{ProtocolAuto, ProtocolConsumer, ProtocolClassic}, []string{"auto", "consumer", "classic"},
			func(s string) (enum, error) { return ParseGroupProtocol(s) }, GroupProtocol(0)},
	}
	for _, c := range cases {
		t.Run(c.what, func(t *testing.T) {
			if c.zero != c.values[0] {
				t.Fatalf("zero value %v, want the default %v", c.zero, c.values[0])
			}
			for i, v := range c.values {
				if v.String() != c.names[i] {
					t.Fatalf("String() = %q, want %q", v.String(), c.names[i])
				}
				got, err := c.parse(c.names[i])
				if err != nil || got != v {
					t.Fatalf("parse(%q) = %v, %v; want %v", c.names[i], got, err, v)
				}
			}
			for _, bad := range []string{"", "Exactly-Once", "nope"} {
				_, err := c.parse(bad)
				if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", bad)) || !strings.Contains(err.Error(), c.what) {
					t.Fatalf("parse(%q) error %v: want one naming the %s and the value", bad, err, c.what)
				}
			}
		})
	}
	if got := Guarantee(9).String(); got != "guarantee(9)" {
		t.Fatalf("out-of-range guarantee prints %q", got)
	}
}

// The failure labels are part of the metrics and the dead-letter headers:
// they must not change.
func TestFailureKinds(t *testing.T) {
	want := map[FailureKind]string{
		FailureError: "error", FailureTrap: "trap", FailureTimeout: "timeout",
		FailureMemoryLimit: "memory_limit", FailureABIMisuse: "abi_misuse",
		FailurePluginFailed: "plugin_failed", FailureHostFailed: "host_failed",
		FailureInstanceLost: "instance_lost", FailureStackLimit: "stack_limit",
		FailureLimitExceeded: "limit_exceeded", FailureRefused: "refused",
	}
	if len(want) != int(numFailureKinds) {
		t.Fatalf("%d kinds checked of %d", len(want), numFailureKinds)
	}
	for k, label := range want {
		if k.String() != label {
			t.Fatalf("kind %d label %q, want %q", k, k.String(), label)
		}
	}
	wrapped := fmt.Errorf("record 3: %w", &KindError{Kind: FailureTimeout, Err: errors.New("took 2s")})
	if k := failureKind(wrapped); k != FailureTimeout {
		t.Fatalf("kind of a wrapped KindError %v", k)
	}
	if k := failureKind(errors.New("plain")); k != FailureError {
		t.Fatalf("kind of a plain error %v", k)
	}
	if k := failureKind(&KindError{Kind: 200, Err: errors.New("x")}); k != FailureError {
		t.Fatalf("kind of an out-of-range kind %v", k)
	}
	if msg := (&KindError{Kind: FailureTrap, Err: errors.New("unreachable")}).Error(); msg != "unreachable" {
		t.Fatalf("KindError message %q, want its error's", msg)
	}
	s := newStats()
	s.failure(FailureTrap)
	s.failure(FailureTrap)
	s.failure(FailureMemoryLimit)
	if got := s.Failures(); len(got) != 2 || got["trap"] != 2 || got["memory_limit"] != 1 {
		t.Fatalf("Failures() = %v", got)
	}
}
