/* The verdict of the `verify` commands on a ledger (ledgercmd.c: a file ledger,
 * pgverify.c: a PostgreSQL ledger): every problem counted, the first RA_HOST_MAX_PRINTED
 * printed as they are found, then one closing line that decides the exit code; and the
 * operands every `verify` takes. */
#include "host.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

void ra_host_report(ra_host_verdict_t *vd, bool is_break, const char *fmt, ...) {
    if (is_break)
        vd->breaks++;
    else
        vd->problems++;
    if (vd->printed++ >= RA_HOST_MAX_PRINTED) return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
}

void ra_host_report_overflow(const ra_host_verdict_t *vd) {
    if (vd->printed > RA_HOST_MAX_PRINTED)
        printf("... and %" PRIu64 " more problems\n", vd->printed - RA_HOST_MAX_PRINTED);
}

int ra_host_verdict_end(const ra_host_verdict_t *vd) {
    bool bad = vd->problems || vd->breaks;
    if (bad)
        printf("FAILED: %" PRIu64 " problems, %" PRIu64 " chain breaks\n", vd->problems,
               vd->breaks);
    else
        printf("OK\n");
    fflush(stdout);
    return bad ? RA_HOST_EXIT_FAILED : RA_HOST_EXIT_OK;
}

void ra_host_add_rows(const ra_slice_t *s, uint64_t *sum, bool *overflow) {
    for (size_t r = 0, nr = ra_slice_row_count(s); r < nr; r++) {
        uint64_t inc = 0;
        if (ra_slice_row(s, r, NULL, &inc) == 0) {
            if (*sum > UINT64_MAX - inc) *overflow = true;
            *sum += inc;
        }
    }
}

int ra_host_verify_operand(const char *arg, const char **target, const char *what,
                           const char *usage) {
    if (arg[0] == '-' && arg[1]) {
        fprintf(stderr,
                RA_HOST_NAME " verify: unknown option '%s' (usage: " RA_HOST_NAME " verify %s)\n",
                arg, usage);
        return RA_HOST_EXIT_USAGE;
    }
    if (*target) {
        fprintf(stderr, RA_HOST_NAME " verify: one %s only (got '%s' and '%s')\n", what, *target,
                arg);
        return RA_HOST_EXIT_USAGE;
    }
    *target = arg;
    return 0;
}
