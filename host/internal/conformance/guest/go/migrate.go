package main

import (
	"errors"

	"github.com/wasmstream/wasmstream/sdk"
	"github.com/wasmstream/wasmstream/sdk/migrate"
	"github.com/wasmstream/wasmstream/sdk/timer"
)

// The migration script (host/internal/conformance/README.md, "Migration").

func init() { migrate.Handle(migrateFrom) }

func migrateFrom(from string) error {
	emitted := res(out.Emit(sdk.Out{Key: []byte("lost")}))
	_, err := timer.Set(timer.EventTime, 1, []byte("k"))
	for _, p := range [][2]string{
		{"migrated-from", from}, {"migrate-emit", emitted}, {"migrate-timer", res(err)},
		{"migrate-counter", get(kv, []byte("counter"))},
	} {
		if err := kv.Put([]byte(p[0]), []byte(p[1])); err != nil {
			return err
		}
	}
	if from == "fail" {
		return errors.New("conformance: migration refused")
	}
	return nil
}
