package config

import (
	"math"
	"strconv"
)

// Duration returns a duration field in milliseconds, or def when it is
// absent. The field is a string of decimal numbers with units, as Go's
// time.ParseDuration reads them but without fractions ("90s", "5m",
// "1h30m", "250ms"; units ms, s, m, h, d), or a non-negative integer
// number of milliseconds. Negative durations are refused. (The time
// package is not linked into plugins; the SDK measures time in
// milliseconds.)
func (o *Object) Duration(key string, def int64) int64 {
	v, ok := o.Any(key)
	if !ok {
		return def
	}
	switch v := v.(type) {
	case float64:
		if v < 0 || v != math.Trunc(v) || v > 1<<53 {
			o.Fail(key, "must be a whole, non-negative number of milliseconds or a duration such as \"90s\"")
			return def
		}
		return int64(v)
	case string:
		ms, err := parseDuration(v)
		if err != "" {
			o.Fail(key, err+`; got `+strconv.Quote(v))
			return def
		}
		return ms
	}
	o.Fail(key, "must be a duration such as \"90s\" or a number of milliseconds, got "+typeName(v))
	return def
}

// unit is the length of a duration unit in ms, or 0 for an unknown one. A
// switch rather than a map: a package-level map is built at start in every
// plugin that links this package, used or not.
func unit(s string) int64 {
	switch s {
	case "ms":
		return 1
	case "s":
		return 1000
	case "m":
		return 60_000
	case "h":
		return 3_600_000
	case "d":
		return 86_400_000
	}
	return 0
}

// parseDuration reads "1h30m"-style text into milliseconds; the error is
// "" or says what is wrong.
func parseDuration(s string) (int64, string) {
	const want = `must be a duration such as "90s", "5m" or "1h30m" (units ms, s, m, h, d)`
	if s == "" {
		return 0, want
	}
	var total int64
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == i {
			return 0, want
		}
		n, err := strconv.ParseInt(s[i:j], 10, 64)
		if err != nil {
			return 0, want
		}
		k := j
		for k < len(s) && (s[k] < '0' || s[k] > '9') {
			k++
		}
		u := unit(s[j:k])
		if u == 0 {
			return 0, want
		}
		if n > (math.MaxInt64-total)/u {
			return 0, "is too long"
		}
		total += n * u
		i = k
	}
	return total, ""
}
