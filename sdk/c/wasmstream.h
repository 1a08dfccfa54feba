/*
 * wasmstream.h: write wasmstream stream processors in C (abi/ABI.md; the
 * module speaks ABI versions 1 and 2, batches, with no change to the
 * processor). Link wasmstream.c with the processor.
 *
 * A processor defines
 *
 *     int ws_process(const ws_record *r);   // once per record: WS_OK or WS_FAILED
 *     int ws_init(void);                    // optional: once per instance
 *
 * and uses the calls below to emit to its declared outputs, read and write
 * its declared state stores, read its config and log. Returning WS_OK
 * commits the record's emits and state writes; ws_fail(msg) sets the reason
 * and returns WS_FAILED, which fails the record (the host then applies the
 * processor's error policy). Emits and state calls during ws_init return
 * -WS_EPHASE.
 *
 *     static ws_output out = WS_OUTPUT("out");
 *     int ws_process(const ws_record *r) {
 *         WS_TRY(ws_forward(&out, r), "emit", out.name);
 *         return WS_OK;
 *     }
 *
 * Build for Wasm (a reactor module: no main):
 *
 *     clang --target=wasm32-wasi -mexec-model=reactor -O2 -o p.wasm p.c wasmstream.c
 *
 * Natively, the host functions come from wasmstream_fake.c, an in-process
 * fake host (wasmstream_fake.h), so a processor is unit-tested with the
 * system compiler.
 *
 * Every call that reaches the host returns a value >= 0 or -errno
 * (WS_E*). Byte strings are (pointer, length) pairs; a length of -1 is null.
 */
#ifndef WASMSTREAM_H
#define WASMSTREAM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status of ws_process and ws_init. */
#define WS_OK 0
#define WS_FAILED 1

/* The errno table (abi/ABI.md section 6); host calls return -errno. */
#define WS_EFAULT 1    /* pointer or length outside plugin memory (fails the record) */
#define WS_EINVAL 2    /* malformed argument */
#define WS_ENOOUTPUT 3 /* output not declared (fails the record) */
#define WS_ENOSTORE 4  /* store not declared */
#define WS_ENOTFOUND 5 /* key not found */
#define WS_ETOOLARGE 6 /* key, value or record over its limit */
#define WS_ENOCURSOR 7 /* no such scan cursor */
#define WS_EPHASE 8    /* not allowed now (emit or state during init) */
#define WS_ELIMIT 9    /* per-record limit reached (open cursors) */
#define WS_EIO 10      /* the host could not serve the call; the record fails */
#define WS_ENONAME 11  /* no output or store with that name */
#define WS_ETIMESTAMP 12 /* emitted timestamp outside what the output accepts (fails the record) */

/* Limits (abi/ABI.md section 7), in bytes unless said. */
#define WS_HEADER_SIZE 36
#define WS_MAX_KEY_SIZE (4 << 10)
#define WS_MAX_VALUE_SIZE (1 << 20)
#define WS_MAX_RECORD_SIZE (1 << 20)
#define WS_MAX_HEADERS 1024          /* headers per record */
#define WS_MAX_LOG_SIZE (4 << 10)
#define WS_MAX_OPEN_CURSORS 16       /* per record */
#define WS_ANY_PARTITION (-1)        /* emit: the host picks by key hash */

/* Log levels. */
#define WS_LOG_DEBUG 0
#define WS_LOG_INFO 1
#define WS_LOG_WARN 2
#define WS_LOG_ERROR 3

/* A byte string; len == -1 is null (ptr is then NULL), 0 is empty. */
typedef struct {
    const uint8_t *ptr;
    int32_t len;
} ws_bytes;

#define WS_NULL ((ws_bytes){NULL, -1})
/* The length of a byte string, 0 for null. */
static inline size_t ws_len(ws_bytes b) { return b.len < 0 ? 0 : (size_t)b.len; }
/* A byte string over a C string (not null). */
ws_bytes ws_str(const char *s);

typedef struct {
    ws_bytes name; /* never null */
    ws_bytes value;
} ws_header;

/* The input record. Its bytes are the SDK's input buffer: valid while
 * ws_process runs. */
