/* wasmstream_fake.c: the fake host of wasmstream_fake.h (native builds). */
#include "wasmstream_fake.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint8_t *k, *v;
    size_t kl, vl;
} entry;

typedef struct {
    char *name;
    entry *e;
    size_t n, cap;
} store;

typedef struct {
    int open;
    entry *e; /* a snapshot of the range at open */
    size_t n, pos;
} cursor;

typedef struct {
    char *output;
    uint8_t *raw;
    size_t len;
} emitted;

struct ws_fake {
    char **outputs;
    int n_outputs;
    store *stores;
    int n_stores;
    char *config;
    int phase; /* 0 idle, 1 init, 2 record */
    char err[WS_MAX_LOG_SIZE + 1];
    int err_set, host_fail;
    emitted *em;
    size_t n_em, cap_em;
    cursor cur[WS_MAX_OPEN_CURSORS * 4];
    int n_cur;
    char **logs;
    uint32_t *levels;
    size_t n_logs;
};

static ws_fake *active;

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "wasmstream_fake: out of memory\n");
        abort();
    }
    return p;
}

static uint8_t *dup(const void *p, size_t n) {
    uint8_t *d = xmalloc(n);
    if (n) memcpy(d, p, n);
    return d;
}

static int cmpstr(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

ws_fake *ws_fake_new(const char *const *outputs, int n_outputs, const char *const *stores, int n_stores,
                     const char *config) {
    ws_fake *h = calloc(1, sizeof *h);
    h->outputs = xmalloc(sizeof(char *) * (size_t)n_outputs);
    for (int i = 0; i < n_outputs; i++) h->outputs[i] = (char *)dup(outputs[i], strlen(outputs[i]) + 1);
    qsort(h->outputs, (size_t)n_outputs, sizeof(char *), cmpstr);
    h->n_outputs = n_outputs;
    char **names = xmalloc(sizeof(char *) * (size_t)n_stores);
    for (int i = 0; i < n_stores; i++) names[i] = (char *)dup(stores[i], strlen(stores[i]) + 1);
    qsort(names, (size_t)n_stores, sizeof(char *), cmpstr);
    h->stores = calloc((size_t)n_stores + 1, sizeof(store));
    for (int i = 0; i < n_stores; i++) h->stores[i].name = names[i];
    free(names);
    h->n_stores = n_stores;
    h->config = (char *)dup(config ? config : "", config ? strlen(config) + 1 : 1);
    return h;
}

static void clear_emits(ws_fake *h) {
    for (size_t i = 0; i < h->n_em; i++) free(h->em[i].raw);
    h->n_em = 0;
}

static void close_cursors(ws_fake *h) {
    for (int i = 0; i < h->n_cur; i++) {
        for (size_t j = 0; j < h->cur[i].n; j++) free(h->cur[i].e[j].k), free(h->cur[i].e[j].v);
        free(h->cur[i].e);
    }
    h->n_cur = 0;
}

static void free_entries(store *s) {
    for (size_t j = 0; j < s->n; j++) free(s->e[j].k), free(s->e[j].v);
    free(s->e);
}

void ws_fake_free(ws_fake *h) {
    if (active == h) active = NULL;
    clear_emits(h);
    close_cursors(h);
    free(h->em);
    for (int i = 0; i < h->n_outputs; i++) free(h->outputs[i]);
    free(h->outputs);
    for (int i = 0; i < h->n_stores; i++) free(h->stores[i].name), free_entries(&h->stores[i]);
    free(h->stores);
    for (size_t i = 0; i < h->n_logs; i++) free(h->logs[i]);
    free(h->logs);
    free(h->levels);
    free(h->config);
    free(h);
}

static void begin(ws_fake *h, int phase) {
    active = h;
    h->phase = phase;
    h->err[0] = 0;
    h->err_set = h->host_fail = 0;
    clear_emits(h);
    close_cursors(h);
}

static int end(ws_fake *h, int st) {
    h->phase = 0;
    close_cursors(h);
    if (st == WS_OK && !h->host_fail) return WS_OK;
    if (!h->err_set && !h->host_fail)
        snprintf(h->err, sizeof h->err, st == WS_FAILED ? "failed without set_error" : "unknown status %d", st);
    clear_emits(h);
    return st == WS_OK ? WS_FAILED : st;
}

int ws_fake_start(ws_fake *h) {
    ws_sdk_reset();
    begin(h, 1);
    int st = end(h, ws_sdk_init());
    if (st == WS_OK) ws_sdk_input(4096);
    return st;
}

/* Deep copies of the stores, to discard a failed record's writes. */
static store *snapshot(const ws_fake *h) {
    store *s = calloc((size_t)h->n_stores + 1, sizeof(store));
    for (int i = 0; i < h->n_stores; i++) {
        s[i].n = s[i].cap = h->stores[i].n;
        s[i].e = xmalloc(sizeof(entry) * (s[i].n + 1));
        for (size_t j = 0; j < s[i].n; j++) {
            entry *e = &h->stores[i].e[j];
            s[i].e[j] = (entry){dup(e->k, e->kl), dup(e->v, e->vl), e->kl, e->vl};
        }
    }
    return s;
}

int ws_fake_process(ws_fake *h, const uint8_t *rec, size_t len) {
    active = h;
    uint8_t *buf = ws_sdk_input((uint32_t)len);
    if (!buf) {
        fprintf(stderr, "wasmstream_fake: the SDK refused a %zu-byte input buffer\n", len);
        abort();
    }
    memcpy(buf, rec, len);
    store *saved = snapshot(h);
    begin(h, 2);
    int st = end(h, ws_sdk_process((uint32_t)len));
    store *drop = st == WS_OK ? saved : h->stores;
    if (st != WS_OK) {
        for (int i = 0; i < h->n_stores; i++) saved[i].name = h->stores[i].name;
        h->stores = saved;
    }
    for (int i = 0; i < h->n_stores; i++) free_entries(&drop[i]);
    free(drop);
    return st;
}

int ws_fake_process_kv(ws_fake *h, ws_bytes key, ws_bytes value, int64_t timestamp) {
    ws_out o = {key, value, NULL, 0, 0};
    size_t n = ws_encoded_size(&o);
    uint8_t *b = xmalloc(n);
    ws_encode(b, timestamp, 0, 0, 0, &o);
    int st = ws_fake_process(h, b, n);
    free(b);
    return st;
}

const char *ws_fake_error(const ws_fake *h) { return h->err; }
size_t ws_fake_emitted_count(const ws_fake *h) { return h->n_em; }

const char *ws_fake_emitted(const ws_fake *h, size_t i, ws_record *rec) {
    if (i >= h->n_em) return NULL;
    ws_decode(h->em[i].raw, h->em[i].len, rec);
    return h->em[i].output;
}

static store *find_store(const ws_fake *h, uint32_t i) { return i < (uint32_t)h->n_stores ? &h->stores[i] : NULL; }

static int keycmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl) {
    size_t n = al < bl ? al : bl;
    int c = n ? memcmp(a, b, n) : 0;
    if (c) return c;
    return al < bl ? -1 : al > bl;
}

