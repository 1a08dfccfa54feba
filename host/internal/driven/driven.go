// Package driven is what a host started by a test driver (host/testdriver)
// hands it: the wall clock the driver moves, and, once the host is made,
// its runners, state databases and Kafka client settings. The driver runs
// the host's own code (runners, commit points, timers, state) and reaches
// it only through these hooks.
package driven

import (
	"time"

	"github.com/wasmstream/wasmstream/host/internal/kclient"
	"github.com/wasmstream/wasmstream/host/internal/runner"
	"github.com/wasmstream/wasmstream/host/internal/state"
)

// Hooks connect a host and its test driver.
type Hooks struct {
	// Clock, set by the driver, is the wall clock of the host's runners
	// (runner.Options.Clock); their commit points come only when the
	// driver asks (runner.Options.ManualCommits).
	Clock func() time.Time

	// Set by the host when it is made.

	// Runners returns the runners of the host's consumer group members as
	// of now (the host replaces one that stopped on an error), in the
	// order of Members.
	Runners func() []*runner.Runner
	// Members are the topics each member's processors read (repartition
	// topics and task tables included) and write (dead letters aside).
	Members []Member
	// DeadLetters are the dead-letter topics, by processor.
	DeadLetters map[string]string
	// State returns the database of a processor's stores; nil for a
	// processor without stores.
	State func(processor string) *state.DB
	// Tables are the global tables' stores, by topic.
	Tables map[string]*state.Table
	// Kafka is what the host's clients start from (the embedded broker).
	Kafka kclient.Config
}

// Member is what one consumer group member of the host reads and writes.
type Member struct {
	Inputs, Outputs []string
}
