/* wasmstream_fake.c: the fake host of wasmstream_fake.h (native builds). */
#include "wasmstream_fake.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The callbacks' bodies, in wasmstream_time.c; weak so that a processor
 * without time links without it (a callback due then aborts, saying so). */
extern int32_t ws_sdk_on_timer(uint32_t len) __attribute__((weak));
extern int32_t ws_sdk_on_commit(uint32_t len) __attribute__((weak));

#define EVENT_TIME 0
#define PROCESSING_TIME 1
#define TRIGGER_COMMIT 2
#define NO_TIME INT64_MIN

typedef struct {
    uint8_t *k, *v;
    size_t kl, vl;
    int64_t stamp; /* the store's clock at the write (used with a TTL) */
} entry;

typedef struct {
    char *name;
    entry *e;
    size_t n, cap;
    int64_t ttl; /* ms, 0: none */
    uint32_t clock;
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

/* A pending timer (kind, ts, key), or a marked key (ts: the last mark's). */
typedef struct {
    uint32_t kind;
    int64_t ts;
    uint8_t *k;
    size_t kl;
} timer;

typedef struct {
    timer *t;
    size_t n, cap;
} timers;

typedef struct {
    uint32_t kind;
    int64_t ts;
    uint8_t *k;
    size_t kl;
    char *err; /* NULL if it succeeded */
} callback;

enum { IDLE, INIT, RECORD, TIMER, COMMIT, MIGRATE }; /* MIGRATE: state only */

/* A pending timer's or a marked key's copy, or a store's: what a failed
 * call puts back. */
typedef struct {
    store *stores;
    timers timers, marks;
} staged;

/* A wasmstream_batch call in progress, as the host sees it (abi/ABI.md
 * section 10): it learns that calls ended from the batch's done count,
 * which it reads at every host call (sync) and when the batch returns. */
typedef struct {
    int active;
    uint8_t *base; /* the batch in the SDK's input buffer */
    size_t len, n;
    size_t *off, *payload, *plen; /* each slot's offset, payload offset and length */
    uint32_t *kind;
    /* Calls whose end the fake has seen (done as last read), whether the
     * one at seen has begun, the first call that does not run (its host
     * calls get EPHASE, its results are ignored). */
    size_t seen, cut;
    int began;
    staged saved; /* what a failure of the call in progress puts back */
    int has_saved;
    size_t em_from; /* where the call in progress's emits start */
    /* Cut after a record that leaves a check due, as the host does;
     * records ended so far. */
    int checks;
    size_t records;
} batch_run;

/* The outcome of one call of a batch step: its status and error (NULL if
 * it succeeded), and its emits and callbacks (those of the check after
 * it) in the step's lists. */
typedef struct {
    int status;
    char *err;
    size_t em_from, em_to, cb_from, cb_to;
} result;

struct ws_fake {
    char **outputs;
    int n_outputs;
    store *stores;
    int n_stores;
    char *config;
    int phase;
    char err[WS_MAX_LOG_SIZE + 1]; /* the current call's */
    int err_set, host_fail;
    char rec_err[WS_MAX_LOG_SIZE + 1];      /* the last record's (or init's) */
    char failed[WS_MAX_LOG_SIZE + 256];     /* the step's first failure */
    emitted *em;
    size_t n_em, cap_em;
    cursor cur[WS_MAX_OPEN_CURSORS * 4];
    int n_cur;
    char **logs;
    uint32_t *levels;
    size_t n_logs;

    int64_t stream, wall, call_ts;
    timers timers, marks;
    size_t max_timers, max_firings, max_marks, fired, records, commit_every;
    int started; /* ws_fake_start ran: the wall clock may no longer go back */
    callback *cbs;
    size_t n_cbs, cap_cbs;

    /* The clocks time_now returns in a trigger of a batch: the trigger's
     * own (abi/ABI.md section 10.2). */
    int call_clocks;
    int64_t call_stream, call_wall;
    batch_run batch; /* the batch the SDK is running */
    result *res;     /* the outcome of each call of the last batch step */
    size_t n_res, cap_res;
};

static ws_fake *active;

/* The addresses the SDK handed out (ws_sdk_address) in the running batch:
 * handle h is entry h - 1. */
static const void **addrs;
static size_t n_addrs, cap_addrs;

uint32_t ws_sdk_address(const void *p) {
    if (n_addrs == cap_addrs) {
        cap_addrs = cap_addrs ? 2 * cap_addrs : 64;
        const void **a = realloc(addrs, cap_addrs * sizeof *a);
        if (!a) {
            fprintf(stderr, "wasmstream_fake: out of memory\n");
            abort();
        }
        addrs = a;
    }
    addrs[n_addrs++] = p;
    return (uint32_t)n_addrs;
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "wasmstream_fake: out of memory\n");
        abort();
    }
    return p;
}

