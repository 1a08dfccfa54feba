/*
 * sdk_test.c: the C SDK against its fake host, and the shared record
 * vectors (abi/testdata/records.json, path in argv[1]). Exits non-zero on
 * the first failed check, naming it.
 *
 *     cc -I.. sdk_test.c ../wasmstream.c ../wasmstream_fake.c && ./a.out ../../../abi/testdata/records.json
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "wasmstream_fake.h"


static ws_output out = WS_OUTPUT("out");
static ws_output nope = WS_OUTPUT("nope");
static ws_store st = WS_STORE("s");
static ws_buf val;

static int eq(ws_bytes b, const char *s) { return b.len == (int32_t)strlen(s) && memcmp(b.ptr, s, (size_t)b.len) == 0; }

static int emit_text(const char *s) {
    ws_out o = {WS_NULL, ws_str(s), NULL, 0, 0};
    int32_t e = ws_emit(&out, &o);
    return e < 0 ? ws_fail_call("emit", out.name, e) : WS_OK;
}

#define TRY(call, what)                                         \
    do {                                                        \
        int32_t e_ = (call);                                    \
        if (e_ < 0) return ws_fail_call(what, st.name, e_);     \
    } while (0)

int ws_init(void) {
    if (ws_output_check(&out) < 0) return ws_fail("init: no output out");
    int32_t e = ws_store_check(&st);
    if (e < 0) return ws_fail_call("store_index", st.name, e);
    ws_out o = {WS_NULL, WS_NULL, NULL, 0, 0};
    if (ws_emit(&out, &o) != -WS_EPHASE) return ws_fail("init: emit not refused");
    if (ws_get(&st, "k", 1, &val) != -WS_EPHASE) return ws_fail("init: state_get not refused");
    ws_logs(WS_LOG_WARN, "init ok");
    return WS_OK;
}

int ws_process(const ws_record *r) {
    if (eq(r->value, "state")) {
        if (ws_get(&st, "k", 1, &val) != 0) return ws_fail("missing key found");
        TRY(ws_put(&st, "k", 1, "", 0), "state_put");
        if (ws_get(&st, "k", 1, &val) != 1 || val.len != 0) return ws_fail("empty value not found");
        TRY(ws_put(&st, "k", 1, "v1", 2), "state_put");
        if (ws_get(&st, "k", 1, &val) != 1 || val.len != 2 || memcmp(val.data, "v1", 2)) return ws_fail("staged read");
        TRY(ws_delete(&st, "k", 1), "state_delete");
        TRY(ws_delete(&st, "k", 1), "state_delete");
        if (ws_get(&st, "k", 1, &val) != 0) return ws_fail("deleted key found");
        static uint8_t big[5000];
        memset(big, 7, sizeof big);
        TRY(ws_put(&st, "big", 3, big, sizeof big), "state_put");
        if (ws_get(&st, "big", 3, &val) != 1 || val.len != sizeof big || memcmp(val.data, big, sizeof big))
            return ws_fail("big value");
        return emit_text("state ok");
    }
    if (eq(r->value, "scan")) {
        static uint8_t x[70000];
        memset(x, 'x', sizeof x);
        TRY(ws_put(&st, "a/1", 3, x, 10), "state_put");
        TRY(ws_put(&st, "a/2", 3, x, 700), "state_put");
        TRY(ws_put(&st, "a/3", 3, x, 70000), "state_put");
        TRY(ws_put(&st, "b/1", 3, x, 1), "state_put");
        ws_scan sc;
        TRY(ws_scan_open(&st, "a/", 2, "a0", 2, &sc), "scan_open");
        char msg[256];
        size_t n = 0;
        ws_bytes k, v;
        int32_t e;
        while ((e = ws_scan_next(&sc, &k, &v)) == 1)
            n += (size_t)snprintf(msg + n, sizeof msg - n, "%.*s=%d ", (int)k.len, (const char *)k.ptr, (int)v.len);
        TRY(e, "scan_next");
        ws_scan_close(&sc);
        TRY(ws_scan_open(&st, "", 0, "", 0, &sc), "scan_open");
        int all = 0;
        while ((e = ws_scan_next(&sc, &k, &v)) == 1) all++;
        ws_scan_close(&sc);
        snprintf(msg + n, sizeof msg - n, "%d", all);
        return emit_text(msg);
    }
    if (eq(r->value, "limits")) {
        static uint8_t key[WS_MAX_KEY_SIZE + 1];
        if (ws_put(&st, key, sizeof key, "", 0) != -WS_ETOOLARGE) return ws_fail("long key accepted");
        static uint8_t rec[WS_MAX_RECORD_SIZE];
        ws_out o = {WS_NULL, {rec, (int32_t)sizeof rec}, NULL, 0, 0};
        if (ws_emit(&out, &o) != -WS_ETOOLARGE) return ws_fail("oversized emit accepted");
        if (ws_emit(&nope, &o) != -WS_ENONAME) return ws_fail("undeclared output resolved");
        ws_scan sc[WS_MAX_OPEN_CURSORS + 1];
        for (int i = 0; i < WS_MAX_OPEN_CURSORS; i++) TRY(ws_scan_open(&st, "", 0, "", 0, &sc[i]), "scan_open");
        if (ws_scan_open(&st, "", 0, "", 0, &sc[WS_MAX_OPEN_CURSORS]) != -WS_ELIMIT) return ws_fail("cursor limit");
        for (int i = 0; i < WS_MAX_OPEN_CURSORS; i++) ws_scan_close(&sc[i]);
        TRY(ws_scan_open(&st, "", 0, "", 0, &sc[0]), "scan_open");
        if (ws_host_scan_close(999) != -WS_ENOCURSOR) return ws_fail("bad cursor closed");
        return emit_text("limits ok");
    }
    if (eq(r->value, "headers")) {
        ws_header hs[3] = {{ws_str("n"), WS_NULL}, {ws_str("e"), ws_str("")}, {ws_str(""), ws_str("v")}};
        ws_out o = {ws_str(""), WS_NULL, hs, 3, 7};
        int32_t e = ws_emit_to(&out, 2, &o);
        if (e < 0) return ws_fail_call("emit", "out", e);
        ws_out o2 = {r->key, r->value, NULL, 0, 0};
        e = ws_emit(&out, &o2);
        return e < 0 ? ws_fail_call("emit", "out", e) : WS_OK;
    }
    if (eq(r->value, "fail")) {
        TRY(ws_put(&st, "written", 7, "1", 1), "state_put");
        emit_text("lost");
        return ws_fail("rejected on purpose");
    }
    if (eq(r->value, "config")) {
        ws_buf c = {0};
        int32_t n = ws_config(&c);
        char msg[32];
        snprintf(msg, sizeof msg, "%d", (int)n);
        ws_buf_free(&c);
        return emit_text(msg);
    }
    if (eq(r->value, "forward")) {
        int32_t e = ws_forward(&out, r);
        return e < 0 ? ws_fail_call("emit", "out", e) : WS_OK;
    }
    return ws_fail("unknown command");
}

static const char *outs[] = {"out"}, *stores[] = {"s"};

static ws_fake *host(const char *config) {
    ws_fake *h = ws_fake_new(outs, 1, stores, 1, config);
    int s = ws_fake_start(h);
    CHECK(s == WS_OK, "init: %s", ws_fake_error(h));
    return h;
}

static const char *run(ws_fake *h, const char *cmd, char *buf, size_t cap) {
    int s = ws_fake_process_kv(h, WS_NULL, ws_str(cmd), 42);
    CHECK(s == WS_OK, "%s: %s", cmd, ws_fake_error(h));
    ws_record r;
    if (s != WS_OK || !ws_fake_emitted(h, 0, &r)) return "";
    snprintf(buf, cap, "%.*s", (int)r.value.len, (const char *)r.value.ptr);
    return buf;
}

static uint8_t *unhex(const char *s, size_t n, size_t *len) {
    uint8_t *b = malloc(n / 2 + 1);
    for (size_t i = 0; i + 1 < n; i += 2) {
        unsigned v;
        sscanf(s + i, "%2x", &v);
        b[i / 2] = (uint8_t)v;
    }
    *len = n / 2;
    return b;
}

/* Every "encoded" string of records.json: those before "malformed" must
 * decode and re-encode to the same bytes; the rest must be refused, by the
 * codec and by the SDK's input path. (The conformance suite sends the good
 * ones through the SDK in Wasm.) */
