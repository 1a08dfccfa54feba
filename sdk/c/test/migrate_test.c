/*
 * migrate_test.c: the C SDK's state migration (WS_MIGRATE of
 * wasmstream.h, abi/ABI.md section 13) against the fake host: a migration that rewrites
 * JSON counts ({"n":5}) as 8 bytes big-endian, and a failing one whose
 * writes are dropped and whose emit and timer_set get EPHASE. The Go SDK's
 * sdk/migrate test, in C.
 *
 *     cc -I.. migrate_test.c ../wasmstream_time.c ../wasmstream.c ../wasmstream_fake.c
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "wasmstream_fake.h"
#include "wasmstream_time.h"

static ws_output out = WS_OUTPUT("out");
static ws_store counts = WS_STORE("counts");
static int failing; /* the migration under test: 0 converts, 1 fails */

int ws_process(const ws_record *r) {
    (void)r;
    return WS_OK;
}

static int convert(ws_bytes from) {
    if (ws_len(from) < 3 || memcmp(from.ptr, "v1@", 3) != 0) return ws_fail("no migration from this version");
    /* Read everything first, then write. */
    char keys[16][16], vals[16][32];
    int n = 0;
    ws_scan sc;
    int32_t e = ws_scan_open(&counts, "", 0, "", 0, &sc);
    if (e < 0) return ws_fail_call("scan_open", counts.name, e);
    ws_bytes k, v;
    while ((e = ws_scan_next(&sc, &k, &v)) == 1 && n < 16) {
        snprintf(keys[n], sizeof keys[n], "%.*s", (int)ws_len(k), (const char *)k.ptr);
        snprintf(vals[n], sizeof vals[n], "%.*s", (int)ws_len(v), (const char *)v.ptr);
        n++;
    }
    ws_scan_close(&sc);
    if (e < 0) return ws_fail_call("scan_next", counts.name, e);
    for (int i = 0; i < n; i++) {
        unsigned long long c;
        if (sscanf(vals[i], "{\"n\":%llu}", &c) != 1) return ws_fail("not a JSON count");
        uint8_t be[8];
        for (int b = 0; b < 8; b++) be[b] = (uint8_t)(c >> (56 - 8 * b));
        WS_TRY(ws_put(&counts, keys[i], strlen(keys[i]), be, 8), "state_put", counts.name);
    }
    return WS_OK;
}

static int forbidden(void) {
    WS_TRY(ws_put(&counts, "half", 4, "written", 7), "state_put", counts.name);
    ws_out o = {WS_NULL, ws_str("x"), NULL, 0, 0};
    int32_t emit = ws_emit(&out, &o);
    int32_t set = ws_timer_set(WS_EVENT_TIME, 5, "t", 1);
    if (emit != -WS_EPHASE || set != -WS_EPHASE) return ws_fail("emit or timer_set was not refused with EPHASE");
    return ws_fail("the migration fails");
}

static int migrate(ws_bytes from) { return failing ? forbidden() : convert(from); }
WS_MIGRATE(migrate);

int main(void) {
    const char *outs[] = {"out"}, *stores[] = {"counts"};
    ws_fake *h = ws_fake_new(outs, 1, stores, 1, NULL);
    CHECK(ws_fake_start(h) == WS_OK, "start: %s", ws_fake_error(h));
    ws_fake_put(h, "counts", "a", 1, "{\"n\":5}", 7);
    ws_fake_put(h, "counts", "b", 1, "{\"n\":12}", 8);

    CHECK(ws_fake_migrate(h, "v0@0123456789ab") == WS_FAILED, "a migration from an unknown version fails");
    CHECK(strstr(ws_fake_failed(h), "no migration from this version") != NULL, "%s", ws_fake_failed(h));

    failing = 1;
    CHECK(ws_fake_migrate(h, "v1@0123456789ab") == WS_FAILED, "the failing migration fails");
    CHECK(strstr(ws_fake_failed(h), "the migration fails") != NULL, "%s", ws_fake_failed(h));
    CHECK(ws_fake_len(h, "counts") == 2, "a failed migration's writes are dropped: %zu entries", ws_fake_len(h, "counts"));
    CHECK(ws_fake_emitted_count(h) == 0, "a migration emitted");

    failing = 0;
    CHECK(ws_fake_migrate(h, "v1@0123456789ab") == WS_OK, "migrate: %s", ws_fake_failed(h));
    ws_bytes v;
    CHECK(ws_fake_get(h, "counts", "a", 1, &v) && ws_len(v) == 8 && v.ptr[7] == 5, "a migrated");
    CHECK(ws_fake_get(h, "counts", "b", 1, &v) && ws_len(v) == 8 && v.ptr[7] == 12, "b migrated");
    ws_fake_free(h);
    if (failures) return 1;
    puts("ok");
    return 0;
}
