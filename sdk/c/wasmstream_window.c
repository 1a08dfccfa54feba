/*
 * wasmstream_window.c: the window and join helpers of wasmstream_time.h, a
 * port of the Go SDK's sdk/window and sdk/join with the same semantics and
 * the same state, timer and mark keys and values (so a processor keeps its
 * state when it is rewritten from one SDK to another). Like wasmstream.c
 * it uses only memcpy, memmove, memcmp, strlen and malloc/realloc/free.
 *
 * Every function returns WS_OK or WS_FAILED with the reason set (ws_fail),
 * in the words of the Go SDK.
 */
#include "wasmstream_time.h"

#include <stdlib.h>
#include <string.h>

/* ---- small helpers ---- */

static uint64_t be64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | p[i];
    return v;
}

static void putbe64(uint8_t *p, uint64_t v) {
    for (int i = 7; i >= 0; i--, v >>= 8) p[i] = (uint8_t)v;
}

static int64_t sortable(const uint8_t *p) { return (int64_t)(be64(p) ^ ((uint64_t)1 << 63)); }

/* Go's wrapping int64 arithmetic, without C's undefined overflow. */
static int64_t wadd(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }

/* a+b clamped to the int64 range (Go's join.sat). */
static int64_t sat(int64_t a, int64_t b) {
    if (b > 0 && a > INT64_MAX - b) return INT64_MAX;
    if (b < 0 && a < INT64_MIN - b) return INT64_MIN;
    return a + b;
}

static int grow(ws_buf *b, size_t n) {
    if (n <= b->cap) return 1;
    size_t c = b->cap ? b->cap : 64;
    while (c < n) c *= 2;
    uint8_t *d = realloc(b->data, c);
    if (!d) return 0;
    b->data = d;
    b->cap = c;
    return 1;
}

static int add(ws_buf *b, const void *p, size_t n) {
    if (!grow(b, b->len + n)) return 0;
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    return 1;
}

static int add64(ws_buf *b, uint64_t v) {
    uint8_t x[8];
    putbe64(x, v);
    return add(b, x, 8);
}

static ws_bytes bytes_of(const ws_buf *b) {
    ws_bytes x = {b->data, (int32_t)b->len};
    return x;
}

static const ws_bytes empty = {(const uint8_t *)"", 0};

static int oom(void) { return ws_fail("sdk: out of memory"); }

/* A message in a fixed buffer, built without stdio. */
typedef struct {
    char s[512];
    size_t n;
} msg;

static void m_str(msg *m, const char *s) {
    for (; *s && m->n < sizeof m->s; s++) m->s[m->n++] = *s;
}

static void m_i64(msg *m, int64_t v) {
    char d[24];
    int i = 0;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do d[i++] = (char)('0' + u % 10);
    while (u /= 10);
    if (v < 0) d[i++] = '-';
    while (i > 0 && m->n < sizeof m->s) m->s[m->n++] = d[--i];
}

/* A quoted string, bytes outside printable ASCII escaped as \xNN. */
static void m_quote(msg *m, const uint8_t *p, size_t n) {
    static const char hex[] = "0123456789abcdef";
    m_str(m, "\"");
    for (size_t i = 0; i < n && m->n + 4 < sizeof m->s; i++) {
        uint8_t c = p[i];
        if (c == '"' || c == '\\') {
            m->s[m->n++] = '\\';
            m->s[m->n++] = (char)c;
        } else if (c >= 0x20 && c < 0x7f) {
            m->s[m->n++] = (char)c;
        } else {
            m->s[m->n++] = '\\';
            m->s[m->n++] = 'x';
            m->s[m->n++] = hex[c >> 4];
            m->s[m->n++] = hex[c & 15];
        }
    }
    m_str(m, "\"");
}

static void m_qstr(msg *m, const char *s) { m_quote(m, (const uint8_t *)s, strlen(s)); }

static int m_fail(msg *m) { return ws_fail_n(m->s, m->n); }

/* "<what>: "<name>": <text>", the helpers' errors. */
static int bad(const char *what, const char *name, const char *text) {
    msg m = {.n = 0};
    m_str(&m, what);
    m_str(&m, ": ");
    m_qstr(&m, name);
    m_str(&m, ": ");
    m_str(&m, text);
    return m_fail(&m);
}

/* The smallest key above every key starting with p (empty: none). */
static int prefix_end(const ws_buf *p, ws_buf *end) {
    end->len = 0;
    if (!add(end, p->data, p->len)) return 0;
    while (end->len > 0) {
        if (end->data[end->len - 1] != 0xff) {
            end->data[end->len - 1]++;
            return 1;
        }
        end->len--;
    }
    return 1;
}