/* The position of key in s, or where it would go (*found = 0). */
static size_t search(const store *s, const uint8_t *k, size_t kl, int *found) {
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = keycmp(s->e[mid].k, s->e[mid].kl, k, kl);
        if (c == 0) {
            *found = 1;
            return mid;
        }
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    *found = 0;
    return lo;
}

int ws_fake_get(const ws_fake *h, const char *name, const void *key, size_t key_len, ws_bytes *val) {
    for (int i = 0; i < h->n_stores; i++) {
        if (strcmp(h->stores[i].name, name)) continue;
        int found;
        size_t p = search(&h->stores[i], key, key_len, &found);
        if (!found) return 0;
        val->ptr = h->stores[i].e[p].v;
        val->len = (int32_t)h->stores[i].e[p].vl;
        return 1;
    }
    return 0;
}

size_t ws_fake_log_count(const ws_fake *h) { return h->n_logs; }
const char *ws_fake_log(const ws_fake *h, size_t i, uint32_t *level) {
    if (i >= h->n_logs) return NULL;
    if (level) *level = h->levels[i];
    return h->logs[i];
}

/* ---- the host functions ---- */

static ws_fake *cur(void) {
    if (!active) {
        fprintf(stderr, "wasmstream_fake: a host call with no fake host started\n");
        abort();
    }
    return active;
}

