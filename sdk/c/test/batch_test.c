/*
 * batch_test.c: batches (abi/ABI.md section 10) in the C SDK against its
 * fake host. The shared vectors (abi/testdata/batches.json, with
 * records.json and triggers.json for the payloads they name: paths in
 * argv[1..3]) split into their slots and encode back to their bytes, emit
 * entries encode byte for byte, and through the SDK's wasmstream_batch
 * every record is forwarded as a single call forwards it and every trigger
 * reaches its callback with its own clocks. Then the same records go
 * through ws_fake_process_batch and ws_fake_process one at a time, with
 * the same outcome record by record and the same state: every emit path
 * (the input forwarded in place, then copied when more follow), failures,
 * oversized records, timers that cut a batch, the arena's growth and its
 * hand-over. Exits non-zero on the first failed check.
 *
 *     cc -I.. batch_test.c ../wasmstream.c ../wasmstream_time.c ../wasmstream_fake.c && \
 *         ./a.out batches.json records.json triggers.json
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "wasmstream_fake.h"
#include "wasmstream_time.h"

static ws_output out = WS_OUTPUT("out");
static ws_output side = WS_OUTPUT("side");
static ws_store kv = WS_STORE("kv");
static ws_buf val;

/* vectors: every record forwarded, every trigger emitting its clocks. */
static int vector_mode;

