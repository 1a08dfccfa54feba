/*
 * passthrough: emits every input record unchanged to the output "out"
 * (key, value, headers, timestamp; the host picks the partition by key
 * hash), like plugins/passthrough in Go. It takes no config.
 */
#include <string.h>

#include "wasmstream.h"

static ws_output out = WS_OUTPUT("out");

int ws_init(void) {
    ws_buf c = {0};
    int32_t n = ws_config(&c);
    size_t k = 0;
    char t[8];
    for (int32_t i = 0; i < n; i++) {
        uint8_t b = c.data[i];
        if (b == ' ' || b == '\t' || b == '\r' || b == '\n') continue;
        if (k == sizeof t - 1) break;
        t[k++] = (char)b;
    }
    t[k] = 0;
    if (!(k == 0 || strcmp(t, "null") == 0 || strcmp(t, "{}") == 0)) {
        static const char pre[] = "passthrough: config: takes no config; got ";
        char m[256];
        size_t cl = c.len < sizeof m - sizeof pre ? c.len : sizeof m - sizeof pre;
        memcpy(m, pre, sizeof pre - 1);
        memcpy(m + sizeof pre - 1, c.data, cl);
        ws_buf_free(&c);
        return ws_fail_n(m, sizeof pre - 1 + cl);
    }
    ws_buf_free(&c);
    int32_t e = ws_output_check(&out);
    return e < 0 ? ws_fail_call("output_index", out.name, e) : WS_OK;
}

/* The record as it came: the SDK sends its input buffer, not a copy. */
int ws_process(const ws_record *r) {
    int32_t e = ws_forward(&out, r);
    return e < 0 ? ws_fail_call("emit", out.name, e) : WS_OK;
}
