package abitest

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/wasmstream/wasmstream/abi"
)

// Triggers are the shared vectors of ABI.md section 8 (time), from
// testdata/triggers.json.
type Triggers struct {
	// Vectors are triggers with their exact encodings.
	Vectors []TriggerVector
	// Malformed are encodings Trigger.Decode must reject, by name.
	Malformed map[string][]byte
	// Checks are timer_set/timer_cancel arguments with the errno the host
	// returns for them (0: accepted).
	Checks []TimerCheck
	// Given is a list of timers; Fired is the same timers in the order the
	// host fires them when all are due.
	Given, Fired []Timer
}

// TriggerVector is one trigger and its encoding.
type TriggerVector struct {
	Name    string
	Trigger abi.Trigger
	Encoded []byte
}

// TimerCheck is one argument check.
type TimerCheck struct {
	Kind   abi.TimerKind
	TS     int64
	KeyLen int
	Errno  abi.Errno
}

// Timer identifies a timer: (kind, time, key).
type Timer struct {
	Kind abi.TimerKind
	TS   int64
	Key  []byte
}

type timerJSON struct {
	Kind uint32 `json:"kind"`
	TS   int64  `json:"ts"`
	Key  string `json:"key"`
}

type triggersFile struct {
	Vectors []struct {
		Name       string `json:"name"`
		Timestamp  int64  `json:"timestamp"`
		StreamTime int64  `json:"stream_time"`
		WallTime   int64  `json:"wall_time"`
		Kind       uint32 `json:"kind"`
		Key        string `json:"key"`
		Encoded    string `json:"encoded"`
	} `json:"vectors"`
	Malformed []struct {
		Name    string `json:"name"`
		Encoded string `json:"encoded"`
	} `json:"malformed"`
	Checks []struct {
		Kind   uint32 `json:"kind"`
		TS     int64  `json:"ts"`
		KeyLen int    `json:"key_len"`
		Errno  int32  `json:"errno"`
	} `json:"checks"`
	Order struct {
		Given []timerJSON `json:"given"`
		Fired []timerJSON `json:"fired"`
	} `json:"order"`
}

// TriggersPath is the location of the trigger vector file in this
// repository.
func TriggersPath() string {
	_, here, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(here), "..", "testdata", "triggers.json")
}

// LoadTriggers reads the file at path.
func LoadTriggers(path string) (*Triggers, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f triggersFile
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := &Triggers{Malformed: map[string][]byte{}}
	for _, v := range f.Vectors {
		key, err := hex.DecodeString(v.Key)
		if err != nil {
			return nil, fmt.Errorf("%s: vector %q key: %w", path, v.Name, err)
		}
		enc, err := hex.DecodeString(v.Encoded)
		if err != nil {
			return nil, fmt.Errorf("%s: vector %q encoded: %w", path, v.Name, err)
		}
		out.Vectors = append(out.Vectors, TriggerVector{Name: v.Name, Encoded: enc, Trigger: abi.Trigger{
			Timestamp: v.Timestamp, StreamTime: v.StreamTime, WallTime: v.WallTime,
			Kind: abi.TimerKind(v.Kind), Key: key}})
	}
	for _, m := range f.Malformed {
		enc, err := hex.DecodeString(m.Encoded)
		if err != nil {
			return nil, fmt.Errorf("%s: malformed %q: %w", path, m.Name, err)
		}
		out.Malformed[m.Name] = enc
	}
	for _, c := range f.Checks {
		out.Checks = append(out.Checks, TimerCheck{Kind: abi.TimerKind(c.Kind), TS: c.TS, KeyLen: c.KeyLen, Errno: abi.Errno(c.Errno)})
	}
	for _, list := range []struct {
		from []timerJSON
		to   *[]Timer
	}{{f.Order.Given, &out.Given}, {f.Order.Fired, &out.Fired}} {
		for _, t := range list.from {
			key, err := hex.DecodeString(t.Key)
			if err != nil {
				return nil, fmt.Errorf("%s: order key: %w", path, err)
			}
			*list.to = append(*list.to, Timer{Kind: abi.TimerKind(t.Kind), TS: t.TS, Key: key})
		}
	}
	return out, nil
}