/* ws_get into out: 1 found, 0 missing, or WS_FAILED (-1 here). */
static int get(ws_store *s, ws_bytes key, ws_buf *out) {
    int32_t e = ws_get(s, key.ptr, ws_len(key), out);
    if (e < 0) {
        ws_fail_call("state_get", s->name, e);
        return -1;
    }
    return e;
}

static int put(ws_store *s, ws_bytes key, const void *v, size_t n) {
    int32_t e = ws_put(s, key.ptr, ws_len(key), v, n);
    return e < 0 ? ws_fail_call("state_put", s->name, e) : WS_OK;
}

static int del(ws_store *s, ws_bytes key) {
    int32_t e = ws_delete(s, key.ptr, ws_len(key));
    return e < 0 ? ws_fail_call("state_delete", s->name, e) : WS_OK;
}

static int timer_set(int64_t ts, ws_bytes key) {
    int32_t e = ws_timer_set(WS_EVENT_TIME, ts, key.ptr, ws_len(key));
    return e < 0 ? ws_fail_call("timer_set", NULL, e) : WS_OK;
}

static int timer_cancel(int64_t ts, ws_bytes key) {
    int32_t e = ws_timer_cancel(WS_EVENT_TIME, ts, key.ptr, ws_len(key));
    return e < 0 ? ws_fail_call("timer_cancel", NULL, e) : WS_OK;
}

/* name, 0, tag, u32 key length, key, with room for tail more bytes, which
 * the caller adds: the start of a window's or a buffered record's key; an
 * error naming what ("window", "join") and the noun ("window key") when it
 * would be over WS_MAX_KEY_SIZE. */
static int record_key(const char *what, const char *noun, const char *name, ws_buf *k, uint8_t tag, ws_bytes key,
                      size_t tail) {
    size_t nl = strlen(name), kl = ws_len(key), n = nl + 1 + 1 + 4 + kl + tail;
    if (n > WS_MAX_KEY_SIZE) {
        msg m = {.n = 0};
        m_str(&m, what);
        m_str(&m, ": ");
        m_qstr(&m, name);
        m_str(&m, ": a record key of ");
        m_i64(&m, (int64_t)kl);
        m_str(&m, " bytes makes a ");
        m_str(&m, noun);
        m_str(&m, " over ");
        m_i64(&m, WS_MAX_KEY_SIZE);
        m_str(&m, " bytes");
        return m_fail(&m);
    }
    uint8_t len[4] = {(uint8_t)(kl >> 24), (uint8_t)(kl >> 16), (uint8_t)(kl >> 8), (uint8_t)kl};
    k->len = 0;
    if (!grow(k, n) || !add(k, name, nl + 1) || !add(k, &tag, 1) || !add(k, len, 4) || !add(k, key.ptr, kl))
        return oom();
    return WS_OK;
}

/* The late-record count key: name, 0, 'c', "late". */
static int late_key(const char *name, ws_buf *k) {
    k->len = 0;
    return add(k, name, strlen(name) + 1) && add(k, "clate", 5);
}

static int late_count(const char *name, ws_store *store, const char *what, uint64_t *n) {
    ws_buf k = {0}, v = {0};
    int st = WS_OK;
    *n = 0;
    if (!late_key(name, &k)) {
        st = oom();
    } else {
        int g = get(store, bytes_of(&k), &v);
        if (g < 0) {
            st = WS_FAILED;
        } else if (g == 1 && v.len != 8) {
            msg m = {.n = 0};
            m_str(&m, what);
            m_str(&m, ": ");
            m_qstr(&m, name);
            if (!strcmp(what, "window")) {
                m_str(&m, ": store ");
                m_qstr(&m, store->name);
                m_str(&m, " key ");
                m_quote(&m, k.data, k.len);
                m_str(&m, ": late count is not 8 bytes");
            } else {
                m_str(&m, ": corrupt buffered record under key ");
                m_quote(&m, k.data, k.len);
            }
            st = m_fail(&m);
        } else if (g == 1) {
            *n = be64(v.data);
        }
    }
    ws_buf_free(&k);
    ws_buf_free(&v);
    return st;
}

/* Counts a late record and sends it, with the header, to the late output. */
static int late_record(const char *name, ws_store *store, ws_output *out, const char *header, const char *what,
                       const ws_record *r, ws_bytes key) {
    uint64_t n;
    if (late_count(name, store, what, &n) != WS_OK) return WS_FAILED;
    ws_buf k = {0};
    uint8_t v[8];
    putbe64(v, n + 1);
    int st = late_key(name, &k) ? put(store, bytes_of(&k), v, 8) : oom();
    ws_buf_free(&k);
    if (st != WS_OK || !out) return st;
    ws_header *hs = malloc((r->header_count + 1) * sizeof *hs);
    if (!hs) return oom();
    size_t pos = 0;
    uint32_t i = 0;
    while (ws_next_header(r, &pos, &hs[i])) i++;
    hs[i].name = ws_str(header);
    hs[i].value = ws_str(name);
    ws_out o = {key, r->value, hs, i + 1, r->timestamp};
    int32_t e = ws_emit(out, &o);
    free(hs);
    return e < 0 ? ws_fail_call("emit", out->name, e) : WS_OK;
}