static int32_t write_if_fits(void *out, uint32_t cap, const void *b, size_t n) {
    if (n <= cap && n) memcpy(out, b, n);
    return (int32_t)n;
}

int32_t ws_host_emit(const void *rec, uint32_t len) {
    ws_fake *h = cur();
    if (h->phase != 2) return -WS_EPHASE;
    if (len > WS_MAX_RECORD_SIZE) return -WS_ETOOLARGE;
    ws_record r;
    if (ws_decode(rec, len, &r) < 0) return -WS_EINVAL;
    if (r.input >= (uint32_t)h->n_outputs) {
        h->host_fail = 1;
        snprintf(h->err, sizeof h->err, "emit to undeclared output index %u", r.input);
        return -WS_ENOOUTPUT;
    }
    if (h->n_em == h->cap_em) {
        h->cap_em = h->cap_em ? 2 * h->cap_em : 8;
        h->em = realloc(h->em, h->cap_em * sizeof(emitted));
    }
    h->em[h->n_em++] = (emitted){h->outputs[r.input], dup(rec, len), len};
    return 0;
}

static int32_t index_of(char **names, int n, const void *name, uint32_t len) {
    for (int i = 0; i < n; i++)
        if (strlen(names[i]) == len && memcmp(names[i], name, len) == 0) return i;
    return -WS_ENONAME;
}

int32_t ws_host_output_index(const void *name, uint32_t len) {
    ws_fake *h = cur();
    return index_of(h->outputs, h->n_outputs, name, len);
}

int32_t ws_host_store_index(const void *name, uint32_t len) {
    ws_fake *h = cur();
    for (int i = 0; i < h->n_stores; i++)
        if (strlen(h->stores[i].name) == len && memcmp(h->stores[i].name, name, len) == 0) return i;
    return -WS_ENONAME;
}

int32_t ws_host_config(void *out, uint32_t cap) {
    ws_fake *h = cur();
    return write_if_fits(out, cap, h->config, strlen(h->config));
}

int32_t ws_host_log(uint32_t level, const void *msg, uint32_t len) {
    ws_fake *h = cur();
    if (level > WS_LOG_ERROR) return -WS_EINVAL;
    if (len > WS_MAX_LOG_SIZE) len = WS_MAX_LOG_SIZE;
    h->logs = realloc(h->logs, (h->n_logs + 1) * sizeof(char *));
    h->levels = realloc(h->levels, (h->n_logs + 1) * sizeof(uint32_t));
    char *m = xmalloc(len + 1);
    memcpy(m, msg, len);
    m[len] = 0;
    h->logs[h->n_logs] = m;
    h->levels[h->n_logs++] = level;
    return 0;
}

int32_t ws_host_set_error(const void *msg, uint32_t len) {
    ws_fake *h = cur();
    if (len > WS_MAX_LOG_SIZE) len = WS_MAX_LOG_SIZE;
    memcpy(h->err, msg, len);
    h->err[len] = 0;
    h->err_set = 1;
    return 0;
}

static int32_t state_check(ws_fake *h, uint32_t st, uint32_t key_len) {
    if (h->phase != 2) return -WS_EPHASE;
    if (!find_store(h, st)) return -WS_ENOSTORE;
    if (key_len > WS_MAX_KEY_SIZE) return -WS_ETOOLARGE;
    return 0;
}

int32_t ws_host_state_get(uint32_t st, const void *key, uint32_t key_len, void *out, uint32_t cap) {
    ws_fake *h = cur();
    int32_t e = state_check(h, st, key_len);
    if (e) return e;
    int found;
    store *s = find_store(h, st);
    size_t p = search(s, key, key_len, &found);
    if (!found) return -WS_ENOTFOUND;
    return write_if_fits(out, cap, s->e[p].v, s->e[p].vl);
}

