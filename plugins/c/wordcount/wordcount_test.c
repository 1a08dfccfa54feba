/* Native test of wordcount.c against the fake host. */
#include <stdio.h>
#include <string.h>

#include "../common/check.h"
#include "wasmstream_fake.h"

static const char *names[] = {"counts"};

/* The emits of the last record as "word=value " (decimal) text. */
static const char *emitted(ws_fake *h, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = 0;
    for (size_t i = 0; i < ws_fake_emitted_count(h); i++) {
        ws_record r;
        ws_fake_emitted(h, i, &r);
        n += (size_t)snprintf(buf + n, cap - n, "%s%.*s=%.*s", i ? " " : "", (int)r.key.len, (const char *)r.key.ptr,
                              (int)r.value.len, (const char *)r.value.ptr);
    }
    return buf;
}

static const char *count(ws_fake *h, const char *text, char *buf, size_t cap) {
    int st = ws_fake_process_kv(h, ws_str("k"), ws_str(text), 1);
    CHECK(st == WS_OK, "%s: %s", text, ws_fake_error(h));
    return emitted(h, buf, cap);
}

int main(void) {
    char b[512];
    ws_fake *h = ws_fake_new(names, 1, names, 1, "{}");
    CHECK(ws_fake_start(h) == WS_OK, "%s", ws_fake_error(h));
    CHECK(!strcmp(count(h, "The cat, the HAT; don't", b, sizeof b), "the=2 cat=1 hat=1 don=1 t=1"), "%s", b);
    CHECK(!strcmp(count(h, "Ça va, ÇA VA — Привет ПРИВЕТ", b, sizeof b), "ça=2 va=2 привет=2"), "%s", b);
    CHECK(!strcmp(count(h, "the", b, sizeof b), "the=3"), "%s", b);
    CHECK(!strcmp(count(h, "ab\xff" "cd", b, sizeof b), "ab=1 cd=1"), "invalid UTF-8: %s", b);
    static char lng[6000];
    memset(lng, 'x', sizeof lng - 1);
    CHECK(!strcmp(count(h, lng, b, sizeof b), ""), "long word: %s", b);
    ws_bytes v;
    CHECK(ws_fake_get(h, "counts", "the", 3, &v) && v.len == 8 && v.ptr[7] == 3, "stored count");
    ws_fake_free(h);

    h = ws_fake_new(names, 1, names, 1, "{\"value_format\": \"int64\"}");
    CHECK(ws_fake_start(h) == WS_OK, "%s", ws_fake_error(h));
    CHECK(ws_fake_process_kv(h, ws_str("k"), ws_str("a"), 1) == WS_OK, "int64");
    ws_record r;
    ws_fake_emitted(h, 0, &r);
    CHECK(r.value.len == 8 && r.value.ptr[7] == 1, "int64 value");
    ws_fake_free(h);

    h = ws_fake_new(names, 1, names, 1, "{\"value_format\":\"hex\"}");
    CHECK(ws_fake_start(h) == WS_FAILED && strstr(ws_fake_error(h), "must be \"decimal\" or \"int64\""), "%s",
          ws_fake_error(h));
    ws_fake_free(h);
    if (failures) return 1;
    puts("ok");
    return 0;
}
