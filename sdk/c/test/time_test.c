/*
 * time_test.c: the C SDK's time (wasmstream_time.h) against the fake host:
 * timers, clocks, commit marks, callbacks' failures, store expiry, declared
 * handles, the window and join helpers (including out-of-order runs
 * against reference models), and the shared trigger vectors
 * (abi/testdata/triggers.json, path in argv[1]). The Go SDK's sdk/timer,
 * sdk/window, sdk/join and sdktest tests, in C. Exits non-zero on the
 * first failed check, naming it.
 *
 *     cc -I.. time_test.c ../wasmstream.c ../wasmstream_time.c ../wasmstream_window.c ../wasmstream_fake.c
 */
#define _POSIX_C_SOURCE 200809L /* strtok_r, strdup */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "wasmstream_fake.h"
#include "wasmstream_time.h"


static ws_output out = WS_OUTPUT("out");
static ws_output late = WS_OUTPUT("late");
static ws_store st = WS_STORE("s");

/* The processor under test: each scenario sets these. */
static int (*process_fn)(const ws_record *r);
static int (*timer_fn)(const ws_trigger *t);
static int (*commit_fn)(const ws_trigger *t);

int ws_process(const ws_record *r) { return process_fn(r); }
int ws_on_timer(const ws_trigger *t) { return timer_fn ? timer_fn(t) : ws_fail("no timer function"); }
int ws_on_commit(const ws_trigger *t) { return commit_fn ? commit_fn(t) : ws_fail("no commit function"); }

static int emit_text(const char *s) {
    ws_out o = {WS_NULL, ws_str(s), NULL, 0, 0};
    int32_t e = ws_emit(&out, &o);
    return e < 0 ? ws_fail_call("emit", out.name, e) : WS_OK;
}

static const char *kind_name(uint32_t k) {
    return k == WS_EVENT_TIME ? "event" : k == WS_PROCESSING_TIME ? "processing" : "commit";
}

/* A record's value is a list of commands: "set:e:100:k" sets an event-time
 * timer, "set:p:..." a processing-time one, "cancel:..." cancels,
 * "mark:k" marks a key, "now" emits the clocks, "fail" fails. */
static int commands(const ws_record *r) {
    char v[512];
    snprintf(v, sizeof v, "%.*s", (int)ws_len(r->value), r->value.ptr ? (const char *)r->value.ptr : "");
    for (char *save, *c = strtok_r(v, " ", &save); c; c = strtok_r(NULL, " ", &save)) {
        char buf[128];
        if (!strncmp(c, "set:", 4) || !strncmp(c, "cancel:", 7)) {
            int set = c[0] == 's';
            char kind;
            long long ts;
            char key[64] = "";
            sscanf(c + (set ? 4 : 7), "%c:%lld:%63s", &kind, &ts, key);
            uint32_t k = kind == 'p' ? WS_PROCESSING_TIME : WS_EVENT_TIME;
            int32_t e = set ? ws_timer_set(k, ts, key, strlen(key)) : ws_timer_cancel(k, ts, key, strlen(key));
            if (e < 0) return ws_fail_call(set ? "timer_set" : "timer_cancel", NULL, e);
            snprintf(buf, sizeof buf, "%s=%s", c, e ? "true" : "false");
            if (emit_text(buf) != WS_OK) return WS_FAILED;
        } else if (!strncmp(c, "mark:", 5)) {
            int32_t e = ws_commit_mark(c + 5, strlen(c + 5));
            if (e < 0) return ws_fail_call("commit_mark", NULL, e);
        } else if (!strcmp(c, "now")) {
            int64_t s, w;
            int32_t e = ws_stream_time(&s);
            if (e == 0) e = ws_wall_time(&w);
            if (e < 0) return ws_fail_call("time_now", NULL, e);
            snprintf(buf, sizeof buf, "now %lld %lld", (long long)s, (long long)w);
            if (emit_text(buf) != WS_OK) return WS_FAILED;
        } else if (!strcmp(c, "fail")) {
            return ws_fail("failed on purpose");
        }
    }
    return WS_OK;
}

static int fired_emit(const ws_trigger *t) {
    char buf[256];
    snprintf(buf, sizeof buf, "fired %s %lld %.*s stream=%lld", kind_name(t->kind), (long long)t->time,
             (int)t->key.len, (const char *)t->key.ptr, (long long)t->stream_time);
    return emit_text(buf);
}

static const char *outs2[] = {"out", "late"}, *stores1[] = {"s"};

static ws_fake *host(void) {
    ws_fake *h = ws_fake_new(outs2, 2, stores1, 1, NULL);
    return h;
}

static void start(ws_fake *h) {
    int s = ws_fake_start(h);
    CHECK(s == WS_OK, "init: %s", ws_fake_error(h));
}

/* The values the last step emitted to "out", joined by "|". */
static const char *values(ws_fake *h) {
    static char buf[1 << 16];
    size_t n = 0;
    buf[0] = 0;
    for (size_t i = 0; i < ws_fake_emitted_count(h); i++) {
        ws_record r;
        if (strcmp(ws_fake_emitted(h, i, &r), "out")) continue;
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%.*s", n ? "|" : "", (int)ws_len(r.value),
                              r.value.ptr ? (const char *)r.value.ptr : "");
    }
    return buf;
}

static const char *step(ws_fake *h, int64_t ts, const char *cmd) {
    int s = ws_fake_process_kv(h, WS_NULL, ws_str(cmd), ts);
    CHECK(s == WS_OK && !*ws_fake_failed(h), "%s@%lld: %s", cmd, (long long)ts, ws_fake_failed(h));
    return values(h);
}

static void expect(const char *what, const char *got, const char *want) {
    CHECK(strcmp(got, want) == 0, "%s: got %s, want %s", what, got, want);
}

