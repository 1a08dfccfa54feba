/*
 * wordcount: splits each record's value into words, keeps a running count
 * per word in the store "counts" (8-byte big-endian) and emits word -> count
 * to the output "counts" for each distinct word of the record, in order of
 * first appearance (emit: update), or once per commit window for each word
 * that changed in it (emit: commit, through commit marks), like
 * plugins/wordcount in Go (see its README.md).
 * Config: {"value_format": "decimal" | "int64", "emit": "update" | "commit"}.
 *
 * Words are those of ../common/words.h (shared with split): runs of letters
 * and digits, lowercased, the Go plugin's rule for text in the scripts
 * that file lists.
 *
 * Build with wasmstream_time.c (commit marks and ws_on_commit): the
 * Makefile's c-plugins and internal/polybuild link it into this plugin.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/words.h"
#include "wasmstream.h"
#include "wasmstream_time.h"

static ws_output out = WS_OUTPUT("counts");
static ws_store store = WS_STORE("counts");
/* value_format: decimal text (1) or an 8-byte big-endian integer, the
 * format of Kafka's LongSerializer (0). */
static int decimal = 1;
/* emit: commit (1): a record only updates the counts and marks its words;
 * ws_on_commit emits each marked word's count once per commit window. */
static int at_commit = 0;

/* Per-record scratch, reused: the record's words, the distinct ones with
 * their count in the record, the stored count. */
static words scratch;
typedef struct {
    size_t start, end;
    uint64_t n;
} word;
static word *distinct;
static size_t n_distinct, cap_distinct;
static ws_buf val;

/* The config's error text (one at a time: init reads it at once). */
static char config_err[160];

/* The index of the first byte at or after i that is not white space. */
static size_t skip(const uint8_t *c, size_t n, size_t i) {
    while (i < n && (c[i] == ' ' || c[i] == '\t' || c[i] == '\r' || c[i] == '\n')) i++;
    return i;
}

/* The string (without escapes) that starts with a quote at *i: its start
 * and length, *i past its closing quote; -1 if there is none. */
static int quoted(const uint8_t *c, size_t n, size_t *i, size_t *start, size_t *len) {
    if (*i >= n || c[*i] != '"') return -1;
    const uint8_t *q = memchr(c + *i + 1, '"', n - *i - 1);
    if (!q) return -1;
    *start = *i + 1;
    *len = (size_t)(q - c) - *start;
    *i = (size_t)(q - c) + 1;
    return 0;
}

/* Reads the config, a flat JSON object of string fields (the host hands
 * the processor's YAML config as JSON), without a JSON library: the
 * values of "value_format" and "emit" into fmt and mode (each cap bytes,
 * holding the default), truncated to fit. Returns NULL or the error. */
static const char *read_config(const uint8_t *c, size_t n, char *fmt, char *mode, size_t cap) {
    size_t i = skip(c, n, 0);
    if (i == n || (n - i >= 4 && memcmp(c + i, "null", 4) == 0 && skip(c, n, i + 4) == n)) return NULL;
    if (c[i] != '{') return "wordcount: config: not a JSON object";
    i = skip(c, n, i + 1);
    if (i < n && c[i] == '}') return skip(c, n, i + 1) == n ? NULL : "wordcount: config: cannot read the config";
    for (;;) {
        size_t k, kl, v, vl;
        if (quoted(c, n, &i, &k, &kl) < 0) return "wordcount: config: cannot read the config";
        i = skip(c, n, i);
        if (i >= n || c[i] != ':') return "wordcount: config: cannot read the config";
        i = skip(c, n, i + 1);
        char *dst;
        if (kl == 12 && memcmp(c + k, "value_format", 12) == 0) dst = fmt;
        else if (kl == 4 && memcmp(c + k, "emit", 4) == 0) dst = mode;
        else {
            snprintf(config_err, sizeof config_err, "wordcount: config: unknown field \"%.*s\" (known: emit, value_format)",
                     kl > 64 ? 64 : (int)kl, (const char *)c + k);
            return config_err;
        }
        if (quoted(c, n, &i, &v, &vl) < 0) {
            snprintf(config_err, sizeof config_err, "wordcount: config: \"%s\": must be a string",
                     dst == fmt ? "value_format" : "emit");
            return config_err;
        }
        size_t l = vl < cap - 1 ? vl : cap - 1;
        memcpy(dst, c + v, l);
        dst[l] = 0;
        i = skip(c, n, i);
        if (i < n && c[i] == '}') return skip(c, n, i + 1) == n ? NULL : "wordcount: config: cannot read the config";
        if (i >= n || c[i] != ',') return "wordcount: config: cannot read the config";
        i = skip(c, n, i + 1);
    }
}

