/*
 * wordcount: splits each record's value into words, keeps a running count
 * per word in the store "counts" (8-byte big-endian) and emits word -> count
 * to the output "counts" for each distinct word of the record, in order of
 * first appearance, like plugins/wordcount in Go (see its README.md).
 * Config: {"value_format": "decimal" | "int64"}.
 *
 * Words are maximal runs of letters and digits, lowercased. Without
 * Unicode tables (they would dwarf the plugin) the letters are those of
 * ASCII, Latin-1, Latin Extended-A and -B, Greek, Cyrillic, and the CJK,
 * Hiragana, Katakana and Hangul blocks, lowercased by their simple mappings
 * in ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic; everything else
 * (punctuation, symbols, other scripts, invalid UTF-8) separates words.
 * That is the Go plugin's rule (unicode.IsLetter, IsDigit, ToLower) for
 * text in those scripts; it differs for capitals of Latin Extended-B (kept
 * as they are), for letters of other scripts and for non-ASCII digits
 * (separators here).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wasmstream.h"

static ws_output out = WS_OUTPUT("counts");
static ws_store store = WS_STORE("counts");
static int decimal = 1;

/* Per-record scratch, reused: the words one after another, their ends, the
 * distinct ones with their count in the record. */
static uint8_t *text;
static size_t text_len, text_cap;
static size_t *ends, n_ends, cap_ends;
typedef struct {
    size_t start, end;
    uint64_t n;
} word;
static word *distinct;
static size_t n_distinct, cap_distinct;
static ws_buf val;

static void *grow(void *p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return p;
    size_t n = *cap ? *cap * 2 : 64;
    while (n < need) n *= 2;
    void *q = realloc(p, n * elem);
    if (!q) abort(); /* out of memory: the host fails the record */
    *cap = n;
    return q;
}

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

/* The next code point of s[*i..n] (advancing *i), or -1 for invalid UTF-8
 * (advancing one byte). */
static int32_t next_rune(const uint8_t *s, size_t n, size_t *i) {
    uint8_t c = s[*i];
    if (c < 0x80) return (*i)++, c;
    int len = c >= 0xf0 && c < 0xf5 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
    if (len == 0 || *i + (size_t)len > n) return (*i)++, -1;
    int32_t r = c & (0x3f >> (len - 1));
    for (int k = 1; k < len; k++) {
        if ((s[*i + k] & 0xc0) != 0x80) return (*i)++, -1;
        r = r << 6 | (s[*i + k] & 0x3f);
    }
    static const int32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (r < min[len] || r > 0x10ffff || (r >= 0xd800 && r < 0xe000)) return (*i)++, -1;
    *i += (size_t)len;
    return r;
}

