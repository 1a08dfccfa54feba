/*
 * wasmstream_time.h: time for C processors (abi/ABI.md section 8): timers
 * that call the processor back when the task's stream time or the host's
 * wall clock reaches them, the two clocks, commit marks (one call per
 * marked key per commit window), and the window and join helpers built on
 * them. It mirrors the Go SDK's sdk/timer, sdk/window and sdk/join: the
 * same semantics, and the same keys and values in the store and in
 * timers.
 *
 * Link wasmstream_time.c (timers, clocks, marks, the callbacks) and, for
 * windows and joins, wasmstream_window.c with the processor and
 * wasmstream.c. wasmstream_time.c exports wasmstream_on_timer and
 * wasmstream_on_commit, which call the processor's
 *
 *     int ws_on_timer(const ws_trigger *t);   // a due timer
 *     int ws_on_commit(const ws_trigger *t);  // a key marked in the ending window
 *
 * (each optional: a weak default fails the call saying it is missing).
 * Like ws_process they return WS_OK or WS_FAILED (after ws_fail); emits
 * whose timestamp is 0 get the trigger's time. A processor that sets
 * timers declares a store (the host keeps timers with the task's state)
 * and defines ws_on_timer.
 *
 *     static ws_store recent = WS_STORE("recent");
 *     int ws_process(const ws_record *r) {
 *         int32_t e = ws_timer_set(WS_EVENT_TIME, r->timestamp + 60000, r->key.ptr, ws_len(r->key));
 *         return e < 0 ? ws_fail_call("timer_set", NULL, e) : WS_OK;
 *     }
 *     int ws_on_timer(const ws_trigger *t) { ... }
 */
#ifndef WASMSTREAM_TIME_H
#define WASMSTREAM_TIME_H

#include "wasmstream.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Timer kinds, and the kind of a commit trigger. */
#define WS_EVENT_TIME 0      /* due when the stream time reaches it */
#define WS_PROCESSING_TIME 1 /* due when the wall clock reaches it (at a commit point at the latest) */
#define WS_TRIGGER_COMMIT 2  /* not a timer: an on_commit call */
/* Clocks of time_now. */
#define WS_CLOCK_STREAM 0
#define WS_CLOCK_WALL 1
/* The stream time of a task that has seen no record with a timestamp. */
#define WS_NO_TIME INT64_MIN
#define WS_MAX_TIMER_KEY_SIZE WS_MAX_KEY_SIZE
#define WS_TRIGGER_HEADER_SIZE 32
/* The host's default limits (abi/ABI.md section 8.6). */
#define WS_DEFAULT_MAX_TIMERS 1000000
#define WS_DEFAULT_MAX_FIRINGS_PER_COMMIT 10000
#define WS_DEFAULT_MAX_COMMIT_MARKS 100000

/* Sets the timer (kind, ts, key): 1 if it is new, 0 if it was already
 * pending, or -errno (-WS_EINVAL: bad kind or negative ts; -WS_ETOOLARGE:
 * key over WS_MAX_TIMER_KEY_SIZE; -WS_ELIMIT: the task's pending-timer
 * limit; -WS_EPHASE: during init). Staged with the call's writes. */
int32_t ws_timer_set(uint32_t kind, int64_t ts, const void *key, size_t key_len);
/* Removes the timer: 1 if it was pending, 0 if not, or -errno. */
int32_t ws_timer_cancel(uint32_t kind, int64_t ts, const void *key, size_t key_len);
/* The clocks as the current call sees them, in ms since the epoch: 0 with
 * the time in *ms (WS_NO_TIME for a task without stream time), or -errno.
 * The stream time includes the record being processed; the wall time is
 * the host's, not reproducible. */
int32_t ws_stream_time(int64_t *ms);
int32_t ws_wall_time(int64_t *ms);
/* Asks for one ws_on_commit call for key at the end of the commit window:
 * 1 if newly marked, 0 if it already was, or -errno (-WS_ELIMIT: the
 * window's mark limit, emit at once instead; -WS_EPHASE in ws_on_commit). */