typedef struct {
    int64_t timestamp; /* milliseconds since the Unix epoch */
    int64_t offset;
    int32_t partition;
    uint32_t input; /* index of the record's topic among the processor's inputs */
    ws_bytes key;
    ws_bytes value;
    uint32_t header_count;
    const uint8_t *headers; /* encoded headers, checked; read with ws_header_at */
    size_t headers_len;
    const uint8_t *raw; /* the whole encoding, and its length */
    size_t raw_len;
} ws_record;

/* Iterates a record's headers: pass *pos = 0 first. Returns 1 with *h set,
 * 0 after the last. */
int ws_next_header(const ws_record *r, size_t *pos, ws_header *h);

/* A record to emit. timestamp 0 means the input record's. */
typedef struct {
    ws_bytes key;
    ws_bytes value;
    const ws_header *headers;
    uint32_t header_count;
    int64_t timestamp;
} ws_out;

/* A named output or store; declare as statics with WS_OUTPUT / WS_STORE.
 * The name is resolved to the host's index on first use and cached. */
typedef struct {
    const char *name;
    int32_t idx;
    uint32_t gen;
} ws_output, ws_store;

#define WS_OUTPUT(n) {(n), -1, 0}
#define WS_STORE(n) {(n), -1, 0}

/* Declares a handle the instance resolves when it starts, before ws_init:
 * a deployment whose config lacks it fails to start (and `wasmstream
 * validate` says so), with a message naming every missing name, instead
 * of failing records. The preferred way to declare a processor's outputs
 * and stores:
 *
 *     WS_DECLARE_OUTPUT(out, "out");      // static ws_output out
 *     WS_DECLARE_STORE(seen, "seen");     // static ws_store seen
 *
 * (A static constructor registers it; in Wasm the reactor's _initialize
 * runs them.) A WS_OUTPUT / WS_STORE handle is resolved on first use. */
#define WS_DECLARE_OUTPUT(var, n)        \
    static ws_output var = WS_OUTPUT(n); \
    WS_DECLARE_(var, 0)
#define WS_DECLARE_STORE(var, n)       \
    static ws_store var = WS_STORE(n); \
    WS_DECLARE_(var, 1)
#define WS_DECLARE_(var, is_store)                                                           \
    __attribute__((constructor)) static void ws_declare_##var(void) { ws_declare(&var, is_store); } \
    struct ws_declare_##var
/* Registers h (a store if is_store) for resolution at start. */
void ws_declare(ws_output *h, int is_store);

/* Resolve now: 0, or -WS_ENONAME if the processor does not declare it. */
int32_t ws_output_check(ws_output *o);
int32_t ws_store_check(ws_store *s);

/* Emit (staged until the record succeeds). ws_emit lets the host pick the
 * partition; ws_emit_to names one. ws_forward emits the input record as it
 * came (key, value, headers, timestamp) without copying it. */
int32_t ws_emit(ws_output *o, const ws_out *r);
int32_t ws_emit_to(ws_output *o, int32_t partition, const ws_out *r);
int32_t ws_forward(ws_output *o, const ws_record *r);

/* A growable buffer the SDK fills with malloc/realloc; zero-initialise it
 * and reuse it across records; ws_buf_free releases it. */
typedef struct {
    uint8_t *data;
    size_t len;
    size_t cap;
} ws_buf;
void ws_buf_free(ws_buf *b);

/* State. ws_get returns 1 with the value in *out, 0 for a missing key, or
 * -errno. Keys are at most WS_MAX_KEY_SIZE bytes, values WS_MAX_VALUE_SIZE. */
int32_t ws_get(ws_store *s, const void *key, size_t key_len, ws_buf *out);
int32_t ws_put(ws_store *s, const void *key, size_t key_len, const void *val, size_t val_len);
int32_t ws_delete(ws_store *s, const void *key, size_t key_len);

/* A scan over start <= key < end in byte order (end_len 0: no upper bound). */
typedef struct {
    const char *store;
    int32_t cursor;
    int open;
    ws_buf buf;
} ws_scan;
int32_t ws_scan_open(ws_store *s, const void *start, size_t start_len, const void *end, size_t end_len,
                     ws_scan *out);
/* 1 with the entry in *key and *value (valid until the next call), 0 at the
 * end (the cursor is then closed), or -errno. */
int32_t ws_scan_next(ws_scan *sc, ws_bytes *key, ws_bytes *value);
/* Closes the cursor (if open) and frees the buffer. */
int32_t ws_scan_close(ws_scan *sc);

