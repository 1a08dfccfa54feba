package config

import (
	"strings"
	"testing"
)

func TestDuration(t *testing.T) {
	for in, want := range map[string]int64{
		`{"d":"90s"}`: 90_000, `{"d":"1h30m"}`: 5_400_000, `{"d":"250ms"}`: 250, `{"d":"2d"}`: 172_800_000,
		`{"d":"1m1s1ms"}`: 61_001, `{"d":0}`: 0, `{"d":1500}`: 1500, `{}`: 7,
	} {
		o, err := Parse("p", []byte(in))
		if err != nil {
			t.Fatal(err)
		}
		if got := o.Duration("d", 7); got != want || o.Err() != nil {
			t.Errorf("%s: %d (%v), want %d", in, got, o.Err(), want)
		}
	}
	for in, msg := range map[string]string{
		`{"d":"5"}`: "must be a duration", `{"d":"m"}`: "must be a duration", `{"d":"1.5s"}`: "must be a duration",
		`{"d":"-1s"}`: "must be a duration", `{"d":""}`: "must be a duration", `{"d":"5 m"}`: "must be a duration",
		`{"d":"1y"}`: "must be a duration", `{"d":-1}`: "non-negative", `{"d":1.5}`: "whole",
		`{"d":true}`: "got a boolean", `{"d":"999999999999d"}`: "too long",
	} {
		o, _ := Parse("p", []byte(in))
		o.Duration("d", 0)
		if err := o.Err(); err == nil || !strings.Contains(err.Error(), msg) || !strings.HasPrefix(err.Error(), `p: config: "d": `) {
			t.Errorf("%s: %v, want %q", in, err, msg)
		}
	}
}

func TestBool(t *testing.T) {
	o, _ := Parse("p", []byte(`{"a":true,"b":"yes"}`))
	if !o.Bool("a", false) || o.Bool("c", false) {
		t.Fatal("wrong values")
	}
	o.Bool("b", false)
	if err := o.Err(); err == nil || err.Error() != `p: config: "b": must be true or false, got a string` {
		t.Fatal(err)
	}
}
