/*
 * The C SDK's processor of the ABI conformance suite
 * (host/internal/conformance/README.md has the script it follows, the same
 * in every language). It is not a plugin to deploy.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wasmstream_time.h"

WS_DECLARE_OUTPUT(out, "out");
WS_DECLARE_OUTPUT(side, "side");
WS_DECLARE_STORE(kv, "kv");
WS_DECLARE_STORE(aux, "aux");
static ws_buf val;

/* A result in the script's words: a number, ok or the errno name. */
static const char *res(int32_t r, char *buf) {
    if (r < 0) return ws_errno_name(r);
    sprintf(buf, "%d", (int)r);
    return buf;
}

static const char *okres(int32_t r) { return r < 0 ? ws_errno_name(r) : "ok"; }

static ws_bytes bytes(const void *p, size_t n) {
    ws_bytes b = {(const uint8_t *)p, (int32_t)n};
    return b;
}

/* Writes the get's result into m: missing, found:<value> or the errno. */
static const char *get(ws_store *s, const void *key, size_t kl, char *m, size_t cap) {
    int32_t r = ws_get(s, key, kl, &val);
    if (r < 0) return ws_errno_name(r);
    if (r == 0) return "missing";
    snprintf(m, cap, "found:%.*s", (int)val.len, (const char *)val.data);
    return m;
}

/* The migration script (README.md, "Migration"). */
static int migrate_from(ws_bytes from) {
    ws_out o = {ws_str("lost"), WS_NULL, NULL, 0, 0};
    const char *emitted = okres(ws_emit(&out, &o));
    int32_t t = ws_timer_set(WS_EVENT_TIME, 1, "k", 1);
    const char *timer = t < 0 ? ws_errno_name(t) : "ok";
    char m[256], f[WS_MAX_MIGRATE_FROM + 1];
    const char *counter = get(&kv, "counter", 7, m, sizeof m);
    snprintf(f, sizeof f, "%.*s", (int)ws_len(from), from.ptr ? (const char *)from.ptr : "");
    const char *pairs[][2] = {{"migrated-from", f}, {"migrate-emit", emitted}, {"migrate-timer", timer}, {"migrate-counter", counter}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        int32_t e = ws_put(&kv, pairs[i][0], strlen(pairs[i][0]), pairs[i][1], strlen(pairs[i][1]));
        if (e < 0) return ws_fail_call("state_put", kv.name, e);
    }
    if (strcmp(f, "fail") == 0) return ws_fail("conformance: migration refused");
    return WS_OK;
}
WS_MIGRATE(migrate_from);

static int32_t note(const char *step, const char *text) {
    ws_out o = {ws_str(step), ws_str(text), NULL, 0, 0};
    return ws_emit(&side, &o);
}

#define NOTE(step, text)                                            \
    do {                                                            \
        int32_t e_ = note(step, text);                              \
        if (e_ < 0) return ws_fail_call("emit", side.name, e_);    \
    } while (0)
#define TRY(call, what, name)                                       \
    do {                                                            \
        int32_t e_ = (call);                                        \
        if (e_ < 0) return ws_fail_call(what, name, e_);            \
    } while (0)

int ws_init(void) {
    ws_buf c = {0};
    char m[128];
    int32_t n = ws_config(&c);
    ws_buf_free(&c);
    snprintf(m, sizeof m, "init config %d", (int)n);
    ws_logs(WS_LOG_INFO, m);
    ws_out o = {WS_NULL, WS_NULL, NULL, 0, 0};
    int32_t e1 = ws_emit(&out, &o);
    int32_t e2 = ws_get(&kv, "k", 1, &val);
    snprintf(m, sizeof m, "init emit %s get %s", okres(e1), okres(e2));
    ws_logs(WS_LOG_INFO, m);
    int64_t ms;
    int32_t t1 = ws_timer_set(WS_EVENT_TIME, 1, "k", 1), t2 = ws_timer_cancel(WS_EVENT_TIME, 1, "k", 1);
    int32_t t3 = ws_stream_time(&ms), t4 = ws_wall_time(&ms), t5 = ws_commit_mark("k", 1);
    snprintf(m, sizeof m, "init time set %s cancel %s stream %s wall %s mark %s", okres(t1), okres(t2), okres(t3),
             okres(t4), okres(t5));
    ws_logs(WS_LOG_INFO, m);
    TRY(ws_output_check(&out), "output_index", out.name);
    TRY(ws_output_check(&side), "output_index", side.name);
    TRY(ws_store_check(&kv), "store_index", kv.name);
    TRY(ws_store_check(&aux), "store_index", aux.name);
    return WS_OK;
}

