/*
 * wasmstream.c: the C SDK's implementation (see wasmstream.h). It uses
 * only memcpy, memcmp, strlen, malloc, realloc and free from the C library.
 *
 * A Wasm instance is single-threaded and the host calls one export at a
 * time, so the SDK's state is plain statics.
 */
#include "wasmstream.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Input buffer sizes in bytes: the first is larger than the 4096 the host
 * asks for at start so that typical records never regrow it; requests over
 * the largest get NULL ("cannot") instead of an allocation that would hit
 * the instance's memory limit. */
#define MIN_INPUT (16 << 10)
#define MAX_INPUT (256u << 20)

static uint8_t *in_buf;  /* handed to the host; kept until the next ws_sdk_input */
static size_t in_cap;
static uint8_t *cur_rec; /* the record being processed (in in_buf; a slot's payload in a batch) */
static size_t cur_len;   /* its length while ws_process runs, else 0 */
static int64_t cur_ts;   /* its timestamp (a callback's trigger's), the default of emits */
static uint8_t *emit_buf; /* encoding of the record being emitted, reused */
static size_t emit_cap;
static uint32_t gen = 1; /* instance generation of cached indices */

ws_bytes ws_str(const char *s) {
    ws_bytes b = {(const uint8_t *)s, (int32_t)strlen(s)};
    return b;
}

static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32; }

