// Command velocity is the card-velocity processor of the newcomer's path, written
// with the Go SDK's time helpers: per card (the record key), count the
// payments in the last 60 s of event time, alert above 3, and pass every
// payment on. (A payment counts the card's payments in the 60 s before it;
// one that comes out of order also counts the later ones.) Its twins in
// the other SDKs are sdk/rust/tests/velocity.rs and
// sdk/c/test/velocity_test.c; main_test.go runs it against the fake
// host. It is a test of the SDK, not a plugin to deploy.
package main

import (
	"encoding/binary"
	"strconv"

	"github.com/wasmstream/wasmstream/sdk"
	"github.com/wasmstream/wasmstream/sdk/timer"
)

// recent holds per card the timestamps (8 bytes each) of its payments in
// the 60 s before its last one.
var payments, alerts, recent = sdk.Output("payments"), sdk.Output("alerts"), sdk.Store("recent")

const window, limit = 60_000, 3

func init() {
	sdk.Handle(pay)
	timer.Handle(forget)
}

// since appends to dst the timestamps of v after t.
func since(dst, v []byte, t int64) []byte {
	for i := 0; i+8 <= len(v); i += 8 {
		if int64(binary.BigEndian.Uint64(v[i:])) > t {
			dst = append(dst, v[i:i+8]...)
		}
	}
	return dst
}

func pay(r *sdk.Record) error {
	v, _, err := recent.Get(r.Key)
	if err != nil {
		return err
	}
	v = binary.BigEndian.AppendUint64(since(nil, v, r.Timestamp-window), uint64(r.Timestamp))
	if err := recent.Put(r.Key, v); err != nil {
		return err
	}
	if _, err := timer.Set(timer.EventTime, r.Timestamp+window, r.Key); err != nil {
		return err
	}
	if n := len(v) / 8; n > limit {
		if err := alerts.Emit(sdk.Out{Key: r.Key, Value: []byte(strconv.Itoa(n))}); err != nil {
			return err
		}
	}
	return payments.Forward(r)
}

// forget drops a card 60 s (of event time) after its last payment.
func forget(f *timer.Firing) error {
	v, _, err := recent.Get(f.Key)
	if err != nil || len(since(nil, v, f.Time-window)) > 0 {
		return err
	}
	return recent.Delete(f.Key)
}

func main() {}
