// Package runner moves records between Kafka and processor instances: one
// consumer group member per process, one task per input partition, commit
// points that never pass a record whose effects are not acknowledged.
//
// It knows Kafka and nothing of Wasm: a processor instance is anything with
// Process and Close (the engine's Instance is one).
//
// A record's path, and the file that owns each step:
//
//	runner.go    the loop (Run, iterate): finish restores, advance swaps,
//	             poll, process (processFetches, tasks in parallel), commit
//	             point; group callbacks; New and the client's options
//	task.go      one task: processBatch, processOne, Emit, the error
//	             policies (onFailure, deadLetter), changelog records, applyState
//	window.go    a task's commit window: the offset to commit, where a
//	             batch stopped, the changelog positions (I1, I5)
//	commit.go    the committer interface and the commit schedule
//	alo.go       at_least_once: flush, apply state, commit offsets (I1);
//	             the canary rollback's rewind
//	eos.go       exactly_once: one transaction per commit point, End's
//	             watchdog, callbacks queued while End runs (I2); the lock order
//	swap.go      versions, Swap, the canary and rollBack (I8)
//	restoring.go restores before a task's first record (I4)
//	failure.go   failure kinds and their labels (metrics, dead letters; I7)
//	enums.go     Guarantee, ErrorPolicy, StartOffset, GroupProtocol
//	group.go     choosing the group protocol
//	stats.go     counters, latency buckets, commit samples
package runner