static void vectors(const char *path) {
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL, "open %s", path);
    if (!f) return;
    static char doc[1 << 20];
    size_t n = fread(doc, 1, sizeof doc - 1, f);
    fclose(f);
    doc[n] = 0;
    const char *malformed = strstr(doc, "\"malformed\"");
    CHECK(malformed != NULL, "no malformed list");
    int good = 0, bad = 0;
    for (const char *p = strstr(doc, "\"encoded\""); p; p = strstr(p + 1, "\"encoded\"")) {
        const char *q = strchr(p + 9, '"') + 1, *e = strchr(q, '"');
        size_t len;
        uint8_t *enc = unhex(q, (size_t)(e - q), &len);
        ws_record r;
        int rc = ws_decode(enc, len, &r);
        if (p < malformed) {
            good++;
            CHECK(rc == 0, "vector %d refused", good);
            ws_header hs[8];
            size_t pos = 0;
            uint32_t nh = 0;
            while (nh < 8 && ws_next_header(&r, &pos, &hs[nh])) nh++;
            CHECK(nh == r.header_count, "vector %d: %u headers of %u", good, nh, r.header_count);
            ws_out o = {r.key, r.value, hs, nh, r.timestamp};
            CHECK(ws_encoded_size(&o) == len, "vector %d: size", good);
            uint8_t *re = malloc(len);
            ws_encode(re, r.timestamp, r.offset, r.partition, r.input, &o);
            CHECK(memcmp(re, enc, len) == 0, "vector %d: re-encoding differs", good);
            free(re);
        } else {
            bad++;
            CHECK(rc == -WS_EINVAL, "malformed %d accepted", bad);
            ws_fake *h = host(NULL);
            int s = ws_fake_process(h, enc, len);
            CHECK(s == WS_FAILED && strstr(ws_fake_error(h), "malformed record"), "malformed %d: %s", bad,
                  ws_fake_error(h));
            ws_fake_free(h);
        }
        free(enc);
    }
    CHECK(good >= 7 && bad >= 7, "%d vectors, %d malformed", good, bad);
}