static void timers_tests(void) {
    char want[256];
    process_fn = commands, timer_fn = fired_emit, commit_fn = NULL;

    ws_fake *h = host();
    start(h);
    expect("identity", step(h, 10, "set:e:100:a set:e:100:a set:p:100:a set:e:100:b cancel:e:100:b cancel:e:100:b"),
           "set:e:100:a=true|set:e:100:a=false|set:p:100:a=true|set:e:100:b=true|cancel:e:100:b=true|cancel:e:100:b="
           "false");
    CHECK(ws_fake_timer_count(h) == 2, "%zu timers", ws_fake_timer_count(h));
    ws_fake_free(h);

    /* Event-time timers fire after the record that moves the stream time
     * to them, in (time, kind, key) order, seeing that stream time. */
    h = host();
    start(h);
    step(h, 10, "set:e:100:b set:e:100:a set:e:50:z set:p:10:p");
    snprintf(want, sizeof want, "now 49 %lld", WS_FAKE_WALL_TIME);
    expect("before", step(h, 49, "now"), want);
    snprintf(want, sizeof want, "now 120 %lld|fired event 50 z stream=120|fired event 100 a stream=120|fired event 100 b stream=120",
             WS_FAKE_WALL_TIME);
    expect("due", step(h, 120, "now"), want);
    ws_record r;
    ws_fake_emitted(h, 1, &r);
    CHECK(r.timestamp == 50 && ws_fake_callback_count(h) == 3, "emit in a callback: ts %lld", (long long)r.timestamp);
    snprintf(want, sizeof want, "now 120 %lld", WS_FAKE_WALL_TIME);
    expect("out of order", step(h, 5, "now"), want);
    step(h, -1, "");
    CHECK(ws_fake_stream_time(h) == 120 && ws_fake_timer_count(h) == 1, "stream %lld", (long long)ws_fake_stream_time(h));
    ws_fake_free(h);

    /* Processing-time timers fire at commit points only. */
    h = host();
    ws_fake_set_wall_time(h, 1000);
    start(h);
    step(h, 1, "set:p:61000:k set:p:1000:now");
    step(h, 2, "");
    CHECK(ws_fake_callback_count(h) == 0, "fired between records");
    CHECK(ws_fake_commit(h) == WS_OK, "commit");
    expect("first commit", values(h), "fired processing 1000 now stream=2");
    ws_fake_advance_wall_time(h, 59000);
    expect("early", values(h), "");
    ws_fake_advance_wall_time(h, 1000);
    expect("due", values(h), "fired processing 61000 k stream=2");
    CHECK(ws_fake_timer_count(h) == 0, "timers left");
    ws_fake_free(h);

    /* Firings per commit window. */
    h = host();
    ws_fake_timer_limits(h, 0, 2, 0);
    start(h);
    step(h, 0, "set:e:1:a set:e:2:b set:e:3:c set:e:4:d set:e:5:e");
    step(h, 10, "");
    CHECK(ws_fake_callback_count(h) == 2, "first window: %zu", ws_fake_callback_count(h));
    step(h, 11, "");
    CHECK(ws_fake_callback_count(h) == 0, "over the limit: %zu", ws_fake_callback_count(h));
    ws_fake_commit(h);
    expect("spent window", values(h), "");
    expect("second window", step(h, 12, ""), "fired event 3 c stream=12|fired event 4 d stream=12");
    ws_fake_free(h);

    /* Pending timers limit; a cancel frees a place. */
    h = host();
    ws_fake_timer_limits(h, 2, 0, 0);
    start(h);
    CHECK(ws_fake_process_kv(h, WS_NULL, ws_str("set:e:10:a set:e:10:a set:e:11:b set:e:12:c"), 0) == WS_FAILED &&
              !strcmp(ws_fake_error(h), "sdk: timer_set: ELIMIT: per-record limit reached"),
          "limit: %s", ws_fake_error(h));
    step(h, 0, "set:e:10:a set:e:11:b cancel:e:10:a set:e:12:c");
    CHECK(ws_fake_timer_count(h) == 2, "%zu", ws_fake_timer_count(h));
    ws_fake_free(h);

    /* A failed record's timers and marks are discarded; it still moved
     * the stream time. */
    h = host();
    start(h);
    CHECK(ws_fake_process_kv(h, WS_NULL, ws_str("set:e:100:a mark:k fail"), 40) == WS_FAILED, "fail");
    CHECK(ws_fake_timer_count(h) == 0 && ws_fake_marked_count(h) == 0 && ws_fake_stream_time(h) == 40, "discarded");
    ws_fake_free(h);
}

static int again_n;

static int again(const ws_trigger *t) {
    if (++again_n < 3) {
        char k[16];
        snprintf(k, sizeof k, "again%d", again_n);
        int32_t e = ws_timer_set(WS_EVENT_TIME, t->time, k, strlen(k));
        if (e < 0) return ws_fail_call("timer_set", NULL, e);
    }
    return fired_emit(t);
}

static int failing_timer(const ws_trigger *t) {
    if (ws_put(&st, t->key.ptr, ws_len(t->key), "x", 1) < 0) return ws_fail("put");
    if (ws_timer_set(WS_EVENT_TIME, 1000, t->key.ptr, ws_len(t->key)) < 0) return ws_fail("set");
    if (emit_text("lost") != WS_OK) return WS_FAILED;
    return ws_fail("callback says no");
}

static int mark_timer(const ws_trigger *t) {
    int32_t e = ws_commit_mark(t->key.ptr, ws_len(t->key));
    return e < 0 ? ws_fail_call("commit_mark", NULL, e) : WS_OK;
}

static int32_t mark_in_commit;

static int commit_emit(const ws_trigger *t) {
    mark_in_commit = ws_commit_mark("again", 5);
    char buf[128];
    snprintf(buf, sizeof buf, "commit %.*s %lld", (int)t->key.len, (const char *)t->key.ptr, (long long)t->time);
    return emit_text(buf);
}

static int32_t errs[8];

static int arg_checks(const ws_record *r) {
    (void)r;
    static uint8_t big[WS_MAX_TIMER_KEY_SIZE + 1];
    int64_t ms;
    errs[0] = ws_timer_set(WS_TRIGGER_COMMIT, 1, "", 0);
    errs[1] = ws_timer_set(WS_EVENT_TIME, -1, "", 0);
    errs[2] = ws_timer_set(WS_EVENT_TIME, 1, big, sizeof big);
    errs[3] = ws_timer_cancel(7, 1, "", 0);
    errs[4] = ws_commit_mark(big, sizeof big);
    errs[5] = (int32_t)ws_host_time_now(2);
    errs[6] = ws_stream_time(&ms);
    return WS_OK;
}