/* ---- windows ---- */

#define TAG_WINDOW 'w'
#define TAG_SESSION 's'
#define FLAG_DIRTY 1   /* changed since its result was last emitted (WS_EMIT_ON_COMMIT) */
#define FLAG_EMITTED 2 /* a result was emitted (WS_EMIT_ON_COMMIT; for retractions) */
#define STORED_HEADER 17

/* A window's value: flags u8, end i64, largest timestamp i64 (big-endian),
 * then the aggregate; fresh: no aggregate yet (a new window). */
typedef struct {
    uint8_t flags;
    int64_t end, max_ts;
    ws_buf agg;
    int fresh;
} stored;

int ws_windows_check(const ws_windows *w) {
    const char *name = w->name ? w->name : "";
    const char *e = NULL;
    if (!*name) e = "name is required";
    else if (!w->store) e = "store is required";
    else if (!w->aggregate) e = "aggregate is required";
    else if (!w->result) e = "result is required";
    else if (w->grace < 0) e = "grace must not be negative";
    else if (w->emit < WS_EMIT_FINAL || w->emit > WS_EMIT_ON_COMMIT) e = "unknown emit mode";
    else if ((w->size > 0) == (w->gap > 0)) e = "set exactly one of size (tumbling, hopping) and gap (sessions), positive";
    else if (w->size < 0 || w->gap < 0) e = "size and gap must not be negative";
    else if (w->gap > 0 && w->advance != 0) e = "advance is for hopping windows, not sessions";
    else if (w->gap > 0 && !w->merge) e = "merge is required for session windows";
    else if (w->advance < 0 || w->advance > w->size) e = "advance must be in (0, size]";
    return e ? bad("window", name, e) : WS_OK;
}

/* name, 0, tag, u32 key length, key, start (sortable). */
static int state_key(const ws_windows *w, ws_buf *k, uint8_t tag, ws_bytes key, int64_t start) {
    if (record_key("window", "window key", w->name, k, tag, key, 8) != WS_OK) return WS_FAILED;
    return add64(k, (uint64_t)start ^ ((uint64_t)1 << 63)) ? WS_OK : oom();
}

/* Splits a key made by state_key: 1, or 0 for any other key. */
static int parse_key(const char *name, ws_bytes k, size_t tail, uint8_t tag1, uint8_t tag2, uint8_t *tag,
                     ws_bytes *key, int64_t *ts) {
    size_t p = strlen(name) + 1, n = ws_len(k);
    if (n < p + 1 + 4 + tail || memcmp(k.ptr, name, p) != 0) return 0;
    *tag = k.ptr[p];
    if (*tag != tag1 && *tag != tag2) return 0;
    const uint8_t *l = k.ptr + p + 1;
    size_t kl = (size_t)l[0] << 24 | (size_t)l[1] << 16 | (size_t)l[2] << 8 | l[3];
    if (n != p + 1 + 4 + kl + tail) return 0;
    key->ptr = k.ptr + p + 5;
    key->len = (int32_t)kl;
    *ts = sortable(k.ptr + p + 5 + kl);
    return 1;
}

static int corrupt_window(const ws_windows *w, ws_bytes key, size_t vlen) {
    msg m = {.n = 0};
    m_str(&m, "window: ");
    m_qstr(&m, w->name);
    m_str(&m, ": store ");
    m_qstr(&m, w->store->name);
    m_str(&m, " key ");
    m_quote(&m, key.ptr, ws_len(key));
    m_str(&m, ": window value of ");
    m_i64(&m, (int64_t)vlen);
    m_str(&m, " bytes");
    return m_fail(&m);
}

static int decode(const ws_windows *w, ws_bytes key, const uint8_t *v, size_t n, stored *st) {
    if (n < STORED_HEADER) return corrupt_window(w, key, n);
    st->flags = v[0];
    st->end = (int64_t)be64(v + 1);
    st->max_ts = (int64_t)be64(v + 9);
    st->agg.len = 0;
    st->fresh = 0;
    return add(&st->agg, v + STORED_HEADER, n - STORED_HEADER) ? WS_OK : oom();
}