int ws_init(void) {
    ws_buf c = {0};
    char fmt[32] = "decimal", mode[32] = "update";
    int32_t n = ws_config(&c);
    const char *err = read_config(c.data, n > 0 ? (size_t)n : 0, fmt, mode, sizeof fmt);
    ws_buf_free(&c);
    if (err) return ws_fail(err);
    char m[128];
    if (strcmp(fmt, "decimal") && strcmp(fmt, "int64")) {
        snprintf(m, sizeof m, "wordcount: config: \"value_format\": must be \"decimal\" or \"int64\"; got \"%s\"", fmt);
        return ws_fail(m);
    }
    if (strcmp(mode, "update") && strcmp(mode, "commit")) {
        snprintf(m, sizeof m, "wordcount: config: \"emit\": must be \"update\" or \"commit\"; got \"%s\"", mode);
        return ws_fail(m);
    }
    int32_t e = ws_store_check(&store);
    if (e < 0) return ws_fail_call("store_index", store.name, e);
    e = ws_output_check(&out);
    if (e < 0) return ws_fail_call("output_index", out.name, e);
    decimal = strcmp(fmt, "decimal") == 0;
    at_commit = strcmp(mode, "commit") == 0;
    return WS_OK;
}

/* Reads the stored count of key into *total: 1 if there is one, 0 if not,
 * or -1 with the call failed (ws_fail). Counts are 8-byte big-endian. */
static int stored_count(const uint8_t *key, size_t kl, uint64_t *total) {
    int32_t got = ws_get(&store, key, kl, &val);
    if (got < 0) {
        ws_fail_call("state_get", store.name, got);
        return -1;
    }
    if (got == 0) return 0;
    if (val.len != 8) {
        char m[WS_MAX_KEY_SIZE + 128];
        snprintf(m, sizeof m, "wordcount: store \"counts\" holds %zu bytes for word \"%.*s\", want an 8-byte count",
                 val.len, (int)kl, (const char *)key);
        ws_fail(m);
        return -1;
    }
    uint64_t n = 0;
    for (int k = 0; k < 8; k++) n = n << 8 | val.data[k];
    *total = n;
    return 1;
}

/* Writes v into b as 8 bytes big-endian (a stored count). */
static void be64(uint8_t b[8], uint64_t v) {
    for (int k = 0; k < 8; k++) b[k] = (uint8_t)(v >> (56 - 8 * k));
}

/* Emits word -> total as decimal text or 8 bytes (value_format). The SDK
 * stamps it with the record's timestamp, or in ws_on_commit the one the
 * host kept with the mark. */
static int emit_count(const uint8_t *key, size_t kl, uint64_t total) {
    uint8_t be[8];
    char dec[24];
    be64(be, total);
    ws_out o = {{key, (int32_t)kl}, {be, 8}, NULL, 0, 0};
    if (decimal) {
        int dl = snprintf(dec, sizeof dec, "%llu", (unsigned long long)total);
        o.value = (ws_bytes){(const uint8_t *)dec, dl};
    }
    int32_t e = ws_emit(&out, &o);
    return e < 0 ? ws_fail_call("emit", out.name, e) : WS_OK;
}

int ws_process(const ws_record *r) {
    words_split(&scratch, r->value.ptr, r->value.len > 0 ? (size_t)r->value.len : 0);
    n_distinct = 0;
    size_t start = 0;
    for (size_t i = 0; i < scratch.n; i++) {
        size_t end = scratch.ends[i], j;
        for (j = 0; j < n_distinct; j++) {
            word *d = &distinct[j];
            if (d->end - d->start == end - start && memcmp(scratch.text + d->start, scratch.text + start, end - start) == 0) break;
        }
        if (j < n_distinct) distinct[j].n++;
        else {
            distinct = words_grow(distinct, &cap_distinct, n_distinct + 1, sizeof *distinct);
            distinct[n_distinct++] = (word){start, end, 1};
        }
        start = end;
    }
    for (size_t i = 0; i < n_distinct; i++) {
        const uint8_t *key = scratch.text + distinct[i].start;
        size_t kl = distinct[i].end - distinct[i].start;
        uint64_t total = 0;
        if (stored_count(key, kl, &total) < 0) return WS_FAILED;
        total += distinct[i].n;
        uint8_t be[8];
        be64(be, total);
        int32_t e = ws_put(&store, key, kl, be, 8);
        if (e < 0) return ws_fail_call("state_put", store.name, e);
        if (at_commit) {
            /* Marks are staged like state writes: a record that fails
             * after this leaves none. */
            e = ws_commit_mark(key, kl);
            if (e >= 0) continue;
            if (e != -WS_ELIMIT) return ws_fail_call("commit_mark", NULL, e);
            /* The window holds as many marked keys as the host allows
             * (limits.commit_marks): this word's count goes out now
             * instead, as in update mode. */
        }
        if (emit_count(key, kl, total) != WS_OK) return WS_FAILED;
    }
    return WS_OK;
}

/* The commit callback of emit: commit, once per word marked in the ending
 * window, in key order: it emits the word's count as it stands at the end
 * of the window, with the timestamp of the last record that changed it. */
int ws_on_commit(const ws_trigger *t) {
    uint64_t total;
    int st = stored_count(t->key.ptr, ws_len(t->key), &total);
    /* Not found: only a time to live on the store removes a count, and it
     * expired after the record that marked it; there is no count to emit. */
    if (st <= 0) return st == 0 ? WS_OK : WS_FAILED;
    return emit_count(t->key.ptr, ws_len(t->key), total);
}