static int init_errs[4];

int ws_init(void) {
    if (process_fn != arg_checks) return WS_OK;
    int64_t ms;
    init_errs[0] = ws_timer_set(WS_EVENT_TIME, 1, "", 0);
    init_errs[1] = ws_stream_time(&ms);
    init_errs[2] = ws_commit_mark("", 0);
    init_errs[3] = ws_wall_time(&ms);
    return WS_OK;
}

static int largest_key_len;

static int set_largest(const ws_record *r) {
    (void)r;
    static uint8_t big[WS_MAX_TIMER_KEY_SIZE];
    int32_t e = ws_timer_set(WS_EVENT_TIME, 1, big, sizeof big);
    return e < 0 ? ws_fail_call("timer_set", NULL, e) : WS_OK;
}

static int key_len(const ws_trigger *t) {
    largest_key_len = t->key.len;
    return WS_OK;
}

static void callback_tests(void) {
    /* A timer a callback sets that is already due waits for the next check. */
    process_fn = commands, timer_fn = again;
    ws_fake *h = host();
    start(h);
    step(h, 10, "set:e:5:a");
    CHECK(again_n == 1 && ws_fake_timer_count(h) == 1, "n %d", again_n);
    step(h, 10, "");
    uint32_t k;
    int64_t ts;
    ws_bytes key;
    CHECK(ws_fake_callback_count(h) == 1, "next check");
    ws_fake_callback(h, 0, &k, &ts, &key);
    CHECK(key.len == 6 && !memcmp(key.ptr, "again1", 6), "again1");
    ws_fake_commit(h);
    CHECK(ws_fake_callback_count(h) == 1, "commit point");
    ws_fake_callback(h, 0, &k, &ts, &key);
    CHECK(key.len == 6 && !memcmp(key.ptr, "again2", 6), "again2");
    ws_fake_free(h);

    /* A failed callback's effects are discarded; its timer stays removed. */
    timer_fn = failing_timer;
    h = host();
    start(h);
    step(h, 0, "set:e:1:err set:e:2:err2");
    CHECK(ws_fake_process_kv(h, WS_NULL, WS_NULL, 5) == WS_OK, "record");
    CHECK(ws_fake_callback_count(h) == 2 && ws_fake_emitted_count(h) == 0, "callbacks");
    CHECK(!strcmp(ws_fake_callback(h, 0, NULL, NULL, NULL), "callback says no"), "error");
    CHECK(!strcmp(ws_fake_failed(h), "event callback for key \"err\" at 1: callback says no"), "%s", ws_fake_failed(h));
    CHECK(ws_fake_timer_count(h) == 0 && ws_fake_len(h, "s") == 0, "left timers or state");
    ws_fake_free(h);

    /* Commit marks: one call per key per window, in key order, with the
     * last mark's timestamp, including marks made at the commit point. */
    timer_fn = mark_timer, commit_fn = commit_emit;
    h = host();
    ws_fake_set_wall_time(h, 0);
    start(h);
    step(h, 7, "mark:b mark:a");
    step(h, 5, "mark:b set:p:0:t");
    CHECK(ws_fake_marked_count(h) == 2, "marked");
    CHECK(ws_fake_commit(h) == WS_OK, "commit: %s", ws_fake_failed(h));
    expect("commit", values(h), "commit a 7|commit b 5|commit t 0");
    ws_record r;
    ws_fake_emitted(h, 1, &r);
    CHECK(r.timestamp == 5 && mark_in_commit == -WS_EPHASE, "ts %lld, mark in commit %d", (long long)r.timestamp,
          mark_in_commit);
    ws_fake_commit(h);
    expect("again", values(h), "");
    ws_fake_free(h);

    /* The mark limit; commit_every. */
    h = host();
    ws_fake_timer_limits(h, 0, 0, 2);
    start(h);
    CHECK(ws_fake_process_kv(h, WS_NULL, ws_str("mark:a mark:b mark:a mark:c"), 0) == WS_FAILED &&
              !strcmp(ws_fake_error(h), "sdk: commit_mark: ELIMIT: per-record limit reached"),
          "%s", ws_fake_error(h));
    ws_fake_free(h);
    h = host();
    ws_fake_commit_every(h, 2);
    start(h);
    expect("first", step(h, 0, "mark:x"), "");
    expect("second", step(h, 0, "mark:x"), "commit x 0");
    ws_fake_free(h);

    /* Argument checks, in the ABI's order; all refused during init. */
    process_fn = arg_checks;
    h = host();
    start(h);
    step(h, 0, "");
    int32_t want[] = {-WS_EINVAL, -WS_EINVAL, -WS_ETOOLARGE, -WS_EINVAL, -WS_ETOOLARGE, -WS_EINVAL, 0};
    for (int i = 0; i < 7; i++) CHECK(errs[i] == want[i], "check %d: %d, want %d", i, errs[i], want[i]);
    for (int i = 0; i < 4; i++) CHECK(init_errs[i] == -WS_EPHASE, "init %d: %d", i, init_errs[i]);
    ws_fake_free(h);

    /* The largest key makes a trigger larger than the first buffer. */
    process_fn = set_largest, timer_fn = key_len;
    h = host();
    start(h);
    step(h, 1, "");
    CHECK(largest_key_len == WS_MAX_TIMER_KEY_SIZE, "key of %d bytes", largest_key_len);
    ws_fake_free(h);
}

/* "put:k", "get:k" or "scan"; what it reads is emitted. */
static int ttl_plugin(const ws_record *r) {
    char v[64];
    snprintf(v, sizeof v, "%.*s", (int)ws_len(r->value), r->value.ptr ? (const char *)r->value.ptr : "");
    static ws_buf b;
    if (!strncmp(v, "put:", 4)) return ws_put(&st, v + 4, strlen(v + 4), "v", 1) < 0 ? ws_fail("put") : WS_OK;
    if (!strncmp(v, "get:", 4)) {
        int32_t g = ws_get(&st, v + 4, strlen(v + 4), &b);
        ws_buf_free(&b);
        return emit_text(g == 1 ? "found" : "missing");
    }
    if (!strcmp(v, "scan")) {
        ws_scan sc;
        ws_bytes k, x;
        char keys[128] = "scan ";
        if (ws_scan_open(&st, "", 0, "", 0, &sc) < 0) return ws_fail("scan");
        while (ws_scan_next(&sc, &k, &x) == 1) strncat(keys, (const char *)k.ptr, (size_t)k.len);
        ws_scan_close(&sc);
        return emit_text(keys);
    }
    return WS_OK;
}

