/*
 * wasmstream_migrate.c: the wasmstream_migrate export of
 * wasmstream_migrate.h (abi/ABI.md section 12). Link it only into
 * processors that migrate their state.
 */
#include "wasmstream_migrate.h"

int32_t ws_sdk_migrate(uint32_t len) {
    const uint8_t *buf = ws_sdk_input_bytes(len);
    if (!buf) return ws_fail("sdk: migrate: version ID length beyond the input buffer");
    ws_bytes from = {buf, (int32_t)len};
    return ws_migrate(from);
}

#ifdef __wasm__
__attribute__((export_name("wasmstream_migrate"))) int32_t ws_export_migrate(uint32_t len) {
    return ws_sdk_migrate(len);
}
#endif
