/* The error taxonomy: one X-macro map (include/ron/accounting.h) generates the codes, their
 * names and their messages. No positive codes, ever. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>

#define RA__CHECK(suffix, value, name, msg) _Static_assert(value < 0, "negative codes only");
RA_ERRNO_MAP(RA__CHECK)
#undef RA__CHECK
_Static_assert(RA_ERRNO_MIN == RA_EBUFSIZE, "RA_ERRNO_MIN tracks the last code");

const char *ra_strerror(int code) {
    switch (code) {
    case RA_OK:
        return "success";
#define RA__MSG(suffix, value, name, msg)                                                          \
    case value:                                                                                    \
        return msg;
        RA_ERRNO_MAP(RA__MSG)
#undef RA__MSG
    default:
        return "unknown error";
    }
}

const char *ra_err_name(int code) {
    switch (code) {
    case RA_OK:
        return "OK";
#define RA__NAME(suffix, value, name, msg)                                                         \
    case value:                                                                                    \
        return name;
        RA_ERRNO_MAP(RA__NAME)
#undef RA__NAME
    default:
        return "Unknown";
    }
}

void ra__assert_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "ron-accounting: assertion failed: %s (%s:%d)\n", expr, file, line);
    abort();
}