static void ttl_tests(void) {
    process_fn = ttl_plugin;
    ws_fake *h = host();
    ws_fake_ttl(h, "s", 100, WS_CLOCK_STREAM);
    start(h);
    step(h, 1000, "put:a");
    step(h, 1050, "put:b");
    expect("before expiry", step(h, 1099, "get:a"), "found");
    expect("at expiry", step(h, 1100, "get:a"), "missing");
    expect("scan", step(h, 1100, "scan"), "scan b");
    ws_bytes v;
    CHECK(ws_fake_get(h, "s", "a", 1, &v), "deleted before a commit point");
    ws_fake_commit(h);
    CHECK(ws_fake_len(h, "s") == 1, "after the commit point: %zu", ws_fake_len(h, "s"));
    step(h, 1120, "put:b");
    expect("renewed", step(h, 1200, "get:b"), "found");
    expect("old record", step(h, 1000, "get:a"), "missing");
    ws_fake_free(h);

    h = host();
    ws_fake_set_wall_time(h, 0);
    ws_fake_ttl(h, "s", 60000, WS_CLOCK_WALL);
    start(h);
    step(h, (int64_t)1 << 40, "put:k");
    ws_fake_set_wall_time(h, 59999);
    expect("wall before", step(h, 0, "get:k"), "found");
    ws_fake_advance_wall_time(h, 1);
    expect("wall after", step(h, 0, "get:k"), "missing");
    CHECK(ws_fake_len(h, "s") == 0, "wall: left %zu", ws_fake_len(h, "s"));
    ws_fake_free(h);
}

/* ---- windows ---- */

static ws_store wstore = WS_STORE("w");
static ws_windows win;

static int window_result(const ws_window_result *res) {
    char v[32] = "retract", s[256];
    if (res->agg.len >= 0) {
        uint64_t n;
        if (ws_window_count_of(res->agg, &n) != WS_OK) return WS_FAILED;
        snprintf(v, sizeof v, "%llu", (unsigned long long)n);
    }
    snprintf(s, sizeof s, "%.*s %lld-%lld %s%s", (int)res->key.len, (const char *)res->key.ptr, (long long)res->start,
             (long long)res->end, v, res->final ? " final" : "");
    ws_out o = {res->key, ws_str(s), NULL, 0, res->timestamp};
    int32_t e = ws_emit(&out, &o);
    return e < 0 ? ws_fail_call("emit", out.name, e) : WS_OK;
}

static int window_add(const ws_record *r) {
    if (r->value.len == 5 && !memcmp(r->value.ptr, "late?", 5)) {
        uint64_t n;
        if (ws_windows_late_count(&win, &n) != WS_OK) return WS_FAILED;
        char s[32];
        snprintf(s, sizeof s, "late %llu", (unsigned long long)n);
        return emit_text(s);
    }
    return ws_windows_add(&win, r);
}

static int window_timer(const ws_trigger *t) {
    int taken;
    int s = ws_windows_on_timer(&win, t, &taken);
    return s == WS_OK && !taken ? ws_fail("a timer that is not the windows'") : s;
}

static int window_commit(const ws_trigger *t) {
    int taken;
    int s = ws_windows_on_commit(&win, t, &taken);
    return s == WS_OK && !taken ? ws_fail("a mark that is not the windows'") : s;
}

static const char *wstores[] = {"w"};

static ws_fake *window_host(ws_windows spec) {
    win = spec;
    win.name = "t";
    win.store = &wstore;
    win.aggregate = ws_window_count;
    win.result = window_result;
    if (win.gap) win.merge = ws_window_merge_counts;
    process_fn = window_add, timer_fn = window_timer, commit_fn = window_commit;
    ws_fake *h = ws_fake_new(outs2, 2, wstores, 1, NULL);
    start(h);
    return h;
}

static const char *wstep(ws_fake *h, const char *key, int64_t ts) {
    int s = ws_fake_process_kv(h, ws_str(key), ws_str("v"), ts);
    CHECK(s == WS_OK && !*ws_fake_failed(h), "%s@%lld: %s", key, (long long)ts, ws_fake_failed(h));
    return values(h);
}

static uint64_t late_count(ws_fake *h) {
    ws_fake_process_kv(h, WS_NULL, ws_str("late?"), 0);
    const char *v = values(h);
    return strncmp(v, "late ", 5) ? (uint64_t)-1 : strtoull(v + 5, NULL, 10);
}

