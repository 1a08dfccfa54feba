/*
 * velocity_test.c: the card-velocity processor of the newcomer's path, written with
 * the C SDK's time helpers: per card (the record key), count the payments
 * in the last 60 s of event time, alert above 3, and pass every payment
 * on. The same processor as the Go SDK's sdk/internal/velocity and the
 * Rust SDK's sdk/rust/tests/velocity.rs, run against the fake host.
 *
 *     cc -I.. velocity_test.c ../wasmstream.c ../wasmstream_time.c ../wasmstream_fake.c
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "wasmstream_fake.h"
#include "wasmstream_time.h"

/* ---- the processor ---- */

WS_DECLARE_OUTPUT(payments, "payments");
WS_DECLARE_OUTPUT(alerts, "alerts");
/* Per card, the timestamps (8 bytes each, big-endian) of its payments in
 * the 60 s before its last one. */
WS_DECLARE_STORE(recent, "recent");
#define WINDOW 60000
#define LIMIT 3
static ws_buf v;

/* Keeps the timestamps of v after t. */
static void since(int64_t t) {
    size_t n = 0;
    for (size_t i = 0; i + 8 <= v.len; i += 8) {
        uint64_t ts = 0;
        for (int b = 0; b < 8; b++) ts = ts << 8 | v.data[i + b];
        if ((int64_t)ts > t) memmove(v.data + n, v.data + i, 8), n += 8;
    }
    v.len = n;
}

int ws_process(const ws_record *r) {
    WS_TRY(ws_get(&recent, r->key.ptr, ws_len(r->key), &v), "state_get", recent.name);
    since(r->timestamp - WINDOW);
    uint8_t *d = realloc(v.data, v.len + 8);
    if (!d) return ws_fail("velocity: out of memory");
    for (int b = 0; b < 8; b++) d[v.len + b] = (uint8_t)((uint64_t)r->timestamp >> (56 - 8 * b));
    v.data = d, v.cap = v.len += 8;
    WS_TRY(ws_put(&recent, r->key.ptr, ws_len(r->key), v.data, v.len), "state_put", recent.name);
    WS_TRY(ws_timer_set(WS_EVENT_TIME, r->timestamp + WINDOW, r->key.ptr, ws_len(r->key)), "timer_set", NULL);
    if (v.len / 8 > LIMIT) {
        char n[24];
        ws_out o = {r->key, {(const uint8_t *)n, snprintf(n, sizeof n, "%zu", v.len / 8)}, NULL, 0, 0};
        WS_TRY(ws_emit(&alerts, &o), "emit", alerts.name);
    }
    WS_TRY(ws_forward(&payments, r), "emit", payments.name);
    return WS_OK;
}

/* Drops a card 60 s (of event time) after its last payment. */
int ws_on_timer(const ws_trigger *t) {
    int32_t found = ws_get(&recent, t->key.ptr, ws_len(t->key), &v);
    WS_TRY(found, "state_get", recent.name);
    since(t->time - WINDOW);
    if (found && v.len == 0) WS_TRY(ws_delete(&recent, t->key.ptr, ws_len(t->key)), "state_delete", recent.name);
    return WS_OK;
}

/* ---- its test ---- */


int main(void) {
    const char *outs[] = {"payments", "alerts"}, *stores[] = {"recent"};
    ws_fake *h = ws_fake_new(outs, 2, stores, 1, NULL);
    CHECK(ws_fake_start(h) == WS_OK, "start: %s", ws_fake_error(h));
    struct {
        const char *card;
        int64_t sec;
    } pays[] = {{"a", 0}, {"a", 10}, {"b", 15}, {"a", 20}, {"a", 30}, {"b", 40}, {"a", 60}, {"a", 61}, {"a", 121}};
    char got[256] = "";
    for (size_t i = 0; i < sizeof pays / sizeof pays[0]; i++) {
        char value[32];
        snprintf(value, sizeof value, "%s pays", pays[i].card);
        ws_header hd = {ws_str("id"), {(const uint8_t *)&i, 1}};
        ws_out o = {ws_str(pays[i].card), ws_str(value), &hd, 1, 0};
        uint8_t enc[128];
        size_t n = ws_encoded_size(&o);
        ws_encode(enc, pays[i].sec * 1000, (int64_t)i, 0, 0, &o);
        CHECK(ws_fake_process(h, enc, n) == WS_OK && !*ws_fake_failed(h), "%s@%lld: %s", pays[i].card,
              (long long)pays[i].sec, ws_fake_failed(h));
        int passed = 0;
        for (size_t j = 0; j < ws_fake_emitted_count(h); j++) {
            ws_record r;
            const char *to = ws_fake_emitted(h, j, &r);
            if (!strcmp(to, "payments")) {
                passed++;
                /* unchanged: the same bytes but for offset, partition, output */
                CHECK(r.raw_len == n && !memcmp(r.raw, enc, 8) && !memcmp(r.raw + 24, enc + 24, n - 24), "passed on changed");
            } else {
                size_t l = strlen(got);
                snprintf(got + l, sizeof got - l, "%s%s@%lld=%.*s", l ? " " : "", pays[i].card, (long long)pays[i].sec,
                         (int)r.value.len, (const char *)r.value.ptr);
            }
        }
        CHECK(passed == 1, "%s@%lld passed on %d times", pays[i].card, (long long)pays[i].sec, passed);
    }
    CHECK(!strcmp(got, "a@30=4 a@60=4 a@61=5"), "alerts %s", got);
    /* A card is forgotten 60 s after its last payment: b is gone, a keeps
     * the payment at 121. */
    ws_bytes val;
    CHECK(ws_fake_len(h, "recent") == 1 && ws_fake_get(h, "recent", "a", 1, &val) && val.len == 8, "cards kept: %zu",
          ws_fake_len(h, "recent"));
    ws_fake_free(h);

    /* The declared outputs and store are resolved at start. */
    h = ws_fake_new(outs, 1, NULL, 0, NULL);
    CHECK(ws_fake_start(h) == WS_FAILED &&
              !strcmp(ws_fake_error(h), "sdk: not declared by the processor (add to its outputs or stores in the "
                                        "pipeline config): output \"alerts\", store \"recent\""),
          "start without alerts and recent: %s", ws_fake_error(h));
    ws_fake_free(h);
    ws_buf_free(&v);
    if (failures) return 1;
    puts("ok");
    return 0;
}