static int store_window(const ws_windows *w, ws_bytes key, const stored *st) {
    ws_buf v = {0};
    uint8_t f = st->flags;
    int ok = add(&v, &f, 1) && add64(&v, (uint64_t)st->end) && add64(&v, (uint64_t)st->max_ts) &&
             add(&v, st->agg.data, st->agg.len);
    int r = ok ? put(w->store, key, v.data, v.len) : oom();
    ws_buf_free(&v);
    return r;
}

static int result(const ws_windows *w, ws_bytes key, int64_t start, int64_t end, ws_bytes agg, int64_t ts, int final) {
    ws_window_result res = {key, start, end, agg, ts, final};
    return w->result(&res);
}

/* Stores a window that a record changed and emits per the mode. */
static int updated(const ws_windows *w, ws_bytes skey, ws_bytes key, int64_t start, stored *st) {
    switch (w->emit) {
    case WS_EMIT_UPDATE:
        if (result(w, key, start, st->end, bytes_of(&st->agg), st->max_ts, 0) != WS_OK) return WS_FAILED;
        break;
    case WS_EMIT_ON_COMMIT: {
        st->flags |= FLAG_DIRTY;
        int32_t e = ws_commit_mark(skey.ptr, ws_len(skey));
        if (e == -WS_ELIMIT) { /* too many keys marked in this window: emit now instead */
            if (result(w, key, start, st->end, bytes_of(&st->agg), st->max_ts, 0) != WS_OK) return WS_FAILED;
            st->flags = (uint8_t)((st->flags & ~FLAG_DIRTY) | FLAG_EMITTED);
        } else if (e < 0) {
            return ws_fail_call("commit_mark", NULL, e);
        }
        break;
    }
    }
    return store_window(w, skey, st);
}

static int add_to_window(const ws_windows *w, const ws_record *r, ws_bytes key, int64_t start, int64_t end) {
    ws_buf k = {0}, v = {0};
    stored st = {0};
    int rc = state_key(w, &k, TAG_WINDOW, key, start);
    if (rc != WS_OK) goto done;
    int g = get(w->store, bytes_of(&k), &v);
    if (g < 0) {
        rc = WS_FAILED;
    } else if (g == 1) {
        rc = decode(w, bytes_of(&k), v.data, v.len, &st);
        if (st.max_ts < r->timestamp) st.max_ts = r->timestamp;
    } else {
        st = (stored){.end = end, .max_ts = r->timestamp, .fresh = 1};
        rc = timer_set(wadd(end, w->grace), bytes_of(&k));
    }
    if (rc == WS_OK) rc = w->aggregate(&st.agg, st.fresh, r);
    if (rc == WS_OK) rc = updated(w, bytes_of(&k), key, start, &st);
done:
    ws_buf_free(&k);
    ws_buf_free(&v);
    ws_buf_free(&st.agg);
    return rc;
}

typedef struct {
    ws_buf key;
    int64_t start;
    stored st;
} old_session;

static void free_sessions(old_session *s, size_t n) {
    for (size_t i = 0; i < n; i++) ws_buf_free(&s[i].key), ws_buf_free(&s[i].st.agg);
    free(s);
}

/* Adds r to its key's sessions: it joins every session it is within gap
 * of, merging them. */