#define TRY(call)                                             \
    do {                                                      \
        int32_t e_ = (call);                                  \
        if (e_ < 0) return ws_fail_call(#call, NULL, e_);     \
    } while (0)

static int emit_kv(ws_output *o, const char *k, ws_bytes v, int64_t ts) {
    ws_out x = {ws_str(k), v, NULL, 0, ts};
    return ws_emit(o, &x);
}

/* An SDK result as text: "ok" or the errno's name. */
static const char *res(int32_t e) { return e < 0 ? ws_errno_name(e) : "ok"; }

/* The command is the key's text before a colon, its argument the number
 * after it. */
int ws_process(const ws_record *r) {
    if (vector_mode) {
        int32_t e = ws_forward(&out, r);
        return e < 0 ? ws_fail_call("emit", out.name, e) : WS_OK;
    }
    char cmd[64] = {0};
    size_t kl = ws_len(r->key) < sizeof cmd - 1 ? ws_len(r->key) : sizeof cmd - 1;
    if (kl) memcpy(cmd, r->key.ptr, kl);
    long long arg = 0;
    char *colon = strchr(cmd, ':');
    if (colon) *colon = 0, arg = atoll(colon + 1);
    if (!strcmp(cmd, "fwd")) {
        TRY(ws_forward(&out, r));
    } else if (!strcmp(cmd, "fwd2")) {
        TRY(ws_forward(&out, r));
        TRY(ws_forward(&side, r));
    } else if (!strcmp(cmd, "emit-fwd")) {
        TRY(emit_kv(&side, "before", r->value, 0));
        TRY(ws_forward(&out, r));
    } else if (!strcmp(cmd, "fwd-emit")) {
        TRY(ws_forward(&out, r));
        TRY(emit_kv(&side, "after", r->value, 7));
        TRY(ws_forward(&out, r));
    } else if (!strcmp(cmd, "count")) {
        int32_t got = ws_get(&kv, "count", 5, &val);
        TRY(got);
        /* the counter as text (val is not NUL-terminated) */
        char cur[32] = "0", b[32];
        if (got) snprintf(cur, sizeof cur, "%.*s", (int)val.len, (const char *)val.data);
        snprintf(b, sizeof b, "%lld", atoll(cur) + 1);
        TRY(ws_put(&kv, "count", 5, b, strlen(b)));
        TRY(emit_kv(&side, "count", ws_str(b), 0));
    } else if (!strcmp(cmd, "fail")) {
        TRY(ws_put(&kv, "failed", 6, "x", 1));
        TRY(ws_forward(&out, r));
        TRY(emit_kv(&side, "lost", WS_NULL, 0));
        return ws_fail("batch: rejected on purpose");
    } else if (!strcmp(cmd, "big")) {
        /* arg records of 100,000 bytes each: past the arena's hand-over
         * size (1 MiB) the batch returns early. */
        uint8_t *v = malloc(100000);
        if (!v) return ws_fail("batch: out of memory");
        for (int i = 0; i < 100000; i++) v[i] = (uint8_t)(i * 7 + arg);
        int32_t e = 0;
        for (long long i = 0; i < arg && e >= 0; i++) {
            char k[32];
            snprintf(k, sizeof k, "big%lld", i);
            e = emit_kv(&out, k, (ws_bytes){v, 100000}, 0);
        }
        free(v);
        TRY(e);
    } else if (!strcmp(cmd, "huge")) {
        uint8_t *v = calloc(1, WS_MAX_RECORD_SIZE);
        if (!v) return ws_fail("batch: out of memory");
        ws_out x = {WS_NULL, {v, WS_MAX_RECORD_SIZE}, NULL, 0, 0};
        int32_t e = ws_emit(&out, &x);
        free(v);
        TRY(emit_kv(&side, "huge", ws_str(res(e)), 0));
    } else if (!strcmp(cmd, "hugefwd")) {
        TRY(emit_kv(&side, "hugefwd", ws_str(res(ws_forward(&out, r))), 0));
    } else if (!strcmp(cmd, "timer")) {
        TRY(ws_timer_set(WS_EVENT_TIME, arg, r->key.ptr, ws_len(r->key)));
        TRY(ws_forward(&out, r));
    } else if (!strcmp(cmd, "now")) {
        int64_t t;
        TRY(ws_stream_time(&t));
        char b[32];
        snprintf(b, sizeof b, "%lld", (long long)t);
        TRY(emit_kv(&side, "now", ws_str(b), 0));
    } else {
        return ws_fail("batch: unknown command");
    }
    return WS_OK;
}

/* Emits the trigger's key with the clocks time_now gives (vectors), or
 * marks the timer fired. */
static int trigger(const ws_trigger *t) {
    int64_t s, w;
    TRY(ws_stream_time(&s));
    TRY(ws_wall_time(&w));
    char b[64];
    snprintf(b, sizeof b, "%lld %lld", (long long)s, (long long)w);
    if (!vector_mode) TRY(ws_put(&kv, t->key.ptr, ws_len(t->key), "fired", 5));
    ws_out x = {t->key, ws_str(b), NULL, 0, 0};
    TRY(ws_emit(vector_mode ? &out : &side, &x));
    return WS_OK;
}

int ws_on_timer(const ws_trigger *t) { return trigger(t); }
int ws_on_commit(const ws_trigger *t) { return trigger(t); }

static const char *outs[] = {"out", "side"}, *stores[] = {"kv"};

static ws_fake *host(size_t commit_every) {
    ws_fake *h = ws_fake_new(outs, 2, stores, 1, NULL);
    ws_fake_commit_every(h, commit_every);
    int s = ws_fake_start(h);
    CHECK(s == WS_OK, "init: %s", ws_fake_error(h));
    return h;
}

/* ---- the shared vectors ---- */

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL, "open %s", path);
    if (!f) exit(1);
    static char bufs[3][1 << 20];
    static int next;
    char *doc = bufs[next++ % 3];
    size_t n = fread(doc, 1, (1 << 20) - 1, f);
    fclose(f);
    doc[n] = 0;
    return doc;
}

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

/* The string value of the first "field" at or after p, copied into out;
 * the position after it. */
static const char *str_field(const char *p, const char *field, char *out, size_t cap, const char **value, size_t *vlen) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\"", field);
    const char *f = strstr(p, pat);
    if (!f) return NULL;
    const char *q = strchr(f + strlen(pat), '"') + 1, *e = strchr(q, '"');
    if (out) snprintf(out, cap, "%.*s", (int)(e - q), q);
    if (value) *value = q, *vlen = (size_t)(e - q);
    return e + 1;
}

