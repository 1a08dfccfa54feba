/*
 * fuzzop: the plugin of the sandbox fuzzer (host/sandbox_fuzz_test.go). It
 * runs the ABI calls a program of bytes asks for, with whatever arguments
 * the program gives: a record's value is the program of its process call;
 * the config's "timer" and "commit" (hex) are the programs of on_timer and
 * on_commit. Every host result is ignored: what the host does with each
 * call is what is tested, never this plugin's logic.
 *
 * Ops (little-endian arguments; a program cut short stops where it is):
 *   'e' u8 output, u32 size     emit size bytes (output 0 "out", 1 "side", other: raw index)
 *   'p' u16 klen, u32 vlen      state_put
 *   'd' u16 klen                state_delete
 *   'g' u16 klen                state_get
 *   's' u8 n, u8 steps          open n cursors (not closed), step each
 *   't' u8 kind, i32 delta      timer_set at the trigger/record time + delta
 *   'c' u8 kind, i32 delta      timer_cancel
 *   'm' u16 klen                commit_mark
 *   'l' u16 len, u16 times      log len bytes, times times
 *   'G' u16 pages               malloc pages * 64 KiB and touch every page
 *   'S' u32 n                   spin n * 1000 iterations
 *   'r' u16 depth               recurse
 *   'T'                         trap
 *   'f'                         fail the call (return WS_FAILED)
 *   'x' u8 byte                 the key byte of the ops that follow
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wasmstream.h"
#include "wasmstream_time.h"

WS_DECLARE_OUTPUT(out, "out");
WS_DECLARE_OUTPUT(side, "side");
WS_DECLARE_STORE(st, "s");

static ws_buf timer_prog, commit_prog, cfg, got;
static uint8_t keybyte = 'k';
static volatile uint64_t sink;

/* A buffer of n bytes filled with b, reused. */
static uint8_t *fill(size_t n, uint8_t b) {
    static uint8_t *buf;
    static size_t cap;
    if (n > cap) {
        uint8_t *p = realloc(buf, n);
        if (!p) return NULL;
        buf = p, cap = n;
    }
    if (n) memset(buf, b, n);
    return buf;
}

static uint32_t u(const uint8_t *p, size_t n, size_t *i, int bytes) {
    uint32_t v = 0;
    for (int k = 0; k < bytes; k++) v |= (uint32_t)(*i < n ? p[(*i)++] : 0) << (8 * k);
    return v;
}

static int recurse(int depth) {
    volatile uint8_t frame[256];
    frame[depth & 255] = (uint8_t)depth;
    if (depth <= 0) return frame[0];
    return recurse(depth - 1) + frame[depth & 255];
}

