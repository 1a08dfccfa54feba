package scaffold

import (
	"io/fs"
	"path"
)

var cLang = &Lang{
	Name:   "c",
	Title:  "C",
	Files:  cFiles,
	SDK:    cSDK,
	Marker: SDKDir + "/wasmstream.h", // Go and Rust projects have a Makefile too
}

// cSDK is the sources and headers of sdk/c: the SDK and its fake host.
func cSDK(src fs.FS) (map[string][]byte, error) {
	return copyTree(src, "sdk/c", "", func(p string, d fs.DirEntry) bool {
		if d.IsDir() {
			return false // sdk/c/test: the SDK's own tests
		}
		ext := path.Ext(p)
		return ext == ".c" || ext == ".h"
	})
}

var cFiles = map[string]string{
	"NAME.c": `/*
 * [[.Name]]: uppercases each record's value, counts the records seen per key
 * in the store "seen", and emits the result to the output "out" with the
 * count in a header "seen".
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wasmstream.h"

static ws_output out = WS_OUTPUT("out");
static ws_store seen = WS_STORE("seen");
static char prefix[256]; /* from the config's "prefix" */
static ws_buf val;
static uint8_t *buf;
static size_t buf_cap;

int ws_init(void) {
    int32_t e = ws_output_check(&out);
    if (e < 0) return ws_fail_call("output_index", out.name, e);
    e = ws_store_check(&seen);
    if (e < 0) return ws_fail_call("store_index", seen.name, e);
    /* Finds "prefix": "..." in the config (no escapes). */
    ws_buf c = {0};
    prefix[0] = 0;
    if (ws_config(&c) > 0) {
        char *s = malloc(c.len + 1);
        if (!s) return ws_fail("[[.Name]]: out of memory");
        memcpy(s, c.data, c.len);
        s[c.len] = 0;
        char *p = strstr(s, "\"prefix\":");
        if (p) {
            p += 9;
            while (*p == ' ') p++;
            char *end = *p == '"' ? strchr(p + 1, '"') : NULL;
            if (end) snprintf(prefix, sizeof prefix, "%.*s", (int)(end - p - 1), p + 1);
        }
        free(s);
    }
    ws_buf_free(&c);
    return WS_OK;
}

int ws_process(const ws_record *r) {
    if (r->value.len < 0) return ws_fail("[[.Name]]: a tombstone has no value to process");
    const void *key = r->key.ptr;
    size_t kl = r->key.len < 0 ? 0 : (size_t)r->key.len;
    int32_t got = ws_get(&seen, key, kl, &val);
    if (got < 0) return ws_fail_call("state_get", seen.name, got);
    unsigned long long n = 0;
    if (got == 1) {
        char t[24];
        snprintf(t, sizeof t, "%.*s", (int)val.len, (const char *)val.data);
        n = strtoull(t, NULL, 10);
    }
    char count[24];
    int cl = snprintf(count, sizeof count, "%llu", n + 1);
    int32_t e = ws_put(&seen, key, kl, count, (size_t)cl);
    if (e < 0) return ws_fail_call("state_put", seen.name, e);
    size_t pl = strlen(prefix), vl = (size_t)r->value.len;
    if (pl + vl > buf_cap) {
        uint8_t *b = realloc(buf, pl + vl);
        if (!b) return ws_fail("[[.Name]]: out of memory");
        buf = b;
        buf_cap = pl + vl;
    }
    memcpy(buf, prefix, pl);
    for (size_t i = 0; i < vl; i++) buf[pl + i] = (uint8_t)toupper(r->value.ptr[i]);
    ws_header h = {ws_str("seen"), {(const uint8_t *)count, cl}};
    ws_out o = {r->key, {buf, (int32_t)(pl + vl)}, &h, 1, 0};
    e = ws_emit(&out, &o);
    return e < 0 ? ws_fail_call("emit", out.name, e) : WS_OK;
}
`,
	"NAME_test.c": `/* The native test of [[.Ident]].c, against the C SDK's fake host. */
#include <stdio.h>
#include <string.h>

#include "wasmstream_fake.h"

int main(void) {
    const char *outs[] = {"out"}, *stores[] = {"seen"};
    ws_fake *h = ws_fake_new(outs, 1, stores, 1, "{\"prefix\":\"> \"}");
    if (ws_fake_start(h) != WS_OK) {
        fprintf(stderr, "FAIL init: %s\n", ws_fake_error(h));
        return 1;
    }
    const char *want[] = {"1", "2"};
    for (int i = 0; i < 2; i++) {
        if (ws_fake_process_kv(h, ws_str("k"), ws_str("hello"), 1) != WS_OK) {
            fprintf(stderr, "FAIL record %d: %s\n", i, ws_fake_error(h));
            return 1;
        }
        ws_record r;
        ws_header hd;
        size_t pos = 0;
        ws_fake_emitted(h, 0, &r);
        ws_next_header(&r, &pos, &hd);
        if (r.value.len != 7 || memcmp(r.value.ptr, "> HELLO", 7) || hd.value.len != 1 || hd.value.ptr[0] != want[i][0]) {
            fprintf(stderr, "FAIL record %d: emitted %.*s\n", i, (int)r.value.len, (const char *)r.value.ptr);
            return 1;
        }
    }
    if (ws_fake_process_kv(h, ws_str("k"), WS_NULL, 1) != WS_FAILED) {
        fprintf(stderr, "FAIL: a tombstone was accepted\n");
        return 1;
    }
    ws_fake_free(h);
    puts("ok");
    return 0;
}
`,
	"Makefile": `# [[.Name]]: make (the plugin), make test (the native test, against the
# C SDK's fake host). The SDK is in [[.SDKDir]]/ ("wasmstream init
# --update-sdk" replaces it). Debian packages: clang-19 lld-19 wasi-libc
# libclang-rt-19-dev-wasm32 (or WASI_SYSROOT pointing at a wasi-sdk sysroot).
SDK = [[.SDKDir]]
# The SDK's sources; the fake host's (named *fake*) only in the native test.
SDK_SRC = $(foreach f,$(wildcard $(SDK)/*.c),$(if $(findstring fake,$(notdir $(f))),,$(f)))
SDK_FAKE = $(foreach f,$(wildcard $(SDK)/*.c),$(if $(findstring fake,$(notdir $(f))),$(f)))
CLANG ?= clang-19
WASI_SYSROOT ?= /usr
WASI_FLAGS ?= --sysroot=$(WASI_SYSROOT) -isystem /usr/include/wasm32-wasi -L/usr/lib/wasm32-wasi
CC ?= cc
# Optional: binaryen's optimizer (npm install binaryen, or Debian's
# binaryen), e.g. make WASM_OPT=wasm-opt. It took 9-14 % off the CPU per
# record of wasmstream's own C plugins. Sign the module after it.
WASM_OPT ?=
WASM_OPT_FLAGS ?= -O3

[[.Ident]].wasm: [[.Ident]].c $(SDK_SRC) $(wildcard $(SDK)/*.h)
	$(CLANG) --target=wasm32-wasi $(WASI_FLAGS) -mexec-model=reactor -O2 -std=c11 -Wall -Wextra \
		-Wl,-z,stack-size=65536 -Wl,--strip-all -I$(SDK) -o $@ [[.Ident]].c $(SDK_SRC)
	$(if $(WASM_OPT),$(WASM_OPT) $(WASM_OPT_FLAGS) $@ -o $@)

.PHONY: test
test:
	$(CC) -std=c11 -g -Wall -Wextra -I$(SDK) -o [[.Ident]]_test [[.Ident]]_test.c [[.Ident]].c \
		$(SDK_SRC) $(SDK_FAKE)
	./[[.Ident]]_test
`,
	".gitignore": "*.wasm\n[[.Ident]]_test\nwasmstream-state/\n",
}
