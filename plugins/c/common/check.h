/*
 * check.h: the assertion of the C plugins' native tests (run against the
 * SDK's fake host by the conformance suite): CHECK(cond, printf-format,
 * ...) reports a failed condition with its place and counts it; a test's
 * main returns failures != 0.
 */
#ifndef WASMSTREAM_PLUGINS_CHECK_H
#define WASMSTREAM_PLUGINS_CHECK_H

#include <stdio.h>

static int failures;
#define CHECK(c, ...)                                                   \
    do {                                                                \
        if (!(c)) {                                                     \
            fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__);       \
            fprintf(stderr, __VA_ARGS__);                               \
            fputc('\n', stderr);                                        \
            failures++;                                                 \
        }                                                               \
    } while (0)

#endif