/* Runs the program p[0:n]; now is the time timers are set relative to. */
static int run(const uint8_t *p, size_t n, int64_t now) {
    size_t i = 0;
    while (i < n) {
        uint8_t op = p[i++];
        switch (op) {
        case 'e': {
            uint32_t o = u(p, n, &i, 1), size = u(p, n, &i, 4) % (2u << 20);
            uint8_t *v = fill(size, 'v');
            if (!v) return ws_fail("fuzzop: out of memory");
            ws_out r = {{&keybyte, 1}, {v, (int32_t)size}, NULL, 0, 0};
            if (o == 0) ws_emit(&out, &r);
            else if (o == 1) ws_emit(&side, &r);
            else {
                static uint8_t enc[64];
                ws_out small = {{&keybyte, 1}, {v, size < 8 ? (int32_t)size : 8}, NULL, 0, 0};
                ws_encode(enc, 0, -1, WS_ANY_PARTITION, o, &small);
                ws_host_emit(enc, (uint32_t)ws_encoded_size(&small));
            }
            break;
        }
        case 'p': {
            uint32_t kl = u(p, n, &i, 2) % 8192, vl = u(p, n, &i, 4) % (2u << 20);
            uint8_t *k = malloc(kl ? kl : 1);
            uint8_t *v = fill(vl, 'w');
            if (!k || !v) return ws_fail("fuzzop: out of memory");
            memset(k, keybyte, kl);
            ws_put(&st, k, kl, v, vl);
            free(k);
            break;
        }
        case 'd':
        case 'g':
        case 'm': {
            uint32_t kl = u(p, n, &i, 2) % 8192;
            uint8_t *k = malloc(kl ? kl : 1);
            if (!k) return ws_fail("fuzzop: out of memory");
            memset(k, keybyte, kl);
            if (op == 'd') ws_delete(&st, k, kl);
            else if (op == 'g') ws_get(&st, k, kl, &got);
            else ws_commit_mark(k, kl);
            free(k);
            break;
        }
        case 's': {
            uint32_t c = u(p, n, &i, 1) % 24, steps = u(p, n, &i, 1);
            for (uint32_t k = 0; k < c; k++) {
                ws_scan sc;
                if (ws_scan_open(&st, "", 0, "", 0, &sc) < 0) continue;
                ws_bytes kk, vv;
                for (uint32_t s = 0; s < steps; s++)
                    if (ws_scan_next(&sc, &kk, &vv) <= 0) break;
                ws_buf_free(&sc.buf); /* the cursor stays open: the host closes it */
            }
            break;
        }
        case 't':
        case 'c': {
            uint32_t kind = u(p, n, &i, 1) % 3;
            int32_t delta = (int32_t)u(p, n, &i, 4);
            if (op == 't') ws_timer_set(kind, now + delta, &keybyte, 1);
            else ws_timer_cancel(kind, now + delta, &keybyte, 1);
            break;
        }
        case 'l': {
            uint32_t len = u(p, n, &i, 2) % 16384, times = u(p, n, &i, 2) % 2000;
            uint8_t *msg = fill(len, 'L');
            if (!msg) return ws_fail("fuzzop: out of memory");
            for (uint32_t k = 0; k < times; k++) ws_log(WS_LOG_INFO, (const char *)msg, len);
            break;
        }
        case 'G': {
            uint32_t pages = u(p, n, &i, 2) % 4096;
            uint8_t *m = malloc((size_t)pages << 16);
            if (!m) break; /* the memory limit said no: fine */
            for (size_t k = 0; k < ((size_t)pages << 16); k += 4096) m[k] = 1;
            sink += m[0];
            /* kept: memory only grows, as a leaking plugin's does */
            break;
        }
        case 'S': {
            uint32_t iters = u(p, n, &i, 4) % 1000000;
            for (uint64_t k = 0; k < (uint64_t)iters * 1000; k++) sink += k;
            break;
        }
        case 'r':
            sink += (uint64_t)recurse((int)(u(p, n, &i, 2) % 60000));
            break;
        case 'T':
            __builtin_trap();
        case 'f':
            return ws_fail("fuzzop: the program failed the call");
        case 'x':
            keybyte = (uint8_t)u(p, n, &i, 1);
            break;
        default:
            break; /* not an op: skipped */
        }
    }
    return WS_OK;
}

/* Decodes the hex string after "name":" in the config into b. */
static void program(const char *name, ws_buf *b) {
    char pat[32];
    size_t pl = strlen(name);
    pat[0] = '"';
    memcpy(pat + 1, name, pl);
    memcpy(pat + 1 + pl, "\":\"", 4);
    const char *c = (const char *)cfg.data, *end = c + cfg.len;
    size_t patl = strlen(pat);
    for (; c + patl <= end; c++) {
        if (memcmp(c, pat, patl) != 0) continue;
        c += patl;
        size_t n = 0;
        while (c + n < end && c[n] != '"') n++;
        b->data = malloc(n / 2 + 1);
        if (!b->data) return;
        for (size_t k = 0; k + 1 < n; k += 2) {
            char h[3] = {c[k], c[k + 1], 0};
            b->data[b->len++] = (uint8_t)strtoul(h, NULL, 16);
        }
        return;
    }
}

int ws_init(void) {
    if (ws_config(&cfg) < 0) return ws_fail("fuzzop: no config");
    program("timer", &timer_prog);
    program("commit", &commit_prog);
    return WS_OK;
}

int ws_process(const ws_record *r) {
    return run(r->value.ptr, r->value.len < 0 ? 0 : (size_t)r->value.len, r->timestamp);
}

int ws_on_timer(const ws_trigger *t) { return run(timer_prog.data, timer_prog.len, t->time); }

int ws_on_commit(const ws_trigger *t) { return run(commit_prog.data, commit_prog.len, t->time); }
