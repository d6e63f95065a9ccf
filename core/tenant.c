/* Tenants as text: the 36-character UUID form (8-4-4-4-12 hex digits) of the 16 bytes a key
 * and a slice carry. A leaf with no state, so that the WAL (wal.c), its journal (journal.c)
 * and the host's tools name a tenant without calling up into the meter's facade. */
#include "internal.h"

#include <stdio.h>

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

int ra_tenant_parse(const char *s, size_t len, ra_tenant_t *out) {
    if (!s || !out || len != RA_UUID_STR_LEN) return RA_EINVAL;
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-') return RA_EINVAL;
            continue;
        }
        int hi = hexval(s[i]), lo = hexval(s[i + 1]);
        if (hi < 0 || lo < 0) return RA_EINVAL;
        out->b[k++] = (uint8_t)(hi << 4 | lo);
        i++; /* groups have even lengths: a pair never straddles a dash */
    }
    return k == 16 ? 0 : RA_EINVAL;
}

void ra_tenant_format(const ra_tenant_t *t, char *out) {
    char hex[33];
    ra_hex(t->b, 16, hex);
    snprintf(out, RA_UUID_STR_LEN + 1, "%.8s-%.4s-%.4s-%.4s-%.12s", hex, hex + 8, hex + 12,
             hex + 16, hex + 20);
}