static void *xrealloc(void *p, size_t n) {
    p = realloc(p, n ? n : 1);
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

static int keycmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl) {
    size_t n = al < bl ? al : bl;
    int c = n ? memcmp(a, b, n) : 0;
    if (c) return c;
    return al < bl ? -1 : al > bl;
}

ws_fake *ws_fake_new(const char *const *outputs, int n_outputs, const char *const *stores, int n_stores,
                     const char *config) {
    ws_fake *h = calloc(1, sizeof *h);
    if (!h) return NULL;
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
    h->stream = NO_TIME;
    h->wall = WS_FAKE_WALL_TIME;
    return h;
}

static void clear_emits(ws_fake *h, size_t from) {
    for (size_t i = from; i < h->n_em; i++) free(h->em[i].raw);
    h->n_em = from;
}

static void clear_callbacks(ws_fake *h) {
    for (size_t i = 0; i < h->n_cbs; i++) free(h->cbs[i].k), free(h->cbs[i].err);
    h->n_cbs = 0;
}

static void clear_results(ws_fake *h) {
    for (size_t i = 0; i < h->n_res; i++) free(h->res[i].err);
    h->n_res = 0;
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

static void free_timers(timers *t) {
    for (size_t i = 0; i < t->n; i++) free(t->t[i].k);
    free(t->t);
    *t = (timers){0};
}

void ws_fake_free(ws_fake *h) {
    if (active == h) active = NULL;
    clear_emits(h, 0);
    clear_callbacks(h);
    clear_results(h);
    close_cursors(h);
    free(h->em);
    free(h->cbs);
    free(h->res);
    for (int i = 0; i < h->n_outputs; i++) free(h->outputs[i]);
    free(h->outputs);
    for (int i = 0; i < h->n_stores; i++) free(h->stores[i].name), free_entries(&h->stores[i]);
    free(h->stores);
    for (size_t i = 0; i < h->n_logs; i++) free(h->logs[i]);
    free(h->logs);
    free(h->levels);
    free(h->config);
    free_timers(&h->timers);
    free_timers(&h->marks);
    free(h);
}

/* ---- staging: what a failed call discards ---- */

static timers copy_timers(const timers *t) {
    timers c = {xmalloc(sizeof(timer) * (t->n + 1)), t->n, t->n};
    for (size_t i = 0; i < t->n; i++) c.t[i] = (timer){t->t[i].kind, t->t[i].ts, dup(t->t[i].k, t->t[i].kl), t->t[i].kl};
    return c;
}

static staged snapshot(const ws_fake *h) {
    staged s = {calloc((size_t)h->n_stores + 1, sizeof(store)), copy_timers(&h->timers), copy_timers(&h->marks)};
    for (int i = 0; i < h->n_stores; i++) {
        const store *o = &h->stores[i];
        s.stores[i] = (store){o->name, xmalloc(sizeof(entry) * (o->n + 1)), o->n, o->n, o->ttl, o->clock};
        for (size_t j = 0; j < o->n; j++) {
            entry *e = &o->e[j];
            s.stores[i].e[j] = (entry){dup(e->k, e->kl), dup(e->v, e->vl), e->kl, e->vl, e->stamp};
        }
    }
    return s;
}

/* Keeps the call's changes (ok) or puts the snapshot back. */
static void settle(ws_fake *h, staged s, int ok) {
    store *drop = ok ? s.stores : h->stores;
    if (!ok) {
        h->stores = s.stores;
        free_timers(&h->timers);
        free_timers(&h->marks);
        h->timers = s.timers;
        h->marks = s.marks;
    } else {
        free_timers(&s.timers);
        free_timers(&s.marks);
    }
    for (int i = 0; i < h->n_stores; i++) free_entries(&drop[i]);
    free(drop);
}

/* ---- calls ---- */

static void begin(ws_fake *h, int phase) {
    active = h;
    h->phase = phase;
    h->err[0] = 0;
    h->err_set = h->host_fail = 0;
    close_cursors(h);
}

/* Ends a call whose emits start at index from: its status (a host failure
 * turns OK into FAILED), the error text in h->err, and its emits dropped
 * when it failed. */
static int end(ws_fake *h, int st, size_t from) {
    h->phase = IDLE;
    close_cursors(h);
    if (st == WS_OK && !h->host_fail) return WS_OK;
    if (!h->err_set && !h->host_fail)
        snprintf(h->err, sizeof h->err, st == WS_FAILED ? "failed without set_error" : "unknown status %d", st);
    clear_emits(h, from);
    return st == WS_OK ? WS_FAILED : st;
}

/* A new step: no emits, callbacks, results or failure yet. */
static void step(ws_fake *h) {
    active = h;
    clear_emits(h, 0);
    clear_callbacks(h);
    clear_results(h);
    h->failed[0] = 0;
}

int ws_fake_start(ws_fake *h) {
    step(h);
    h->started = 1;
    ws_sdk_reset();
    begin(h, INIT);
    int st = end(h, ws_sdk_init(), 0);
    memcpy(h->rec_err, h->err, sizeof h->err);
    if (st == WS_OK) ws_sdk_input(4096);
    return st;
}

static void fail_step(ws_fake *h, const char *what) {
    if (!h->failed[0]) snprintf(h->failed, sizeof h->failed, "%s%s", what, h->err);
}

static int64_t clock_of(const ws_fake *h, const store *s) {
    if (s->clock == 1) return h->wall;
    return h->stream < 0 ? 0 : h->stream;
}

static int expired(const ws_fake *h, const store *s, const entry *e) {
    return s->ttl > 0 && clock_of(h, s) - s->ttl >= e->stamp;
}

/* The position of (kind, ts, key) in t (marks: by key only), or where it
 * would go (*found = 0). */
static size_t find_timer(const timers *t, int marks, uint32_t kind, int64_t ts, const uint8_t *k, size_t kl, int *found) {
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const timer *x = &t->t[mid];
        int c;
        if (marks) c = keycmp(x->k, x->kl, k, kl);
        else if (x->ts != ts) c = x->ts < ts ? -1 : 1;
        else if (x->kind != kind) c = x->kind < kind ? -1 : 1;
        else c = keycmp(x->k, x->kl, k, kl);
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

static void insert_timer(timers *t, size_t p, uint32_t kind, int64_t ts, const void *k, size_t kl) {
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 16;
        t->t = xrealloc(t->t, t->cap * sizeof(timer));
    }
    memmove(&t->t[p + 1], &t->t[p], (t->n - p) * sizeof(timer));
    t->t[p] = (timer){kind, ts, dup(k, kl), kl};
    t->n++;
}

static void remove_timer(timers *t, size_t p) {
    free(t->t[p].k);
    memmove(&t->t[p], &t->t[p + 1], (t->n - p - 1) * sizeof(timer));
    t->n--;
}

static size_t limit(size_t n, size_t def) { return n ? n : def; }

/* Runs one on_timer or on_commit call. */
static void run_callback(ws_fake *h, uint32_t kind, int64_t ts, const uint8_t *k, size_t kl) {
    int32_t (*fn)(uint32_t) = kind == TRIGGER_COMMIT ? ws_sdk_on_commit : ws_sdk_on_timer;
    if (!fn) {
        fprintf(stderr, "wasmstream_fake: a %s callback is due but wasmstream_time.c is not linked\n",
                kind == TRIGGER_COMMIT ? "commit" : "timer");
        abort();
    }
    size_t len = 32 + kl;
    uint8_t *buf = ws_sdk_input((uint32_t)len);
    if (!buf) {
        fprintf(stderr, "wasmstream_fake: the SDK refused a %zu-byte input buffer\n", len);
        abort();
    }
    uint64_t f[3] = {(uint64_t)ts, (uint64_t)h->stream, (uint64_t)h->wall};
    for (int i = 0; i < 3; i++)
        for (int b = 0; b < 8; b++) buf[8 * i + b] = (uint8_t)(f[i] >> (8 * b));
    for (int b = 0; b < 4; b++) buf[24 + b] = (uint8_t)(kind >> (8 * b)), buf[28 + b] = (uint8_t)(kl >> (8 * b));
    if (kl) memcpy(buf + 32, k, kl);
    h->call_ts = ts;
    staged s = snapshot(h);
    size_t from = h->n_em;
    begin(h, kind == TRIGGER_COMMIT ? COMMIT : TIMER);
    int st = end(h, fn((uint32_t)len), from);
    settle(h, s, st == WS_OK);
    if (h->n_cbs == h->cap_cbs) {
        h->cap_cbs = h->cap_cbs ? 2 * h->cap_cbs : 8;
        h->cbs = xrealloc(h->cbs, h->cap_cbs * sizeof(callback));
    }
    h->cbs[h->n_cbs++] = (callback){kind, ts, dup(k, kl), kl, st == WS_OK ? NULL : (char *)dup(h->err, strlen(h->err) + 1)};
    if (st != WS_OK) {
        char what[WS_MAX_KEY_SIZE + 128];
        snprintf(what, sizeof what, "%s callback for key \"%.*s\" at %lld: ",
                 kind == TRIGGER_COMMIT ? "commit" : kind == EVENT_TIME ? "event" : "processing", (int)kl, (const char *)k,
                 (long long)ts);
        fail_step(h, what);
    }
}

/* A check: the timers due at its start fire (event time always,
 * processing time at a commit point), up to the window's firings limit. */
static void fire_due(ws_fake *h, int commit_point) {
    timers due = {0};
    for (size_t i = 0; i < h->timers.n; i++) {
        timer *t = &h->timers.t[i];
        if ((t->kind == EVENT_TIME && t->ts <= h->stream) || (commit_point && t->kind == PROCESSING_TIME && t->ts <= h->wall))
            insert_timer(&due, due.n, t->kind, t->ts, t->k, t->kl);
    }
    for (size_t i = 0; i < due.n; i++) {
        if (h->fired >= limit(h->max_firings, 10000)) break; /* the rest fire in the next window */
        timer *t = &due.t[i];
        int found;
        size_t p = find_timer(&h->timers, 0, t->kind, t->ts, t->k, t->kl, &found);
        if (!found) continue; /* cancelled by an earlier callback of this check */
        remove_timer(&h->timers, p); /* removed whatever the callback does */
        h->fired++;
        run_callback(h, t->kind, t->ts, t->k, t->kl);
    }
    free_timers(&due);
}

static void commit_point(ws_fake *h) {
    fire_due(h, 1);
    timers marks = h->marks;
    h->marks = (timers){0};
    for (size_t i = 0; i < marks.n; i++) run_callback(h, TRIGGER_COMMIT, marks.t[i].ts, marks.t[i].k, marks.t[i].kl);
    free_timers(&marks);
    h->fired = h->records = 0;
    for (int i = 0; i < h->n_stores; i++) {
        store *s = &h->stores[i];
        size_t w = 0;
        for (size_t j = 0; j < s->n; j++) {
            if (expired(h, s, &s->e[j])) free(s->e[j].k), free(s->e[j].v);
            else s->e[w++] = s->e[j];
        }
        s->n = w;
    }
}

int ws_fake_process(ws_fake *h, const uint8_t *rec, size_t len) {
    step(h);
    uint8_t *buf = ws_sdk_input((uint32_t)len);
    if (!buf) {
        fprintf(stderr, "wasmstream_fake: the SDK refused a %zu-byte input buffer\n", len);
        abort();
    }
    memcpy(buf, rec, len);
    int64_t ts = 0;
    if (len >= 8) {
        uint64_t u = 0;
        for (int b = 7; b >= 0; b--) u = u << 8 | rec[b];
        ts = (int64_t)u;
    }
    if (ts >= 0 && ts > h->stream) h->stream = ts;
    h->call_ts = ts;
    staged s = snapshot(h);
    begin(h, RECORD);
    int st = end(h, ws_sdk_process((uint32_t)len), 0);
    settle(h, s, st == WS_OK);
    memcpy(h->rec_err, h->err, sizeof h->err);
    if (st != WS_OK) fail_step(h, "");
    fire_due(h, 0);
    if (h->commit_every && ++h->records >= h->commit_every) commit_point(h);
    return st;
}

/* The processor's wasmstream_migrate body, defined by WS_MIGRATE (weak: a
 * processor without it has no migration). */
__attribute__((weak)) int32_t ws_sdk_migrate(uint32_t len);

int ws_fake_migrate(ws_fake *h, const char *from) {
    step(h);
    if (!ws_sdk_migrate) {
        fprintf(stderr, "wasmstream_fake: ws_fake_migrate: the processor has no WS_MIGRATE\n");
        abort();
    }
    size_t len = strlen(from);
    uint8_t *buf = ws_sdk_input((uint32_t)len);
    if (!buf) {
        fprintf(stderr, "wasmstream_fake: the SDK refused a %zu-byte input buffer\n", len);
        abort();
    }
    memcpy(buf, from, len);
    staged s = snapshot(h);
    begin(h, MIGRATE);
    int st = end(h, ws_sdk_migrate((uint32_t)len), 0);
    settle(h, s, st == WS_OK);
    memcpy(h->rec_err, h->err, sizeof h->err);
    if (st != WS_OK) fail_step(h, "");
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

int ws_fake_commit(ws_fake *h) {
    step(h);
    commit_point(h);
    return h->failed[0] ? WS_FAILED : WS_OK;
}

void ws_fake_set_wall_time(ws_fake *h, int64_t ms) {
    if (h->started && ms < h->wall) {
        fprintf(stderr, "wasmstream_fake: ws_fake_set_wall_time(%lld) would move the wall clock back from %lld\n",
                (long long)ms, (long long)h->wall);
        abort();
    }
    h->wall = ms;
}

int ws_fake_advance_wall_time(ws_fake *h, int64_t ms) {
    ws_fake_set_wall_time(h, h->wall + ms);
    return ws_fake_commit(h);
}

int64_t ws_fake_wall_time(const ws_fake *h) { return h->wall; }
int64_t ws_fake_stream_time(const ws_fake *h) { return h->stream; }
void ws_fake_set_stream_time(ws_fake *h, int64_t ms) { h->stream = ms; }
void ws_fake_commit_every(ws_fake *h, size_t n) { h->commit_every = n; }

void ws_fake_timer_limits(ws_fake *h, size_t timers_, size_t firings, size_t marks) {
    h->max_timers = timers_;
    h->max_firings = firings;
    h->max_marks = marks;
}

static store *store_named(const ws_fake *h, const char *name) {
    for (int i = 0; i < h->n_stores; i++)
        if (!strcmp(h->stores[i].name, name)) return &h->stores[i];
    fprintf(stderr, "wasmstream_fake: no store \"%s\" declared\n", name);
    abort();
}

void ws_fake_ttl(ws_fake *h, const char *name, int64_t ms, uint32_t clock) {
    store *s = store_named(h, name);
    s->ttl = ms;
    s->clock = clock;
}

size_t ws_fake_timer_count(const ws_fake *h) { return h->timers.n; }

void ws_fake_timer(const ws_fake *h, size_t i, uint32_t *kind, int64_t *ts, ws_bytes *key) {
    const timer *t = &h->timers.t[i];
    *kind = t->kind;
    *ts = t->ts;
    *key = (ws_bytes){t->k, (int32_t)t->kl};
}

size_t ws_fake_marked_count(const ws_fake *h) { return h->marks.n; }
ws_bytes ws_fake_marked(const ws_fake *h, size_t i) { return (ws_bytes){h->marks.t[i].k, (int32_t)h->marks.t[i].kl}; }

size_t ws_fake_callback_count(const ws_fake *h) { return h->n_cbs; }

const char *ws_fake_callback(const ws_fake *h, size_t i, uint32_t *kind, int64_t *ts, ws_bytes *key) {
    const callback *c = &h->cbs[i];
    if (kind) *kind = c->kind;
    if (ts) *ts = c->ts;
    if (key) *key = (ws_bytes){c->k, (int32_t)c->kl};
    return c->err ? c->err : "";
}

const char *ws_fake_error(const ws_fake *h) { return h->rec_err; }
const char *ws_fake_failed(const ws_fake *h) { return h->failed; }
size_t ws_fake_emitted_count(const ws_fake *h) { return h->n_em; }

const char *ws_fake_emitted(const ws_fake *h, size_t i, ws_record *rec) {
    if (i >= h->n_em) return NULL;
    ws_decode(h->em[i].raw, h->em[i].len, rec);
    return h->em[i].output;
}

static store *find_store(const ws_fake *h, uint32_t i) { return i < (uint32_t)h->n_stores ? &h->stores[i] : NULL; }

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
    store *s = store_named(h, name);
    int found;
    size_t p = search(s, key, key_len, &found);
    if (!found) return 0;
    val->ptr = s->e[p].v;
    val->len = (int32_t)s->e[p].vl;
    return 1;
}

size_t ws_fake_len(const ws_fake *h, const char *name) { return store_named(h, name)->n; }

static void write_entry(ws_fake *h, store *s, const void *key, size_t key_len, const void *val, size_t val_len) {
    int found;
    size_t p = search(s, key, key_len, &found);
    int64_t stamp = clock_of(h, s);
    if (found) {
        free(s->e[p].v);
        s->e[p].v = dup(val, val_len);
        s->e[p].vl = val_len;
        s->e[p].stamp = stamp;
        return;
    }
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 16;
        s->e = xrealloc(s->e, s->cap * sizeof(entry));
    }
    memmove(&s->e[p + 1], &s->e[p], (s->n - p) * sizeof(entry));
    s->e[p] = (entry){dup(key, key_len), dup(val, val_len), key_len, val_len, stamp};
    s->n++;
}

