// Package runner moves records between Kafka and processor instances: one
// consumer group member per runner, one task per input partition (or per
// partition of a co-partitioned processor's inputs), commit points that
// never pass a record whose effects are not acknowledged.
//
// It knows Kafka and nothing of Wasm: a processor instance is anything with
// Process and Close, taking batches of calls when it is a BatchProcessor
// (the engine's Instance, through host/internal/plugin, is one).
//
// A record's path, and the file that owns each step:
//
//	runner.go      the loop (Run, iterate): finish restores, advance swaps,
//	               poll, hand the records to their tasks, run the tasks in
//	               parallel (processFetches), the commit point; group
//	               callbacks; New and the client's options
//	task.go        one task: processBatch (the order records run in, task
//	               tables, lagging inputs), Emit, the error policies
//	               (onFailure, deadLetter), changelog records, applyState
//	calls.go       batches of calls into the instance and the hooks that
//	               end each call as it would end alone (I7)
//	window.go      a task's commit window on its inputs: the offset to
//	               commit, the records held, where a batch stopped, the
//	               changelog positions (I1, I5)
//	commitpoint.go the commit point: the one owner of the open window of
//	               every task, its schedule, and the one commit, abort and
//	               fail path (I1, I2, I3)
//	eos.go         exactly_once's strategy: one transaction per window,
//	               End's watchdog, callbacks queued while End runs (I2)
//	alo.go         at_least_once's strategy: flush, then state, then
//	               offsets (I1); a rollback's rewind
//	cpushare.go    the process's slots for heavy guest work (I9): at most
//	               GOMAXPROCS-1 cores, granted to runners in turn
//	limits.go      the one check of an emit: what its output topic accepts
//	               (read from the broker), and the producer's batch size
//	               per topic
//	refusal.go     a record the broker refuses anyway: its origin, the
//	               window's abort, the producing call failing on its next
//	               pass (kind refused)
//	arena.go       the record structs and bytes of a task's emits, carved
//	               from chunks
//	latest.go      outputs that take the latest record per key
//	timekeeper.go  a task's time: stream and wall clocks, timers, marks (I10)
//	timers.go      timer checks and the commit point's calls
//	swap.go        versions, the canary and rollBack (I8)
//	migrate.go     state migration between versions: the state's version, settleVersion
//	shadow.go      shadow runs: a candidate beside the active version in
//	               every task, its time budget, the comparison (I11)
//	shadowstate.go a shadow's state overlay over the task's stores
//	pause.go       processors paused by the operator: the registry, and
//	               their inputs paused at a commit point
//	serving.go     the tasks whose state interactive queries may read
//	restoring.go   restores before a task's first record (I4)
//	standby.go     standby replicas: warm copies of other members' tasks
//	fence.go       fencing a dead former owner's open transaction
//	copartition.go tasks of several inputs
//	failure.go     failure kinds and their labels (metrics, dead letters; I7)
//	enums.go       Guarantee, ErrorPolicy, StartOffset, GroupProtocol
//	group.go       choosing the group protocol
//	stats.go       counters, latency buckets, commit samples
//	drive.go       a test driver's hooks: a commit point now, where each
//	               task stands
//
// The locks it takes, and in which order, are in docs/locks.md.
package runner