int main(int argc, char **argv) {
    char buf[256];
    ws_fake *h = host(NULL);
    CHECK(strcmp(run(h, "state", buf, sizeof buf), "state ok") == 0, "state: %s", buf);
    ws_bytes v;
    CHECK(ws_fake_get(h, "s", "big", 3, &v) && v.len == 5000, "big not committed");
    uint32_t level;
    CHECK(ws_fake_log_count(h) == 1 && strcmp(ws_fake_log(h, 0, &level), "init ok") == 0 && level == WS_LOG_WARN,
          "init log");
    CHECK(strcmp(run(h, "scan", buf, sizeof buf), "a/1=10 a/2=700 a/3=70000 5") == 0, "scan: %s", buf);
    CHECK(strcmp(run(h, "limits", buf, sizeof buf), "limits ok") == 0, "limits: %s", buf);

    CHECK(ws_fake_process_kv(h, WS_NULL, ws_str("headers"), 42) == WS_OK, "headers: %s", ws_fake_error(h));
    ws_record r;
    CHECK(ws_fake_emitted_count(h) == 2, "headers: %zu emits", ws_fake_emitted_count(h));
    ws_fake_emitted(h, 0, &r);
    CHECK(r.key.len == 0 && r.value.len == -1 && r.partition == 2 && r.timestamp == 7 && r.header_count == 3,
          "headers: first emit");
    ws_header hh;
    size_t pos = 0;
    ws_next_header(&r, &pos, &hh);
    CHECK(eq(hh.name, "n") && hh.value.len == -1, "null header");
    ws_next_header(&r, &pos, &hh);
    CHECK(eq(hh.name, "e") && hh.value.len == 0, "empty header");
    ws_next_header(&r, &pos, &hh);
    CHECK(hh.name.len == 0 && eq(hh.value, "v"), "empty name");
    ws_fake_emitted(h, 1, &r);
    CHECK(r.key.len == -1 && r.partition == WS_ANY_PARTITION && r.timestamp == 42 && r.offset == -1, "second emit");

    CHECK(ws_fake_process_kv(h, ws_str("k"), ws_str("fail"), 1) == WS_FAILED, "fail succeeded");
    CHECK(strcmp(ws_fake_error(h), "rejected on purpose") == 0, "fail: %s", ws_fake_error(h));
    CHECK(ws_fake_emitted_count(h) == 0 && !ws_fake_get(h, "s", "written", 7, &v), "failed record kept effects");

    CHECK(ws_fake_process_kv(h, ws_str("k"), ws_str("forward"), 5) == WS_OK, "forward: %s", ws_fake_error(h));
    ws_fake_emitted(h, 0, &r);
    CHECK(eq(r.key, "k") && eq(r.value, "forward") && r.timestamp == 5 && r.offset == -1 && r.partition == -1,
          "forward emitted the wrong record");
    ws_fake_free(h);

    char cfg[4000];
    snprintf(cfg, sizeof cfg, "{\"pad\":\"%03000d\"}", 0);
    h = host(cfg);
    snprintf(buf, sizeof buf, "%zu", strlen(cfg));
    char got[64];
    CHECK(strcmp(run(h, "config", got, sizeof got), buf) == 0, "config: %s, want %s", got, buf);
    ws_fake_free(h);

    h = ws_fake_new(outs, 1, NULL, 0, NULL);
    CHECK(ws_fake_start(h) == WS_FAILED &&
              strcmp(ws_fake_error(h), "sdk: store_index \"s\": ENONAME: no output or store with that name") == 0,
          "init without the store: %s", ws_fake_error(h));
    ws_fake_free(h);

    if (argc > 1) vectors(argv[1]);
    else CHECK(0, "usage: sdk_test path/to/records.json");
    ws_buf_free(&val);
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    puts("ok");
    return 0;
}