static int add_session(const ws_windows *w, const ws_record *r, ws_bytes key, int64_t now) {
    int64_t ts = r->timestamp, gap = w->gap;
    ws_buf prefix = {0}, end = {0}, skey = {0};
    old_session *joined = NULL;
    size_t n = 0, cap = 0;
    stored st = {0};
    int rc = state_key(w, &prefix, TAG_SESSION, key, 0);
    if (rc != WS_OK) goto done;
    prefix.len -= 8;
    if (!prefix_end(&prefix, &end)) {
        rc = oom();
        goto done;
    }
    ws_scan sc;
    int32_t e = ws_scan_open(w->store, prefix.data, prefix.len, end.data, end.len, &sc);
    if (e < 0) {
        rc = ws_fail_call("scan_open", w->store->name, e);
        goto done;
    }
    ws_bytes k, v;
    while ((e = ws_scan_next(&sc, &k, &v)) == 1) {
        int64_t start = sortable(k.ptr + prefix.len);
        stored o = {0};
        if (decode(w, k, v.ptr, ws_len(v), &o) != WS_OK) {
            ws_buf_free(&o.agg);
            ws_scan_close(&sc);
            rc = WS_FAILED;
            goto done;
        }
        /* The session [start, end) takes records in [start-gap, end-1+gap]. */
        if (ts >= wadd(start, -gap) && ts <= wadd(wadd(o.end, -1), gap)) {
            if (n == cap) {
                cap = cap ? 2 * cap : 4;
                old_session *j = realloc(joined, cap * sizeof *j);
                if (!j) {
                    ws_buf_free(&o.agg);
                    ws_scan_close(&sc);
                    rc = oom();
                    goto done;
                }
                joined = j;
            }
            joined[n] = (old_session){.start = start, .st = o};
            if (!add(&joined[n++].key, k.ptr, ws_len(k))) {
                ws_scan_close(&sc);
                rc = oom();
                goto done;
            }
        } else {
            ws_buf_free(&o.agg);
        }
    }
    int32_t ce = ws_scan_close(&sc);
    if (e < 0 || ce < 0) {
        rc = ws_fail_call(e < 0 ? "scan_next" : "scan_close", w->store->name, e < 0 ? e : ce);
        goto done;
    }
    int64_t start = ts, last = wadd(ts, 1), max_ts = ts;
    for (size_t i = 0; i < n; i++) {
        if (joined[i].start < start) start = joined[i].start;
        if (joined[i].st.end > last) last = joined[i].st.end;
        if (joined[i].st.max_ts > max_ts) max_ts = joined[i].st.max_ts;
    }
    if (wadd(wadd(last, gap), w->grace) <= now) { /* even merged, the session is closed */
        rc = late_record(w->name, w->store, w->late_output, WS_WINDOW_LATE_HEADER, "window", r, key);
        goto done;
    }
    /* The aggregate: the joined sessions' merged (a lone empty one is none,
     * as in the Go SDK), then the record. */
    st.fresh = n == 0 || (n == 1 && joined[0].st.agg.len == 0);
    for (size_t i = 0; i < n; i++) {
        if (i == 0) {
            if (!add(&st.agg, joined[0].st.agg.data, joined[0].st.agg.len)) {
                rc = oom();
                goto done;
            }
        } else if ((rc = w->merge(&st.agg, bytes_of(&joined[i].st.agg))) != WS_OK) {
            goto done;
        }
        if (joined[i].start == start) st.flags = joined[i].st.flags & FLAG_EMITTED; /* the same key keeps its history */
    }
    if ((rc = w->aggregate(&st.agg, st.fresh, r)) != WS_OK) goto done;
    if ((rc = state_key(w, &skey, TAG_SESSION, key, start)) != WS_OK) goto done;
    for (size_t i = 0; i < n; i++) {
        old_session *o = &joined[i];
        if ((rc = timer_cancel(wadd(wadd(o->st.end, gap), w->grace), bytes_of(&o->key))) != WS_OK) goto done;
        if (o->start == start) continue; /* the same key: overwritten below */
        if ((rc = del(w->store, bytes_of(&o->key))) != WS_OK) goto done;
        if (w->emit == WS_EMIT_UPDATE || (w->emit == WS_EMIT_ON_COMMIT && (o->st.flags & FLAG_EMITTED))) {
            if ((rc = result(w, key, o->start, o->st.end, WS_NULL, o->st.max_ts, 0)) != WS_OK) goto done;
        }
    }
    if ((rc = timer_set(wadd(wadd(last, gap), w->grace), bytes_of(&skey))) != WS_OK) goto done;
    st.end = last;
    st.max_ts = max_ts;
    rc = updated(w, bytes_of(&skey), key, start, &st);
done:
    free_sessions(joined, n);
    ws_buf_free(&prefix);
    ws_buf_free(&end);
    ws_buf_free(&skey);
    ws_buf_free(&st.agg);
    return rc;
}

int ws_windows_add(const ws_windows *w, const ws_record *r) {
    if (ws_windows_check(w) != WS_OK) return WS_FAILED;
    if (r->timestamp < 0) return late_record(w->name, w->store, w->late_output, WS_WINDOW_LATE_HEADER, "window", r, r->key);
    ws_bytes key = r->key.len < 0 ? empty : r->key; /* a null key is the empty key */
    int64_t now;
    int32_t e = ws_stream_time(&now);
    if (e < 0) return ws_fail_call("time_now", NULL, e);
    if (w->gap > 0) return add_session(w, r, key, now);
    int64_t ts = r->timestamp, size = w->size, adv = w->advance ? w->advance : w->size;
    int applied = 0;
    /* The windows of ts start at multiples of adv in (ts-size, ts], and not
     * before 0, as Kafka Streams' TimeWindows.windowsFor. */
    int64_t first = wadd(wadd(ts, -size), adv);
    if (first < 0) first = 0;
    for (int64_t start = first / adv * adv; start <= ts;) {
        int64_t end = wadd(start, size);
        if (wadd(end, w->grace) > now) {
            applied = 1;
            if (add_to_window(w, r, key, start, end) != WS_OK) return WS_FAILED;
        }
        if (start > INT64_MAX - adv) break;
        start += adv;
    }
    return applied ? WS_OK : late_record(w->name, w->store, w->late_output, WS_WINDOW_LATE_HEADER, "window", r, key);
}