/* The processor's config (JSON text) into *out; its length or -errno. */
int32_t ws_config(ws_buf *out);

/* Logging; never fails the record. */
void ws_log(uint32_t level, const char *msg, size_t len);
void ws_logs(uint32_t level, const char *msg); /* a C string */

/* Sets the record's (or init's) failure reason and returns WS_FAILED. */
int ws_fail(const char *msg);
int ws_fail_n(const char *msg, size_t len);
/* ws_fail with `sdk: <call> "<name>": <ENAME>: <text>` for the host
 * result err (name may be NULL). */
int ws_fail_call(const char *call, const char *name, int32_t err);
/* WS_TRY(call, what, name) evaluates the host call once and, if it returned
 * an error (< 0), returns ws_fail_call(what, name, err) from the enclosing
 * function (which returns int, like ws_process):
 *
 *     WS_TRY(ws_forward(&out, r), "emit", out.name);
 */
#define WS_TRY(call, what, name)                            \
    do {                                                    \
        int32_t ws_try_err_ = (call);                       \
        if (ws_try_err_ < 0) return ws_fail_call((what), (name), ws_try_err_); \
    } while (0)

/* "ENOTFOUND" and "key not found" for 5 (or -5). */
const char *ws_errno_name(int32_t e);
const char *ws_errno_text(int32_t e);

/* The record codec (also used by the fake host and tests). ws_decode
 * returns 0 or -WS_EINVAL for malformed bytes. ws_encode writes
 * ws_encoded_size bytes. */
int ws_decode(const uint8_t *src, size_t n, ws_record *out);
size_t ws_encoded_size(const ws_out *r);
void ws_encode(uint8_t *dst, int64_t ts, int64_t offset, int32_t partition, uint32_t index, const ws_out *r);

/* Defined by the processor. */
int ws_process(const ws_record *r);
int ws_init(void); /* optional (a weak default returns WS_OK) */

/* State migration between versions (abi/ABI.md section 13), optional:
 *
 *     static int migrate_counts(ws_bytes from) { ... }   // from: the old version's ID
 *     WS_MIGRATE(migrate_counts);
 *
 * at file scope in the processor makes it export wasmstream_migrate: the
 * host calls the function once per task, before this version's first
 * record, when another version wrote the task's stores. It may use every
 * store (ws_get, ws_put, ws_delete, ws_scan_*) as ws_process may, but not
 * emit or set timers (-WS_EPHASE). It returns WS_OK, or fails like a
 * record (ws_fail): nothing it wrote stays, and the host rolls the
 * processor back to the version before. A processor without WS_MIGRATE
 * has no migration: its stores pass to the next version as they are. */
#define WS_MAX_MIGRATE_FROM 1024 /* abi.MaxMigrateFrom */
int32_t ws_sdk_run_migrate(uint32_t len, int (*fn)(ws_bytes from));
int32_t ws_sdk_migrate(uint32_t len); /* defined by WS_MIGRATE; the fake host calls it */
#ifdef __wasm__
#define WS_MIGRATE_EXPORT_                                                                                  \
    __attribute__((export_name("wasmstream_migrate"))) int32_t ws_export_migrate(uint32_t len);             \
    int32_t ws_export_migrate(uint32_t len) { return ws_sdk_migrate(len); }
#else
#define WS_MIGRATE_EXPORT_
#endif
#define WS_MIGRATE(fn)                                                              \
    int32_t ws_sdk_migrate(uint32_t len) { return ws_sdk_run_migrate(len, (fn)); } \
    WS_MIGRATE_EXPORT_                                                              \
    typedef int ws_migrate_declared_ /* so that WS_MIGRATE(f); ends with a semicolon */

/* The host functions (module "wasmstream"); raw access for code that tests
 * the ABI itself. Natively they are the fake host's. */