static int echo(const ws_record *r) {
    static ws_header hs[WS_MAX_HEADERS]; /* 16 KiB: not on the 64 KiB stack */
    size_t pos = 0;
    uint32_t n = 0;
    while (n < WS_MAX_HEADERS && ws_next_header(r, &pos, &hs[n])) n++;
    ws_out o = {r->key, r->value, hs, n, r->timestamp};
    TRY(ws_emit(&out, &o), "emit", out.name);
    ws_out swapped = {r->value, r->key, NULL, 0, 0};
    TRY(ws_emit_to(&side, r->partition & 3, &swapped), "emit", side.name);
    TRY(ws_forward(&side, r), "emit", side.name);
    return WS_OK;
}

static int state(void) {
    char m[256];
    NOTE("get-missing", get(&kv, "k", 1, m, sizeof m));
    NOTE("put-empty", okres(ws_put(&kv, "k", 1, "", 0)));
    NOTE("get-empty", get(&kv, "k", 1, m, sizeof m));
    NOTE("put-v1", okres(ws_put(&kv, "k", 1, "v1", 2)));
    NOTE("get-staged", get(&kv, "k", 1, m, sizeof m));
    int32_t e1 = ws_delete(&kv, "k", 1), e2 = ws_delete(&kv, "k", 1);
    NOTE("delete-twice", okres(e1 < 0 ? e1 : e2));
    NOTE("get-deleted", get(&kv, "k", 1, m, sizeof m));
    NOTE("put-aux", okres(ws_put(&aux, "k", 1, "aux", 3)));
    NOTE("get-other-store", get(&kv, "k", 1, m, sizeof m));
    NOTE("get-aux", get(&aux, "k", 1, m, sizeof m));

    size_t bn = 200000;
    uint8_t *big = malloc(WS_MAX_VALUE_SIZE + 1);
    if (!big) return ws_fail("conformance: out of memory");
    for (size_t i = 0; i < bn; i++) big[i] = (uint8_t)(i * 7 % 251);
    TRY(ws_put(&kv, "big", 3, big, bn), "state_put", kv.name);
    TRY(ws_get(&kv, "big", 3, &val), "state_get", kv.name);
    ws_out o = {ws_str("get-big"), bytes(val.data, val.len), NULL, 0, 0};
    TRY(ws_emit(&out, &o), "emit", out.name);

    static uint8_t longkey[WS_MAX_KEY_SIZE + 1];
    memset(longkey, 'k', sizeof longkey);
    NOTE("put-long-key", okres(ws_put(&kv, longkey, sizeof longkey, "", 0)));
    NOTE("get-long-key", get(&kv, longkey, sizeof longkey, m, sizeof m));
    memset(big, 0, WS_MAX_VALUE_SIZE + 1);
    NOTE("put-huge-value", okres(ws_put(&kv, "huge", 4, big, WS_MAX_VALUE_SIZE + 1)));
    NOTE("put-max-value", okres(ws_put(&kv, "max", 3, big, WS_MAX_VALUE_SIZE)));
    free(big);
    TRY(ws_delete(&kv, "max", 3), "state_delete", kv.name);

    int32_t r = ws_get(&kv, "counter", 7, &val);
    if (r < 0) return ws_fail_call("state_get", kv.name, r);
    long c = 0;
    if (r == 1) {
        char t[32];
        snprintf(t, sizeof t, "%.*s", (int)val.len, (const char *)val.data);
        c = strtol(t, NULL, 10);
    }
    char next[32];
    snprintf(next, sizeof next, "%ld", c + 1);
    TRY(ws_put(&kv, "counter", 7, next, strlen(next)), "state_put", kv.name);
    NOTE("counter", next);
    return WS_OK;
}

