/*
 * wasmstream_fake.h: an in-process fake of the wasmstream host, so a C
 * processor is unit-tested natively (cc p.c wasmstream.c wasmstream_fake.c).
 *
 *     const char *outs[] = {"out"}, *stores[] = {"counts"};
 *     ws_fake *h = ws_fake_new(outs, 1, stores, 1, "{}");
 *     if (ws_fake_start(h) != WS_OK) puts(ws_fake_error(h));      // runs ws_init
 *     ws_fake_process_kv(h, ws_str("k"), ws_str("the cat"), 1000); // one record
 *     ws_fake_emitted_count(h), ws_fake_emitted(h, 0, &rec)       // what it emitted
 *     ws_fake_get(h, "counts", "cat", 3, &val)                    // committed state
 *
 * The record goes through the SDK exactly as in Wasm: encoded in the ABI
 * layout into the buffer ws_sdk_input hands out, then ws_sdk_process. The
 * fake keeps the host's semantics (abi/ABI.md): declared outputs and stores
 * only, EPHASE during init, the size limits, null distinct from empty, reads
 * that see staged writes, scans in byte order written only when they fit, at
 * most WS_MAX_OPEN_CURSORS cursors, and a failed call's emits, writes, timer
 * changes and marks discarded. One fake host is active at a time (the last
 * started).
 *
 * Time (abi/ABI.md section 8, wasmstream_time.h) is faked as the Go SDK's
 * sdktest does: the stream time follows the records' timestamps; the wall
 * clock moves only when the test says (ws_fake_set_wall_time,
 * ws_fake_advance_wall_time) and starts at WS_FAKE_WALL_TIME; due
 * event-time timers fire after each record; at a commit point
 * (ws_fake_commit, ws_fake_advance_wall_time, or every n records with
 * ws_fake_commit_every) the due timers of both kinds fire, then ws_on_commit
 * runs once per marked key in key order, then the expired entries of stores
 * with a TTL are deleted. Timers fire by time, kind, key; a timer a
 * callback sets that is already due waits for the next check; at most the
 * firings limit fire per commit window. A failed callback's effects are
 * discarded and its timer stays removed. The processor links
 * wasmstream_time.c for its callbacks.
 *
 * Batches (abi/ABI.md section 10): ws_fake_process_batch hands records to
 * the SDK's wasmstream_batch as a host that speaks version 2 does, with
 * the same outcome per record as one at a time (ws_fake_result);
 * ws_fake_batch runs one batch given as bytes.
 */
#ifndef WASMSTREAM_FAKE_H
#define WASMSTREAM_FAKE_H

#include "wasmstream.h"

typedef struct ws_fake ws_fake;

/* The wall clock at start: 2024-01-01T00:00:00Z, in ms (as the Go SDK's
 * sdktest). */
#define WS_FAKE_WALL_TIME 1704067200000LL

/* A fake host declaring these outputs and stores (indices in sorted name
 * order, as the host gives them) and serving config (NULL: empty). */
ws_fake *ws_fake_new(const char *const *outputs, int n_outputs, const char *const *stores, int n_stores,
                     const char *config);
void ws_fake_free(ws_fake *h);

/* Starts a fresh instance: resolves the declared handles, runs ws_init.
 * Returns its status. */
int ws_fake_start(ws_fake *h);
/* Processes one encoded record (or any bytes) after moving the stream time
 * to its timestamp; then the event-time timers it made due fire (and a
 * commit point runs, with ws_fake_commit_every). Returns the record's
 * status. */
int ws_fake_process(ws_fake *h, const uint8_t *rec, size_t len);
/* Processes a record with this key and value, no headers. */
int ws_fake_process_kv(ws_fake *h, ws_bytes key, ws_bytes value, int64_t timestamp);
/* Runs the processor's migration (WS_MIGRATE)
 * from version from, as the host does (abi/ABI.md section 13): its state
 * writes are kept if it returns WS_OK and dropped otherwise
 * (ws_fake_failed says why). */
int ws_fake_migrate(ws_fake *h, const char *from);

/* The last record's (or init's) error text, "" if it succeeded. */
const char *ws_fake_error(const ws_fake *h);
/* The first error of the last step, the record's or a callback's ("" if
 * every call succeeded). */
const char *ws_fake_failed(const ws_fake *h);
/* The last step's emits: the record's (none when it failed), then those
 * of the callbacks that succeeded. */