#ifdef __wasm__
#define WS_IMPORT(n) __attribute__((import_module("wasmstream"), import_name(n)))
#else
#define WS_IMPORT(n)
#endif
WS_IMPORT("emit") int32_t ws_host_emit(const void *rec, uint32_t len);
WS_IMPORT("output_index") int32_t ws_host_output_index(const void *name, uint32_t len);
WS_IMPORT("store_index") int32_t ws_host_store_index(const void *name, uint32_t len);
WS_IMPORT("config") int32_t ws_host_config(void *out, uint32_t cap);
WS_IMPORT("log") int32_t ws_host_log(uint32_t level, const void *msg, uint32_t len);
WS_IMPORT("set_error") int32_t ws_host_set_error(const void *msg, uint32_t len);
WS_IMPORT("state_get")
int32_t ws_host_state_get(uint32_t store, const void *key, uint32_t key_len, void *out, uint32_t cap);
WS_IMPORT("state_put")
int32_t ws_host_state_put(uint32_t store, const void *key, uint32_t key_len, const void *val, uint32_t val_len);
WS_IMPORT("state_delete") int32_t ws_host_state_delete(uint32_t store, const void *key, uint32_t key_len);
WS_IMPORT("scan_open")
int32_t ws_host_scan_open(uint32_t store, const void *start, uint32_t start_len, const void *end, uint32_t end_len);
WS_IMPORT("scan_next") int32_t ws_host_scan_next(uint32_t cursor, void *out, uint32_t cap);
WS_IMPORT("scan_close") int32_t ws_host_scan_close(uint32_t cursor);

/* Batches (abi/ABI.md section 10, version 2): the layout the host writes
 * into the input buffer. Integers are little-endian u32. The header: the
 * number of slots (host), the calls the plugin has finished (plugin), the
 * stop word (host: return after the call in progress). A slot: its kind
 * (host), the call's status and the address and length of its staged
 * emits (plugin), the payload's length (host), then the payload (a record
 * or a trigger). Slots start at multiples of 8. */
#define WS_BATCH_HEADER_SIZE 16
#define WS_BATCH_COUNT 0
#define WS_BATCH_DONE 4
#define WS_BATCH_STOP 8
#define WS_SLOT_HEADER_SIZE 24
#define WS_SLOT_KIND 0
#define WS_SLOT_STATUS 4
#define WS_SLOT_OUT_PTR 8
#define WS_SLOT_OUT_LEN 12
#define WS_SLOT_LEN 20
#define WS_SLOT_RECORD 0
#define WS_SLOT_TRIGGER 1
/* The bytes one slot with an n-byte payload takes, padding included. */
#define WS_SLOT_SIZE(n) (((size_t)WS_SLOT_HEADER_SIZE + (size_t)(n) + 7) & ~(size_t)7)

/* The slot at off of the batch src (n bytes): its kind and payload
 * (offset and length in src); 0, or -WS_EINVAL if it does not fit. */
int ws_slot_at(const uint8_t *src, size_t n, size_t off, uint32_t *kind, size_t *payload, size_t *payload_len);
/* Writes the length n of an emit entry (a staged emit: u32 length, then
 * the encoded record) at dst and returns where its record goes. */
uint8_t *ws_put_emit_entry(uint8_t *dst, size_t n);
/* The first emit entry (a staged emit: u32 length, then the encoded
 * record) of src (n bytes): the record in *rec and *rec_len; returns the
 * entry's size, or -WS_EINVAL if its length runs past n. */
int64_t ws_next_emit_entry(const uint8_t *src, size_t n, const uint8_t **rec, size_t *rec_len);

/* The export bodies (the Wasm exports call them; the fake host too). */
uint8_t *ws_sdk_input(uint32_t size);
int32_t ws_sdk_process(uint32_t len);
int32_t ws_sdk_init(void);
/* wasmstream_batch: the calls of the batch of len bytes in the input
 * buffer, each through the path of its single-call export. */
int32_t ws_sdk_batch(uint32_t len);
/* A trigger of a batch: wasmstream_time.c runs it through ws_on_timer or
 * ws_on_commit; without it, the call fails. */
int32_t ws_sdk_trigger(const uint8_t *trigger, uint32_t len);
/* The address of p in linear memory, as the ABI's pointers are; natively,
 * a handle the fake host resolves (wasmstream_fake.c). */
uint32_t ws_sdk_address(const void *p);
/* A fresh instance (fake host only): forget cached indices. */
void ws_sdk_reset(void);
/* For the callbacks (wasmstream_time.c): the timestamp emits default to,
 * and the first len bytes of the input buffer (NULL if it is shorter). */
void ws_sdk_set_timestamp(int64_t ts);
const uint8_t *ws_sdk_input_bytes(uint32_t len);

#ifdef __cplusplus
}
#endif
#endif