/* The encoding of the vector called name in doc (before its "malformed"
 * list), or NULL. */
static uint8_t *named(const char *doc, const char *name, size_t *len) {
    const char *end = strstr(doc, "\"malformed\"");
    char pat[128];
    snprintf(pat, sizeof pat, "\"name\": \"%s\"", name);
    const char *p = strstr(doc, pat);
    if (!p || (end && p > end)) return NULL;
    const char *hex;
    size_t n;
    str_field(p, "encoded", NULL, 0, &hex, &n);
    return unhex(hex, n, len);
}

static void batch_vectors(const char *batches, const char *records, const char *triggers) {
    int seen = 0;
    const char *emits = strstr(batches, "\"emits\"");
    for (const char *p = batches;; seen++) {
        const char *next = strstr(p, "\"name\"");
        if (!next || next > emits) break;
        p = next;
        char name[64];
        p = str_field(p, "name", name, sizeof name, NULL, NULL);
        const char *slots_end = strstr(p, "\"encoded\"");
        /* The slots it names, in order. */
        uint32_t kinds[16];
        uint8_t *want[16];
        size_t want_len[16], n = 0;
        for (const char *s = strstr(p, "\"kind\""); s && s < slots_end && n < 16; s = strstr(s, "\"kind\"")) {
            char kind[16], vname[64];
            s = str_field(s, "kind", kind, sizeof kind, NULL, NULL);
            s = str_field(s, "name", vname, sizeof vname, NULL, NULL);
            kinds[n] = strcmp(kind, "record") ? WS_SLOT_TRIGGER : WS_SLOT_RECORD;
            want[n] = named(kinds[n] == WS_SLOT_RECORD ? records : triggers, vname, &want_len[n]);
            CHECK(want[n] != NULL, "%s: no vector %s", name, vname);
            if (!want[n]) return;
            n++;
        }
        const char *hex;
        size_t hl, len;
        p = str_field(p, "encoded", NULL, 0, &hex, &hl);
        uint8_t *enc = unhex(hex, hl, &len);
        /* Split with the SDK's walker, then encode back. */
        CHECK(len >= WS_BATCH_HEADER_SIZE && enc[0] == n, "%s: count", name);
        uint8_t *re = calloc(1, len);
        re[0] = (uint8_t)n;
        size_t off = WS_BATCH_HEADER_SIZE;
        for (size_t k = 0; k < n; k++) {
            uint32_t kind;
            size_t pl, plen;
            int rc = ws_slot_at(enc, len, off, &kind, &pl, &plen);
            CHECK(rc == 0 && kind == kinds[k] && plen == want_len[k] && !memcmp(enc + pl, want[k], plen),
                  "%s: slot %zu", name, k);
            if (rc) break;
            re[off + WS_SLOT_KIND] = (uint8_t)kind;
            re[off + WS_SLOT_LEN] = (uint8_t)plen, re[off + WS_SLOT_LEN + 1] = (uint8_t)(plen >> 8);
            memcpy(re + pl, want[k], plen);
            off += WS_SLOT_SIZE(plen);
        }
        CHECK(off == len && !memcmp(re, enc, len), "%s: re-encoding differs", name);
        free(re);

        /* Through the SDK's wasmstream_batch. */
        vector_mode = 1;
        ws_fake *h = host(0);
        size_t ran = ws_fake_batch(h, enc, len);
        CHECK(ran == n, "%s: %zu of %zu calls ran", name, ran, n);
        for (size_t k = 0; k < ran; k++) {
            int st;
            size_t first, ne;
            const char *err = ws_fake_result(h, k, &st, &first, &ne, NULL, NULL);
            CHECK(st == WS_OK && ne == 1, "%s call %zu: %s, %zu emits", name, k, err, ne);
            if (ne != 1) continue;
            ws_record r;
            ws_fake_emitted(h, first, &r);
            if (kinds[k] == WS_SLOT_RECORD) {
                uint8_t *fwd = malloc(want_len[k]);
                memcpy(fwd, want[k], want_len[k]);
                memset(fwd + 8, 0xff, 12); /* offset -1, any partition */
                memset(fwd + 20, 0, 4);    /* output 0 */
                CHECK(r.raw_len == want_len[k] && !memcmp(r.raw, fwd, want_len[k]), "%s call %zu: forwarded", name, k);
                free(fwd);
            } else {
                ws_trigger t;
                ws_decode_trigger(want[k], want_len[k], &t);
                char clocks[64];
                snprintf(clocks, sizeof clocks, "%lld %lld", (long long)t.stream_time, (long long)t.wall_time);
                CHECK(r.timestamp == t.time && ws_len(r.key) == ws_len(t.key) &&
                          (!ws_len(t.key) || !memcmp(r.key.ptr, t.key.ptr, ws_len(t.key))) &&
                          ws_len(r.value) == strlen(clocks) && !memcmp(r.value.ptr, clocks, strlen(clocks)),
                      "%s call %zu: trigger emit", name, k);
            }
        }
        ws_fake_free(h);
        vector_mode = 0;
        for (size_t k = 0; k < n; k++) free(want[k]);
        free(enc);
    }
    CHECK(seen >= 3, "%d batch vectors", seen);

    /* Emit entries: the records each run names, written with the SDK's
     * entry writer, are the run's bytes. */
    const char *malformed = strstr(batches, "\"malformed_emits\"");
    int runs = 0;
    for (const char *p = emits;; runs++) {
        const char *next = strstr(p, "\"name\"");
        if (!next || next > malformed) break;
        char name[64];
        p = str_field(next, "name", name, sizeof name, NULL, NULL);
        const char *list = strchr(p, '['), *list_end = strchr(list, ']');
        uint8_t run[4096];
        size_t rl = 0;
        for (const char *s = strchr(list, '"'); s && s < list_end; s = strchr(s, '"')) {
            const char *e = strchr(s + 1, '"');
            char vname[64];
            snprintf(vname, sizeof vname, "%.*s", (int)(e - s - 1), s + 1);
            size_t vl;
            uint8_t *v = named(records, vname, &vl);
            CHECK(v != NULL, "emits %s: no vector %s", name, vname);
            if (!v) return;
            memcpy(ws_put_emit_entry(run + rl, vl), v, vl);
            rl += 4 + vl;
            free(v);
            s = e + 1;
        }
        const char *hex;
        size_t hl, len;
        p = str_field(p, "encoded", NULL, 0, &hex, &hl);
        uint8_t *enc = unhex(hex, hl, &len);
        CHECK(len == rl && !memcmp(enc, run, rl), "emits %s: differs", name);
        free(enc);
    }
    CHECK(runs >= 3, "%d emit runs", runs);
    int bad = 0;
    for (const char *p = strstr(malformed, "\"encoded\""); p; p = strstr(p + 1, "\"encoded\""), bad++) {
        const char *hex;
        size_t hl, len;
        str_field(p, "encoded", NULL, 0, &hex, &hl);
        uint8_t *enc = unhex(hex, hl, &len);
        int ok = 1;
        for (size_t at = 0; ok && at < len;) {
            const uint8_t *rec;
            size_t n;
            int64_t used = ws_next_emit_entry(enc + at, len - at, &rec, &n);
            ws_record r;
            ok = used > 0 && ws_decode(rec, n, &r) == 0;
            if (ok) at += (size_t)used;
        }
        CHECK(!ok, "malformed emits %d accepted", bad);
        free(enc);
    }
    CHECK(bad >= 3, "%d malformed emit runs", bad);
}