static void window_tests(void) {
    ws_fake *h = window_host((ws_windows){.size = 10, .grace = 5});
    expect("a@1", wstep(h, "a", 1), "");
    expect("b@3", wstep(h, "b", 3), "");
    expect("a@9", wstep(h, "a", 9), "");
    expect("a@12", wstep(h, "a", 12), "");
    expect("a@7 within grace", wstep(h, "a", 7), "");
    expect("c@15 closes [0,10)", wstep(h, "c", 15), "a 0-10 3 final|b 0-10 1 final");
    ws_record r;
    ws_fake_emitted(h, 0, &r);
    CHECK(r.timestamp == 9, "result timestamp %lld", (long long)r.timestamp);
    expect("a@8 is late", wstep(h, "a", 8), "");
    expect("c@100", wstep(h, "c", 100), "a 10-20 1 final|c 10-20 1 final");
    CHECK(ws_fake_len(h, "w") == 2, "state left: %zu", ws_fake_len(h, "w"));
    ws_fake_free(h);

    /* Late records counted and routed. */
    h = window_host((ws_windows){.size = 10, .late_output = &late});
    wstep(h, "a", 25);
    ws_header hd = {ws_str("h"), ws_str("1")};
    ws_out o = {ws_str("a"), ws_str("old"), &hd, 1, 0};
    uint8_t enc[128];
    ws_encode(enc, 9, 0, 0, 0, &o);
    CHECK(ws_fake_process(h, enc, ws_encoded_size(&o)) == WS_OK, "late record");
    CHECK(ws_fake_emitted_count(h) == 1 && !strcmp(ws_fake_emitted(h, 0, &r), "late"), "late output");
    CHECK(r.timestamp == 9 && r.header_count == 2, "late record %lld %u", (long long)r.timestamp, r.header_count);
    size_t pos = 0;
    ws_header got;
    ws_next_header(&r, &pos, &got);
    ws_next_header(&r, &pos, &got);
    CHECK(got.name.len == 22 && !memcmp(got.name.ptr, WS_WINDOW_LATE_HEADER, 22) && got.value.len == 1 && got.value.ptr[0] == 't',
          "late header");
    ws_fake_process_kv(h, ws_str("a"), WS_NULL, -1); /* no timestamp: late too */
    CHECK(late_count(h) == 2, "late count");
    ws_fake_free(h);

    h = window_host((ws_windows){.size = 10, .advance = 5, .emit = WS_EMIT_UPDATE});
    expect("h a@7", wstep(h, "a", 7), "a 0-10 1|a 5-15 1");
    expect("h a@12", wstep(h, "a", 12), "a 5-15 2|a 10-20 1");
    expect("h a@3 late", wstep(h, "a", 3), "");
    expect("h a@6", wstep(h, "a", 6), "a 5-15 3");
    ws_fake_free(h);

    h = window_host((ws_windows){.size = 10, .emit = WS_EMIT_ON_COMMIT});
    wstep(h, "a", 1), wstep(h, "a", 2), wstep(h, "a", 3), wstep(h, "b", 4);
    ws_fake_commit(h);
    expect("commit 1", values(h), "a 0-10 3|b 0-10 1");
    ws_fake_commit(h);
    expect("commit 2", values(h), "");
    wstep(h, "a", 5);
    expect("close", wstep(h, "c", 10), "a 0-10 4 final");
    ws_fake_commit(h);
    expect("commit 3", values(h), "c 10-20 1");
    ws_fake_free(h);

    h = window_host((ws_windows){.size = 10, .emit = WS_EMIT_ON_COMMIT});
    ws_fake_free(h);
    win.size = 10;
    ws_fake *hl = ws_fake_new(outs2, 2, wstores, 1, NULL);
    ws_fake_timer_limits(hl, 0, 0, 1);
    start(hl);
    expect("over limit a", wstep(hl, "a", 1), "");
    expect("over limit b", wstep(hl, "b", 1), "b 0-10 1");
    ws_fake_commit(hl);
    expect("over limit commit", values(hl), "a 0-10 1");
    ws_fake_free(hl);

    h = window_host((ws_windows){.gap = 10, .grace = 20});
    wstep(h, "a", 100), wstep(h, "a", 105), wstep(h, "a", 125), wstep(h, "a", 115), wstep(h, "b", 120);
    expect("nothing closed", wstep(h, "z", 150), "");
    expect("b closes", wstep(h, "z", 151), "b 120-121 1 final");
    expect("a closes", wstep(h, "z", 156), "a 100-126 4 final");
    expect("z closes", wstep(h, "y", 300), "z 150-157 3 final");
    ws_fake_free(h);

    h = window_host((ws_windows){.gap = 10, .grace = 50, .emit = WS_EMIT_UPDATE});
    expect("s1", wstep(h, "a", 100), "a 100-101 1");
    expect("s2", wstep(h, "a", 120), "a 120-121 1");
    expect("bridge", wstep(h, "a", 110), "a 120-121 retract|a 100-121 3");
    expect("earlier", wstep(h, "a", 95), "a 100-121 retract|a 95-121 4");
    expect("inside", wstep(h, "a", 115), "a 95-121 5");
    CHECK(ws_fake_len(h, "w") == 1, "sessions left %zu", ws_fake_len(h, "w"));
    ws_fake_free(h);

    h = window_host((ws_windows){.gap = 10, .grace = 100, .emit = WS_EMIT_ON_COMMIT});
    wstep(h, "a", 100);
    ws_fake_commit(h);
    expect("sc1", values(h), "a 100-101 1");
    wstep(h, "a", 120), wstep(h, "a", 140);
    ws_fake_commit(h);
    expect("sc2", values(h), "a 120-121 1|a 140-141 1");
    expect("160", wstep(h, "a", 160), "");
    expect("bridge 120-140", wstep(h, "a", 130), "a 140-141 retract");
    expect("bridge to 160", wstep(h, "a", 150), "");
    ws_fake_commit(h);
    expect("sc3", values(h), "a 120-161 5");
    expect("sclose", wstep(h, "z", 1000), "");
    ws_fake_free(h);

    /* Bad specs. */
    ws_windows bads[] = {{.store = &wstore, .size = 1, .aggregate = ws_window_count, .result = window_result},
                         {.name = "a", .store = &wstore, .aggregate = ws_window_count, .result = window_result},
                         {.name = "a", .store = &wstore, .size = 10, .advance = 11, .aggregate = ws_window_count, .result = window_result},
                         {.name = "a", .store = &wstore, .gap = 10, .aggregate = ws_window_count, .result = window_result}};
    process_fn = commands;
    h = host();
    start(h);
    for (size_t i = 0; i < sizeof bads / sizeof bads[0]; i++) {
        ws_fake_process_kv(h, WS_NULL, WS_NULL, 0);
        /* checked inside a call: ws_fail needs a host */
        win = bads[i];
        process_fn = window_add;
        CHECK(ws_fake_process_kv(h, ws_str("k"), ws_str("v"), 1) == WS_FAILED && strstr(ws_fake_error(h), "window: "),
              "bad spec %zu accepted: %s", i, ws_fake_error(h));
    }
    ws_fake_free(h);
}

/* A small deterministic generator (splitmix64). */
static uint64_t rng_state;
static int64_t below(int64_t n) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (int64_t)((z ^ (z >> 31)) % (uint64_t)n);
}

