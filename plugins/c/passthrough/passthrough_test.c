/* Native test of passthrough.c against the fake host. */
#include <stdio.h>
#include <string.h>

#include "wasmstream_fake.h"

static int failures;
#define CHECK(c, what)                                                  \
    do {                                                                \
        if (!(c)) {                                                     \
            fprintf(stderr, "%s:%d: FAIL %s\n", __FILE__, __LINE__, what); \
            failures++;                                                 \
        }                                                               \
    } while (0)

int main(void) {
    const char *outs[] = {"out"};
    ws_fake *h = ws_fake_new(outs, 1, NULL, 0, " {} ");
    CHECK(ws_fake_start(h) == WS_OK, ws_fake_error(h));
    ws_header hs[2] = {{ws_str("h"), WS_NULL}, {ws_str("e"), ws_str("")}};
    ws_out in = {WS_NULL, ws_str("v"), hs, 2, 0};
    uint8_t buf[128];
    ws_encode(buf, 7, 9, 3, 0, &in);
    CHECK(ws_fake_process(h, buf, ws_encoded_size(&in)) == WS_OK, ws_fake_error(h));
    ws_record r;
    CHECK(ws_fake_emitted_count(h) == 1 && strcmp(ws_fake_emitted(h, 0, &r), "out") == 0, "one emit to out");
    CHECK(r.key.len == -1 && r.value.len == 1 && r.timestamp == 7 && r.partition == -1 && r.offset == -1,
          "the record unchanged, host partitioning");
    CHECK(r.header_count == 2 && r.headers_len == 8 + 1 + 8 + 1, "headers kept, null and empty apart");
    ws_fake_free(h);

    h = ws_fake_new(outs, 1, NULL, 0, "{\"x\":1}");
    CHECK(ws_fake_start(h) == WS_FAILED &&
              strcmp(ws_fake_error(h), "passthrough: config: takes no config; got {\"x\":1}") == 0,
          "config refused");
    ws_fake_free(h);
    if (failures) return 1;
    puts("ok");
    return 0;
}
