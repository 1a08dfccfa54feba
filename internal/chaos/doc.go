// Package chaos holds process-level fault tests of wasmstream (its test
// files are the package). Each test builds the wasmstream binary and the
// counter test plugin once, starts several `wasmstream run` processes of one
// app against the broker internal/testbroker selects (kfake in the test
// process by default, real Kafka with WASMSTREAM_TEST_BROKERS), hurts them
// while input is produced — SIGKILL, SIGSTOP past the session timeout,
// members joining and leaving every second — and then checks the committed
// output record by record: under exactly_once every input id once with the
// count its key had reached at that record, under at_least_once every id at
// least once and no count below it. TestWindowsExactlyOnceSIGKILL runs
// plugins/windowcount instead, on input with event timestamps, and checks
// that every window that closed is in the committed output exactly once
// with the count of its records that were in time. TestJoinExactlyOnceSIGKILL
// runs plugins/clickjoin on two co-partitioned inputs (impressions and
// clicks) and checks that every impression in time is reported exactly
// once, joined with its click when the click was in its window.
//
// The child processes' logs go to the test's temporary directory and their
// tails are printed when a test fails; set WASMSTREAM_CHAOS_LOGS to a
// directory to keep every log.
//
// They take a few minutes, so `make test` runs them after the rest of the
// suite, on each broker, one package at a time; `make chaos` runs them alone
// (WASMSTREAM_CHAOS_SEED repeats a test's random schedule).
package chaos