int ws_windows_on_timer(const ws_windows *w, const ws_trigger *t, int *taken) {
    uint8_t tag;
    ws_bytes key;
    int64_t start;
    *taken = 0;
    if (!parse_key(w->name, t->key, 8, TAG_WINDOW, TAG_SESSION, &tag, &key, &start) || t->kind != WS_EVENT_TIME)
        return WS_OK;
    *taken = 1;
    if (ws_windows_check(w) != WS_OK) return WS_FAILED;
    ws_buf v = {0};
    stored st = {0};
    int rc = WS_OK;
    int g = get(w->store, t->key, &v);
    if (g <= 0) { /* nothing left to close */
        rc = g < 0 ? WS_FAILED : WS_OK;
        goto done;
    }
    if ((rc = decode(w, t->key, v.data, v.len, &st)) != WS_OK) goto done;
    int64_t close_at = wadd(st.end, w->grace);
    if (tag == TAG_SESSION) close_at = wadd(close_at, w->gap);
    if (close_at != t->time) goto done; /* a timer of an earlier extent of the session */
    if (w->emit == WS_EMIT_FINAL || (w->emit == WS_EMIT_ON_COMMIT && (st.flags & FLAG_DIRTY))) {
        if ((rc = result(w, key, start, st.end, bytes_of(&st.agg), st.max_ts, 1)) != WS_OK) goto done;
    }
    rc = del(w->store, t->key);
done:
    ws_buf_free(&v);
    ws_buf_free(&st.agg);
    return rc;
}

int ws_windows_on_commit(const ws_windows *w, const ws_trigger *t, int *taken) {
    uint8_t tag;
    ws_bytes key;
    int64_t start;
    *taken = 0;
    if (!parse_key(w->name, t->key, 8, TAG_WINDOW, TAG_SESSION, &tag, &key, &start)) return WS_OK;
    *taken = 1;
    if (ws_windows_check(w) != WS_OK) return WS_FAILED;
    ws_buf v = {0};
    stored st = {0};
    int rc = WS_OK;
    int g = get(w->store, t->key, &v);
    if (g <= 0) { /* closed (and emitted) or merged away since */
        rc = g < 0 ? WS_FAILED : WS_OK;
        goto done;
    }
    if ((rc = decode(w, t->key, v.data, v.len, &st)) != WS_OK || !(st.flags & FLAG_DIRTY)) goto done;
    if ((rc = result(w, key, start, st.end, bytes_of(&st.agg), st.max_ts, 0)) != WS_OK) goto done;
    st.flags = (uint8_t)((st.flags & ~FLAG_DIRTY) | FLAG_EMITTED);
    rc = store_window(w, t->key, &st);
done:
    ws_buf_free(&v);
    ws_buf_free(&st.agg);
    return rc;
}

int ws_windows_late_count(const ws_windows *w, uint64_t *n) { return late_count(w->name, w->store, "window", n); }

int ws_window_count_of(ws_bytes agg, uint64_t *n) {
    *n = 0;
    if (agg.len < 0) return WS_OK;
    if (agg.len == 8) {
        *n = be64(agg.ptr);
        return WS_OK;
    }
    msg m = {.n = 0};
    m_str(&m, "window: a count aggregate of ");
    m_i64(&m, agg.len);
    m_str(&m, " bytes, want 8");
    return m_fail(&m);
}

int ws_window_count(ws_buf *acc, int fresh, const ws_record *r) {
    (void)r;
    uint64_t n = 0;
    if (!fresh && ws_window_count_of(bytes_of(acc), &n) != WS_OK) return WS_FAILED;
    acc->len = 0;
    return add64(acc, n + 1) ? WS_OK : oom();
}

int ws_window_merge_counts(ws_buf *a, ws_bytes b) {
    uint64_t x = 0, y = 0;
    /* an empty aggregate counts 0 (the Go SDK's nil) */
    if (a->len && ws_window_count_of(bytes_of(a), &x) != WS_OK) return WS_FAILED;
    if (b.len > 0 && ws_window_count_of(b, &y) != WS_OK) return WS_FAILED;
    a->len = 0;
    return add64(a, x + y) ? WS_OK : oom();
}

/* ---- joins ---- */

#define TAG_LEFT 'L'
#define TAG_RIGHT 'R'
#define FLAG_MATCHED 1 /* joined at least one record of the other side */
#define FLAG_NULL 2    /* the record's value is null */

int ws_join_check(const ws_join *j) {
    const char *name = j->name ? j->name : "";
    const char *e = NULL;
    if (!*name) e = "name is required";
    else if (!j->store) e = "store is required";
    else if (!j->result) e = "result is required";
    else if (j->left == j->right) e = "left and right must be different inputs";
    else if (j->before < 0 || j->after < 0 || j->grace < 0) e = "before, after and grace must not be negative";
    else if (j->kind < WS_JOIN_INNER || j->kind > WS_JOIN_OUTER) e = "unknown kind";
    return e ? bad("join", name, e) : WS_OK;
}