int32_t ws_commit_mark(const void *key, size_t key_len);

/* What an on_timer or on_commit call is about. */
typedef struct {
    uint32_t kind;       /* WS_EVENT_TIME, WS_PROCESSING_TIME or WS_TRIGGER_COMMIT */
    int64_t time;        /* a timer's time; a commit's: the timestamp of the last call that marked the key */
    ws_bytes key;        /* never null; valid during the call */
    int64_t stream_time; /* as ws_stream_time returns during the call */
    int64_t wall_time;
} ws_trigger;

/* Defined by the processor (optional). */
int ws_on_timer(const ws_trigger *t);
int ws_on_commit(const ws_trigger *t);

/* The trigger codec and the timer rules of abi/ABI.md 8.2-8.4 (also used
 * by the fake host and the tests). ws_decode_trigger returns 0 or
 * -WS_EINVAL; ws_encode_trigger writes WS_TRIGGER_HEADER_SIZE + key bytes.
 * ws_check_timer is the argument check of timer_set and timer_cancel (0
 * or -errno); ws_timer_cmp orders timers as they fire (time, then kind,
 * then key bytes). */
int ws_decode_trigger(const uint8_t *src, size_t n, ws_trigger *t);
size_t ws_encode_trigger(uint8_t *dst, const ws_trigger *t);
int32_t ws_check_timer(uint32_t kind, int64_t ts, size_t key_len);
int ws_timer_cmp(uint32_t ak, int64_t ats, ws_bytes akey, uint32_t bk, int64_t bts, ws_bytes bkey);

/* The raw imports (module "wasmstream"). */
WS_IMPORT("timer_set") int32_t ws_host_timer_set(uint32_t kind, int64_t ts, const void *key, uint32_t key_len);
WS_IMPORT("timer_cancel") int32_t ws_host_timer_cancel(uint32_t kind, int64_t ts, const void *key, uint32_t key_len);
WS_IMPORT("time_now") int64_t ws_host_time_now(uint32_t clock);
WS_IMPORT("commit_mark") int32_t ws_host_commit_mark(const void *key, uint32_t key_len);

/* The export bodies. */
int32_t ws_sdk_on_timer(uint32_t len);
int32_t ws_sdk_on_commit(uint32_t len);

/* ---- windows (wasmstream_window.c) ----
 *
 * Windowed aggregation per key, as Kafka Streams' windowed aggregations:
 * tumbling, hopping and session windows, a grace period, results emitted
 * on every update, once per commit window or once when the window closes,
 * late records counted and optionally routed. Windows follow event time;
 * a window [start, end) closes when the stream time reaches end + grace.
 * State lives in the store under keys that start with the name and a zero
 * byte; so do the timer and mark keys. The functions below return WS_OK or
 * WS_FAILED (the reason set, as ws_fail does), so a processor can return
 * them; the callbacks they call return the same.
 *
 *     static ws_windows counts = {.name = "c", .store = &store, .size = 60000,
 *                                 .aggregate = ws_window_count, .result = emit_count};
 *     int ws_process(const ws_record *r) { return ws_windows_add(&counts, r); }
 *     int ws_on_timer(const ws_trigger *t) { int taken; return ws_windows_on_timer(&counts, t, &taken); }
 */
#define WS_EMIT_FINAL 0     /* once, when the window closes */
#define WS_EMIT_UPDATE 1    /* after every record that changes it */
#define WS_EMIT_ON_COMMIT 2 /* its latest aggregate once per commit window, and at its close if it changed */

#define WS_WINDOW_LATE_HEADER "wasmstream-window-late"

