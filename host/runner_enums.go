package host

import (
	"fmt"

	"github.com/wasmstream/wasmstream/host/internal/runner"
)

// runnerEnums are the config's strings as the runner's types, mapped once
// where the runner's options are built.
type runnerEnums struct {
	guarantee runner.Guarantee
	start     runner.StartOffset
	protocol  runner.GroupProtocol
	onError   []runner.ErrorPolicy // by processor, as cfg.Processors
}

// parseRunnerEnums maps cfg's guarantee, start offset, group protocol and
// error policies. An empty string (a Config built in Go without LoadConfig's
// defaults) is the runner's default, its zero value.
func parseRunnerEnums(cfg *Config) (runnerEnums, error) {
	var e runnerEnums
	var err error
	if e.guarantee, err = parseOrZero(cfg.Guarantee, runner.ParseGuarantee); err != nil {
		return e, fmt.Errorf("guarantee: %w", err)
	}
	if e.start, err = parseOrZero(cfg.Kafka.StartOffset, runner.ParseStartOffset); err != nil {
		return e, fmt.Errorf("kafka.start_offset: %w", err)
	}
	if e.protocol, err = parseOrZero(cfg.Kafka.GroupProtocol, runner.ParseGroupProtocol); err != nil {
		return e, fmt.Errorf("kafka.group_protocol: %w", err)
	}
	e.onError = make([]runner.ErrorPolicy, len(cfg.Processors))
	for i, p := range cfg.Processors {
		if e.onError[i], err = parseOrZero(p.OnError, runner.ParseErrorPolicy); err != nil {
			return e, fmt.Errorf("processors[%d].on_error: %w", i, err)
		}
	}
	return e, nil
}

func parseOrZero[E any](s string, parse func(string) (E, error)) (E, error) {
	if s == "" {
		var zero E
		return zero, nil
	}
	return parse(s)
}