/* name, 0, side tag, u32 key length, key, timestamp (sortable), offset
 * (sortable). */
static int buffer_key(const ws_join *j, ws_buf *k, uint8_t tag, ws_bytes key, int64_t ts, int64_t offset) {
    if (record_key("join", "buffer key", j->name, k, tag, key, 16) != WS_OK) return WS_FAILED;
    if (!add64(k, (uint64_t)ts ^ ((uint64_t)1 << 63)) || !add64(k, (uint64_t)offset ^ ((uint64_t)1 << 63)))
        return oom();
    return WS_OK;
}

static int corrupt_join(const ws_join *j, ws_bytes key) {
    msg m = {.n = 0};
    m_str(&m, "join: ");
    m_qstr(&m, j->name);
    m_str(&m, ": corrupt buffered record under key ");
    m_quote(&m, key.ptr, ws_len(key));
    return m_fail(&m);
}

static int emits_unmatched(const ws_join *j, uint8_t tag) {
    return j->kind == WS_JOIN_OUTER || (j->kind == WS_JOIN_LEFT && tag == TAG_LEFT);
}

typedef struct {
    ws_buf key;
    int64_t ts;
    uint8_t flags;
    ws_buf value;
} buffered;

static void free_buffered(buffered *b, size_t n) {
    for (size_t i = 0; i < n; i++) ws_buf_free(&b[i].key), ws_buf_free(&b[i].value);
    free(b);
}

/* The buffered records of one side and key with timestamps in [lo, hi],
 * in timestamp order, into *out (*n of them). */
