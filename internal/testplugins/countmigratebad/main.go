// Command countmigratebad is countmigrate whose migration fails after
// writing the new layout (or, with the processor config {"fail":"trap"},
// panics; {"fail":"loop"} runs until the host's time limit;
// {"fail":"bloat"} writes until a state limit stops it): the host must
// discard those writes and roll the swap back. With {"fail":"records"}
// the migration succeeds but a third of the records fail (input ids
// "id<n>" with n divisible by 3, spread over every key and partition),
// for a canary to roll back the window that holds the migration.
package main

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/wasmstream/wasmstream/internal/testplugins/countlib"
	"github.com/wasmstream/wasmstream/sdk"
	"github.com/wasmstream/wasmstream/sdk/migrate"
)

var (
	counts = sdk.Store("counts")
	fail   string
)

func init() {
	sdk.OnInit(func() error {
		var cfg struct{ Fail string }
		if err := json.Unmarshal(sdk.Config(), &cfg); err != nil {
			return err
		}
		fail = cfg.Fail
		return nil
	})
	sdk.Handle(func(r *sdk.Record) error {
		if n, err := strconv.Atoi(strings.TrimPrefix(string(r.Value), "id")); fail == "records" && err == nil && n%3 == 0 {
			return errors.New("countmigratebad: asked to fail every third id")
		}
		return countlib.CountBinary(r)
	})
	migrate.Handle(func(from string) error {
		switch fail {
		case "trap":
			panic("countmigratebad: asked to trap")
		case "loop":
			for {
				_, _, _ = counts.Get([]byte("k0"))
			}
		case "bloat":
			v := make([]byte, 64<<10)
			for i := 0; ; i++ {
				if err := counts.Put([]byte{'b', byte(i), byte(i >> 8), byte(i >> 16)}, v); err != nil {
					return err
				}
			}
		case "records":
			return countlib.MigrateJSON(from)
		}
		if err := countlib.MigrateJSON(from); err != nil {
			return err
		}
		return errors.New("countmigratebad: the migration fails after writing the new layout")
	})
}

func main() {}
