/*
 * words.h: the word rule of the C plugins that split text (wordcount,
 * split), in one place so that they split alike. Header-only (static
 * functions): each plugin is built from its own .c file and the SDK.
 *
 * Words are maximal runs of letters and digits, lowercased, at most
 * WS_MAX_KEY_SIZE bytes (a longer run is dropped, as the Go plugins drop
 * a word that could not be a key). Without Unicode tables (they would
 * dwarf the plugin) the letters are those of ASCII, Latin-1, Latin
 * Extended-A and -B, Greek, Cyrillic, and the CJK, Hiragana, Katakana and
 * Hangul blocks, lowercased by their simple mappings in ASCII, Latin-1,
 * Latin Extended-A, Greek and Cyrillic; everything else (punctuation,
 * symbols, other scripts, invalid UTF-8) separates words. That is the Go
 * plugins' rule (plugins/internal/words: unicode.IsLetter, IsDigit,
 * ToLower) for text in those scripts; it differs for capitals of Latin
 * Extended-B (kept as they are), for letters of other scripts and for
 * non-ASCII digits (separators here).
 */
#ifndef WASMSTREAM_PLUGINS_WORDS_H
#define WASMSTREAM_PLUGINS_WORDS_H

#include <stdint.h>
#include <stdlib.h>

#include "wasmstream.h"

/* The words of the last words_split, one after another in text; word i
 * is text[ends[i-1]..ends[i]) (ends[-1] being 0). The buffers are reused
 * from call to call. */
typedef struct {
    uint8_t *text;
    size_t len, cap;
    size_t *ends;
    size_t n, cap_ends;
} words;

/* p grown to hold need elements of elem bytes (doubling), *cap updated. */
static void *words_grow(void *p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return p;
    size_t n = *cap ? *cap * 2 : 64;
    while (n < need) n *= 2;
    void *q = realloc(p, n * elem);
    if (!q) abort(); /* out of memory: the host fails the record */
    *cap = n;
    return q;
}

/* The next code point of s[*i..n] (advancing *i), or -1 for invalid UTF-8
 * (advancing one byte). */
static int32_t words_next_rune(const uint8_t *s, size_t n, size_t *i) {
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
static int32_t words_lower(int32_t r) {
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

/* Appends r to w->text as UTF-8. */
static void words_put_rune(words *w, int32_t r) {
    w->text = words_grow(w->text, &w->cap, w->len + 4, 1);
    uint8_t *t = w->text;
    if (r < 0x80) t[w->len++] = (uint8_t)r;
    else if (r < 0x800) {
        t[w->len++] = (uint8_t)(0xc0 | r >> 6);
        t[w->len++] = (uint8_t)(0x80 | (r & 0x3f));
    } else if (r < 0x10000) {
        t[w->len++] = (uint8_t)(0xe0 | r >> 12);
        t[w->len++] = (uint8_t)(0x80 | (r >> 6 & 0x3f));
        t[w->len++] = (uint8_t)(0x80 | (r & 0x3f));
    } else {
        t[w->len++] = (uint8_t)(0xf0 | r >> 18);
        t[w->len++] = (uint8_t)(0x80 | (r >> 12 & 0x3f));
        t[w->len++] = (uint8_t)(0x80 | (r >> 6 & 0x3f));
        t[w->len++] = (uint8_t)(0x80 | (r & 0x3f));
    }
}

/* Ends the word being built at *start, dropping it if it is over
 * WS_MAX_KEY_SIZE. */
static void words_flush(words *w, size_t *start) {
    if (w->len == *start) return;
    if (w->len - *start > WS_MAX_KEY_SIZE) {
        w->len = *start;
        return;
    }
    w->ends = words_grow(w->ends, &w->cap_ends, w->n + 1, sizeof *w->ends);
    w->ends[w->n++] = w->len;
    *start = w->len;
}

/* Splits s[0..n) into w's words, replacing what it held. */
static void words_split(words *w, const uint8_t *s, size_t n) {
    w->len = w->n = 0;
    size_t start = 0;
    for (size_t i = 0; i < n;) {
        int32_t r = words_next_rune(s, n, &i);
        int32_t l = r < 0 ? -1 : words_lower(r);
        if (l < 0) words_flush(w, &start);
        else words_put_rune(w, l);
    }
    words_flush(w, &start);
}

#endif