static void put32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static void put64(uint8_t *p, uint64_t v) {
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

/* The field of length n (-1: null) at src[*p:len]; 0 if it is not there. */
static int take(const uint8_t *src, size_t len, size_t *p, int32_t n, ws_bytes *out) {
    if (n == -1) {
        out->ptr = NULL;
        out->len = -1;
        return 1;
    }
    if (n < 0 || (size_t)n > len - *p) return 0;
    out->ptr = src + *p;
    out->len = n;
    *p += (size_t)n;
    return 1;
}

int ws_decode(const uint8_t *src, size_t n, ws_record *r) {
    if (n < WS_HEADER_SIZE) return -WS_EINVAL;
    uint32_t count = get32(src + 32);
    if (count > WS_MAX_HEADERS) return -WS_EINVAL;
    size_t p = WS_HEADER_SIZE;
    if (!take(src, n, &p, (int32_t)get32(src + 24), &r->key)) return -WS_EINVAL;
    if (!take(src, n, &p, (int32_t)get32(src + 28), &r->value)) return -WS_EINVAL;
    size_t hstart = p;
    for (uint32_t i = 0; i < count; i++) {
        ws_bytes name, val;
        if (n - p < 8) return -WS_EINVAL;
        int32_t nl = (int32_t)get32(src + p), vl = (int32_t)get32(src + p + 4);
        p += 8;
        if (nl < 0 || !take(src, n, &p, nl, &name) || !take(src, n, &p, vl, &val)) return -WS_EINVAL;
    }
    if (p != n) return -WS_EINVAL; /* trailing bytes: the lengths do not add up */
    r->timestamp = (int64_t)get64(src);
    r->offset = (int64_t)get64(src + 8);
    r->partition = (int32_t)get32(src + 16);
    r->input = get32(src + 20);
    r->header_count = count;
    r->headers = src + hstart;
    r->headers_len = n - hstart;
    r->raw = src;
    r->raw_len = n;
    return 0;
}

int ws_next_header(const ws_record *r, size_t *pos, ws_header *h) {
    if (*pos >= r->headers_len) return 0;
    const uint8_t *b = r->headers + *pos;
    int32_t nl = (int32_t)get32(b), vl = (int32_t)get32(b + 4);
    h->name.ptr = b + 8;
    h->name.len = nl;
    if (vl < 0) {
        h->value.ptr = NULL;
        h->value.len = -1;
        vl = 0;
    } else {
        h->value.ptr = b + 8 + nl;
        h->value.len = vl;
    }
    *pos += 8 + (size_t)nl + (size_t)vl;
    return 1;
}

static size_t blen(ws_bytes b) { return b.len < 0 ? 0 : (size_t)b.len; }

size_t ws_encoded_size(const ws_out *r) {
    size_t n = WS_HEADER_SIZE + blen(r->key) + blen(r->value);
    for (uint32_t i = 0; i < r->header_count; i++)
        n += 8 + blen(r->headers[i].name) + blen(r->headers[i].value);
    return n;
}

static uint8_t *copy(uint8_t *d, ws_bytes b) {
    if (b.len > 0) memcpy(d, b.ptr, (size_t)b.len);
    return d + blen(b);
}

void ws_encode(uint8_t *d, int64_t ts, int64_t offset, int32_t partition, uint32_t index, const ws_out *r) {
    put64(d, (uint64_t)ts);
    put64(d + 8, (uint64_t)offset);
    put32(d + 16, (uint32_t)partition);
    put32(d + 20, index);
    put32(d + 24, (uint32_t)r->key.len);
    put32(d + 28, (uint32_t)r->value.len);
    put32(d + 32, r->header_count);
    uint8_t *p = copy(copy(d + WS_HEADER_SIZE, r->key), r->value);
    for (uint32_t i = 0; i < r->header_count; i++) {
        put32(p, (uint32_t)blen(r->headers[i].name));
        put32(p + 4, (uint32_t)r->headers[i].value.len);
        p = copy(copy(p + 8, r->headers[i].name), r->headers[i].value);
    }
}

/* ---- errors ---- */

static const char *const names[] = {"", "EFAULT", "EINVAL", "ENOOUTPUT", "ENOSTORE", "ENOTFOUND", "ETOOLARGE",
                                    "ENOCURSOR", "EPHASE", "ELIMIT", "EIO", "ENONAME", "ETIMESTAMP"};
static const char *const texts[] = {"",
                                    "pointer or length outside plugin memory",
                                    "malformed argument",
                                    "output not declared by the processor",
                                    "store not declared by the processor",
                                    "key not found",
                                    "over the size limit",
                                    "no such scan cursor",
                                    "call not allowed in this phase",
                                    "per-record limit reached",
                                    "host I/O failure",
                                    "no output or store with that name",
                                    "timestamp outside what the output accepts"};

const char *ws_errno_name(int32_t e) {
    if (e < 0) e = -e;
    return e > 0 && e <= WS_ETIMESTAMP ? names[e] : "E?";
}

const char *ws_errno_text(int32_t e) {
    if (e < 0) e = -e;
    return e > 0 && e <= WS_ETIMESTAMP ? texts[e] : "unknown errno";
}

int ws_fail_n(const char *msg, size_t len) {
    ws_host_set_error(msg, (uint32_t)len);
    return WS_FAILED;
}

int ws_fail(const char *msg) { return ws_fail_n(msg, strlen(msg)); }

int ws_fail_call(const char *call, const char *name, int32_t err) {
    char m[256];
    size_t n = 0;
    const char *parts[8] = {"sdk: ", call, name ? " \"" : "", name ? name : "", name ? "\"" : "", ": ",
                            ws_errno_name(err), ""};
    for (int i = 0; i < 8; i++)
        for (const char *s = parts[i]; *s && n < sizeof m - 2; s++) m[n++] = *s;
    const char *t = ws_errno_text(err);
    if (n < sizeof m - 2) m[n++] = ':', m[n++] = ' ';
    for (; *t && n < sizeof m; t++) m[n++] = *t;
    return ws_fail_n(m, n);
}

/* ---- names ---- */

static int32_t resolve(ws_output *o, int32_t (*f)(const void *, uint32_t)) {
    if (o->gen == gen) return o->idx;
    int32_t i = f(o->name, (uint32_t)strlen(o->name));
    if (i < 0) return i;
    o->idx = i;
    o->gen = gen;
    return i;
}

/* The declared handles (WS_DECLARE_OUTPUT, WS_DECLARE_STORE), resolved by
 * ws_sdk_init before ws_init. */
static struct declared {
    ws_output *h;
    int is_store;
} *declared;
static size_t n_declared, cap_declared;

/* ws_sdk_init calls it, and only ws_declare sets it: a processor that
 * declares nothing does not link the resolution and its message. Not
 * static, so that the compiler cannot see that its one value is
 * resolve_declared and call that directly (which would link it). */
int (*ws_sdk_resolve_hook)(void);
static int resolve_declared(void);

void ws_declare(ws_output *h, int is_store) {
    ws_sdk_resolve_hook = resolve_declared;
    if (n_declared == cap_declared) {
        size_t n = cap_declared ? 2 * cap_declared : 8;
        struct declared *d = realloc(declared, n * sizeof *d);
        if (!d) return; /* then it is resolved on first use */
        declared = d;
        cap_declared = n;
    }
    declared[n_declared].h = h;
    declared[n_declared++].is_store = is_store;
}

/* Orders missing handles as the other SDKs list them: outputs first, then
 * stores, each by name. */
static int declared_less(const struct declared *a, const struct declared *b) {
    if (a->is_store != b->is_store) return a->is_store < b->is_store;
    return strcmp(a->h->name, b->h->name) < 0;
}

static void append(char *m, size_t cap, size_t *n, const char *s) {
    for (; *s && *n < cap; s++) m[(*n)++] = *s;
}

/* Resolves the declared handles: WS_OK, or WS_FAILED with the reason. */
static int resolve_declared(void) {
    struct declared *missing = NULL;
    size_t n_missing = 0;
    for (size_t i = 0; i < n_declared; i++) {
        ws_output *h = declared[i].h;
        int32_t e = resolve(h, declared[i].is_store ? ws_host_store_index : ws_host_output_index);
        if (e >= 0) continue;
        if (e != -WS_ENONAME) {
            free(missing);
            return ws_fail_call(declared[i].is_store ? "store_index" : "output_index", h->name, e);
        }
        if (!missing && !(missing = malloc(n_declared * sizeof *missing))) return ws_fail("sdk: out of memory");
        /* insertion in order, without duplicates */
        size_t j = n_missing;
        while (j > 0 && declared_less(&declared[i], &missing[j - 1])) j--;
        if (j > 0 && missing[j - 1].is_store == declared[i].is_store && !strcmp(missing[j - 1].h->name, h->name))
            continue;
        memmove(&missing[j + 1], &missing[j], (n_missing - j) * sizeof *missing);
        missing[j] = declared[i];
        n_missing++;
    }
    if (!n_missing) return WS_OK;
    char m[WS_MAX_LOG_SIZE];
    size_t n = 0;
    append(m, sizeof m, &n, "sdk: not declared by the processor (add to its outputs or stores in the pipeline config): ");
    for (size_t i = 0; i < n_missing; i++) {
        append(m, sizeof m, &n, i ? ", " : "");
        append(m, sizeof m, &n, missing[i].is_store ? "store \"" : "output \"");
        append(m, sizeof m, &n, missing[i].h->name);
        append(m, sizeof m, &n, "\"");
    }
    free(missing);
    return ws_fail_n(m, n);
}

int32_t ws_output_check(ws_output *o) {
    int32_t i = resolve(o, ws_host_output_index);
    return i < 0 ? i : 0;
}

int32_t ws_store_check(ws_store *s) {
    int32_t i = resolve(s, ws_host_store_index);
    return i < 0 ? i : 0;
}

/* ---- emit ---- */

/* Batches (abi/ABI.md section 10). Inside ws_sdk_batch emits are staged in
 * an arena in plugin memory, a run of emit entries (u32 length, record)
 * per call, which the host reads when it sees the call end, instead of
 * one host call each. The arena's bytes never move or get freed while the
 * batch runs, nor until the next batch starts: the host reads the last
 * calls' runs after ws_sdk_batch returned, and free would let the
 * allocator write into them. A call whose emits outgrow it moves its own
 * run to a larger chunk; the older chunk is kept for the earlier calls'
 * runs until the next batch. */

/* Arena sizes in bytes: the first chunk, and the staged bytes past which a
 * batch returns after the call in progress so that the host takes them
 * (it hands the rest of the calls again), which bounds the arena at about
 * this plus one call's emits (the Go SDK's figure, sdk/batch.go). */
#define MIN_ARENA (16 << 10)
#define ARENA_HAND_OVER (1 << 20)

static int batching;       /* inside ws_sdk_batch: emits are staged */
static uint8_t *arena;     /* the running batch's runs */
static size_t arena_len, arena_cap;
static uint8_t **arena_old; /* older chunks, kept until the next batch */
static size_t n_old, cap_old;
static size_t call_start;  /* where the current call's run starts in arena */
/* The current call's only emit so far is its input record, forwarded in
 * place: its run is the slot's length field and the record after it. A
 * second emit copies it into the arena first. */
static int forwarded;
static int staged; /* the current call has emitted */

/* Makes room for n more bytes at the end of the current call's run
 * without moving the batch's earlier runs; 0 if memory is short. */
static int arena_reserve(size_t n) {
    if (arena_cap - arena_len >= n) return 1;
    size_t run = arena_len - call_start;
    size_t cap = 2 * arena_cap;
    if (cap < run + n) cap = run + n;
    if (cap < MIN_ARENA) cap = MIN_ARENA;
    if (call_start > 0 && n_old == cap_old) { /* earlier calls' runs stay where they are */
        size_t c = cap_old ? 2 * cap_old : 4;
        uint8_t **o = realloc(arena_old, c * sizeof *o);
        if (!o) return 0;
        arena_old = o;
        cap_old = c;
    }
    uint8_t *next = malloc(cap);
    if (!next) return 0;
    if (run) memcpy(next, arena + call_start, run);
    if (call_start > 0)
        arena_old[n_old++] = arena;
    else
        free(arena); /* it held only this call's run, now copied */
    arena = next;
    arena_cap = cap;
    arena_len = run;
    call_start = 0;
    return 1;
}

uint8_t *ws_put_emit_entry(uint8_t *dst, size_t n) {
    put32(dst, (uint32_t)n);
    return dst + 4;
}

/* Copies the forwarded input record into the arena, where the call's next
 * emits follow it; 0 if memory is short. */
static int materialize(void) {
    if (!arena_reserve(4 + cur_len)) return 0;
    forwarded = 0;
    memcpy(ws_put_emit_entry(arena + arena_len, cur_len), cur_rec, cur_len);
    arena_len += 4 + cur_len;
    return 1;
}

/* n bytes for the next staged record of the current call (its entry's
 * length written before them), or NULL if memory is short. */
static uint8_t *stage(size_t n) {
    if (forwarded && !materialize()) return NULL;
    if (!arena_reserve(4 + n)) return NULL;
    uint8_t *d = ws_put_emit_entry(arena + arena_len, n);
    arena_len += 4 + n;
    staged = 1;
    return d;
}

int32_t ws_emit_to(ws_output *o, int32_t partition, const ws_out *r) {
    int32_t idx = resolve(o, ws_host_output_index);
    if (idx < 0) return idx;
    size_t n = ws_encoded_size(r);
    /* Checked here so that an oversized record neither grows emit_buf for
     * good nor crosses into the host. */
    if (n > WS_MAX_RECORD_SIZE) return -WS_ETOOLARGE;
    int64_t ts = r->timestamp ? r->timestamp : cur_ts;
    if (batching) {
        uint8_t *d = stage(n);
        if (!d) return -WS_ETOOLARGE;
        ws_encode(d, ts, -1, partition, (uint32_t)idx, r);
        return 0;
    }
    if (n > emit_cap) {
        uint8_t *b = realloc(emit_buf, n);
        if (!b) return -WS_ETOOLARGE;
        emit_buf = b;
        emit_cap = n;
    }
    ws_encode(emit_buf, ts, -1, partition, (uint32_t)idx, r);
    return ws_host_emit(emit_buf, (uint32_t)n);
}

int32_t ws_emit(ws_output *o, const ws_out *r) { return ws_emit_to(o, WS_ANY_PARTITION, r); }

/* The fields an emit sets (offset -1, any partition, the output index) in
 * an encoded record. */
static void emit_fields(uint8_t *b, int32_t idx) {
    put64(b + 8, (uint64_t)-1);
    put32(b + 16, (uint32_t)WS_ANY_PARTITION);
    put32(b + 20, (uint32_t)idx);
}

int32_t ws_forward(ws_output *o, const ws_record *r) {
    int32_t idx = resolve(o, ws_host_output_index);
    if (idx < 0) return idx;
    int current = cur_len != 0 && r->raw == cur_rec && r->raw_len == cur_len;
    if (batching) {
        /* Checked here: the host gives a staged emit no errno. */
        if (r->raw_len > WS_MAX_RECORD_SIZE) return -WS_ETOOLARGE;
        if (current && !staged) {
            /* The call's first emit: handed over where it is (the slot's
             * length field and the record are one emit entry). */
            emit_fields(cur_rec, idx);
            forwarded = staged = 1;
            return 0;
        }
        uint8_t *d = stage(r->raw_len);
        if (!d) return -WS_ETOOLARGE;
        memcpy(d, r->raw, r->raw_len);
        emit_fields(d, idx);
        return 0;
    }
    uint8_t *b = cur_rec;
    if (!current) {
        /* Not the record being processed (a copy the processor made): its
         * encoding is copied and rewritten instead. */
        if (r->raw_len > WS_MAX_RECORD_SIZE) return -WS_ETOOLARGE;
        if (r->raw_len > emit_cap) {
            uint8_t *nb = realloc(emit_buf, r->raw_len);
            if (!nb) return -WS_ETOOLARGE;
            emit_buf = nb;
            emit_cap = r->raw_len;
        }
        memcpy(emit_buf, r->raw, r->raw_len);
        b = emit_buf;
    }
    /* The input's own bytes are the encoding but for offset, partition and
     * index, which the record's decoded fields keep. */
    emit_fields(b, idx);
    return ws_host_emit(b, (uint32_t)r->raw_len);
}

/* ---- state ---- */

void ws_buf_free(ws_buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

static int reserve(ws_buf *b, size_t n) {
    if (n <= b->cap) return 1;
    uint8_t *d = realloc(b->data, n);
    if (!d) return 0;
    b->data = d;
    b->cap = n;
    return 1;
}

int32_t ws_get(ws_store *s, const void *key, size_t key_len, ws_buf *out) {
    int32_t idx = resolve(s, ws_host_store_index);
    if (idx < 0) return idx;
    out->len = 0;
    if (!reserve(out, 256)) return -WS_EIO;
    /* A second read only for a value larger than the buffer; a third only
     * if it changed size in between, which a host serving one record at a
     * time never does: the bound turns a broken host into an error. */
    for (int i = 0; i < 3; i++) {
        int32_t n = ws_host_state_get((uint32_t)idx, key, (uint32_t)key_len, out->data, (uint32_t)out->cap);
        if (n == -WS_ENOTFOUND) return 0;
        if (n < 0) return n;
        if ((size_t)n <= out->cap) {
            out->len = (size_t)n;
            return 1;
        }
        if (!reserve(out, (size_t)n)) return -WS_EIO;
    }
    return -WS_EIO;
}

int32_t ws_put(ws_store *s, const void *key, size_t key_len, const void *val, size_t val_len) {
    int32_t idx = resolve(s, ws_host_store_index);
    if (idx < 0) return idx;
    return ws_host_state_put((uint32_t)idx, key, (uint32_t)key_len, val, (uint32_t)val_len);
}

int32_t ws_delete(ws_store *s, const void *key, size_t key_len) {
    int32_t idx = resolve(s, ws_host_store_index);
    if (idx < 0) return idx;
    return ws_host_state_delete((uint32_t)idx, key, (uint32_t)key_len);
}

int32_t ws_scan_open(ws_store *s, const void *start, size_t start_len, const void *end, size_t end_len,
                     ws_scan *out) {
    memset(out, 0, sizeof *out);
    out->store = s->name;
    int32_t idx = resolve(s, ws_host_store_index);
    if (idx < 0) return idx;
    int32_t c = ws_host_scan_open((uint32_t)idx, start, (uint32_t)start_len, end, (uint32_t)end_len);
    if (c < 0) return c;
    out->cursor = c;
    out->open = 1;
    return 0;
}

static int32_t scan_end(ws_scan *sc) {
    if (!sc->open) return 0;
    sc->open = 0;
    return ws_host_scan_close((uint32_t)sc->cursor);
}

int32_t ws_scan_next(ws_scan *sc, ws_bytes *key, ws_bytes *value) {
    if (!sc->open) return 0;
    if (!reserve(&sc->buf, 512)) return -WS_EIO;
    for (int i = 0; i < 3; i++) {
        int32_t n = ws_host_scan_next((uint32_t)sc->cursor, sc->buf.data, (uint32_t)sc->buf.cap);
        if (n == 0) {
            int32_t e = scan_end(sc);
            return e < 0 ? e : 0;
        }
        if (n < 0) {
            scan_end(sc);
            return n;
        }
        if ((size_t)n <= sc->buf.cap) {
            const uint8_t *b = sc->buf.data;
            uint32_t kl = get32(b), vl = get32(b + 4);
            if ((uint64_t)kl + vl + 8 != (uint64_t)n) return -WS_EINVAL;
            key->ptr = b + 8;
            key->len = (int32_t)kl;
            value->ptr = b + 8 + kl;
            value->len = (int32_t)vl;
            return 1;
        }
        size_t grow = sc->buf.cap * 2 > (size_t)n ? sc->buf.cap * 2 : (size_t)n;
        if (!reserve(&sc->buf, grow)) return -WS_EIO;
    }
    scan_end(sc);
    return -WS_EIO;
}

int32_t ws_scan_close(ws_scan *sc) {
    int32_t e = scan_end(sc);
    ws_buf_free(&sc->buf);
    return e;
}

/* ---- config, log ---- */

int32_t ws_config(ws_buf *out) {
    out->len = 0;
    if (!reserve(out, 512)) return -WS_EIO;
    int32_t n = ws_host_config(out->data, (uint32_t)out->cap);
    if (n < 0) return n;
    if ((size_t)n > out->cap) {
        if (!reserve(out, (size_t)n)) return -WS_EIO;
        if (ws_host_config(out->data, (uint32_t)out->cap) != n) return -WS_EIO;
    }
    out->len = (size_t)n;
    return n;
}

void ws_log(uint32_t level, const char *msg, size_t len) { ws_host_log(level, msg, (uint32_t)len); }

void ws_logs(uint32_t level, const char *msg) { ws_log(level, msg, strlen(msg)); }

/* ---- the exports ---- */

uint8_t *ws_sdk_input(uint32_t size) {
    if (size > MAX_INPUT) return NULL;
    if (size > in_cap) {
        size_t n = in_cap * 2 > size ? in_cap * 2 : size;
        if (n < MIN_INPUT) n = MIN_INPUT;
        if (n > MAX_INPUT) n = MAX_INPUT;
        free(in_buf); /* the host asks again only between records */
        in_buf = malloc(n);
        in_cap = in_buf ? n : 0;
    }
    return in_buf;
}

/* Runs ws_process on the record of n bytes at p (in the input buffer):
 * the one path of wasmstream_process and of a batch's records. */
static int32_t run_record(uint8_t *p, size_t n) {
    ws_record r;
    if (ws_decode(p, n, &r) < 0) return ws_fail("sdk: input record: abi: malformed record");
    cur_rec = p;
    cur_len = n;
    cur_ts = r.timestamp;
    int st = ws_process(&r);
    cur_len = 0;
    return st;
}

int32_t ws_sdk_process(uint32_t len) {
    if (len > in_cap) return ws_fail("sdk: record length is beyond the input buffer");
    return run_record(in_buf, len);
}

int ws_slot_at(const uint8_t *src, size_t n, size_t off, uint32_t *kind, size_t *payload, size_t *payload_len) {
    if (off > n || n - off < WS_SLOT_HEADER_SIZE) return -WS_EINVAL;
    size_t plen = get32(src + off + WS_SLOT_LEN), start = off + WS_SLOT_HEADER_SIZE;
    if (plen > n - start) return -WS_EINVAL;
    *kind = get32(src + off + WS_SLOT_KIND);
    *payload = start;
    *payload_len = plen;
    return 0;
}

int64_t ws_next_emit_entry(const uint8_t *src, size_t n, const uint8_t **rec, size_t *rec_len) {
    if (n < 4) return -WS_EINVAL;
    size_t len = get32(src);
    if (len > n - 4) return -WS_EINVAL;
    *rec = src + 4;
    *rec_len = len;
    return (int64_t)(4 + len);
}

/* The batch's done count and stop word: volatile, so that the compiler
 * neither delays the one nor keeps the other in a register across calls
 * (the host writes stop during a call, or from its watchdog). */
static void store32v(uint8_t *p, uint32_t v) {
    volatile uint8_t *q = p;
    for (int i = 0; i < 4; i++) q[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t load32v(const uint8_t *p) {
    const volatile uint8_t *q = p;
    return (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
}

/* After each call its status and staged emits go into its slot, then the
 * done count: the host, which reads done at every host call, attributes
 * every host call to the call in progress. It returns 0 after the last
 * call or earlier: after a call that failed, when the host set stop, when
 * the arena holds over ARENA_HAND_OVER bytes (the host hands the rest
 * again). 1 is for a batch it cannot read (the host fails the call in
 * progress). */
int32_t ws_sdk_batch(uint32_t len) {
    if (len > in_cap || len < WS_BATCH_HEADER_SIZE) return 1;
    uint8_t *base = in_buf;
    uint32_t count = get32(base + WS_BATCH_COUNT);
    /* The previous batch's older chunks: the host has read every run of it. */
    for (size_t i = 0; i < n_old; i++) free(arena_old[i]);
    n_old = 0;
    arena_len = 0;
    batching = 1;
    size_t off = WS_BATCH_HEADER_SIZE;
    for (uint32_t k = 0; k < count; k++) {
        uint32_t kind;
        size_t p, plen;
        if (ws_slot_at(base, len, off, &kind, &p, &plen) < 0) break; /* the host fails the call unfinished */
        uint8_t *slot = base + off;
        call_start = arena_len;
        forwarded = staged = 0;
        int32_t st;
        if (kind == WS_SLOT_RECORD)
            st = run_record(base + p, plen);
        else if (kind == WS_SLOT_TRIGGER)
            st = ws_sdk_trigger(base + p, (uint32_t)plen);
        else
            st = ws_fail("sdk: batch: unknown slot kind");
        uint32_t out = 0, size = 0;
        if (forwarded) {
            out = ws_sdk_address(slot + WS_SLOT_LEN);
            size = (uint32_t)(4 + plen);
        } else if (arena_len > call_start) {
            out = ws_sdk_address(arena + call_start);
            size = (uint32_t)(arena_len - call_start);
        }
        put32(slot + WS_SLOT_STATUS, (uint32_t)st);
        put32(slot + WS_SLOT_OUT_PTR, out);
        put32(slot + WS_SLOT_OUT_LEN, size);
        /* The slot's fields before done: the host reads them once it sees
         * done pass the call (its watchdog reads done meanwhile). */
        atomic_signal_fence(memory_order_seq_cst);
        store32v(base + WS_BATCH_DONE, k + 1);
        if (st != WS_OK || load32v(base + WS_BATCH_STOP) != 0 || arena_len > ARENA_HAND_OVER) break;
        off += WS_SLOT_SIZE(plen);
    }
    batching = forwarded = 0;
    return 0;
}

/* Without wasmstream_time.c (its definition replaces this one) the
 * processor has no callbacks: the host sends it no triggers. */
__attribute__((weak)) int32_t ws_sdk_trigger(const uint8_t *trigger, uint32_t len) {
    (void)trigger;
    (void)len;
    return ws_fail("sdk: a timer or commit trigger arrived but the processor does not link wasmstream_time.c");
}

int32_t ws_sdk_init(void) {
    int st = ws_sdk_resolve_hook ? ws_sdk_resolve_hook() : WS_OK;
    return st != WS_OK ? st : ws_init();
}

void ws_sdk_set_timestamp(int64_t ts) { cur_ts = ts; }

const uint8_t *ws_sdk_input_bytes(uint32_t len) { return len <= in_cap ? in_buf : NULL; }

/* The body of wasmstream_migrate (WS_MIGRATE): the old version's ID is the
 * len bytes of the input buffer. */
int32_t ws_sdk_run_migrate(uint32_t len, int (*fn)(ws_bytes from)) {
    const uint8_t *buf = ws_sdk_input_bytes(len);
    if (!buf) return ws_fail("sdk: migrate: version ID length beyond the input buffer");
    ws_bytes from = {buf, (int32_t)len};
    return fn(from);
}

__attribute__((weak)) int ws_init(void) { return WS_OK; }

void ws_sdk_reset(void) {
    gen++;
    cur_len = 0;
    batching = forwarded = 0;
    free(in_buf);
    in_buf = NULL;
    in_cap = 0;
}

#ifdef __wasm__
uint32_t ws_sdk_address(const void *p) { return (uint32_t)(uintptr_t)p; }

/* Version 2 (batches) on a host that speaks it, version 1 on an older one. */
__attribute__((export_name("wasmstream_abi_version_1"))) void ws_export_version(void) {}

__attribute__((export_name("wasmstream_abi_version_2"))) void ws_export_version_2(void) {}

__attribute__((export_name("wasmstream_batch"))) int32_t ws_export_batch(uint32_t len) { return ws_sdk_batch(len); }

__attribute__((export_name("wasmstream_input"))) uint8_t *ws_export_input(uint32_t size) {
    return ws_sdk_input(size);
}

__attribute__((export_name("wasmstream_process"))) int32_t ws_export_process(uint32_t len) {
    return ws_sdk_process(len);
}

__attribute__((export_name("wasmstream_init"))) int32_t ws_export_init(void) { return ws_sdk_init(); }
#endif