/* ---- batches against one at a time ---- */

static uint8_t *encode_rec(const char *key, const uint8_t *v, size_t vl, int64_t ts, size_t *len) {
    ws_header hs[2] = {{ws_str("h"), ws_str("1")}, {ws_str("null"), WS_NULL}};
    ws_out o = {ws_str(key), {v, (int32_t)vl}, hs, 2, 0};
    *len = ws_encoded_size(&o);
    uint8_t *b = malloc(*len);
    ws_encode(b, ts, ts, 3, 0, &o);
    return b;
}

/* Appends text to a growing transcript. */
typedef struct {
    char *s;
    size_t n, cap;
} text;

static void put(text *t, const char *s, size_t n) {
    if (t->n + n + 1 > t->cap) {
        t->cap = 2 * (t->n + n + 1);
        t->s = realloc(t->s, t->cap);
    }
    memcpy(t->s + t->n, s, n);
    t->n += n;
    t->s[t->n] = 0;
}

static void putf(text *t, const char *fmt, long long a, const char *b) {
    char line[WS_MAX_LOG_SIZE + 128];
    int n = snprintf(line, sizeof line, fmt, a, b);
    put(t, line, (size_t)n);
}

/* One record's outcome: status, error, emits (hex), callbacks. */
static void outcome(text *t, ws_fake *h, int st, const char *err, size_t first, size_t ne, size_t cb, size_t nc) {
    putf(t, "status %lld %s\n", st, err);
    for (size_t j = first; j < first + ne; j++) {
        ws_record r;
        const char *o = ws_fake_emitted(h, j, &r);
        /* The bytes by their FNV-1a hash: records of 100 KB are many. */
        uint64_t x = 1469598103934665603ull;
        for (size_t b = 0; b < r.raw_len; b++) x = (x ^ r.raw[b]) * 1099511628211ull;
        char line[128];
        int n = snprintf(line, sizeof line, "emit %zu %s %016llx\n", r.raw_len, o, (unsigned long long)x);
        put(t, line, (size_t)n);
    }
    for (size_t j = cb; j < cb + nc; j++) {
        int64_t ts;
        const char *e = ws_fake_callback(h, j, NULL, &ts, NULL);
        putf(t, "callback %lld %s\n", (long long)ts, e);
    }
}

