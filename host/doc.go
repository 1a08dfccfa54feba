// Package host is wasmstream's embedding API: Config (built in Go; the
// CLI loads it from a file, the environment and flags with
// internal/configload), New, Run, Close; Deploy and Rollback publish
// plugin versions to a running app. The host owns everything that must
// be correct (Kafka I/O, the consumer group, commits, state, plugin
// lifecycle and limits); plugins only process records.
//
// This package is a thin face: it turns the Config into the internal
// packages' settings and their state into snapshot types of its own. The
// work is done under host/internal, one package per concern;
// docs/design.md names them, the path a record takes through them, and
// the one owner of each invariant (the tests that guard an invariant sit
// beside its owner). internal/lint enforces the import boundaries between
// them.
package host