static int cmpstrp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Collects the "out" values of the last step into list. */
static void collect(ws_fake *h, char ***list, size_t *n) {
    for (size_t i = 0; i < ws_fake_emitted_count(h); i++) {
        ws_record r;
        if (strcmp(ws_fake_emitted(h, i, &r), "out")) continue;
        *list = realloc(*list, (*n + 1) * sizeof(char *));
        char *s = malloc((size_t)r.value.len + 1);
        memcpy(s, r.value.ptr, (size_t)r.value.len);
        s[r.value.len] = 0;
        (*list)[(*n)++] = s;
    }
}

static void free_list(char **l, size_t n) {
    for (size_t i = 0; i < n; i++) free(l[i]);
    free(l);
}

/* Out-of-order tumbling and hopping windows against a reference: every
 * window that got a record is emitted once, when closed, with the count of
 * the records that came in time; the others are late. */
static void random_windows(void) {
    int64_t cases[][3] = {{100, 100, 0}, {100, 100, 30}, {100, 25, 40}, {60, 40, 10}};
    for (int c = 0; c < 4; c++) {
        int64_t size = cases[c][0], adv = cases[c][1], grace = cases[c][2];
        rng_state = (uint64_t)(size * 1000 + adv * 10 + grace);
        ws_fake *h = window_host((ws_windows){.size = size, .advance = adv, .grace = grace});
        ws_fake_commit_every(h, 7);
        enum { KEYS = 5, MAXW = 400 };
        static uint32_t want[KEYS][MAXW];
        memset(want, 0, sizeof want);
        int64_t stream = -1;
        uint64_t late_want = 0;
        char **got = NULL;
        size_t ng = 0;
        for (int64_t i = 0; i < 2000; i++) {
            int64_t ts = i * 3 + below(240) - 120;
            if (ts < 0) ts = 0;
            int k = (int)below(KEYS);
            if (ts > stream) stream = ts;
            int applied = 0;
            int64_t s = ts - size + adv;
            for (s = (s < 0 ? 0 : s) / adv * adv; s <= ts; s += adv)
                if (s + size + grace > stream) want[k][s / adv]++, applied = 1;
            if (!applied) late_want++;
            char key[8];
            snprintf(key, sizeof key, "k%d", k);
            CHECK(ws_fake_process_kv(h, ws_str(key), ws_str("v"), ts) == WS_OK && !*ws_fake_failed(h), "%s", ws_fake_failed(h));
            collect(h, &got, &ng);
        }
        ws_fake_process_kv(h, ws_str("end"), ws_str("v"), (int64_t)1 << 40);
        collect(h, &got, &ng);
        ws_fake_commit(h);
        collect(h, &got, &ng);
        static uint32_t seen[KEYS][MAXW];
        memset(seen, 0, sizeof seen);
        int nwin = 0, nwant = 0;
        for (size_t i = 0; i < ng; i++) {
            int k;
            long long s, e;
            unsigned n;
            char fin[8];
            if (!strncmp(got[i], "end ", 4)) continue;
            CHECK(sscanf(got[i], "k%d %lld-%lld %u %7s", &k, &s, &e, &n, fin) == 5 && !strcmp(fin, "final"), "result %s", got[i]);
            CHECK(!seen[k][s / adv], "window k%d@%lld emitted twice", k, s);
            seen[k][s / adv] = n;
            CHECK(want[k][s / adv] == n, "window k%d@%lld: %u, want %u", k, s, n, want[k][s / adv]);
            nwin++;
        }
        for (int k = 0; k < KEYS; k++)
            for (int w = 0; w < MAXW; w++) nwant += want[k][w] != 0;
        CHECK(nwin == nwant, "%d windows emitted, want %d", nwin, nwant);
        CHECK(late_want > 0 && late_count(h) == late_want, "late %llu", (unsigned long long)late_want);
        free_list(got, ng);
        ws_fake_free(h);
    }
}

/* ---- joins ---- */

static ws_store jstore = WS_STORE("j");
static ws_join jn;
static int64_t offset;

static void side(char *b, size_t cap, const ws_join_side *s) {
    if (!s) snprintf(b, cap, "-");
    else if (s->value.len < 0) snprintf(b, cap, "null@%lld", (long long)s->timestamp);
    else snprintf(b, cap, "%.*s@%lld", (int)s->value.len, (const char *)s->value.ptr, (long long)s->timestamp);
}

static int join_result(const ws_join_result *res) {
    char l[64], r[64], s[256];
    side(l, sizeof l, res->left);
    side(r, sizeof r, res->right);
    snprintf(s, sizeof s, "%.*s %s|%s", (int)res->key.len, (const char *)res->key.ptr, l, r);
    ws_out o = {res->key, ws_str(s), NULL, 0, res->timestamp};
    int32_t e = ws_emit(&out, &o);
    return e < 0 ? ws_fail_call("emit", out.name, e) : WS_OK;
}

static int join_add(const ws_record *r) { return ws_join_add(&jn, r); }

static int join_timer(const ws_trigger *t) {
    int taken;
    int s = ws_join_on_timer(&jn, t, &taken);
    return s == WS_OK && !taken ? ws_fail("a timer that is not the join's") : s;
}

static const char *jstores[] = {"j"};

static ws_fake *join_host(ws_join spec) {
    jn = spec;
    jn.name = "j";
    jn.store = &jstore;
    jn.left = 0, jn.right = 1;
    jn.result = join_result;
    process_fn = join_add, timer_fn = join_timer, commit_fn = NULL;
    ws_fake *h = ws_fake_new(outs2, 2, jstores, 1, NULL);
    start(h);
    return h;
}

static int jrec(ws_fake *h, uint32_t input, const char *key, ws_bytes value, int64_t ts) {
    ws_out o = {ws_str(key), value, NULL, 0, 0};
    uint8_t enc[256];
    ws_encode(enc, ts, ++offset, 0, input, &o);
    return ws_fake_process(h, enc, ws_encoded_size(&o));
}

static const char *jstep(ws_fake *h, uint32_t input, const char *key, const char *value, int64_t ts) {
    CHECK(jrec(h, input, key, ws_str(value), ts) == WS_OK && !*ws_fake_failed(h), "%s@%lld: %s", key, (long long)ts,
          ws_fake_failed(h));
    return values(h);
}