static int scan_side(const ws_join *j, uint8_t tag, ws_bytes key, int64_t lo, int64_t hi, buffered **out, size_t *n) {
    *out = NULL;
    *n = 0;
    if (hi < lo) return WS_OK;
    ws_buf start = {0}, end = {0};
    size_t cap = 0;
    int rc = buffer_key(j, &start, tag, key, lo, 0);
    if (rc != WS_OK) goto done;
    if (hi == INT64_MAX) {
        ws_buf p = {start.data, start.len - 16, start.cap};
        if (!prefix_end(&p, &end)) rc = oom();
    } else {
        rc = buffer_key(j, &end, tag, key, hi + 1, 0);
    }
    if (rc != WS_OK) goto done;
    ws_scan sc;
    int32_t e = ws_scan_open(j->store, start.data, start.len, end.data, end.len, &sc);
    if (e < 0) {
        rc = ws_fail_call("scan_open", j->store->name, e);
        goto done;
    }
    ws_bytes k, v;
    while ((e = ws_scan_next(&sc, &k, &v)) == 1) {
        uint8_t t;
        ws_bytes rk;
        int64_t ts;
        if (!parse_key(j->name, k, 16, TAG_LEFT, TAG_RIGHT, &t, &rk, &ts) || v.len < 1) {
            ws_scan_close(&sc);
            rc = corrupt_join(j, k);
            goto done;
        }
        if (*n == cap) {
            cap = cap ? 2 * cap : 4;
            buffered *b = realloc(*out, cap * sizeof *b);
            if (!b) {
                ws_scan_close(&sc);
                rc = oom();
                goto done;
            }
            *out = b;
        }
        buffered *b = &(*out)[(*n)++];
        *b = (buffered){.ts = ts, .flags = v.ptr[0]};
        if (!add(&b->key, k.ptr, ws_len(k)) || !add(&b->value, v.ptr + 1, ws_len(v) - 1)) {
            ws_scan_close(&sc);
            rc = oom();
            goto done;
        }
    }
    int32_t ce = ws_scan_close(&sc);
    if (e < 0 || ce < 0) rc = ws_fail_call(e < 0 ? "scan_next" : "scan_close", j->store->name, e < 0 ? e : ce);
done:
    ws_buf_free(&start);
    ws_buf_free(&end);
    if (rc != WS_OK) {
        free_buffered(*out, *n);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

int ws_join_add(const ws_join *j, const ws_record *r) {
    if (ws_join_check(j) != WS_OK) return WS_FAILED;
    int64_t ts = r->timestamp, lo, hi;
    uint8_t tag, other;
    if (r->input == j->left) {
        tag = TAG_LEFT, other = TAG_RIGHT;
        lo = sat(ts, -j->before), hi = sat(ts, j->after);
    } else if (r->input == j->right) {
        tag = TAG_RIGHT, other = TAG_LEFT;
        lo = sat(ts, -j->after), hi = sat(ts, j->before);
    } else {
        msg m = {.n = 0};
        m_str(&m, "join: ");
        m_qstr(&m, j->name);
        m_str(&m, ": a record of input ");
        m_i64(&m, r->input);
        m_str(&m, ", which is neither side (left ");
        m_i64(&m, j->left);
        m_str(&m, ", right ");
        m_i64(&m, j->right);
        m_str(&m, ")");
        return m_fail(&m);
    }
    if (ts < 0) return late_record(j->name, j->store, j->late_output, WS_JOIN_LATE_HEADER, "join", r, r->key);
    int64_t now;
    int32_t e = ws_stream_time(&now);
    if (e < 0) return ws_fail_call("time_now", NULL, e);
    if (now != WS_NO_TIME && ts < sat(now, -j->grace))
        return late_record(j->name, j->store, j->late_output, WS_JOIN_LATE_HEADER, "join", r, r->key);
    ws_bytes key = r->key.len < 0 ? empty : r->key;
    buffered *m = NULL;
    size_t n = 0;
    ws_buf bkey = {0}, v = {0};
    int rc = scan_side(j, other, key, lo < 0 ? 0 : lo, hi, &m, &n);
    if (rc != WS_OK) goto done;
    uint8_t flags = r->value.len < 0 ? FLAG_NULL : 0;
    ws_join_side this = {r->value, ts};
    for (size_t i = 0; i < n; i++) {
        ws_join_side that = {(m[i].flags & FLAG_NULL) ? WS_NULL : bytes_of(&m[i].value), m[i].ts};
        if (!m[i].value.data && !(m[i].flags & FLAG_NULL)) that.value = empty;
        ws_join_result res = {key, tag == TAG_LEFT ? &this : &that, tag == TAG_LEFT ? &that : &this,
                              ts > m[i].ts ? ts : m[i].ts};
        if ((rc = j->result(&res)) != WS_OK) goto done;
        flags |= FLAG_MATCHED;
        /* Remember that the buffered record matched, if its unmatched
         * result would otherwise be emitted when it expires. */
        if (!(m[i].flags & FLAG_MATCHED) && emits_unmatched(j, other)) {
            uint8_t f = m[i].flags | FLAG_MATCHED;
            v.len = 0;
            if (!add(&v, &f, 1) || !add(&v, m[i].value.data, m[i].value.len)) {
                rc = oom();
                goto done;
            }
            if ((rc = put(j->store, bytes_of(&m[i].key), v.data, v.len)) != WS_OK) goto done;
        }
    }
    if ((rc = buffer_key(j, &bkey, tag, key, ts, r->offset)) != WS_OK) goto done;
    v.len = 0;
    if (!add(&v, &flags, 1) || !add(&v, r->value.ptr, ws_len(r->value))) {
        rc = oom();
        goto done;
    }
    if ((rc = put(j->store, bytes_of(&bkey), v.data, v.len)) != WS_OK) goto done;
    /* Kept while a record that is not late could still join it. */
    rc = timer_set(sat(sat(hi, j->grace), 1), bytes_of(&bkey));
done:
    free_buffered(m, n);
    ws_buf_free(&bkey);
    ws_buf_free(&v);
    return rc;
}

int ws_join_on_timer(const ws_join *j, const ws_trigger *t, int *taken) {
    uint8_t tag;
    ws_bytes key;
    int64_t ts;
    *taken = 0;
    if (t->kind != WS_EVENT_TIME || !parse_key(j->name, t->key, 16, TAG_LEFT, TAG_RIGHT, &tag, &key, &ts)) return WS_OK;
    *taken = 1;
    if (ws_join_check(j) != WS_OK) return WS_FAILED;
    ws_buf v = {0};
    int rc = WS_OK;
    int g = get(j->store, t->key, &v);
    if (g <= 0) { /* deleted already: nothing to do */
        rc = g < 0 ? WS_FAILED : WS_OK;
        goto done;
    }
    if (v.len < 1) {
        rc = corrupt_join(j, t->key);
        goto done;
    }
    if (!(v.data[0] & FLAG_MATCHED) && emits_unmatched(j, tag)) {
        ws_join_side side = {(v.data[0] & FLAG_NULL) ? WS_NULL : (ws_bytes){v.data + 1, (int32_t)(v.len - 1)}, ts};
        ws_join_result res = {key, tag == TAG_LEFT ? &side : NULL, tag == TAG_LEFT ? NULL : &side, ts};
        if ((rc = j->result(&res)) != WS_OK) goto done;
    }
    rc = del(j->store, t->key);
done:
    ws_buf_free(&v);
    return rc;
}

int ws_join_late_count(const ws_join *j, uint64_t *n) { return late_count(j->name, j->store, "join", n); }