/* Emits every entry of [start, end) to o; with_len: the value's length as
 * the value. */
static int walk(const char *start, const char *end, ws_output *o, int with_len) {
    ws_scan sc;
    TRY(ws_scan_open(&kv, start, strlen(start), end, strlen(end), &sc), "scan_open", kv.name);
    ws_bytes k, v;
    int32_t e;
    while ((e = ws_scan_next(&sc, &k, &v)) == 1) {
        char len[16];
        snprintf(len, sizeof len, "%d", (int)v.len);
        ws_out rec = {k, with_len ? ws_str(len) : v, NULL, 0, 0};
        int32_t x = ws_emit(o, &rec);
        if (x < 0) {
            ws_scan_close(&sc);
            return ws_fail_call("emit", o->name, x);
        }
    }
    ws_scan_close(&sc);
    if (e < 0) return ws_fail_call("scan_next", kv.name, e);
    return WS_OK;
}

static int scan(void) {
    static uint8_t fill[70000];
    memset(fill, 'a', 10);
    TRY(ws_put(&kv, "s/a", 3, fill, 10), "state_put", kv.name);
    memset(fill, 'b', 700);
    TRY(ws_put(&kv, "s/b", 3, fill, 700), "state_put", kv.name);
    memset(fill, 'c', sizeof fill);
    TRY(ws_put(&kv, "s/c", 3, fill, sizeof fill), "state_put", kv.name);
    TRY(ws_put(&kv, "s/d", 3, "", 0), "state_put", kv.name);
    TRY(ws_put(&kv, "t/x", 3, "x", 1), "state_put", kv.name);
    if (walk("s/", "s0", &out, 0) || walk("s/b", "s/d", &side, 0) || walk("s/c", "", &out, 1)) return WS_FAILED;

    ws_scan sc;
    ws_bytes k, v;
    TRY(ws_scan_open(&kv, "s/", 2, "s0", 2, &sc), "scan_open", kv.name);
    ws_scan_next(&sc, &k, &v);
    NOTE("scan-close", okres(ws_scan_close(&sc)));

    ws_scan open[WS_MAX_OPEN_CURSORS];
    for (int i = 0; i < WS_MAX_OPEN_CURSORS; i++) TRY(ws_scan_open(&kv, "", 0, "", 0, &open[i]), "scan_open", kv.name);
    int32_t e17 = ws_scan_open(&kv, "", 0, "", 0, &sc);
    for (int i = 0; i < WS_MAX_OPEN_CURSORS; i++) ws_scan_close(&open[i]);
    char b[64];
    uint8_t buf[64];
    NOTE("cursor-17", okres(e17));
    NOTE("next-bad", res(ws_host_scan_next(999, buf, sizeof buf), b));
    NOTE("close-bad", res(ws_host_scan_close(999), b));
    NOTE("get-bad-store", res(ws_host_state_get(7, "k", 1, buf, sizeof buf), b));
    NOTE("scan-bad-store", res(ws_host_scan_open(7, "", 0, "", 0), b));
    return WS_OK;
}

static int is(const ws_bytes key, const char *cmd) {
    size_t n = strlen(cmd);
    return key.len == (int32_t)(4 + n) && memcmp(key.ptr + 4, cmd, n) == 0;
}

/* ---- the time script (README.md, "Time") ---- */