static void join_tests(void) {
    ws_fake *h = join_host((ws_join){.before = 10, .after = 20, .grace = 5});
    expect("l1", jstep(h, 0, "a", "l1", 100), "");
    expect("r1", jstep(h, 1, "a", "r1", 95), "a l1@100|r1@95");
    expect("r2", jstep(h, 1, "a", "r2", 120), "a l1@100|r2@120");
    expect("r3", jstep(h, 1, "a", "r3", 121), "");
    expect("other key", jstep(h, 1, "b", "rb", 118), "");
    expect("l2", jstep(h, 0, "a", "l2", 119), "a l2@119|r2@120|a l2@119|r3@121");
    ws_record r;
    ws_fake_emitted(h, 1, &r);
    CHECK(r.timestamp == 121, "the larger timestamp: %lld", (long long)r.timestamp);
    CHECK(jrec(h, 2, "a", ws_str("v"), 122) == WS_FAILED && strstr(ws_fake_error(h), "input 2"), "third input: %s",
          ws_fake_error(h));
    ws_fake_free(h);

    h = join_host((ws_join){.after = 10, .grace = 5, .kind = WS_JOIN_LEFT});
    jstep(h, 0, "a", "l", 100), jstep(h, 0, "b", "m", 100);
    expect("r matches l", jstep(h, 1, "a", "r", 108), "a l@100|r@108");
    expect("115", jstep(h, 1, "z", "x", 115), "");
    expect("116 expires", jstep(h, 1, "z", "x", 116), "b m@100|-");
    expect("late for m", jstep(h, 1, "b", "r", 110), "");
    ws_fake_free(h);

    h = join_host((ws_join){.before = 5, .after = 5, .kind = WS_JOIN_OUTER});
    CHECK(jrec(h, 1, "a", WS_NULL, 10) == WS_OK, "null");
    expect("l@50", jstep(h, 0, "b", "l", 50), "a -|null@10");
    expect("l@100", jstep(h, 0, "c", "l", 100), "b l@50|-");
    expect("empty left", jstep(h, 0, "e", "", 200), "c l@100|-");
    expect("joins empty", jstep(h, 1, "e", "r", 202), "e @200|r@202");
    ws_fake_free(h);

    h = join_host((ws_join){.before = 10, .after = 10, .grace = 5, .late_output = &late});
    jstep(h, 0, "a", "l", 100);
    CHECK(jrec(h, 1, "a", ws_str("old"), 94) == WS_OK && ws_fake_emitted_count(h) == 1 &&
              !strcmp(ws_fake_emitted(h, 0, &r), "late") && r.timestamp == 94,
          "late routed");
    ws_fake_free(h);

    h = join_host((ws_join){.before = 10, .after = 10, .grace = 5});
    for (int i = 0; i < 50; i++) {
        char k[8];
        snprintf(k, sizeof k, "k%d", i % 7);
        jstep(h, (uint32_t)(i % 2), k, "v", 1000 + i);
    }
    jstep(h, 0, "end", "v", 10000);
    CHECK(ws_fake_len(h, "j") == 1 && ws_fake_timer_count(h) == 1, "buffer left: %zu, timers %zu", ws_fake_len(h, "j"),
          ws_fake_timer_count(h));
    ws_fake_free(h);
}

/* Random out-of-order streams of both sides against a brute-force join. */
static void random_joins(void) {
    for (int kind = WS_JOIN_INNER; kind <= WS_JOIN_OUTER; kind++) {
        for (uint64_t seed = 0; seed < 6; seed++) {
            rng_state = seed * 31 + 7;
            int64_t before = below(30), after = below(30), grace = below(20);
            ws_fake *h = join_host((ws_join){.before = before, .after = after, .grace = grace, .kind = kind});
            struct in {
                uint32_t input;
                int key;
                int val;
                int64_t ts;
            } acc[400];
            int na = 0;
            char **got = NULL;
            size_t ng = 0;
            int64_t stream = -1, base = 1000;
            for (int i = 0; i < 400; i++) {
                base += below(4);
                struct in r = {(uint32_t)below(2), (int)below(5), i, base - below(grace + 15)};
                if (r.ts > stream) stream = r.ts;
                char k[8], v[8];
                snprintf(k, sizeof k, "k%d", r.key);
                snprintf(v, sizeof v, "v%d", i);
                CHECK(jrec(h, r.input, k, ws_str(v), r.ts) == WS_OK && !*ws_fake_failed(h), "%s", ws_fake_failed(h));
                collect(h, &got, &ng);
                if (r.ts >= stream - grace) acc[na++] = r;
            }
            jrec(h, 0, "end", ws_str("x"), base + 1000000);
            collect(h, &got, &ng);
            char **want = NULL;
            size_t nw = 0;
            int matched[400] = {0};
            char s[64];
            for (int a = 0; a < na; a++) {
                if (acc[a].input != 0) continue;
                for (int b = 0; b < na; b++) {
                    struct in *l = &acc[a], *r = &acc[b];
                    if (r->input == 1 && r->key == l->key && r->ts >= l->ts - before && r->ts <= l->ts + after) {
                        snprintf(s, sizeof s, "k%d v%d@%lld|v%d@%lld", l->key, l->val, (long long)l->ts, r->val, (long long)r->ts);
                        want = realloc(want, (nw + 1) * sizeof(char *));
                        want[nw++] = strdup(s);
                        matched[a] = matched[b] = 1;
                    }
                }
            }
            for (int i = 0; i < na; i++) {
                if (matched[i]) continue;
                struct in *r = &acc[i];
                if (r->input == 0 && kind != WS_JOIN_INNER)
                    snprintf(s, sizeof s, "k%d v%d@%lld|-", r->key, r->val, (long long)r->ts);
                else if (r->input == 1 && kind == WS_JOIN_OUTER)
                    snprintf(s, sizeof s, "k%d -|v%d@%lld", r->key, r->val, (long long)r->ts);
                else continue;
                want = realloc(want, (nw + 1) * sizeof(char *));
                want[nw++] = strdup(s);
            }
            qsort(got, ng, sizeof(char *), cmpstrp);
            qsort(want, nw, sizeof(char *), cmpstrp);
            int same = ng == nw;
            for (size_t i = 0; same && i < ng; i++) same = !strcmp(got[i], want[i]);
            CHECK(same, "join kind %d seed %llu: %zu results, want %zu", kind, (unsigned long long)seed, ng, nw);
            free_list(got, ng);
            free_list(want, nw);
            ws_fake_free(h);
        }
    }
}

