package noconfig

import "testing"

func TestEmpty(t *testing.T) {
	for c, want := range map[string]bool{
		"": true, "null": true, "{}": true, " { \n\t} ": true, "\r\nnull ": true,
		`{"a":1}`: false, "[]": false, "nul": false, "0": false,
	} {
		if got := Empty([]byte(c)); got != want {
			t.Errorf("Empty(%q) = %v, want %v", c, got, want)
		}
	}
}
