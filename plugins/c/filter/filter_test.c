/* Native test of filter.c against the fake host: the Go filter's table
 * (plugins/filter/main_test.go). */
#include <stdio.h>
#include <string.h>

#include "wasmstream_fake.h"

static int failures;

static const char *records[] = {
    "{\"user\": {\"country\": \"NL\", \"age\": 31}, \"tags\": [\"a\"]}",
    "{\"user\": {\"country\": \"DE\", \"age\": 17.5}}",
    "{\"user\": {\"country\": \"N\\u004c\", \"age\": 1e400}}",
    "{\"user\": {\"country\": null, \"age\": \"31\"}}",
    "{\"user\": {}}",
    "{\"user\": {\"country\": [\"NL\"], \"age\": -1}}",
    "not json",
    "",
};

static void run(const char *cfg, const char *want) {
    const char *outs[] = {"out", "invalid", "kept"};
    ws_fake *h = ws_fake_new(outs, 3, NULL, 0, cfg);
    if (ws_fake_start(h) != WS_OK) {
        fprintf(stderr, "FAIL %s: init: %s\n", cfg, ws_fake_error(h));
        failures++;
        ws_fake_free(h);
        return;
    }
    char got[256] = "";
    for (size_t i = 0; i < sizeof records / sizeof *records; i++) {
        ws_fake_process_kv(h, ws_str("k"), ws_str(records[i]), 1);
        ws_record r;
        const char *o = ws_fake_emitted_count(h) ? ws_fake_emitted(h, 0, &r) : "";
        strcat(got, i ? "," : "");
        strcat(got, o);
    }
    if (strcmp(got, want)) {
        fprintf(stderr, "FAIL %s:\n  got  %s\n  want %s\n", cfg, got, want);
        failures++;
    }
    ws_fake_free(h);
}

static void bad(const char *cfg, const char *want) {
    const char *outs[] = {"out"};
    ws_fake *h = ws_fake_new(outs, 1, NULL, 0, cfg);
    if (ws_fake_start(h) != WS_FAILED || !strstr(ws_fake_error(h), want)) {
        fprintf(stderr, "FAIL config %s:\n  got  %s\n  want %s\n", cfg, ws_fake_error(h), want);
        failures++;
    }
    ws_fake_free(h);
}

int main(void) {
    run("{\"field\":\"user.country\",\"value\":\"NL\"}", "out,,out,,,,,");
    run("{\"field\":\"user.country\",\"op\":\"ne\",\"value\":\"NL\"}", ",out,,out,out,out,,");
    run("{\"field\":\"user.country\",\"op\":\"eq\",\"value\":null}", ",,,out,,,,");
    run("{\"field\":\"user.country\",\"op\":\"exists\"}", "out,out,out,out,,out,,");
    run("{\"field\":\"user.age\",\"op\":\"gt\",\"value\":18}", "out,,out,,,,,");
    run("{\"field\":\"user.age\",\"op\":\"ge\",\"value\":31}", "out,,out,,,,,");
    run("{\"field\":\"user.age\",\"op\":\"lt\",\"value\":18}", ",out,,,,out,,");
    run("{\"field\":\"user.age\",\"op\":\"le\",\"value\":17.5}", ",out,,,,out,,");
    run("{\"field\":\"user.age\",\"op\":\"eq\",\"value\":31.0}", "out,,,,,,,");
    run("{\"field\":\"user.country\",\"op\":\"in\",\"value\":[\"DE\",\"NL\"]}", "out,out,out,,,,,");
    run("{\"field\":\"user.country\",\"op\":\"in\",\"value\":[null, 1]}", ",,,out,,,,");
    run("{\"field\":\"tags.0\",\"op\":\"eq\",\"value\":\"a\"}", "out,,,,,,,");
    run("{\"field\":\"user.country\",\"value\":\"NL\",\"output\":\"kept\"}", "kept,,kept,,,,,");
    run("{\"field\":\"user.country\",\"value\":\"NL\",\"invalid_output\":\"invalid\"}", "out,,out,,,,invalid,invalid");

    bad("", "filter: config: \"field\": required");
    bad("[]", "filter: config: must be a JSON object, got a list");
    bad("{\"field\":", "filter: config: invalid JSON");
    bad("{\"field\":\"a..b\",\"value\":1}", "filter: config: \"field\": empty segment");
    bad("{\"field\":\"a\",\"value\":1,\"op\":\"like\"}",
        "filter: config: \"op\": must be one of eq, ne, exists, gt, ge, lt, le, in; got \"like\"");
    bad("{\"field\":\"a\"}", "filter: config: \"value\": required for op eq");
    bad("{\"field\":\"a\",\"value\":{\"x\":1}}", "\"value\": must be a string, number, boolean or null for op eq");
    bad("{\"field\":\"a\",\"op\":\"gt\",\"value\":\"5\"}", "\"value\": must be a number for op gt");
    bad("{\"field\":\"a\",\"op\":\"in\",\"value\":[]}", "\"value\": must be a non-empty list for op in");
    bad("{\"field\":\"a\",\"op\":\"in\",\"value\":[1,[2]]}", "\"value[1]\": must be a string, number, boolean or null");
    bad("{\"field\":\"a\",\"op\":\"exists\",\"value\":1}", "\"value\": not used by op exists");
    bad("{\"field\":1,\"value\":1}", "\"field\": must be a string, got a number");
    bad("{\"field\":\"a\",\"value\":1,\"output\":\"nope\"}", "\"output\": output \"nope\" is not declared by the processor");
    bad("{\"field\":\"a\",\"value\":1,\"feild\":\"b\"}",
        "unknown field \"feild\" (known: field, invalid_output, op, output, value)");
    if (failures) return 1;
    puts("ok");
    return 0;
}
