/* The audit tests' header: tests/check.h's assertions with return codes named by
 * rau_err_name, and the audit fixtures. */
#ifndef RAU_TEST_H
#define RAU_TEST_H

#include "fixtures.h"
#include "ron/audit.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RA_T_ERR_NAME(code) rau_err_name(code)
#include "../check.h"

static inline void rau_t_hex(const uint8_t *b, size_t n, char *out) {
    static const char d[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = d[b[i] >> 4];
        out[2 * i + 1] = d[b[i] & 15];
    }
    out[2 * n] = 0;
}

static inline size_t rau_t_unhex(const char *s, uint8_t *out, size_t cap) {
    size_t n = 0;
    for (; s[0] && s[1] && n < cap; s += 2) {
        unsigned v;
        if (sscanf(s, "%2x", &v) != 1) break;
        out[n++] = (uint8_t)v;
    }
    return n;
}

static inline const char *rau_t_tmpdir(void) {
    static char dir[512];
    if (!dir[0]) ra_fix_mkdtemp(dir, sizeof dir, NULL, "rau-test-");
    return dir;
}

#endif