int32_t ws_host_state_put(uint32_t st, const void *key, uint32_t key_len, const void *val, uint32_t val_len) {
    ws_fake *h = cur();
    int32_t e = state_check(h, st, key_len);
    if (e) return e;
    if (val_len > WS_MAX_VALUE_SIZE) return -WS_ETOOLARGE;
    int found;
    store *s = find_store(h, st);
    size_t p = search(s, key, key_len, &found);
    if (found) {
        free(s->e[p].v);
        s->e[p].v = dup(val, val_len);
        s->e[p].vl = val_len;
        return 0;
    }
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 16;
        s->e = realloc(s->e, s->cap * sizeof(entry));
    }
    memmove(&s->e[p + 1], &s->e[p], (s->n - p) * sizeof(entry));
    s->e[p] = (entry){dup(key, key_len), dup(val, val_len), key_len, val_len};
    s->n++;
    return 0;
}

int32_t ws_host_state_delete(uint32_t st, const void *key, uint32_t key_len) {
    ws_fake *h = cur();
    int32_t e = state_check(h, st, key_len);
    if (e) return e;
    int found;
    store *s = find_store(h, st);
    size_t p = search(s, key, key_len, &found);
    if (found) {
        free(s->e[p].k);
        free(s->e[p].v);
        memmove(&s->e[p], &s->e[p + 1], (s->n - p - 1) * sizeof(entry));
        s->n--;
    }
    return 0;
}

int32_t ws_host_scan_open(uint32_t st, const void *start, uint32_t start_len, const void *end_, uint32_t end_len) {
    ws_fake *h = cur();
    int32_t e = state_check(h, st, start_len > end_len ? start_len : end_len);
    if (e) return e;
    int open = 0;
    for (int i = 0; i < h->n_cur; i++) open += h->cur[i].open;
    if (open >= WS_MAX_OPEN_CURSORS) return -WS_ELIMIT;
    if (h->n_cur == (int)(sizeof h->cur / sizeof h->cur[0])) return -WS_ELIMIT;
    store *s = find_store(h, st);
    cursor *c = &h->cur[h->n_cur];
    c->e = xmalloc(sizeof(entry) * (s->n + 1));
    c->n = c->pos = 0;
    c->open = 1;
    for (size_t j = 0; j < s->n; j++) {
        entry *x = &s->e[j];
        if (keycmp(x->k, x->kl, start, start_len) < 0) continue;
        if (end_len && keycmp(x->k, x->kl, end_, end_len) >= 0) continue;
        /* A copy: the scan sees the range as it was when it was opened. */
        c->e[c->n++] = (entry){dup(x->k, x->kl), dup(x->v, x->vl), x->kl, x->vl};
    }
    return h->n_cur++;
}

int32_t ws_host_scan_next(uint32_t id, void *out, uint32_t cap) {
    ws_fake *h = cur();
    if (id >= (uint32_t)h->n_cur || !h->cur[id].open) return -WS_ENOCURSOR;
    cursor *c = &h->cur[id];
    if (c->pos == c->n) return 0;
    entry *x = &c->e[c->pos];
    size_t n = 8 + x->kl + x->vl;
    if (n <= cap) {
        uint8_t *o = out;
        uint32_t kl = (uint32_t)x->kl, vl = (uint32_t)x->vl;
        memcpy(o, &kl, 4); /* little-endian hosts only, as every fake-host platform is */
        memcpy(o + 4, &vl, 4);
        memcpy(o + 8, x->k, x->kl);
        memcpy(o + 8 + x->kl, x->v, x->vl);
        c->pos++;
    }
    return (int32_t)n;
}

int32_t ws_host_scan_close(uint32_t id) {
    ws_fake *h = cur();
    if (id >= (uint32_t)h->n_cur || !h->cur[id].open) return -WS_ENOCURSOR;
    h->cur[id].open = 0;
    return 0;
}
