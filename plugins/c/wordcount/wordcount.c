/*
 * wordcount: splits each record's value into words, keeps a running count
 * per word in the store "counts" (8-byte big-endian) and emits word -> count
 * to the output "counts" for each distinct word of the record, in order of
 * first appearance, like plugins/wordcount in Go (see its README.md).
 * Config: {"value_format": "decimal" | "int64"}.
 *
 * Words are those of ../common/words.h (shared with split): runs of letters
 * and digits, lowercased, the Go plugin's rule for text in the scripts
 * that file lists.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/words.h"
#include "wasmstream.h"

static ws_output out = WS_OUTPUT("counts");
static ws_store store = WS_STORE("counts");
static int decimal = 1;

/* Per-record scratch, reused: the record's words, the distinct ones with
 * their count in the record. */
static words scratch;
typedef struct {
    size_t start, end;
    uint64_t n;
} word;
static word *distinct;
static size_t n_distinct, cap_distinct;
static ws_buf val;

/* The value of "value_format" (a flat config object), or an error text. */
static const char *value_format(const uint8_t *c, size_t n, char *fmt, size_t cap) {
    strcpy(fmt, "decimal");
    size_t i = 0;
    while (i < n && (c[i] == ' ' || c[i] == '\t' || c[i] == '\r' || c[i] == '\n')) i++;
    if (i == n || (n - i >= 4 && memcmp(c + i, "null", 4) == 0)) return NULL;
    if (c[i] != '{') return "wordcount: config: not a JSON object";
    for (i++; i < n;) {
        while (i < n && (c[i] == ' ' || c[i] == ',' || c[i] == '\t' || c[i] == '\r' || c[i] == '\n')) i++;
        if (i < n && c[i] == '}') return NULL;
        if (i >= n || c[i] != '"') return "wordcount: config: cannot read the config";
        size_t k = ++i;
        while (i < n && c[i] != '"') i++;
        if (i - k != 12 || memcmp(c + k, "value_format", 12) != 0)
            return "wordcount: config: unknown field (known: value_format)";
        for (i++; i < n && (c[i] == ' ' || c[i] == ':'); i++) {
        }
        if (i >= n || c[i] != '"') return "wordcount: config: \"value_format\": must be a string";
        size_t v = ++i;
        while (i < n && c[i] != '"') i++;
        size_t l = i - v < cap - 1 ? i - v : cap - 1;
        memcpy(fmt, c + v, l);
        fmt[l] = 0;
        i++;
    }
    return "wordcount: config: cannot read the config";
}

int ws_init(void) {
    ws_buf c = {0};
    char fmt[32];
    int32_t n = ws_config(&c);
    const char *err = value_format(c.data, n > 0 ? (size_t)n : 0, fmt, sizeof fmt);
    ws_buf_free(&c);
    if (err) return ws_fail(err);
    if (strcmp(fmt, "decimal") && strcmp(fmt, "int64")) {
        char m[128];
        snprintf(m, sizeof m, "wordcount: config: \"value_format\": must be \"decimal\" or \"int64\"; got \"%s\"", fmt);
        return ws_fail(m);
    }
    int32_t e = ws_store_check(&store);
    if (e < 0) return ws_fail_call("store_index", store.name, e);
    e = ws_output_check(&out);
    if (e < 0) return ws_fail_call("output_index", out.name, e);
    decimal = strcmp(fmt, "decimal") == 0;
    return WS_OK;
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
        int32_t got = ws_get(&store, key, kl, &val);
        if (got < 0) return ws_fail_call("state_get", store.name, got);
        uint64_t total = distinct[i].n;
        if (got == 1) {
            if (val.len != 8) {
                char m[WS_MAX_KEY_SIZE + 128];
                snprintf(m, sizeof m, "wordcount: store \"counts\" holds %zu bytes for word \"%.*s\", want an 8-byte count",
                         val.len, (int)kl, (const char *)key);
                return ws_fail(m);
            }
            uint64_t c = 0;
            for (int k = 0; k < 8; k++) c = c << 8 | val.data[k];
            total += c;
        }
        uint8_t be[8];
        for (int k = 0; k < 8; k++) be[k] = (uint8_t)(total >> (56 - 8 * k));
        int32_t e = ws_put(&store, key, kl, be, 8);
        if (e < 0) return ws_fail_call("state_put", store.name, e);
        char dec[24];
        ws_out o = {{key, (int32_t)kl}, {be, 8}, NULL, 0, 0};
        if (decimal) {
            int dl = snprintf(dec, sizeof dec, "%llu", (unsigned long long)total);
            o.value = (ws_bytes){(const uint8_t *)dec, dl};
        }
        e = ws_emit(&out, &o);
        if (e < 0) return ws_fail_call("emit", out.name, e);
    }
    return WS_OK;
}