void ws_fake_put(ws_fake *h, const char *name, const void *key, size_t key_len, const void *val, size_t val_len) {
    write_entry(h, store_named(h, name), key, key_len, val, val_len);
}

size_t ws_fake_log_count(const ws_fake *h) { return h->n_logs; }
const char *ws_fake_log(const ws_fake *h, size_t i, uint32_t *level) {
    if (i >= h->n_logs) return NULL;
    if (level) *level = h->levels[i];
    return h->logs[i];
}

/* ---- the host functions ---- */

static void sync(ws_fake *h, int begin_next);

static ws_fake *cur(void) {
    if (!active) {
        fprintf(stderr, "wasmstream_fake: a host call with no fake host started\n");
        abort();
    }
    if (active->batch.active) sync(active, 1);
    return active;
}

static int in_call(const ws_fake *h) { return h->phase >= RECORD; }

static int32_t write_if_fits(void *out, uint32_t cap, const void *b, size_t n) {
    if (n <= cap && n) memcpy(out, b, n);
    return (int32_t)n;
}

/* Adds an emitted record to the call's emits after the emit import's
 * checks: 0 or -errno (ENOOUTPUT also fails the call). */
static int32_t add_emit(ws_fake *h, const void *rec, size_t len) {
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
        h->em = xrealloc(h->em, h->cap_em * sizeof(emitted));
    }
    h->em[h->n_em++] = (emitted){h->outputs[r.input], dup(rec, len), len};
    return 0;
}

