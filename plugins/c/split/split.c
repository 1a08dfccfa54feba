/*
 * split: re-keys text by its words, like plugins/split in Go and
 * plugins/rust/split: it splits each record's value into words (the rule
 * of ../common/words.h, shared with wordcount) and emits one record per
 * word, in order, keyed by the word, with the word as value, to the output
 * "words" (the host picks the partition by key hash; the timestamp is the
 * input's). Declared as a repartition output, that output brings every
 * occurrence of a word to one task of the next processor. It takes no
 * config.
 */
#include "../common/noconfig.h"
#include "../common/words.h"
#include "wasmstream.h"

static ws_output out = WS_OUTPUT("words");

/* Per-record scratch, reused. */
static words scratch;

int ws_init(void) {
    int st = no_config("split");
    if (st != WS_OK) return st;
    int32_t e = ws_output_check(&out);
    return e < 0 ? ws_fail_call("output_index", out.name, e) : WS_OK;
}

int ws_process(const ws_record *r) {
    words_split(&scratch, r->value.ptr, r->value.len > 0 ? (size_t)r->value.len : 0);
    size_t start = 0;
    for (size_t i = 0; i < scratch.n; i++) {
        size_t end = scratch.ends[i];
        ws_bytes w = {scratch.text + start, (int32_t)(end - start)};
        ws_out o = {w, w, NULL, 0, 0};
        int32_t e = ws_emit(&out, &o);
        if (e < 0) return ws_fail_call("emit", out.name, e);
        start = end;
    }
    return WS_OK;
}
