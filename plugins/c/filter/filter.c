/*
 * filter: keeps the records whose JSON value satisfies one condition and
 * emits them unchanged to an output; everything else is dropped. The same
 * config and semantics as plugins/filter in Go (see its README.md):
 *
 *   {"field": "user.country", "op": "eq", "value": "NL", "output": "out", "invalid_output": "bad"}
 *
 * ops: eq, ne, exists, gt, ge, lt, le, in. Records that are not JSON
 * (tombstones and empty values included) go to invalid_output if set.
 *
 * The JSON scanner is a port of plugins/internal/jsonx (the Go plugins'):
 * RFC 8259's grammar, nesting limited to MAX_DEPTH so that a hostile record
 * cannot exhaust the stack.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wasmstream.h"

#define MAX_DEPTH 1000
#define MAX_SEGS 32 /* path segments */

typedef enum { K_INVALID, K_NULL, K_BOOL, K_NUMBER, K_STRING, K_OBJECT, K_ARRAY } kind;

static kind kind_of(const uint8_t *raw, size_t n) {
    if (n == 0) return K_INVALID;
    switch (raw[0]) {
    case 'n': return K_NULL;
    case 't': case 'f': return K_BOOL;
    case '"': return K_STRING;
    case '{': return K_OBJECT;
    case '[': return K_ARRAY;
    }
    return raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9') ? K_NUMBER : K_INVALID;
}

