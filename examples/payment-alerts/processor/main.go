// Command processor is the payment-alerts example's plugin: it reads
// payments as "<account>,<amount in cents>" text, passes every payment to
// the "audited" output with a header saying how it was classified, and
// sends payments at or above a threshold to the "alerts" output.
//
// It shows the parts of the SDK a first processor needs: config read once
// at init, two outputs, headers, logging, and a rejected record.
package main

import (
	"bytes"
	"errors"
	"strconv"

	"github.com/wasmstream/wasmstream/sdk"
)

var (
	audited = sdk.Output("audited")
	alerts  = sdk.Output("alerts")

	// threshold is in cents; set from the config's "threshold_cents".
	threshold int64 = 100_000
)

func init() {
	sdk.OnInit(setup)
	sdk.Handle(process)
}

// setup reads the config: {"threshold_cents": 250000}. The config is JSON
// text; this plugin reads its one number without a JSON library to stay
// small.
func setup() error {
	if err := audited.Check(); err != nil {
		return err
	}
	if err := alerts.Check(); err != nil {
		return err
	}
	cfg := sdk.Config()
	i := bytes.Index(cfg, []byte(`"threshold_cents":`))
	if i < 0 {
		return nil // keep the default
	}
	rest := bytes.TrimLeft(cfg[i+len(`"threshold_cents":`):], " ")
	end := bytes.IndexAny(rest, ",} ")
	if end < 0 {
		end = len(rest)
	}
	n, err := strconv.ParseInt(string(rest[:end]), 10, 64)
	if err != nil || n <= 0 {
		return errors.New("payment-alerts: config: threshold_cents must be a positive integer")
	}
	threshold = n
	sdk.LogInfo("payment-alerts: alerting at " + strconv.FormatInt(n, 10) + " cents")
	return nil
}

func process(r *sdk.Record) error {
	comma := bytes.IndexByte(r.Value, ',')
	if comma < 0 {
		// A failed record goes through the processor's on_error policy.
		return errors.New("payment-alerts: value is not <account>,<cents>")
	}
	cents, err := strconv.ParseInt(string(r.Value[comma+1:]), 10, 64)
	if err != nil {
		return errors.New("payment-alerts: amount is not a whole number of cents")
	}
	class := "normal"
	if cents >= threshold {
		class = "alert"
		if err := alerts.Emit(sdk.Out{Key: r.Value[:comma], Value: r.Value}); err != nil {
			return err
		}
	}
	headers := append(r.Headers, sdk.Header{Key: "payment-class", Value: []byte(class)})
	return audited.Emit(sdk.Out{Key: r.Key, Value: r.Value, Headers: headers})
}

func main() {}
