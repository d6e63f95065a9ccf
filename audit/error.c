/* The error taxonomy of libronaudit: one X-macro map (include/ron/audit.h) generates the
 * codes, their names and their messages. No positive codes. */
#include "internal.h"

#include <stdarg.h>

#define RAU__CHECK(suffix, value, name, msg) _Static_assert(value < 0, "negative codes only");
RAU_ERRNO_MAP(RAU__CHECK)
#undef RAU__CHECK
_Static_assert(RAU_ERRNO_MIN == RAU_ECLOSED, "RAU_ERRNO_MIN tracks the last code");

const char *rau_version(void) {
    return RAU_VERSION_STRING;
}

const char *rau_strerror(int code) {
    switch (code) {
    case RAU_OK:
        return "success";
#define RAU__MSG(suffix, value, name, msg)                                                         \
    case value:                                                                                    \
        return msg;
        RAU_ERRNO_MAP(RAU__MSG)
#undef RAU__MSG
    default:
        return "unknown error";
    }
}

const char *rau_err_name(int code) {
    switch (code) {
    case RAU_OK:
        return "OK";
#define RAU__NAME(suffix, value, name, msg)                                                        \
    case value:                                                                                    \
        return name;
        RAU_ERRNO_MAP(RAU__NAME)
#undef RAU__NAME
    default:
        return "Unknown";
    }
}

void rau__assert_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "ron-audit: assertion failed: %s (%s:%d)\n", expr, file, line);
    abort();
}

void rau__errf(char *buf, size_t len, const char *fmt, ...) {
    if (!buf || !len) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
}
