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

    /* emit: commit: records only update and mark; the commit point emits
     * each marked word once, with its count then and the timestamp of the
     * last record that marked it. */
    h = ws_fake_new(names, 1, names, 1, "{\"emit\":\"commit\"}");
    CHECK(ws_fake_start(h) == WS_OK, "%s", ws_fake_error(h));
    CHECK(ws_fake_process_kv(h, ws_str("k"), ws_str("b a b"), 5) == WS_OK, "%s", ws_fake_error(h));
    CHECK(ws_fake_emitted_count(h) == 0, "commit mode emitted at the record: %s", emitted(h, b, sizeof b));
    CHECK(ws_fake_marked_count(h) == 2, "%zu marked, want a and b", ws_fake_marked_count(h));
    CHECK(ws_fake_process_kv(h, ws_str("k"), ws_str("a"), 9) == WS_OK, "%s", ws_fake_error(h));
    CHECK(ws_fake_emitted_count(h) == 0 && ws_fake_marked_count(h) == 2, "a marked again: %zu marked",
          ws_fake_marked_count(h));
    CHECK(ws_fake_get(h, "counts", "b", 1, &v) && v.len == 8 && v.ptr[7] == 2, "counts stored at the record");
    CHECK(ws_fake_commit(h) == WS_OK, "%s", ws_fake_failed(h));
    CHECK(!strcmp(emitted(h, b, sizeof b), "a=2 b=2"), "at commit: %s", b);
    CHECK(ws_fake_callback_count(h) == 2, "%zu commit calls, want one per word", ws_fake_callback_count(h));
    if (ws_fake_emitted_count(h) == 2) {
        ws_fake_emitted(h, 0, &r);
        CHECK(r.timestamp == 9, "a's timestamp %lld, want its last mark's, 9", (long long)r.timestamp);
        ws_fake_emitted(h, 1, &r);
        CHECK(r.timestamp == 5, "b's timestamp %lld, want 5", (long long)r.timestamp);
    }
    CHECK(ws_fake_commit(h) == WS_OK && ws_fake_callback_count(h) == 0 && ws_fake_emitted_count(h) == 0,
          "an empty window: %zu calls", ws_fake_callback_count(h));
    /* A marked word whose count is gone by the commit point (a store's
     * time to live) emits nothing. */
    ws_fake_free(h);
    h = ws_fake_new(names, 1, names, 1, "{\"emit\": \"commit\", \"value_format\": \"int64\"}");
    ws_fake_ttl(h, "counts", 10, 0);
    CHECK(ws_fake_start(h) == WS_OK, "%s", ws_fake_error(h));
    CHECK(ws_fake_process_kv(h, ws_str("k"), ws_str("old"), 100) == WS_OK, "%s", ws_fake_error(h));
    CHECK(ws_fake_commit(h) == WS_OK && ws_fake_emitted_count(h) == 1, "int64 at commit: %zu emits",
          ws_fake_emitted_count(h));
    ws_fake_emitted(h, 0, &r);
    CHECK(r.value.len == 8 && r.value.ptr[7] == 1, "int64 value at commit");
    CHECK(ws_fake_process_kv(h, ws_str("k"), ws_str("old new"), 105) == WS_OK, "%s", ws_fake_error(h));
    CHECK(ws_fake_process_kv(h, ws_str("k"), ws_str("late"), 200) == WS_OK, "%s", ws_fake_error(h));
    CHECK(ws_fake_commit(h) == WS_OK, "%s", ws_fake_failed(h));
    CHECK(ws_fake_callback_count(h) == 3 && ws_fake_emitted_count(h) == 1, "expired counts: %zu calls, %zu emits",
          ws_fake_callback_count(h), ws_fake_emitted_count(h));
    ws_fake_free(h);

    /* Past the window's mark limit a word's count goes out at once. */
    h = ws_fake_new(names, 1, names, 1, "{\"emit\":\"commit\"}");
    ws_fake_timer_limits(h, 0, 0, 1);
    CHECK(ws_fake_start(h) == WS_OK, "%s", ws_fake_error(h));
    CHECK(!strcmp(count(h, "x y", b, sizeof b), "y=1"), "past the limit: %s", b);
    CHECK(ws_fake_commit(h) == WS_OK && !strcmp(emitted(h, b, sizeof b), "x=1"), "at commit: %s", b);
    ws_fake_free(h);

    /* A bad stored count fails the commit call, naming the word. */
    h = ws_fake_new(names, 1, names, 1, "{\"emit\":\"commit\"}");
    CHECK(ws_fake_start(h) == WS_OK, "%s", ws_fake_error(h));
    CHECK(ws_fake_process_kv(h, ws_str("k"), ws_str("w"), 1) == WS_OK, "%s", ws_fake_error(h));
    ws_fake_put(h, "counts", "w", 1, "xyz", 3);
    CHECK(ws_fake_commit(h) == WS_FAILED && strstr(ws_fake_failed(h), "holds 3 bytes for word \"w\""), "%s",
          ws_fake_failed(h));
    ws_fake_free(h);

    /* Config errors name the field and what it takes. */
    static const struct {
        const char *config, *want;
    } bad[] = {
        {"{\"emit\":\"never\"}", "wordcount: config: \"emit\": must be \"update\" or \"commit\"; got \"never\""},
        {"{\"emit\":1}", "wordcount: config: \"emit\": must be a string"},
        {"{\"value_format\":\"int64\",\"emits\":\"commit\"}",
         "wordcount: config: unknown field \"emits\" (known: emit, value_format)"},
        {"[\"emit\"]", "wordcount: config: not a JSON object"},
        {"{\"emit\":\"commit\"", "wordcount: config: cannot read the config"},
        {"{\"emit\" \"commit\"}", "wordcount: config: cannot read the config"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        h = ws_fake_new(names, 1, names, 1, bad[i].config);
        CHECK(ws_fake_start(h) == WS_FAILED && !strcmp(ws_fake_error(h), bad[i].want), "%s: %s", bad[i].config,
              ws_fake_error(h));
        ws_fake_free(h);
    }
    static const char *good[] = {"", "null", " {} ", "{\"emit\":\"update\"}", "{ \"value_format\" : \"decimal\" , \"emit\" : \"update\" }"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        h = ws_fake_new(names, 1, names, 1, good[i]);
        CHECK(ws_fake_start(h) == WS_OK, "%s: %s", good[i], ws_fake_error(h));
        CHECK(!strcmp(count(h, "a a", b, sizeof b), "a=2"), "%s: update mode: %s", good[i], b);
        ws_fake_free(h);
    }
    if (failures) return 1;
    puts("ok");
    return 0;
}
