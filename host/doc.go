// Package host is wasmstream's embedding API: Config (built in Go; the
// CLI loads it from a file, the environment and flags with
// internal/configload), New, Run, Close; Deploy and Rollback publish
// plugin versions to a running app. The host owns everything that must
// be correct (Kafka I/O, the consumer group, commits, state, plugin
// lifecycle and limits); plugins only process records.
//
// This package is a thin face: it turns the Config into the internal
// packages' settings and their state into snapshot types of its own. The
// work is done under host/internal, one package per concern. Which package
// decides each invariant of DESIGN.md section 3 (the tests that guard an
// invariant sit beside the code that decides it):
//
//	I1 no loss                  runner: commit points never pass a record whose
//	                            outputs are not acknowledged; a failed produce
//	                            stops the runner
//	I2 exactly once             runner: the transaction (outputs, changelogs, dead
//	                            letters, offsets); state: a task's batch applies
//	                            if and only if its transaction committed
//	I3 the checkpoint is the    state: data and changelog checkpoint in one Pebble
//	   store's own              batch or ingestion; restore writes only through it
//	I4 restore finishes         restore: explicit offsets, a fixed target, wipe
//	                            and restart when the checkpoint is out of range
//	I5 rebalances lose nothing  runner: rebalances only between polls; revoked
//	                            tasks commit or abort before release, lost ones abort
//	I6 sandbox                  engine: closed WASI, deterministic clocks, the
//	                            memory limit, instrumented per-record time, the
//	                            ABI's staging limits; plugin: the module size
//	                            limit, one check for every path
//	I7 faults stay inside       engine: classified failures, instance discarded;
//	                            plugin: failure kinds; runner: on_error policies
//	I8 swaps are atomic per     versions: the one record of active versions;
//	   task                     runner: swaps and rollbacks at commit points;
//	                            follower: versions from the control topic
//	I9 a plugin costs only its  engine: the per-record deadline; runner: commit
//	   own task                 points on schedule, the transaction-end watchdog
//	I10 time is state           not yet implemented (timers will live with the
//	                            task's state in runner and state)
//
// The other internal packages: kclient builds every Kafka client's options
// (brokers, client id, logging, and later TLS and SASL); control is the
// control topic's format, reader and publisher; deploy is Deploy and
// Rollback; topics creates and checks the app's topics; globaltable keeps
// a topic read as a global table in the local state (tables.go wires it);
// admin serves the
// HTTP endpoint and status feeds it; copartition is a classic-protocol
// group balancer that keeps partition p of co-partitioned topics on one
// member (not yet used by the runner). internal/lint enforces the import
// boundaries between them.
package host