static int now(void) {
    int64_t st, wt;
    char m[64], b[16];
    TRY(ws_stream_time(&st), "time_now", NULL);
    TRY(ws_wall_time(&wt), "time_now", NULL);
    snprintf(m, sizeof m, "%lld %lld", (long long)st, (long long)wt);
    NOTE("now", m);
    NOTE("now-bad-clock", res((int32_t)ws_host_time_now(2), b));
    return WS_OK;
}

static int timers(void) {
    static uint8_t big[WS_MAX_TIMER_KEY_SIZE + 1], maxkey[WS_MAX_TIMER_KEY_SIZE];
    char b[16];
    memset(maxkey, 'm', sizeof maxkey);
    NOTE("set-new", res(ws_timer_set(WS_EVENT_TIME, 5000, "a", 1), b));
    NOTE("set-again", res(ws_timer_set(WS_EVENT_TIME, 5000, "a", 1), b));
    NOTE("set-processing", res(ws_timer_set(WS_PROCESSING_TIME, 5000, "a", 1), b));
    NOTE("set-empty-key", res(ws_timer_set(WS_EVENT_TIME, 4000, "", 0), b));
    NOTE("cancel", res(ws_timer_cancel(WS_PROCESSING_TIME, 5000, "a", 1), b));
    NOTE("cancel-again", res(ws_timer_cancel(WS_PROCESSING_TIME, 5000, "a", 1), b));
    NOTE("set-kind-2", res(ws_timer_set(2, 1, "k", 1), b));
    NOTE("set-kind-7", res(ws_timer_set(7, 1, "k", 1), b));
    NOTE("set-negative", res(ws_timer_set(WS_EVENT_TIME, -1, "k", 1), b));
    NOTE("set-long-key", res(ws_timer_set(WS_EVENT_TIME, 1, big, sizeof big), b));
    NOTE("set-order", res(ws_timer_set(9, -1, big, sizeof big), b));
    NOTE("cancel-kind-2", res(ws_timer_cancel(2, 1, "k", 1), b));
    NOTE("cancel-long-key", res(ws_timer_cancel(WS_EVENT_TIME, 1, big, sizeof big), b));
    NOTE("set-max-key", res(ws_timer_set(WS_EVENT_TIME, 9000, maxkey, sizeof maxkey), b));
    int64_t wall;
    TRY(ws_wall_time(&wall), "time_now", NULL);
    struct {
        uint32_t kind;
        int64_t ts;
        const char *key;
    } set[] = {{WS_EVENT_TIME, 6000, "fail"},
               {WS_EVENT_TIME, 6000, "chain"},
               {WS_PROCESSING_TIME, wall + 5000, "p"},
               {WS_EVENT_TIME, 7000, "fault"},
               {WS_EVENT_TIME, 7000, "zzz"}};
    for (size_t i = 0; i < sizeof set / sizeof set[0]; i++)
        TRY(ws_timer_set(set[i].kind, set[i].ts, set[i].key, strlen(set[i].key)), "timer_set", NULL);
    /* Up to the task's limit; then the ones set are cancelled again. */
    int n = 0;
    int32_t limit = 0;
    for (; n < 10; n++)
        if ((limit = ws_timer_set(WS_EVENT_TIME, 100000 + n, "l", 1)) < 0) break;
    for (int j = 0; j < n; j++) TRY(ws_timer_cancel(WS_EVENT_TIME, 100000 + j, "l", 1), "timer_cancel", NULL);
    char m[32];
    snprintf(m, sizeof m, "%d %s", n, okres(limit));
    NOTE("set-limit", m);
    return WS_OK;
}

