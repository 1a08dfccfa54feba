/* Native test of split.c against the fake host. */
#include <stdio.h>
#include <string.h>

#include "../common/check.h"
#include "wasmstream_fake.h"

static const char *outs[] = {"words"};

/* The emits of the last record as "key=value " text; checks that each
 * goes to "words" with host partitioning and the input's timestamp. */
static const char *split(ws_fake *h, ws_bytes value, char *buf, size_t cap) {
    int st = ws_fake_process_kv(h, ws_str("line"), value, 1700000000000);
    CHECK(st == WS_OK, "%.20s: %s", value.ptr ? (const char *)value.ptr : "(null)", ws_fake_error(h));
    size_t n = 0;
    buf[0] = 0;
    for (size_t i = 0; i < ws_fake_emitted_count(h); i++) {
        ws_record r;
        const char *to = ws_fake_emitted(h, i, &r);
        CHECK(!strcmp(to, "words") && r.partition == WS_ANY_PARTITION && r.timestamp == 1700000000000,
              "emit %zu: to %s, partition %d, timestamp %lld", i, to, r.partition, (long long)r.timestamp);
        n += (size_t)snprintf(buf + n, cap - n, "%s%.*s=%.*s", i ? " " : "", (int)r.key.len, (const char *)r.key.ptr,
                              (int)r.value.len, (const char *)r.value.ptr);
    }
    return buf;
}

int main(void) {
    char b[512];
    ws_fake *h = ws_fake_new(outs, 1, NULL, 0, "");
    CHECK(ws_fake_start(h) == WS_OK, "%s", ws_fake_error(h));
    /* Every occurrence, in order, lowercased; the word is key and value. */
    CHECK(!strcmp(split(h, ws_str("The cat, the hat"), b, sizeof b), "the=the cat=cat the=the hat=hat"), "%s", b);
    CHECK(!strcmp(split(h, ws_str(""), b, sizeof b), ""), "empty: %s", b);
    CHECK(!strcmp(split(h, WS_NULL, b, sizeof b), ""), "tombstone: %s", b);
    CHECK(!strcmp(split(h, ws_str("Ça va — ПРИВЕТ don't"), b, sizeof b), "ça=ça va=va привет=привет don=don t=t"), "%s", b);
    CHECK(!strcmp(split(h, ws_str("\xffhello\xfeworld"), b, sizeof b), "hello=hello world=world"), "invalid UTF-8: %s", b);
    static char lng[WS_MAX_KEY_SIZE + 8];
    memset(lng, 'x', WS_MAX_KEY_SIZE + 1);
    strcpy(lng + WS_MAX_KEY_SIZE + 1, " short");
    CHECK(!strcmp(split(h, ws_str(lng), b, sizeof b), "short=short"), "a word over the key limit: %s", b);
    ws_fake_free(h);

    h = ws_fake_new(outs, 1, NULL, 0, "{\"x\":1}");
    CHECK(ws_fake_start(h) == WS_FAILED && !strcmp(ws_fake_error(h), "split: config: takes no config; got {\"x\":1}"),
          "config refused: %s", ws_fake_error(h));
    ws_fake_free(h);

    const char *other[] = {"out"};
    h = ws_fake_new(other, 1, NULL, 0, "{}");
    CHECK(ws_fake_start(h) == WS_FAILED && strstr(ws_fake_error(h), "\"words\""), "undeclared output: %s",
          ws_fake_error(h));
    ws_fake_free(h);
    if (failures) return 1;
    puts("ok");
    return 0;
}