/* The state the processor can have written, and the pending timers. */
static void state(text *t, ws_fake *h) {
    const char *keys[] = {"count", "failed"};
    for (int i = 0; i < 2; i++) {
        ws_bytes v;
        if (ws_fake_get(h, "kv", keys[i], strlen(keys[i]), &v)) putf(t, "kv %lld %s\n", v.len, keys[i]);
    }
    putf(t, "entries %lld%s\n", (long long)ws_fake_len(h, "kv"), "");
    for (size_t i = 0; i < ws_fake_timer_count(h); i++) {
        uint32_t kind;
        int64_t ts;
        ws_bytes key;
        ws_fake_timer(h, i, &kind, &ts, &key);
        putf(t, "timer %lld %s\n", (long long)ts, "");
    }
    putf(t, "stream %lld%s\n", (long long)ws_fake_stream_time(h), "");
}

static void same(const char *name, uint8_t **recs, size_t *lens, size_t n, size_t chunk, size_t commit_every) {
    text one = {0}, many = {0};
    ws_fake *h = host(commit_every);
    for (size_t i = 0; i < n; i++) {
        int st = ws_fake_process(h, recs[i], lens[i]);
        outcome(&one, h, st, ws_fake_error(h), 0, ws_fake_emitted_count(h), 0, ws_fake_callback_count(h));
    }
    state(&one, h);
    ws_fake_free(h);
    h = host(commit_every);
    for (size_t lo = 0; lo < n; lo += chunk) {
        size_t m = n - lo < chunk ? n - lo : chunk;
        ws_fake_process_batch(h, (const uint8_t *const *)recs + lo, lens + lo, m);
        CHECK(ws_fake_result_count(h) == m, "%s: %zu outcomes of %zu", name, ws_fake_result_count(h), m);
        for (size_t i = 0; i < ws_fake_result_count(h); i++) {
            int st;
            size_t first, ne, cb, nc;
            const char *err = ws_fake_result(h, i, &st, &first, &ne, &cb, &nc);
            outcome(&many, h, st, err, first, ne, cb, nc);
        }
    }
    state(&many, h);
    ws_fake_free(h);
    if (strcmp(one.s, many.s)) {
        size_t i = 0;
        while (one.s[i] == many.s[i]) i++;
        size_t line = i;
        while (line > 0 && one.s[line - 1] != '\n') line--;
        CHECK(0, "%s: in batches differs from one at a time at byte %zu:\n  one:  %.200s\n  many: %.200s", name, i,
              one.s + line, many.s + line);
    }
    free(one.s);
    free(many.s);
}