static size_t skip_ws(const uint8_t *d, size_t n, size_t i) {
    while (i < n && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r')) i++;
    return i;
}

static long scan_value(const uint8_t *d, size_t n, size_t i, int depth);

static long literal(const uint8_t *d, size_t n, size_t i, const char *lit) {
    size_t l = strlen(lit);
    return n - i >= l && memcmp(d + i, lit, l) == 0 ? (long)(i + l) : -1;
}

static size_t digits(const uint8_t *d, size_t n, size_t i) {
    while (i < n && d[i] >= '0' && d[i] <= '9') i++;
    return i;
}

static long scan_number(const uint8_t *d, size_t n, size_t i) {
    if (d[i] == '-') i++;
    if (i < n && d[i] == '0') i++;
    else if (i < n && d[i] >= '1' && d[i] <= '9') i = digits(d, n, i);
    else return -1;
    if (i < n && d[i] == '.') {
        size_t j = digits(d, n, i + 1);
        if (j == i + 1) return -1;
        i = j;
    }
    if (i < n && (d[i] == 'e' || d[i] == 'E')) {
        i++;
        if (i < n && (d[i] == '+' || d[i] == '-')) i++;
        size_t j = digits(d, n, i);
        if (j == i) return -1;
        i = j;
    }
    return (long)i;
}

static int hexval(uint8_t c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static long scan_string(const uint8_t *d, size_t n, size_t i) {
    for (i++; i < n;) {
        uint8_t c = d[i];
        if (c == '"') return (long)(i + 1);
        if (c == '\\') {
            if (i + 1 >= n) return -1;
            switch (d[i + 1]) {
            case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
                i += 2;
                break;
            case 'u':
                if (n - i < 6) return -1;
                for (int k = 2; k < 6; k++)
                    if (hexval(d[i + k]) < 0) return -1;
                i += 6;
                break;
            default:
                return -1;
            }
        } else if (c < 0x20) {
            return -1;
        } else {
            i++;
        }
    }
    return -1;
}

/* A member callback: key token (or NULL in an array), index, value start;
 * returns the value's end or -1. */
typedef long (*member_fn)(void *ctx, const uint8_t *key, size_t key_len, size_t index, size_t start);

static long scan_container(const uint8_t *d, size_t n, size_t i, int depth, member_fn m, void *ctx) {
    if (depth >= MAX_DEPTH) return -1;
    int obj = d[i] == '{';
    uint8_t closer = obj ? '}' : ']';
    i = skip_ws(d, n, i + 1);
    if (i < n && d[i] == closer) return (long)(i + 1);
    for (size_t index = 0;; index++) {
        const uint8_t *key = NULL;
        size_t kl = 0;
        if (obj) {
            if (i >= n || d[i] != '"') return -1;
            long end = scan_string(d, n, i);
            if (end < 0) return -1;
            key = d + i;
            kl = (size_t)end - i;
            i = skip_ws(d, n, (size_t)end);
            if (i >= n || d[i] != ':') return -1;
            i = skip_ws(d, n, i + 1);
        }
        long end = m ? m(ctx, key, kl, index, i) : scan_value(d, n, i, depth + 1);
        if (end < 0) return -1;
        i = skip_ws(d, n, (size_t)end);
        if (i >= n) return -1;
        if (d[i] == closer) return (long)(i + 1);
        if (d[i] != ',') return -1;
        i = skip_ws(d, n, i + 1);
    }
}

static long scan_value(const uint8_t *d, size_t n, size_t i, int depth) {
    if (i >= n) return -1;
    uint8_t c = d[i];
    if (c == '"') return scan_string(d, n, i);
    if (c == '{' || c == '[') return scan_container(d, n, i, depth, NULL, NULL);
    if (c == 't') return literal(d, n, i, "true");
    if (c == 'f') return literal(d, n, i, "false");
    if (c == 'n') return literal(d, n, i, "null");
    if (c == '-' || (c >= '0' && c <= '9')) return scan_number(d, n, i);
    return -1;
}

/* Appends the UTF-8 of r to out (cap at least 4 more). */
static size_t put_utf8(char *out, size_t o, uint32_t r) {
    if (r < 0x80) out[o++] = (char)r;
    else if (r < 0x800) out[o++] = (char)(0xc0 | r >> 6), out[o++] = (char)(0x80 | (r & 0x3f));
    else if (r < 0x10000)
        out[o++] = (char)(0xe0 | r >> 12), out[o++] = (char)(0x80 | (r >> 6 & 0x3f)), out[o++] = (char)(0x80 | (r & 0x3f));
    else
        out[o++] = (char)(0xf0 | r >> 18), out[o++] = (char)(0x80 | (r >> 12 & 0x3f)),
        out[o++] = (char)(0x80 | (r >> 6 & 0x3f)), out[o++] = (char)(0x80 | (r & 0x3f));
    return o;
}

static uint32_t hex4(const uint8_t *b) {
    return (uint32_t)(hexval(b[0]) << 12 | hexval(b[1]) << 8 | hexval(b[2]) << 4 | hexval(b[3]));
}

/* Decodes the string token tok (quotes included, already scanned) into a
 * malloc'd buffer of *len bytes; unpaired surrogates become U+FFFD. */
static char *unquote(const uint8_t *tok, size_t n, size_t *len) {
    const uint8_t *s = tok + 1;
    size_t sl = n - 2, o = 0;
    char *out = malloc(sl * 3 + 4);
    if (!out) abort();
    for (size_t i = 0; i < sl;) {
        if (s[i] != '\\') {
            out[o++] = (char)s[i++];
            continue;
        }
        uint8_t e = s[i + 1];
        if (e == 'u') {
            uint32_t r = hex4(s + i + 2);
            i += 6;
            if (r >= 0xd800 && r < 0xe000) {
                uint32_t r2 = 0;
                if (sl - i >= 6 && s[i] == '\\' && s[i + 1] == 'u') r2 = hex4(s + i + 2);
                if (r < 0xdc00 && r2 >= 0xdc00 && r2 < 0xe000) {
                    r = ((r - 0xd800) << 10 | (r2 - 0xdc00)) + 0x10000;
                    i += 6;
                } else {
                    r = 0xfffd;
                }
            }
            o = put_utf8(out, o, r);
            continue;
        }
        out[o++] = e == 'b' ? '\b' : e == 'f' ? '\f' : e == 'n' ? '\n' : e == 'r' ? '\r' : e == 't' ? '\t' : (char)e;
        i += 2;
    }
    *len = o;
    return out;
}

static int key_equals(const uint8_t *tok, size_t n, const char *seg) {
    size_t sl = strlen(seg);
    if (!memchr(tok + 1, '\\', n - 2)) return n - 2 == sl && memcmp(tok + 1, seg, sl) == 0;
    size_t ul;
    char *u = unquote(tok, n, &ul);
    int eq = ul == sl && memcmp(u, seg, sl) == 0;
    free(u);
    return eq;
}

/* ---- path lookup ---- */

static char *segs[MAX_SEGS];
static int n_segs;

typedef struct {
    const uint8_t *d;
    size_t n;
    int seg;   /* the path segment this container is matched against */
    int depth;
    long *s, *e; /* the last match */
} find_ctx;

static long find_at(const uint8_t *d, size_t n, size_t i, int seg, int depth, long *s, long *e);

static long find_member(void *vc, const uint8_t *key, size_t kl, size_t index, size_t start) {
    find_ctx *c = vc;
    const char *sg = segs[c->seg];
    int hit;
    if (strcmp(sg, "*") == 0) hit = 1;
    else if (key) hit = key_equals(key, kl, sg);
    else {
        /* A decimal index, as Go's strconv.Atoi with n >= 0 reads it. */
        const char *p = sg[0] == '+' ? sg + 1 : sg;
        char *endp;
        hit = *p >= '0' && *p <= '9' && strtoul(p, &endp, 10) == index && *endp == 0;
        for (const char *q = p; *q; q++)
            if (*q < '0' || *q > '9') hit = 0;
    }
    if (hit) return find_at(c->d, c->n, start, c->seg + 1, c->depth + 1, c->s, c->e);
    return scan_value(c->d, c->n, start, c->depth + 1);
}

static long find_at(const uint8_t *d, size_t n, size_t i, int seg, int depth, long *s, long *e) {
    if (seg == n_segs) {
        long end = scan_value(d, n, i, depth);
        if (end >= 0) *s = (long)i, *e = end;
        return end;
    }
    if (i >= n || (d[i] != '{' && d[i] != '[')) return scan_value(d, n, i, depth);
    find_ctx c = {d, n, seg, depth, s, e};
    return scan_container(d, n, i, depth, find_member, &c);
}

/* The last value at the path: returns 0 if d is not JSON, else 1 with
 * raw and rl set (rl = 0: not found). */
static int lookup(const uint8_t *d, size_t n, const uint8_t **raw, size_t *rl) {
    long s = -1, e = -1;
    long end = find_at(d, n, skip_ws(d, n, 0), 0, 0, &s, &e);
    if (end < 0 || skip_ws(d, n, (size_t)end) != n) return 0;
    *raw = s >= 0 ? d + s : NULL;
    *rl = s >= 0 ? (size_t)(e - s) : 0;
    return 1;
}

/* ---- config ---- */

typedef struct {
    kind k;
    int b;
    double num;
    char *s;
    size_t sl;
} scalar;

static char op[64];
static scalar value;
static scalar *values;
static size_t n_values;
static ws_output out_h, invalid_h;
static int has_invalid;
static char out_name[128], invalid_name[128];

static void free_config(void) {
    for (int i = 0; i < n_segs; i++) free(segs[i]);
    n_segs = 0;
    free(value.s);
    value.s = NULL;
    for (size_t i = 0; i < n_values; i++) free(values[i].s);
    free(values);
    values = NULL;
    n_values = 0;
}

static double number(const uint8_t *raw, size_t n) {
    char buf[64];
    if (n >= sizeof buf) { /* long numbers: strtod on a copy */
        char *b = malloc(n + 1);
        if (!b) abort();
        memcpy(b, raw, n);
        b[n] = 0;
        double x = strtod(b, NULL);
        free(b);
        return x; /* beyond double: ±HUGE_VAL, as Go's ParseFloat gives ±Inf */
    }
    memcpy(buf, raw, n);
    buf[n] = 0;
    return strtod(buf, NULL);
}

/* Reads a scalar at raw; 0 if raw is an object or array. */
static int to_scalar(const uint8_t *raw, size_t n, scalar *sc) {
    memset(sc, 0, sizeof *sc);
    sc->k = kind_of(raw, n);
    switch (sc->k) {
    case K_NULL: return 1;
    case K_BOOL: sc->b = raw[0] == 't'; return 1;
    case K_NUMBER: sc->num = number(raw, n); return 1;
    case K_STRING: sc->s = unquote(raw, n, &sc->sl); return 1;
    default: return 0;
    }
}

/* The config's members, found in one pass over the object. */
typedef struct {
    const uint8_t *d;
    size_t n;
    const uint8_t *field, *op, *value, *output, *invalid;
    size_t field_l, op_l, value_l, output_l, invalid_l;
    char unknown[128];
} cfg_ctx;

static long cfg_member(void *vc, const uint8_t *key, size_t kl, size_t index, size_t start) {
    (void)index;
    cfg_ctx *c = vc;
    long end = scan_value(c->d, c->n, start, 1);
    if (end < 0) return -1;
    const uint8_t *v = c->d + start;
    size_t vl = (size_t)end - start;
    static const char *const names[] = {"field", "op", "value", "output", "invalid_output"};
    const uint8_t **slot[] = {&c->field, &c->op, &c->value, &c->output, &c->invalid};
    size_t *len[] = {&c->field_l, &c->op_l, &c->value_l, &c->output_l, &c->invalid_l};
    for (int i = 0; i < 5; i++)
        if (key_equals(key, kl, names[i])) {
            *slot[i] = v; /* the last duplicate wins */
            *len[i] = vl;
            return end;
        }
    if (!c->unknown[0]) snprintf(c->unknown, sizeof c->unknown, "%.*s", (int)kl, (const char *)key);
    return end;
}

static const char *type_name(kind k) {
    switch (k) {
    case K_NULL: return "null";
    case K_BOOL: return "a boolean";
    case K_NUMBER: return "a number";
    case K_STRING: return "a string";
    case K_ARRAY: return "a list";
    case K_OBJECT: return "an object";
    default: return "invalid";
    }
}

static char msg[512], detail[400];

static int failf(const char *key, const char *m) {
    snprintf(msg, sizeof msg, "filter: config: \"%s\": %s", key, m);
    return ws_fail(msg);
}

/* A string member into buf (default def); 0 on a type error (failed). */
static int string_member(const char *key, const uint8_t *v, size_t vl, const char *def, char *buf, size_t cap) {
    if (!v) {
        snprintf(buf, cap, "%s", def);
        return 1;
    }
    if (kind_of(v, vl) != K_STRING) {
        char m[64];
        snprintf(m, sizeof m, "must be a string, got %s", type_name(kind_of(v, vl)));
        failf(key, m);
        return 0;
    }
    size_t ul;
    char *u = unquote(v, vl, &ul);
    snprintf(buf, cap, "%.*s", (int)ul, u);
    free(u);
    return 1;
}

static long list_member(void *vc, const uint8_t *key, size_t kl, size_t index, size_t start) {
    (void)key, (void)kl;
    cfg_ctx *c = vc;
    long end = scan_value(c->d, c->n, start, 2);
    if (end < 0) return -1;
    values = realloc(values, (n_values + 1) * sizeof *values);
    if (!values) abort();
    if (!to_scalar(c->d + start, (size_t)end - start, &values[n_values])) {
        snprintf(c->unknown, sizeof c->unknown, "value[%zu]", index);
        return -2; /* reported by the caller */
    }
    n_values++;
    return end;
}

int ws_init(void) {
    free_config();
    ws_buf cb = {0};
    int32_t cn = ws_config(&cb);
    const uint8_t *d = cb.data;
    size_t n = cn > 0 ? (size_t)cn : 0;
    size_t i = skip_ws(d, n, 0);
    cfg_ctx c = {0};
    c.d = d;
    c.n = n;
    int rc = WS_OK;
    if (i < n && !(n - i >= 4 && memcmp(d + i, "null", 4) == 0 && skip_ws(d, n, i + 4) == n)) {
        long end = scan_value(d, n, i, 0);
        if (end < 0 || skip_ws(d, n, (size_t)end) != n) {
            rc = ws_fail("filter: config: invalid JSON");
            goto done;
        }
        if (d[i] != '{') {
            snprintf(msg, sizeof msg, "filter: config: must be a JSON object, got %s", type_name(kind_of(d + i, n - i)));
            rc = ws_fail(msg);
            goto done;
        }
        scan_container(d, n, i, 0, cfg_member, &c);
    }
    char field[1024];
    if (!c.field) {
        rc = failf("field", "required");
        goto done;
    }
    if (!string_member("field", c.field, c.field_l, "", field, sizeof field)) {
        rc = WS_FAILED;
        goto done;
    }
    size_t fl = strlen(field);
    for (size_t a = 0, b = 0; b <= fl; b++) {
        if (b < fl && field[b] != '.') continue;
        if (b == a || n_segs == MAX_SEGS) {
            snprintf(detail, sizeof detail, "empty segment in path \"%.200s\"", field);
            rc = failf("field", n_segs == MAX_SEGS ? "more than 32 segments" : detail);
            goto done;
        }
        segs[n_segs] = malloc(b - a + 1);
        memcpy(segs[n_segs], field + a, b - a);
        segs[n_segs++][b - a] = 0;
        a = b + 1;
    }
    if (!string_member("op", c.op, c.op_l, "eq", op, sizeof op)) {
        rc = WS_FAILED;
        goto done;
    }
    if (!strcmp(op, "eq") || !strcmp(op, "ne")) {
        if (!c.value) {
            snprintf(detail, sizeof detail, "required for op %s", op);
            rc = failf("value", detail);
            goto done;
        }
        if (!to_scalar(c.value, c.value_l, &value)) {
            snprintf(detail, sizeof detail, "must be a string, number, boolean or null for op %s", op);
            rc = failf("value", detail);
            goto done;
        }
    } else if (!strcmp(op, "gt") || !strcmp(op, "ge") || !strcmp(op, "lt") || !strcmp(op, "le")) {
        if (!c.value || kind_of(c.value, c.value_l) != K_NUMBER) {
            snprintf(detail, sizeof detail, "must be a number for op %s", op);
            rc = failf("value", detail);
            goto done;
        }
        to_scalar(c.value, c.value_l, &value);
    } else if (!strcmp(op, "in")) {
        if (!c.value || kind_of(c.value, c.value_l) != K_ARRAY ||
            skip_ws(c.value, c.value_l, 1) == c.value_l - 1) {
            rc = failf("value", "must be a non-empty list for op in");
            goto done;
        }
        cfg_ctx lc = {0};
        lc.d = c.value;
        lc.n = c.value_l;
        if (scan_container(c.value, c.value_l, 0, 1, list_member, &lc) < 0) {
            rc = failf(lc.unknown, "must be a string, number, boolean or null");
            goto done;
        }
    } else if (!strcmp(op, "exists")) {
        if (c.value) {
            rc = failf("value", "not used by op exists; remove it");
            goto done;
        }
    } else {
        snprintf(detail, sizeof detail, "must be one of eq, ne, exists, gt, ge, lt, le, in; got \"%s\"", op);
        rc = failf("op", detail);
        goto done;
    }
    if (!string_member("output", c.output, c.output_l, "out", out_name, sizeof out_name) ||
        !string_member("invalid_output", c.invalid, c.invalid_l, "", invalid_name, sizeof invalid_name)) {
        rc = WS_FAILED;
        goto done;
    }
    if (c.unknown[0]) {
        snprintf(msg, sizeof msg, "filter: config: unknown field %s (known: field, invalid_output, op, output, value)",
                 c.unknown);
        rc = ws_fail(msg);
        goto done;
    }
    out_h = (ws_output)WS_OUTPUT(out_name);
    if (ws_output_check(&out_h) < 0) {
        snprintf(detail, sizeof detail, "output \"%s\" is not declared by the processor", out_name);
        rc = failf("output", detail);
        goto done;
    }
    has_invalid = invalid_name[0] != 0;
    invalid_h = (ws_output)WS_OUTPUT(invalid_name);
    if (has_invalid && ws_output_check(&invalid_h) < 0) {
        snprintf(detail, sizeof detail, "output \"%s\" is not declared by the processor", invalid_name);
        rc = failf("invalid_output", detail);
    }
done:
    ws_buf_free(&cb);
    return rc;
}

/* ---- matching ---- */

static int equal(const uint8_t *raw, size_t n, const scalar *want) {
    kind k = kind_of(raw, n);
    if (k != want->k) return 0;
    switch (k) {
    case K_NULL: return 1;
    case K_BOOL: return (raw[0] == 't') == want->b;
    case K_NUMBER: return number(raw, n) == want->num;
    case K_STRING: {
        if (!memchr(raw + 1, '\\', n - 2)) return n - 2 == want->sl && memcmp(raw + 1, want->s, want->sl) == 0;
        size_t ul;
        char *u = unquote(raw, n, &ul);
        int eq = ul == want->sl && memcmp(u, want->s, ul) == 0;
        free(u);
        return eq;
    }
    default: return 0;
    }
}

static int match(const uint8_t *raw, size_t n) {
    int found = raw != NULL;
    if (!strcmp(op, "exists")) return found;
    if (!strcmp(op, "ne")) return !found || !equal(raw, n, &value);
    if (!found) return 0;
    if (!strcmp(op, "eq")) return equal(raw, n, &value);
    if (!strcmp(op, "in")) {
        for (size_t i = 0; i < n_values; i++)
            if (equal(raw, n, &values[i])) return 1;
        return 0;
    }
    if (kind_of(raw, n) != K_NUMBER) return 0; /* gt, ge, lt, le compare numbers only */
    double x = number(raw, n);
    if (!strcmp(op, "gt")) return x > value.num;
    if (!strcmp(op, "ge")) return x >= value.num;
    if (!strcmp(op, "lt")) return x < value.num;
    return x <= value.num;
}

int ws_process(const ws_record *r) {
    const uint8_t *raw = NULL;
    size_t rl = 0;
    int valid = r->value.len >= 0 && lookup(r->value.ptr, (size_t)r->value.len, &raw, &rl);
    ws_output *o = NULL;
    if (!valid) {
        if (has_invalid) o = &invalid_h; /* else dropped, as documented */
    } else if (match(raw, rl)) {
        o = &out_h;
    }
    if (!o) return WS_OK;
    int32_t e = ws_forward(o, r);
    return e < 0 ? ws_fail_call("emit", o->name, e) : WS_OK;
}