/* The lowercase of a word character, or -1 if r is not one. */
static int32_t word_lower(int32_t r) {
    if (r < 0x80) {
        if (r >= 'A' && r <= 'Z') return r + 32;
        if ((r >= 'a' && r <= 'z') || (r >= '0' && r <= '9')) return r;
        return -1;
    }
    if (r == 0xaa || r == 0xb5 || r == 0xba) return r; /* ª µ º: lowercase already */
    if (r >= 0xc0 && r <= 0xde && r != 0xd7) return r + 32;
    if (r >= 0xdf && r <= 0xff && r != 0xf7) return r;
    if (r >= 0x100 && r <= 0x17f) { /* Latin Extended-A: pairs */
        if (r == 0x130) return 0x69; /* İ -> i (Go's simple mapping) */
        if (r == 0x131 || r == 0x138 || r == 0x149 || r == 0x17f) return r;
        if (r == 0x178) return 0xff;
        if ((r >= 0x139 && r <= 0x148) || (r >= 0x179 && r <= 0x17e)) return (r & 1) ? r + 1 : r;
        return (r & 1) ? r : r + 1;
    }
    if (r >= 0x180 && r <= 0x24f) return r;
    if (r >= 0x391 && r <= 0x3ab && r != 0x3a2) return r + 32; /* Greek capitals */
    if (r == 0x386) return 0x3ac;
    if (r >= 0x388 && r <= 0x38a) return r + 37;
    if (r == 0x38c) return 0x3cc;
    if (r == 0x38e || r == 0x38f) return r + 63;
    if ((r >= 0x3ac && r <= 0x3ce) || r == 0x390) return r;
    if (r >= 0x410 && r <= 0x42f) return r + 32; /* Cyrillic */
    if (r >= 0x400 && r <= 0x40f) return r + 80;
    if (r >= 0x430 && r <= 0x45f) return r;
    if (r >= 0x460 && r <= 0x481) return (r & 1) ? r : r + 1;
    if (r >= 0x48a && r <= 0x4bf) return (r & 1) ? r : r + 1;
    if (r >= 0x4d0 && r <= 0x52f) return (r & 1) ? r : r + 1;
    if ((r >= 0x3040 && r <= 0x309f && r != 0x309b && r != 0x309c) || (r >= 0x30a1 && r <= 0x30fa) ||
        (r >= 0x4e00 && r <= 0x9fff) || (r >= 0xac00 && r <= 0xd7a3))
        return r;
    return -1;
}

static void put_rune(int32_t r) {
    text = grow(text, &text_cap, text_len + 4, 1);
    if (r < 0x80) text[text_len++] = (uint8_t)r;
    else if (r < 0x800) {
        text[text_len++] = (uint8_t)(0xc0 | r >> 6);
        text[text_len++] = (uint8_t)(0x80 | (r & 0x3f));
    } else if (r < 0x10000) {
        text[text_len++] = (uint8_t)(0xe0 | r >> 12);
        text[text_len++] = (uint8_t)(0x80 | (r >> 6 & 0x3f));
        text[text_len++] = (uint8_t)(0x80 | (r & 0x3f));
    } else {
        text[text_len++] = (uint8_t)(0xf0 | r >> 18);
        text[text_len++] = (uint8_t)(0x80 | (r >> 12 & 0x3f));
        text[text_len++] = (uint8_t)(0x80 | (r >> 6 & 0x3f));
        text[text_len++] = (uint8_t)(0x80 | (r & 0x3f));
    }
}

/* Ends the word being built, skipping it if it is over WS_MAX_KEY_SIZE. */
static void flush(size_t *start) {
    if (text_len == *start) return;
    if (text_len - *start > WS_MAX_KEY_SIZE) {
        text_len = *start;
        return;
    }
    ends = grow(ends, &cap_ends, n_ends + 1, sizeof *ends);
    ends[n_ends++] = text_len;
    *start = text_len;
}

static void split(const uint8_t *s, size_t n) {
    text_len = n_ends = 0;
    size_t start = 0;
    for (size_t i = 0; i < n;) {
        int32_t r = next_rune(s, n, &i);
        int32_t l = r < 0 ? -1 : word_lower(r);
        if (l < 0) flush(&start);
        else put_rune(l);
    }
    flush(&start);
}

int ws_process(const ws_record *r) {
    split(r->value.ptr, r->value.len > 0 ? (size_t)r->value.len : 0);
    n_distinct = 0;
    size_t start = 0;
    for (size_t i = 0; i < n_ends; i++) {
        size_t end = ends[i], j;
        for (j = 0; j < n_distinct; j++) {
            word *d = &distinct[j];
            if (d->end - d->start == end - start && memcmp(text + d->start, text + start, end - start) == 0) break;
        }
        if (j < n_distinct) distinct[j].n++;
        else {
            distinct = grow(distinct, &cap_distinct, n_distinct + 1, sizeof *distinct);
            distinct[n_distinct++] = (word){start, end, 1};
        }
        start = end;
    }
    for (size_t i = 0; i < n_distinct; i++) {
        const uint8_t *key = text + distinct[i].start;
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
