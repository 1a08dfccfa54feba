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
 * most WS_MAX_OPEN_CURSORS cursors, and a failed record's emits and writes
 * discarded. One fake host is active at a time (the last started).
 */
#ifndef WASMSTREAM_FAKE_H
#define WASMSTREAM_FAKE_H

#include "wasmstream.h"

typedef struct ws_fake ws_fake;

/* A fake host declaring these outputs and stores (indices in sorted name
 * order, as the host gives them) and serving config (NULL: empty). */
ws_fake *ws_fake_new(const char *const *outputs, int n_outputs, const char *const *stores, int n_stores,
                     const char *config);
void ws_fake_free(ws_fake *h);

/* Starts a fresh instance: runs ws_init. Returns its status. */
int ws_fake_start(ws_fake *h);
/* Processes one encoded record (or any bytes); returns the status. */
int ws_fake_process(ws_fake *h, const uint8_t *rec, size_t len);
/* Processes a record with this key and value, no headers. */
int ws_fake_process_kv(ws_fake *h, ws_bytes key, ws_bytes value, int64_t timestamp);

/* The last record's (or init's) error text, "" if it succeeded. */
const char *ws_fake_error(const ws_fake *h);
/* The last record's emits (none when it failed). */
size_t ws_fake_emitted_count(const ws_fake *h);
/* Decodes emit i into *rec and returns the output's name; rec's bytes stay
 * valid until the next record. */
const char *ws_fake_emitted(const ws_fake *h, size_t i, ws_record *rec);

/* The committed value of key in store: 1 and *val, or 0. */
int ws_fake_get(const ws_fake *h, const char *store, const void *key, size_t key_len, ws_bytes *val);
/* Log lines so far. */
size_t ws_fake_log_count(const ws_fake *h);
const char *ws_fake_log(const ws_fake *h, size_t i, uint32_t *level);

#endif
