/*
 * noconfig.h: ws_init's config check for the C plugins that take no
 * config (passthrough, split), refusing anything but an empty config,
 * null or {} (JSON whitespace allowed) with the Go plugins' message:
 * "<plugin>: config: takes no config; got <config>". Header-only (a
 * static function): each plugin is built from its own .c file and the SDK.
 */
#ifndef WASMSTREAM_PLUGINS_NOCONFIG_H
#define WASMSTREAM_PLUGINS_NOCONFIG_H

#include <string.h>

#include "wasmstream.h"

/* WS_OK if the config is empty, otherwise the record of a failed init
 * (ws_fail) naming plugin. */
static int no_config(const char *plugin) {
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
    if (k == 0 || strcmp(t, "null") == 0 || strcmp(t, "{}") == 0) {
        ws_buf_free(&c);
        return WS_OK;
    }
    static const char pre[] = ": config: takes no config; got ";
    char m[256];
    size_t pl = strlen(plugin);
    if (pl > 64) pl = 64;
    memcpy(m, plugin, pl);
    memcpy(m + pl, pre, sizeof pre - 1);
    size_t at = pl + sizeof pre - 1;
    size_t cl = c.len < sizeof m - at ? c.len : sizeof m - at;
    memcpy(m + at, c.data, cl);
    ws_buf_free(&c);
    return ws_fail_n(m, at + cl);
}

#endif
