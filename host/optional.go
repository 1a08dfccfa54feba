package host

import (
	"fmt"
	"strconv"
	"time"
)

// Optional is a setting whose zero means something of its own, so that
// zero cannot also mean "unset": swap.canary_window: 0s turns the canary
// off, swap.max_failure_ratio: 0 rolls a version back at its first
// failure. An Optional is unset until it is given a value (Set in Go, the
// field in a file, the environment or a flag); ApplyDefaults gives an
// unset one the default its field states.
type Optional[T time.Duration | float64] struct {
	v   T
	set bool
}

// Set returns an Optional set to v.
func Set[T time.Duration | float64](v T) Optional[T] { return Optional[T]{v: v, set: true} }

// Get returns the value and whether it is set.
func (o Optional[T]) Get() (T, bool) { return o.v, o.set }

// orDefault sets o to def when it is unset.
func (o *Optional[T]) orDefault(def T) {
	if !o.set {
		*o = Set(def)
	}
}

// UnmarshalText parses a duration (with its unit: 0s, 500ms, 1m) or a
// number; "" is unset.
func (o *Optional[T]) UnmarshalText(text []byte) error {
	s := string(text)
	if s == "" {
		*o = Optional[T]{}
		return nil
	}
	switch p := any(&o.v).(type) {
	case *time.Duration:
		d, err := time.ParseDuration(s)
		if err != nil {
			if _, nerr := strconv.ParseFloat(s, 64); nerr == nil {
				return fmt.Errorf("%s %s", s, noUnit)
			}
			return fmt.Errorf("%q is not a duration (examples: 0s, 500ms, 1m)", s)
		}
		*p = d
	case *float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", s)
		}
		*p = f
	}
	o.set = true
	return nil
}

// MarshalText is the value as UnmarshalText reads it; "" when unset.
func (o Optional[T]) MarshalText() ([]byte, error) {
	if !o.set {
		return nil, nil
	}
	return []byte(fmt.Sprint(o.v)), nil
}

// String formats the value, or "unset".
func (o Optional[T]) String() string {
	if !o.set {
		return "unset"
	}
	return fmt.Sprint(o.v)
}

// noUnit is the problem of a duration written as a bare number: "5"
// would otherwise be 5ns.
const noUnit = "has no unit: write a duration such as 500ms, 5s or 1m"
