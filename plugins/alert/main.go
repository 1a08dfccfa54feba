// Command alert is a wasmstream plugin that raises an alert when a key has
// had no record for a configured time of real (wall-clock) time: a
// processing-time timer per key, moved forward by each record. It can also
// report when a silent key is heard from again. See README.md.
package main

import (
	"encoding/binary"
	"errors"
	"strconv"

	"github.com/wasmstream/wasmstream/plugins/internal/config"
	"github.com/wasmstream/wasmstream/sdk"
	"github.com/wasmstream/wasmstream/sdk/timer"
)

var (
	store = sdk.Store("alert")
	out   = sdk.Output("alerts")
)

var (
	// timeout is how long a key may stay silent, in ms of wall time.
	timeout int64
	// resolve emits a "resolved" record when a key that was reported
	// silent has a record again.
	resolve bool
)

func init() {
	sdk.OnInit(setup)
	sdk.Handle(process)
	timer.Handle(fired)
}

func setup() error {
	c, err := config.Parse("alert", sdk.Config())
	if err != nil {
		return err
	}
	timeout = c.Duration("timeout", 0)
	if timeout <= 0 && c.Err() == nil {
		c.Fail("timeout", `required: how long a key may be silent, such as "5m"`)
	}
	resolve = c.Bool("resolve", false)
	if err := c.Err(); err != nil {
		return err
	}
	if err := store.Check(); err != nil {
		return errors.New("alert: " + err.Error())
	}
	if err := out.Check(); err != nil {
		return errors.New("alert: " + err.Error())
	}
	return nil
}

// watch is a key's state: the time its timer is set for, the wall time
// and timestamp of its last record, and whether it was reported silent.
// Stored as three 8-byte big-endian integers and a flag byte.
type watch struct {
	deadline, lastSeen, lastTS int64
	silent                     bool
}

const watchSize = 25

func load(key []byte) (watch, bool, error) {
	v, ok, err := store.Get(key)
	if err != nil || !ok {
		return watch{}, false, err
	}
	if len(v) != watchSize {
		return watch{}, false, errors.New("alert: store \"alert\" holds " + strconv.Itoa(len(v)) +
			" bytes for key " + strconv.Quote(string(key)) + ", want " + strconv.Itoa(watchSize))
	}
	be := binary.BigEndian
	return watch{deadline: int64(be.Uint64(v)), lastSeen: int64(be.Uint64(v[8:])),
		lastTS: int64(be.Uint64(v[16:])), silent: v[24] == 1}, true, nil
}

func save(key []byte, w watch) error {
	var v [watchSize]byte
	be := binary.BigEndian
	be.PutUint64(v[:], uint64(w.deadline))
	be.PutUint64(v[8:], uint64(w.lastSeen))
	be.PutUint64(v[16:], uint64(w.lastTS))
	if w.silent {
		v[24] = 1
	}
	return store.Put(key, v[:])
}

// process moves the key's timer to now + timeout.
func process(r *sdk.Record) error {
	now, err := timer.WallTime()
	if err != nil {
		return err
	}
	w, found, err := load(r.Key)
	if err != nil {
		return err
	}
	if found && !w.silent {
		if _, err := timer.Cancel(timer.ProcessingTime, w.deadline, r.Key); err != nil {
			return err
		}
	}
	if found && w.silent && resolve {
		if err := report(r.Key, "resolved", w.lastSeen, now, r.Timestamp); err != nil {
			return err
		}
	}
	w = watch{deadline: now + timeout, lastSeen: now, lastTS: r.Timestamp}
	if _, err := timer.Set(timer.ProcessingTime, w.deadline, r.Key); err != nil {
		return err
	}
	return save(r.Key, w)
}

// fired reports a key whose timer came due: no record for timeout.
func fired(f *timer.Firing) error {
	w, found, err := load(f.Key)
	if err != nil {
		return err
	}
	if !found || w.silent || w.deadline != f.Time {
		return nil // a timer the key's state no longer expects
	}
	if err := report(f.Key, "silent", w.lastSeen, f.WallTime, w.lastTS); err != nil {
		return err
	}
	if !resolve {
		return store.Delete(f.Key) // nothing more to say about this key
	}
	w.silent = true
	return save(f.Key, w)
}

var valBuf []byte

// report emits {"status":…,"last_seen":…,"silent_ms":…,"record_timestamp":…}
// with the key of the watched records.
func report(key []byte, status string, lastSeen, now, ts int64) error {
	v := append(valBuf[:0], `{"status":"`...)
	v = append(v, status...)
	v = append(v, `","last_seen":`...)
	v = strconv.AppendInt(v, lastSeen, 10)
	v = append(v, `,"silent_ms":`...)
	v = strconv.AppendInt(v, now-lastSeen, 10)
	v = append(v, `,"record_timestamp":`...)
	v = strconv.AppendInt(v, ts, 10)
	v = append(v, '}')
	valBuf = v
	return out.Emit(sdk.Out{Key: key, Value: v, Timestamp: now})
}

func main() {}
