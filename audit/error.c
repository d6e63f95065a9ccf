/* The error taxonomy of libronaudit: one X-macro map (include/ron/audit.h) generates the
 * codes, their names and their messages. No positive codes. */
#include "internal.h"
#include "ron/errmap.h"

#include <stdarg.h>

RON_ERRMAP_CHECK(RAU_ERRNO_MAP, RAU_ERRNO_MIN, RAU_ECLOSED);
RON_ERRMAP_DEFINE(RAU_ERRNO_MAP, RAU_OK, rau_strerror, rau_err_name)

const char *rau_version(void) {
    return RAU_VERSION_STRING;
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