/* ---- the shared trigger vectors ---- */

static uint8_t *unhex(const char *s, size_t n, size_t *len) {
    uint8_t *b = malloc(n / 2 + 1);
    for (size_t i = 0; i + 1 < n; i += 2) {
        unsigned v;
        sscanf(s + i, "%2x", &v);
        b[i / 2] = (uint8_t)v;
    }
    *len = n / 2;
    return b;
}

/* The number after "name": in [p, end), or def. */
static long long num(const char *p, const char *end, const char *name, long long def) {
    char pat[32];
    snprintf(pat, sizeof pat, "\"%s\":", name);
    const char *q = strstr(p, pat);
    if (!q || q >= end) return def;
    return strtoll(q + strlen(pat), NULL, 10);
}

static uint8_t *hexfield(const char *p, const char *end, const char *name, size_t *len) {
    char pat[32];
    snprintf(pat, sizeof pat, "\"%s\":", name);
    const char *q = strstr(p, pat);
    if (!q || q >= end) return NULL;
    q = strchr(q + strlen(pat), '"') + 1;
    return unhex(q, (size_t)(strchr(q, '"') - q), len);
}

static void trigger_vectors(const char *path) {
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL, "open %s", path);
    if (!f) return;
    static char doc[1 << 20];
    size_t n = fread(doc, 1, sizeof doc - 1, f);
    fclose(f);
    doc[n] = 0;
    const char *malformed = strstr(doc, "\"malformed\""), *checks = strstr(doc, "\"checks\""), *order = strstr(doc, "\"order\"");
    CHECK(malformed && checks && order, "sections");
    if (!malformed || !checks || !order) return;
    int good = 0, bad = 0;
    for (const char *p = strchr(strstr(doc, "\"vectors\""), '{'); p && p < checks; p = strchr(p + 1, '{')) {
        const char *end = strchr(p, '}');
        size_t len, kl;
        uint8_t *enc = hexfield(p, end, "encoded", &len);
        ws_trigger t;
        int rc = ws_decode_trigger(enc, len, &t);
        if (p < malformed) {
            good++;
            uint8_t *key = hexfield(p, end, "key", &kl);
            CHECK(rc == 0 && t.time == num(p, end, "timestamp", 0) && t.stream_time == num(p, end, "stream_time", 0) &&
                      t.wall_time == num(p, end, "wall_time", 0) && t.kind == (uint32_t)num(p, end, "kind", 0) &&
                      (size_t)t.key.len == kl && (kl == 0 || !memcmp(t.key.ptr, key, kl)),
                  "trigger vector %d", good);
            uint8_t *re = malloc(len);
            CHECK(rc == 0 && ws_encode_trigger(re, &t) == len && !memcmp(re, enc, len), "trigger vector %d: re-encoding", good);
            free(re);
            free(key);
        } else {
            bad++;
            CHECK(rc == -WS_EINVAL, "malformed trigger %d accepted", bad);
        }
        free(enc);
    }
    CHECK(good >= 4 && bad >= 1, "%d trigger vectors, %d malformed", good, bad);
    int nc = 0;
    for (const char *p = strchr(checks, '{'); p && p < order; p = strchr(p + 1, '{')) {
        const char *end = strchr(p, '}');
        long long kind = num(p, end, "kind", -1);
        int32_t got = ws_check_timer((uint32_t)kind, num(p, end, "ts", 0), (size_t)num(p, end, "key_len", 0));
        CHECK(got == -(int32_t)num(p, end, "errno", 0), "check %d: %d", nc, got);
        nc++;
    }
    CHECK(nc >= 5, "%d checks", nc);
    /* order: sorting "given" by ws_timer_cmp gives "fired". */
    const char *given = strstr(order, "\"given\""), *fired = strstr(order, "\"fired\"");
    struct tm_ {
        uint32_t kind;
        int64_t ts;
        uint8_t *key;
        size_t kl;
    } g[32], w[32];
    int ngv = 0, nf = 0;
    for (const char *p = strstr(given, "{"); p && p < fired && ngv < 32; p = strstr(p + 1, "{")) {
        const char *end = strchr(p, '}');
        g[ngv] = (struct tm_){(uint32_t)num(p, end, "kind", 0), num(p, end, "ts", 0), NULL, 0};
        g[ngv].key = hexfield(p, end, "key", &g[ngv].kl);
        ngv++;
    }
    for (const char *p = strstr(fired, "{"); p && nf < 32; p = strstr(p + 1, "{")) {
        const char *end = strchr(p, '}');
        w[nf] = (struct tm_){(uint32_t)num(p, end, "kind", 0), num(p, end, "ts", 0), NULL, 0};
        w[nf].key = hexfield(p, end, "key", &w[nf].kl);
        nf++;
    }
    for (int i = 1; i < ngv; i++)
        for (int j = i; j > 0; j--) {
            struct tm_ *a = &g[j - 1], *b = &g[j];
            if (ws_timer_cmp(a->kind, a->ts, (ws_bytes){a->key, (int32_t)a->kl}, b->kind, b->ts,
                             (ws_bytes){b->key, (int32_t)b->kl}) <= 0)
                break;
            struct tm_ x = *a;
            *a = *b;
            *b = x;
        }
    CHECK(ngv == nf && ngv >= 5, "order: %d given, %d fired", ngv, nf);
    for (int i = 0; i < ngv && i < nf; i++)
        CHECK(g[i].kind == w[i].kind && g[i].ts == w[i].ts && g[i].kl == w[i].kl && (!g[i].kl || !memcmp(g[i].key, w[i].key, g[i].kl)),
              "order %d", i);
    for (int i = 0; i < ngv; i++) free(g[i].key);
    for (int i = 0; i < nf; i++) free(w[i].key);
}

int main(int argc, char **argv) {
    timers_tests();
    callback_tests();
    ttl_tests();
    window_tests();
    random_windows();
    join_tests();
    random_joins();
    if (argc > 1) trigger_vectors(argv[1]);
    else CHECK(0, "usage: time_test path/to/triggers.json");
    (void)st;
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    puts("ok");
    return 0;
}