static int marks(void) {
    static uint8_t big[WS_MAX_TIMER_KEY_SIZE + 1];
    char b[16], m[32];
    NOTE("mark-new", res(ws_commit_mark("m2", 2), b));
    NOTE("mark-again", res(ws_commit_mark("m2", 2), b));
    TRY(ws_commit_mark("m1", 2), "commit_mark", NULL);
    TRY(ws_commit_mark("cfail", 5), "commit_mark", NULL);
    int32_t lk = ws_commit_mark(big, sizeof big);
    int n = 0;
    int32_t limit = 0;
    for (; n < 10; n++) {
        snprintf(m, sizeof m, "x%d", n);
        if ((limit = ws_commit_mark(m, strlen(m))) < 0) break;
    }
    NOTE("mark-long-key", res(lk, b));
    snprintf(m, sizeof m, "%d %s", n, okres(limit));
    NOTE("mark-limit", m);
    return WS_OK;
}

static int key_is(ws_bytes k, const char *s) { return k.len == (int32_t)strlen(s) && !memcmp(k.ptr, s, (size_t)k.len); }

int ws_on_timer(const ws_trigger *t) {
    char m[128], b[16];
    snprintf(m, sizeof m, "%s %lld %lld %lld %d", t->kind == WS_EVENT_TIME ? "event" : "processing", (long long)t->time,
             (long long)t->stream_time, (long long)t->wall_time, (int)t->key.len);
    NOTE("fired", m);
    if (key_is(t->key, "fail")) {
        TRY(ws_put(&kv, "timer-fail", 10, "x", 1), "state_put", kv.name);
        TRY(ws_timer_set(WS_EVENT_TIME, 6500, "lost", 4), "timer_set", NULL);
        TRY(ws_commit_mark("lost-mark", 9), "commit_mark", NULL);
        return ws_fail("conformance: timer failed on purpose");
    }
    if (key_is(t->key, "chain")) {
        NOTE("chain-set", res(ws_timer_set(WS_EVENT_TIME, t->time, "chain2", 6), b));
        NOTE("chain-mark", res(ws_commit_mark("t-chain", 7), b));
    }
    if (key_is(t->key, "fault")) ws_host_emit((const void *)(uintptr_t)0xFFFFFF00u, 1000);
    return WS_OK;
}

int ws_on_commit(const ws_trigger *t) {
    char m[128];
    int32_t again = ws_commit_mark("again", 5);
    snprintf(m, sizeof m, "%.*s %lld %lld %lld", (int)t->key.len, (const char *)t->key.ptr, (long long)t->time,
             (long long)t->stream_time, (long long)t->wall_time);
    NOTE("commit", m);
    NOTE("commit-mark", okres(again));
    if (key_is(t->key, "cfail")) return ws_fail("conformance: commit failed on purpose");
    return WS_OK;
}

