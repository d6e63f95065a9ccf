/* Logging goes through the host's callback (ra_config_t.log); without one, WARN and above
 * go to stderr. Messages never carry raw subject identifiers (I-14: no PII). */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>

static const char *const level_names[] = {"ERROR", "WARN", "INFO", "DEBUG"};

void ra__log(const ra_meter_t *m, int level, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (m && m->log) {
        m->log(m->log_ud, level, msg);
        return;
    }
    if (level <= RA_LOG_WARN) {
        int l = level < 0 ? 0 : (level > 3 ? 3 : level);
        fprintf(stderr, "ron-accounting %s: %s\n", level_names[l], msg);
    }
}

void ra__errbuf(char *buf, size_t len, const char *fmt, ...) {
    if (!buf || len == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
}
