/* The error taxonomy: one X-macro map (include/ron/accounting.h) generates the codes, and
 * include/ron/errmap.h their names and messages. No positive codes, ever. */
#include "internal.h"
#include "ron/errmap.h"

#include <stdio.h>
#include <stdlib.h>

RON_ERRMAP_CHECK(RA_ERRNO_MAP, RA_ERRNO_MIN, RA_EBUFSIZE);
RON_ERRMAP_DEFINE(RA_ERRNO_MAP, RA_OK, ra_strerror, ra_err_name)

void ra__assert_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "ron-accounting: assertion failed: %s (%s:%d)\n", expr, file, line);
    abort();
}