int32_t ws_host_emit(const void *rec, uint32_t len) {
    ws_fake *h = cur();
    if (!in_call(h) || h->phase == MIGRATE) return -WS_EPHASE;
    return add_emit(h, rec, len);
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
    h->logs = xrealloc(h->logs, (h->n_logs + 1) * sizeof(char *));
    h->levels = xrealloc(h->levels, (h->n_logs + 1) * sizeof(uint32_t));
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
    if (!in_call(h)) return -WS_EPHASE;
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
    if (!found || expired(h, s, &s->e[p])) return -WS_ENOTFOUND;
    return write_if_fits(out, cap, s->e[p].v, s->e[p].vl);
}

int32_t ws_host_state_put(uint32_t st, const void *key, uint32_t key_len, const void *val, uint32_t val_len) {
    ws_fake *h = cur();
    int32_t e = state_check(h, st, key_len);
    if (e) return e;
    if (val_len > WS_MAX_VALUE_SIZE) return -WS_ETOOLARGE;
    write_entry(h, find_store(h, st), key, key_len, val, val_len);
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
        if (expired(h, s, x)) continue;
        /* A copy: the scan sees the range as it was when it was opened. */
        c->e[c->n++] = (entry){dup(x->k, x->kl), dup(x->v, x->vl), x->kl, x->vl, x->stamp};
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

/* ---- time (abi/ABI.md section 8) ---- */

static int32_t timer_args(const ws_fake *h, uint32_t kind, int64_t ts, uint32_t kl) {
    if (!in_call(h) || h->phase == MIGRATE) return -WS_EPHASE;
    if ((kind != EVENT_TIME && kind != PROCESSING_TIME) || ts < 0) return -WS_EINVAL;
    if (kl > WS_MAX_KEY_SIZE) return -WS_ETOOLARGE;
    return 0;
}

int32_t ws_host_timer_set(uint32_t kind, int64_t ts, const void *key, uint32_t key_len) {
    ws_fake *h = cur();
    int32_t e = timer_args(h, kind, ts, key_len);
    if (e) return e;
    int found;
    size_t p = find_timer(&h->timers, 0, kind, ts, key, key_len, &found);
    if (found) return 0;
    if (h->timers.n >= limit(h->max_timers, 1000000)) return -WS_ELIMIT;
    insert_timer(&h->timers, p, kind, ts, key, key_len);
    return 1;
}

int32_t ws_host_timer_cancel(uint32_t kind, int64_t ts, const void *key, uint32_t key_len) {
    ws_fake *h = cur();
    int32_t e = timer_args(h, kind, ts, key_len);
    if (e) return e;
    int found;
    size_t p = find_timer(&h->timers, 0, kind, ts, key, key_len, &found);
    if (!found) return 0;
    remove_timer(&h->timers, p);
    return 1;
}

int64_t ws_host_time_now(uint32_t clock) {
    ws_fake *h = cur();
    if (!in_call(h)) return -WS_EPHASE;
    if (clock == 0) return h->call_clocks ? h->call_stream : h->stream;
    if (clock == 1) return h->call_clocks ? h->call_wall : h->wall;
    return -WS_EINVAL;
}

int32_t ws_host_commit_mark(const void *key, uint32_t key_len) {
    ws_fake *h = cur();
    if (h->phase != RECORD && h->phase != TIMER) return -WS_EPHASE;
    if (key_len > WS_MAX_KEY_SIZE) return -WS_ETOOLARGE;
    int found;
    size_t p = find_timer(&h->marks, 1, 0, 0, key, key_len, &found);
    if (found) {
        h->marks.t[p].ts = h->call_ts; /* the last marking call's timestamp wins */
        return 0;
    }
    if (h->marks.n >= limit(h->max_marks, 100000)) return -WS_ELIMIT;
    insert_timer(&h->marks, p, 0, h->call_ts, key, key_len);
    return 1;
}

/* ---- batches (abi/ABI.md section 10) ---- */

static uint32_t le32(const uint8_t *p) {
    const volatile uint8_t *q = p;
    return (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
}

static void put_le32(uint8_t *p, uint32_t v) {
    volatile uint8_t *q = p;
    for (int i = 0; i < 4; i++) q[i] = (uint8_t)(v >> (8 * i));
}

static int64_t le64(const uint8_t *p) { return (int64_t)((uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32); }

/* The SDK broke the batch protocol (or the test misused the fake). */
static void bail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "wasmstream_fake: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

/* A check is due after a record: an event-time timer at or before the
 * stream time, or a commit point after records more records. */
static int check_due(const ws_fake *h, size_t records) {
    for (size_t i = 0; i < h->timers.n; i++)
        if (h->timers.t[i].kind == EVENT_TIME && h->timers.t[i].ts <= h->stream) return 1;
    return h->commit_every && h->records + records >= h->commit_every;
}

/* Begins call k (once): a record moves the stream time, a trigger's clocks
 * are its own. A call past the cut runs without a phase (EPHASE). */
static void begin_slot(ws_fake *h, size_t k) {
    batch_run *b = &h->batch;
    if (b->began) return;
    b->began = 1;
    if (k >= b->cut) {
        h->phase = IDLE;
        return;
    }
    const uint8_t *p = b->base + b->payload[k];
    int phase = RECORD;
    h->call_clocks = 0;
    if (b->kind[k] == WS_SLOT_RECORD) {
        int64_t ts = b->plen[k] >= 8 ? le64(p) : 0;
        if (ts >= 0 && ts > h->stream) h->stream = ts;
        h->call_ts = ts;
    } else if (b->plen[k] >= 32) {
        h->call_ts = le64(p);
        h->call_clocks = 1;
        h->call_stream = le64(p + 8);
        h->call_wall = le64(p + 16);
        phase = le32(p + 24) == TRIGGER_COMMIT ? COMMIT : TIMER;
    }
    b->saved = snapshot(h);
    b->has_saved = 1;
    b->em_from = h->n_em;
    begin(h, phase);
}

static void add_result(ws_fake *h, result r) {
    if (h->n_res == h->cap_res) {
        h->cap_res = h->cap_res ? 2 * h->cap_res : 16;
        h->res = xrealloc(h->res, h->cap_res * sizeof(result));
    }
    h->res[h->n_res++] = r;
}

/* Ends call k, which the SDK finished: its staged emits go through the
 * emit import's checks (one refused fails the call), then its outcome. A
 * failed call, or a record after which a check is due, cuts the batch. */
static void end_slot(ws_fake *h, size_t k) {
    begin_slot(h, k);
    batch_run *b = &h->batch;
    b->seen = k + 1;
    b->began = 0;
    if (k >= b->cut) return;
    const uint8_t *slot = b->base + b->off[k];
    int st = (int32_t)le32(slot + WS_SLOT_STATUS);
    uint32_t out = le32(slot + WS_SLOT_OUT_PTR), out_len = le32(slot + WS_SLOT_OUT_LEN);
    if (out_len) {
        if (out == 0 || out > n_addrs) bail("staged emits at an address the SDK never handed out (%u of %zu)", out, n_addrs);
        const uint8_t *run = addrs[out - 1];
        size_t left = out_len;
        while (left && !h->host_fail) {
            const uint8_t *rec;
            size_t rl;
            int64_t used = ws_next_emit_entry(run, left, &rec, &rl);
            if (used < 0) {
                h->host_fail = 1;
                snprintf(h->err, sizeof h->err, "ABI misuse: staged emits: an entry's length runs past the run");
                break;
            }
            int32_t e = add_emit(h, rec, rl);
            if (e < 0 && !h->host_fail) {
                h->host_fail = 1;
                snprintf(h->err, sizeof h->err, "staged emit refused: %s", ws_errno_name(e));
            }
            run += used;
            left -= (size_t)used;
        }
    }
    st = end(h, st, b->em_from);
    settle(h, b->saved, st == WS_OK);
    b->has_saved = 0;
    h->call_clocks = 0;
    if (b->kind[k] == WS_SLOT_RECORD) b->records++;
    add_result(h, (result){st, st == WS_OK ? NULL : (char *)dup(h->err, strlen(h->err) + 1), b->em_from, h->n_em,
                           h->n_cbs, h->n_cbs});
    if (st != WS_OK) fail_step(h, "");
    if (st != WS_OK || (b->checks && b->kind[k] == WS_SLOT_RECORD && check_due(h, b->records))) {
        if (k + 1 < b->cut) b->cut = k + 1;
        put_le32(b->base + WS_BATCH_STOP, 1);
    }
}

/* Brings the running batch up to date: ends the calls the SDK finished
 * since the last look, then begins the one in progress (not once the
 * batch call returned). */
static void sync(ws_fake *h, int begin_next) {
    batch_run *b = &h->batch;
    size_t done = le32(b->base + WS_BATCH_DONE);
    if (done > b->n || done < b->seen) bail("the SDK moved the batch's done count to %zu (seen %zu)", done, b->seen);
    for (size_t k = b->seen; k < done; k++) end_slot(h, k);
    if (begin_next && done < b->n) begin_slot(h, done);
}

/* One ws_sdk_batch call over n slots (kinds, payloads); checks cuts after
 * a record that leaves a check due. Returns how many calls ran. */
static size_t run_batch(ws_fake *h, const uint32_t *kinds, const uint8_t *const *payloads, const size_t *lens, size_t n,
                        int checks) {
    size_t size = WS_BATCH_HEADER_SIZE;
    for (size_t k = 0; k < n; k++) size += WS_SLOT_SIZE(lens[k]);
    uint8_t *base = ws_sdk_input((uint32_t)size);
    if (!base) bail("the SDK refused a %zu-byte input buffer", size);
    if ((uintptr_t)base % 8) bail("the SDK's input buffer is not 8-byte aligned (%p)", (void *)base);
    batch_run *b = &h->batch;
    *b = (batch_run){1, base, size, n, xmalloc(n * sizeof(size_t)), xmalloc(n * sizeof(size_t)),
                     xmalloc(n * sizeof(size_t)), xmalloc(n * sizeof(uint32_t)), 0, n, 0, {0}, 0, 0, checks, 0};
    memset(base, 0, size);
    put_le32(base + WS_BATCH_COUNT, (uint32_t)n);
    size_t off = WS_BATCH_HEADER_SIZE;
    for (size_t k = 0; k < n; k++) {
        put_le32(base + off + WS_SLOT_KIND, kinds[k]);
        put_le32(base + off + WS_SLOT_LEN, (uint32_t)lens[k]);
        if (lens[k]) memcpy(base + off + WS_SLOT_HEADER_SIZE, payloads[k], lens[k]);
        b->off[k] = off;
        b->payload[k] = off + WS_SLOT_HEADER_SIZE;
        b->plen[k] = lens[k];
        b->kind[k] = kinds[k];
        off += WS_SLOT_SIZE(lens[k]);
    }
    n_addrs = 0;
    active = h;
    int32_t ret = ws_sdk_batch((uint32_t)size);
    sync(h, 0);
    b->active = 0;
    h->phase = IDLE;
    if (b->has_saved) settle(h, b->saved, 0); /* a call that made host calls and did not finish */
    size_t ran = b->seen < b->cut ? b->seen : b->cut;
    int mid = b->began && b->seen < b->cut;
    free(b->off), free(b->payload), free(b->plen), free(b->kind);
    if (ret != 0) bail("wasmstream_batch returned %d, want 0", (int)ret);
    if (mid) bail("wasmstream_batch returned in the middle of call %zu, which had begun", ran);
    if (!ran) bail("wasmstream_batch returned without finishing a call (%zu bytes)", size);
    return ran;
}

void ws_fake_process_batch(ws_fake *h, const uint8_t *const *recs, const size_t *lens, size_t n) {
    step(h);
    uint32_t *kinds = xmalloc((n + 1) * sizeof(uint32_t));
    for (size_t k = 0; k < n; k++) kinds[k] = WS_SLOT_RECORD;
    for (size_t next = 0; next < n;) {
        size_t ran = run_batch(h, kinds, recs + next, lens + next, n - next, 1);
        /* No check was due after the records before the last (the batch
         * would have been cut there), and the records after them have
         * moved the stream time since: the check runs after the last. */
        h->records += ran - 1;
        result *last = &h->res[h->n_res - 1];
        fire_due(h, 0);
        if (h->commit_every && ++h->records >= h->commit_every) commit_point(h);
        last->em_to = h->n_em;
        last->cb_to = h->n_cbs;
        next += ran;
    }
    free(kinds);
}

size_t ws_fake_batch(ws_fake *h, const uint8_t *batch, size_t len) {
    step(h);
    uint32_t count = len >= WS_BATCH_HEADER_SIZE ? le32(batch) : 0;
    uint32_t *kinds = xmalloc((count + 1) * sizeof(uint32_t));
    const uint8_t **payloads = xmalloc((count + 1) * sizeof(uint8_t *));
    size_t *lens = xmalloc((count + 1) * sizeof(size_t));
    size_t off = WS_BATCH_HEADER_SIZE;
    for (uint32_t k = 0; k < count; k++) {
        size_t p;
        if (ws_slot_at(batch, len, off, &kinds[k], &p, &lens[k]) < 0) bail("ws_fake_batch: a malformed batch (slot %u)", k);
        payloads[k] = batch + p;
        off += WS_SLOT_SIZE(lens[k]);
    }
    size_t ran = count ? run_batch(h, kinds, payloads, lens, count, 0) : 0;
    free(kinds), free(payloads), free(lens);
    return ran;
}

size_t ws_fake_result_count(const ws_fake *h) { return h->n_res; }

const char *ws_fake_result(const ws_fake *h, size_t i, int *status, size_t *first_emit, size_t *n_emits,
                           size_t *first_callback, size_t *n_callbacks) {
    const result *r = &h->res[i];
    if (status) *status = r->status;
    if (first_emit) *first_emit = r->em_from;
    if (n_emits) *n_emits = r->em_to - r->em_from;
    if (first_callback) *first_callback = r->cb_from;
    if (n_callbacks) *n_callbacks = r->cb_to - r->cb_from;
    return r->err ? r->err : "";
}
