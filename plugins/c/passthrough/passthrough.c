/*
 * passthrough: emits every input record unchanged to the output "out"
 * (key, value, headers, timestamp; the host picks the partition by key
 * hash), like plugins/passthrough in Go. It takes no config.
 */
#include "../common/noconfig.h"
#include "wasmstream.h"

static ws_output out = WS_OUTPUT("out");

int ws_init(void) {
    int st = no_config("passthrough");
    if (st != WS_OK) return st;
    int32_t e = ws_output_check(&out);
    return e < 0 ? ws_fail_call("output_index", out.name, e) : WS_OK;
}

/* The record as it came: the SDK sends its input buffer, not a copy. */
int ws_process(const ws_record *r) {
    int32_t e = ws_forward(&out, r);
    return e < 0 ? ws_fail_call("emit", out.name, e) : WS_OK;
}
