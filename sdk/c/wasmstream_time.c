/*
 * wasmstream_time.c: timers, clocks, commit marks and the callbacks of
 * wasmstream_time.h (abi/ABI.md section 8). Link it only into processors
 * that use time: it exports wasmstream_on_timer and wasmstream_on_commit.
 */
#include "wasmstream_time.h"

#include <string.h>

static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32; }

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v) {
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

int ws_decode_trigger(const uint8_t *src, size_t n, ws_trigger *t) {
    if (n < WS_TRIGGER_HEADER_SIZE) return -WS_EINVAL;
    uint32_t kind = get32(src + 24);
    uint64_t kl = get32(src + 28);
    if (kind > WS_TRIGGER_COMMIT || kl > WS_MAX_TIMER_KEY_SIZE || (uint64_t)n != WS_TRIGGER_HEADER_SIZE + kl)
        return -WS_EINVAL;
    t->time = (int64_t)get64(src);
    t->stream_time = (int64_t)get64(src + 8);
    t->wall_time = (int64_t)get64(src + 16);
    t->kind = kind;
    t->key.ptr = src + WS_TRIGGER_HEADER_SIZE;
    t->key.len = (int32_t)kl;
    return 0;
}

size_t ws_encode_trigger(uint8_t *dst, const ws_trigger *t) {
    size_t kl = ws_len(t->key);
    put64(dst, (uint64_t)t->time);
    put64(dst + 8, (uint64_t)t->stream_time);
    put64(dst + 16, (uint64_t)t->wall_time);
    put32(dst + 24, t->kind);
    put32(dst + 28, (uint32_t)kl);
    if (kl) memcpy(dst + WS_TRIGGER_HEADER_SIZE, t->key.ptr, kl);
    return WS_TRIGGER_HEADER_SIZE + kl;
}

int32_t ws_check_timer(uint32_t kind, int64_t ts, size_t key_len) {
    if ((kind != WS_EVENT_TIME && kind != WS_PROCESSING_TIME) || ts < 0) return -WS_EINVAL;
    if (key_len > WS_MAX_TIMER_KEY_SIZE) return -WS_ETOOLARGE;
    return 0;
}

int ws_timer_cmp(uint32_t ak, int64_t ats, ws_bytes akey, uint32_t bk, int64_t bts, ws_bytes bkey) {
    if (ats != bts) return ats < bts ? -1 : 1;
    if (ak != bk) return ak < bk ? -1 : 1;
    size_t al = ws_len(akey), bl = ws_len(bkey), n = al < bl ? al : bl;
    int c = n ? memcmp(akey.ptr, bkey.ptr, n) : 0;
    if (c) return c < 0 ? -1 : 1;
    return al < bl ? -1 : al > bl;
}

int32_t ws_timer_set(uint32_t kind, int64_t ts, const void *key, size_t key_len) {
    return ws_host_timer_set(kind, ts, key, (uint32_t)key_len);
}

int32_t ws_timer_cancel(uint32_t kind, int64_t ts, const void *key, size_t key_len) {
    return ws_host_timer_cancel(kind, ts, key, (uint32_t)key_len);
}

/* time_now: times are >= 0 and WS_NO_TIME is -2^63; a small negative is
 * -errno. */
static int32_t now(uint32_t clock, int64_t *ms) {
    int64_t t = ws_host_time_now(clock);
    if (t < 0 && t != WS_NO_TIME && t >= -((int64_t)1 << 31)) return (int32_t)t;
    *ms = t;
    return 0;
}

int32_t ws_stream_time(int64_t *ms) { return now(WS_CLOCK_STREAM, ms); }
int32_t ws_wall_time(int64_t *ms) { return now(WS_CLOCK_WALL, ms); }

int32_t ws_commit_mark(const void *key, size_t key_len) { return ws_host_commit_mark(key, (uint32_t)key_len); }

__attribute__((weak)) int ws_on_timer(const ws_trigger *t) {
    (void)t;
    return ws_fail("sdk: a timer fired but the processor defines no ws_on_timer");
}

__attribute__((weak)) int ws_on_commit(const ws_trigger *t) {
    (void)t;
    return ws_fail("sdk: a marked key reached its commit point but the processor defines no ws_on_commit");
}

/* Runs f on the trigger t, its emits defaulting to the trigger's time: the
 * one path of the callback exports and of a batch's triggers. */
static int32_t run(const ws_trigger *t, int (*f)(const ws_trigger *)) {
    ws_sdk_set_timestamp(t->time);
    int st = f(t);
    ws_sdk_set_timestamp(0);
    return st;
}

/* Decodes the trigger of a callback from the input buffer and runs f on
 * it. */
static int32_t callback(uint32_t len, int commit, int (*f)(const ws_trigger *)) {
    ws_trigger t;
    const uint8_t *buf = ws_sdk_input_bytes(len);
    if (!buf || ws_decode_trigger(buf, len, &t) < 0 || (t.kind == WS_TRIGGER_COMMIT) != commit)
        return ws_fail(commit ? "sdk: on_commit: abi: malformed commit trigger" : "sdk: on_timer: abi: malformed timer trigger");
    return run(&t, f);
}

int32_t ws_sdk_on_timer(uint32_t len) { return callback(len, 0, ws_on_timer); }
int32_t ws_sdk_on_commit(uint32_t len) { return callback(len, 1, ws_on_commit); }

/* A trigger of a batch (abi/ABI.md section 10): the callback its kind
 * names, as the exports below would run it. Replaces wasmstream.c's weak
 * definition. */
int32_t ws_sdk_trigger(const uint8_t *trigger, uint32_t len) {
    ws_trigger t;
    if (ws_decode_trigger(trigger, len, &t) < 0) return ws_fail("sdk: batch: abi: malformed trigger");
    return run(&t, t.kind == WS_TRIGGER_COMMIT ? ws_on_commit : ws_on_timer);
}

#ifdef __wasm__
__attribute__((export_name("wasmstream_on_timer"))) int32_t ws_export_on_timer(uint32_t len) {
    return ws_sdk_on_timer(len);
}

__attribute__((export_name("wasmstream_on_commit"))) int32_t ws_export_on_commit(uint32_t len) {
    return ws_sdk_on_commit(len);
}
#endif