int ws_process(const ws_record *r) {
    if (r->key.len < 4 || memcmp(r->key.ptr, "cmd:", 4) != 0) return echo(r);
    char b1[16], b2[16], b3[16], b4[16], b5[16];
    if (is(r->key, "state")) return state();
    if (is(r->key, "scan")) return scan();
    if (is(r->key, "config")) {
        ws_buf c = {0};
        TRY(ws_config(&c), "config", NULL);
        ws_out o = {ws_str("config"), bytes(c.data, c.len), NULL, 0, 0};
        int32_t e = ws_emit(&out, &o);
        ws_buf_free(&c);
        TRY(e, "emit", out.name);
        return WS_OK;
    }
    if (is(r->key, "log")) {
        ws_logs(WS_LOG_DEBUG, "debug line");
        ws_logs(WS_LOG_INFO, "info line");
        ws_logs(WS_LOG_WARN, "warn line");
        ws_logs(WS_LOG_ERROR, "error line");
        int32_t r4 = ws_host_log(4, "bad", 3);
        static char ls[5000];
        memset(ls, 'L', sizeof ls);
        ws_log(WS_LOG_INFO, ls, sizeof ls);
        NOTE("log-level-4", res(r4, b1));
        NOTE("log", "ok");
        return WS_OK;
    }
    if (is(r->key, "names")) {
        char m[128];
        snprintf(m, sizeof m, "%s %s %s %s %s", res(ws_host_output_index("side", 4), b1),
                 res(ws_host_store_index("aux", 3), b2), res(ws_host_store_index("kv", 2), b3),
                 res(ws_host_output_index("nope", 4), b4), res(ws_host_store_index("nope", 4), b5));
        NOTE("names", m);
        return WS_OK;
    }
    if (is(r->key, "headers")) {
        ws_header hs[5] = {{ws_str("a"), ws_str("1")},
                           {ws_str("null"), WS_NULL},
                           {ws_str("empty"), ws_str("")},
                           {ws_str(""), ws_str("noname")},
                           {ws_str("a"), ws_str("2")}};
        ws_out o1 = {ws_str(""), WS_NULL, hs, 5, 123};
        TRY(ws_emit(&out, &o1), "emit", out.name);
        ws_out o2 = {WS_NULL, ws_str(""), NULL, 0, 0};
        TRY(ws_emit(&out, &o2), "emit", out.name);
        ws_out o3 = {ws_str("p5"), ws_str("v"), NULL, 0, 0};
        TRY(ws_emit_to(&side, 5, &o3), "emit", side.name);
        ws_out o4 = {WS_NULL, WS_NULL, NULL, 0, 0};
        TRY(ws_emit_to(&side, 0, &o4), "emit", side.name);
        return WS_OK;
    }
    if (is(r->key, "rawemit")) {
        uint8_t *huge = calloc(1, WS_MAX_RECORD_SIZE + 1);
        if (!huge) return ws_fail("conformance: out of memory");
        int32_t e1 = ws_host_emit(huge, WS_MAX_RECORD_SIZE + 1);
        free(huge);
        static const uint8_t zeros[10];
        int32_t e2 = ws_host_emit(zeros, sizeof zeros);
        NOTE("emit-huge", res(e1, b1));
        NOTE("emit-malformed", res(e2, b2));
        return WS_OK;
    }
    if (is(r->key, "fail")) {
        TRY(ws_put(&kv, "fail-k", 6, "x", 1), "state_put", kv.name);
        ws_out o = {ws_str("lost"), WS_NULL, NULL, 0, 0};
        TRY(ws_emit(&out, &o), "emit", out.name);
        return ws_fail("conformance: rejected on purpose");
    }
    if (is(r->key, "fault")) {
        ws_host_emit((const void *)(uintptr_t)0xFFFFFF00u, 1000);
        return WS_OK;
    }
    if (is(r->key, "trap")) {
        /* A byte far outside linear memory: a Wasm trap (out of bounds
         * memory access), the same in every language. */
        volatile const uint8_t *p = (volatile const uint8_t *)(uintptr_t)0xFFFFFFF0u;
        (void)*p;
        return WS_OK;
    }
    if (is(r->key, "nooutput")) {
        ws_out o = {ws_str("k"), WS_NULL, NULL, 0, 0};
        uint8_t rec[64];
        ws_encode(rec, 0, -1, WS_ANY_PARTITION, 9, &o);
        ws_host_emit(rec, (uint32_t)ws_encoded_size(&o));
        return WS_OK;
    }
    if (is(r->key, "now")) return now();
    if (is(r->key, "timers")) return timers();
    if (is(r->key, "mark")) return marks();
    if (is(r->key, "timerfault")) {
        ws_host_timer_set(WS_EVENT_TIME, 1, (const void *)(uintptr_t)0xFFFFFF00u, 100);
        return WS_OK;
    }
    if (is(r->key, "noop")) return WS_OK;
    if (is(r->key, "eio")) {
        int32_t e = ws_get(&kv, "eio", 3, &val);
        char m[64];
        snprintf(m, sizeof m, "conformance: eio %s", okres(e));
        return ws_fail(m);
    }
    char m[128];
    snprintf(m, sizeof m, "conformance: unknown command %.*s", (int)r->key.len, (const char *)r->key.ptr);
    return ws_fail(m);
}