static void every_path(void) {
    /* First, on an arena no batch has grown yet (the arena only grows):
     * the second call's emits outgrow it while the first call's run, not
     * read yet (neither makes a host call), must stay where it is. */
    static const char *keys[] = {"big:6", "big:40", "fwd", "fwd2", "emit-fwd", "fwd-emit", "count", "fail", "count",
                                 "huge", "hugefwd", "fwd", "now", "unknown", "timer:5", "count", "now", "timer:7",
                                 "big:6", "big:6", "fwd", "big:12", "fwd2", "big:1", "count"};
    size_t n = sizeof keys / sizeof keys[0];
    uint8_t *recs[32];
    size_t lens[32];
    uint8_t *huge = calloc(1, WS_MAX_RECORD_SIZE);
    for (size_t i = 0; i < n; i++) {
        int big = !strcmp(keys[i], "hugefwd");
        recs[i] = encode_rec(keys[i], big ? huge : (const uint8_t *)"value", big ? WS_MAX_RECORD_SIZE : 5,
                             (int64_t)(i < 16 ? i : i + 2), &lens[i]);
    }
    free(huge);
    same("every path", recs, lens, n, n, 0);
    same("every path, chunks of 5, commit every 3", recs, lens, n, 5, 3);
    for (size_t i = 0; i < n; i++) free(recs[i]);
}

static uint64_t rng = 42;
static long long below(long long n) {
    rng += 0x9E3779B97F4A7C15ull;
    uint64_t z = rng;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (long long)((z ^ (z >> 31)) % (uint64_t)n);
}

static void random_runs(void) {
    static const char *cmds[] = {"fwd", "fwd2", "emit-fwd", "fwd-emit", "count", "fail", "now", "big:3", "timer"};
    for (int run = 0; run < 20; run++) {
        uint8_t *recs[40];
        size_t lens[40];
        int64_t ts = 0;
        for (int i = 0; i < 40; i++) {
            ts += below(3);
            char key[32];
            const char *c = cmds[below(9)];
            if (!strcmp(c, "timer")) snprintf(key, sizeof key, "timer:%lld", (long long)ts + below(5));
            else snprintf(key, sizeof key, "%s", c);
            uint8_t v[200];
            size_t vl = (size_t)below(200);
            for (size_t j = 0; j < vl; j++) v[j] = (uint8_t)below(256);
            recs[i] = encode_rec(key, v, vl, ts, &lens[i]);
        }
        char name[32];
        snprintf(name, sizeof name, "random run %d", run);
        same(name, recs, lens, 40, (size_t)(1 + below(40)), (size_t)below(4));
        for (int i = 0; i < 40; i++) free(recs[i]);
    }
}

int main(int argc, char **argv) {
    every_path();
    if (argc > 3) batch_vectors(slurp(argv[1]), slurp(argv[2]), slurp(argv[3]));
    else CHECK(0, "usage: batch_test batches.json records.json triggers.json");
    random_runs();
    ws_buf_free(&val);
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    puts("ok");
    return 0;
}
