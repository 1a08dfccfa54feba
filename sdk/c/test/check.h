/* check.h: the C SDK tests' check macro: a failed check names its file,
 * line and condition, and counts; the test exits non-zero at the end. */
#ifndef WASMSTREAM_TEST_CHECK_H
#define WASMSTREAM_TEST_CHECK_H

#include <stdio.h>

static int failures;
#define CHECK(cond, ...)                                                    \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "%s:%d: FAIL %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                   \
            fputc('\n', stderr);                                            \
            failures++;                                                     \
        }                                                                   \
    } while (0)

#endif