typedef struct {
    ws_bytes key;          /* the record key (a null key is the empty key) */
    int64_t start, end;    /* [start, end); a session's end is one past its last record */
    ws_bytes agg;          /* the aggregate; null (len -1) retracts a merged-away session */
    int64_t timestamp;     /* the largest record timestamp in the window */
    int final;             /* the window has closed */
} ws_window_result;

typedef struct {
    const char *name;  /* prefixes every key; required, short */
    ws_store *store;   /* required */
    int64_t size;      /* tumbling or hopping windows, in ms */
    int64_t advance;   /* hopping: 0 < advance <= size; 0 means size */
    int64_t gap;       /* session windows instead of size */
    int64_t grace;     /* ms of stream time a window accepts records after its end */
    int emit;          /* WS_EMIT_* */
    /* Folds r into acc, which holds the window's aggregate (fresh: a new
     * window, acc empty). Required. */
    int (*aggregate)(ws_buf *acc, int fresh, const ws_record *r);
    /* Merges b into a (the earlier session first). Required for sessions. */
    int (*merge)(ws_buf *a, ws_bytes b);
    int (*result)(const ws_window_result *res); /* required */
    ws_output *late_output; /* optional: late records, with WS_WINDOW_LATE_HEADER added */
} ws_windows;

/* Checks the spec; call it from ws_init. */
int ws_windows_check(const ws_windows *w);
/* Adds a record to its key's windows. A record whose windows have all
 * closed (or without a timestamp) is late: counted and routed only. */
int ws_windows_add(const ws_windows *w, const ws_record *r);
/* Close the window a timer is for / emit a window marked in the ending
 * commit window. *taken is 0, and nothing done, for another key's. */
int ws_windows_on_timer(const ws_windows *w, const ws_trigger *t, int *taken);
int ws_windows_on_commit(const ws_windows *w, const ws_trigger *t, int *taken);
/* The late records seen in this task (kept in the store). */
int ws_windows_late_count(const ws_windows *w, uint64_t *n);

/* An aggregate that counts records: 8 bytes, big-endian; its merge; its
 * decoding (a null aggregate is 0; not 8 bytes is WS_FAILED). */
int ws_window_count(ws_buf *acc, int fresh, const ws_record *r);
int ws_window_merge_counts(ws_buf *a, ws_bytes b);
int ws_window_count_of(ws_bytes agg, uint64_t *n);

/* ---- stream-stream joins (wasmstream_window.c) ----
 *
 * Two inputs of one processor (co-partitioned) joined by key within a
 * window, as Kafka Streams' KStream#join, #leftJoin and #outerJoin: a left
 * record at t joins right records of its key with timestamps in
 * [t-before, t+after]; each pair is emitted once, when the second comes,
 * with the larger timestamp. A record more than grace behind the stream
 * time is late. Left and outer joins emit unmatched records once no match
 * can come any more. Records are buffered in the store under keys that
 * start with the name and a zero byte.
 */
#define WS_JOIN_INNER 0
#define WS_JOIN_LEFT 1
#define WS_JOIN_OUTER 2

#define WS_JOIN_LATE_HEADER "wasmstream-join-late"

typedef struct {
    ws_bytes value; /* null for a null value */
    int64_t timestamp;
} ws_join_side;

typedef struct {
    ws_bytes key;
    const ws_join_side *left, *right; /* NULL: the unmatched side */
    int64_t timestamp;                /* the larger of the two */
} ws_join_result;

typedef struct {
    const char *name;
    ws_store *store;
    uint32_t left, right; /* input indexes (ws_record.input); different */
    int64_t before, after, grace;
    int kind; /* WS_JOIN_* */
    int (*result)(const ws_join_result *res);
    ws_output *late_output;
} ws_join;

int ws_join_check(const ws_join *j);
int ws_join_add(const ws_join *j, const ws_record *r);
int ws_join_on_timer(const ws_join *j, const ws_trigger *t, int *taken);
int ws_join_late_count(const ws_join *j, uint64_t *n);

#ifdef __cplusplus
}
#endif
#endif