size_t ws_fake_emitted_count(const ws_fake *h);
/* Decodes emit i into *rec and returns the output's name; rec's bytes stay
 * valid until the next step. */
const char *ws_fake_emitted(const ws_fake *h, size_t i, ws_record *rec);

/* The committed value of key in store: 1 and *val, or 0. (With a TTL, an
 * expired entry no commit point has deleted yet is still there.) */
int ws_fake_get(const ws_fake *h, const char *store, const void *key, size_t key_len, ws_bytes *val);
/* Sets a committed value, as an earlier record would have. */
void ws_fake_put(ws_fake *h, const char *store, const void *key, size_t key_len, const void *val, size_t val_len);
/* The number of committed entries of store. */
size_t ws_fake_len(const ws_fake *h, const char *store);
/* Log lines so far. */
size_t ws_fake_log_count(const ws_fake *h);
const char *ws_fake_log(const ws_fake *h, size_t i, uint32_t *level);

/* ---- time ---- */

/* Options, before ws_fake_start: the wall clock and stream time at start
 * (default WS_FAKE_WALL_TIME and none); the limits of abi/ABI.md 8.6 (0:
 * the default); a commit point every n records (0: only when the test
 * says); a time to live for a store, ms on clock 0 (stream) or 1 (wall). */
void ws_fake_set_stream_time(ws_fake *h, int64_t ms);
void ws_fake_timer_limits(ws_fake *h, size_t timers, size_t firings_per_commit, size_t commit_marks);
void ws_fake_commit_every(ws_fake *h, size_t n);
void ws_fake_ttl(ws_fake *h, const char *store, int64_t ms, uint32_t clock);

/* Sets the wall clock without a check; once started, never back (that
 * aborts); before ws_fake_start, to any time. */
void ws_fake_set_wall_time(ws_fake *h, int64_t ms);
int64_t ws_fake_wall_time(const ws_fake *h);
int64_t ws_fake_stream_time(const ws_fake *h);
/* Runs a commit point (a step of its own). Returns WS_OK if every callback
 * succeeded. */
int ws_fake_commit(ws_fake *h);
/* Moves the wall clock forward by ms and runs a commit point. */
int ws_fake_advance_wall_time(ws_fake *h, int64_t ms);

/* The pending timers, in firing order. */
size_t ws_fake_timer_count(const ws_fake *h);
void ws_fake_timer(const ws_fake *h, size_t i, uint32_t *kind, int64_t *ts, ws_bytes *key);
/* The keys marked in the current commit window, in key order. */
size_t ws_fake_marked_count(const ws_fake *h);
ws_bytes ws_fake_marked(const ws_fake *h, size_t i);
/* The callbacks the last step ran, in order: their kind, time and key, and
 * their error ("" if it succeeded). */
size_t ws_fake_callback_count(const ws_fake *h);
const char *ws_fake_callback(const ws_fake *h, size_t i, uint32_t *kind, int64_t *ts, ws_bytes *key);

/* ---- batches (abi/ABI.md section 10) ---- */

/* Processes n encoded records through the SDK's wasmstream_batch
 * (ws_sdk_batch) as a host that speaks version 2 does, one step, with the
 * same outcome per record as ws_fake_process one at a time. Like the host,
 * the fake learns that a call ended from the batch's done count, which it
 * reads at every host call, so each host call belongs to the call in
 * progress; it reads each call's staged emits through the emit import's
 * checks, cuts a batch after a failed record or one that leaves a check
 * due (the check runs then, its callbacks one at a time), and hands the
 * rest again, as it does when the SDK returns early. */
void ws_fake_process_batch(ws_fake *h, const uint8_t *const *recs, const size_t *lens, size_t n);
/* Runs one wasmstream_batch call on a batch as the host writes it (records,
 * triggers, both; the shared vectors), one step: returns how many calls
 * ran (up to the first that failed, or as far as the SDK went). No check
 * runs after the records. */
size_t ws_fake_batch(ws_fake *h, const uint8_t *batch, size_t len);
/* The outcome of call i of the last batch step: its error ("" if it
 * succeeded) and status; its emits are ws_fake_emitted(h, j) for j from
 * *first_emit, *n_emits of them (with the callbacks' after it), and its
 * callbacks ws_fake_callback(h, j) likewise. Any pointer may be NULL. */
size_t ws_fake_result_count(const ws_fake *h);
const char *ws_fake_result(const ws_fake *h, size_t i, int *status, size_t *first_emit, size_t *n_emits,
                           size_t *first_callback, size_t *n_callbacks);

#endif
