package host

import (
	"fmt"

	"github.com/wasmstream/wasmstream/host/internal/runner"
)

// The config's enums as the runner's types. Each table lists every value
// of its config type (a test checks it), so a resolved, validated config
// always converts; "" is not in any: New converts after ApplyDefaults, and
// the runner's own zero-value defaults are never reached from a config.
var (
	runnerGuarantees = map[Guarantee]runner.Guarantee{
		ExactlyOnce: runner.ExactlyOnce, AtLeastOnce: runner.AtLeastOnce,
	}
	runnerStartOffsets = map[StartOffset]runner.StartOffset{
		StartEarliest: runner.Earliest, StartLatest: runner.Latest,
	}
	runnerGroupProtocols = map[GroupProtocol]runner.GroupProtocol{
		ProtocolAuto: runner.ProtocolAuto, ProtocolConsumer: runner.ProtocolConsumer, ProtocolClassic: runner.ProtocolClassic,
	}
	runnerErrorPolicies = map[ErrorPolicy]runner.ErrorPolicy{
		OnErrorFail: runner.Fail, OnErrorSkip: runner.Skip, OnErrorDeadLetter: runner.DeadLetter,
	}
)

// runnerEnums are cfg's choices as the runner's types.
type runnerEnums struct {
	guarantee runner.Guarantee
	start     runner.StartOffset
	protocol  runner.GroupProtocol
	onError   []runner.ErrorPolicy // by processor, as cfg.Processors
}

// toRunnerEnums converts cfg's choices; cfg has its defaults applied and
// is valid (an error here is a value Validate let through).
func toRunnerEnums(cfg *Config) (runnerEnums, error) {
	var e runnerEnums
	var err error
	if e.guarantee, err = toRunner("guarantee", cfg.Guarantee, runnerGuarantees); err != nil {
		return e, err
	}
	if e.start, err = toRunner("kafka.start_offset", cfg.Kafka.StartOffset, runnerStartOffsets); err != nil {
		return e, err
	}
	if e.protocol, err = toRunner("kafka.group_protocol", cfg.Kafka.GroupProtocol, runnerGroupProtocols); err != nil {
		return e, err
	}
	e.onError = make([]runner.ErrorPolicy, len(cfg.Processors))
	for i, p := range cfg.Processors {
		if e.onError[i], err = toRunner(fmt.Sprintf("processors[%d].on_error", i), p.OnError, runnerErrorPolicies); err != nil {
			return e, err
		}
	}
	return e, nil
}

func toRunner[E ~string, R any](path string, v E, table map[E]R) (R, error) {
	r, ok := table[v]
	if !ok {
		return r, &ConfigError{Path: path, Problem: fmt.Sprintf("%q has no runner value (unset or invalid: New applies defaults and validates first)", v)}
	}
	return r, nil
}
