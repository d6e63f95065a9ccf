/* libFuzzer harness for the wallet's request decoder (ra_wdto_decode, host/lua/
 * wallet_dto.c, over the shared scanner json_scan.c). Any input gives either a typed error
 * that points inside the input, or values that agree with it; never a crash, a hang, an
 * out-of-bounds access (ASan) or undefined behaviour (UBSan). On every accepted input:
 *   - bounds: every required field present, strings and numbers within the schema's
 *     bounds, strings inside the scratch area;
 *   - round trip: the values, written back as canonical JSON, decode to the same values;
 *   - strictness: the canonical JSON with one more field is UNKNOWN_FIELD, and with a
 *     required field left out MISSING_FIELD. */
#include "lua/wallet_dto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The shape of POST /v1/transfer (docs/WALLET.md), with a boolean for coverage. */
static const ra_wdto_field_t SCHEMA[] = {
    {"from", RA_WDTO_STRING, 1, 36, 36},
    {"to", RA_WDTO_STRING, 1, 36, 36},
    {"asset", RA_WDTO_STRING, 1, 1, 15},
    {"amount", RA_WDTO_UINT, 1, 1, RA_WDTO_UINT_MAX},
    {"nonce", RA_WDTO_UINT, 0, 0, RA_WDTO_UINT_MAX},
    {"memo", RA_WDTO_STRING, 0, 0, 256},
    {"dry_run", RA_WDTO_BOOL, 0, 0, 0},
};
#define N_FIELDS (sizeof SCHEMA / sizeof SCHEMA[0])

static void check_error(int rc, const ra_wdto_error_t *e, size_t size) {
    if (rc >= 0 || rc < RA_WDTO_ERRNO_MIN || rc == RA_WDTO_EUSAGE) abort();
    if (e->code != rc || !e->detail || e->pos > size) abort();
    if (strcmp(ra_wdto_reason(rc), "unknown") == 0) abort();
    if (memchr(e->field, '\0', sizeof e->field) == NULL) abort();
    for (const char *c = e->field; *c; c++) /* safe to echo: no quotes, no controls */
        if (*c < 0x20 || *c > 0x7e || *c == '"' || *c == '\\') abort();
}

/* Canonical JSON of the values, skipping field `skip` (N_FIELDS: none) and adding an
 * unknown field when `extra`; returns its length. */
static size_t encode(const ra_wdto_value_t *v, const char *scratch, size_t skip, int extra,
                     char *out, size_t cap) {
    size_t k = 0;
    int first = 1;
#define EMIT(...)                                                                                  \
    do {                                                                                           \
        int w = snprintf(out + k, cap - k, __VA_ARGS__);                                           \
        if (w < 0 || (size_t)w >= cap - k) abort();                                                \
        k += (size_t)w;                                                                            \
    } while (0)
    EMIT("{");
    for (size_t i = 0; i < N_FIELDS; i++) {
        if (!v[i].present || i == skip) continue;
        EMIT("%s\"%s\":", first ? "" : ",", SCHEMA[i].name);
        first = 0;
        if (SCHEMA[i].type == RA_WDTO_UINT) {
            EMIT("%llu", (unsigned long long)v[i].u);
        } else if (SCHEMA[i].type == RA_WDTO_BOOL) {
            EMIT("%s", v[i].u ? "true" : "false");
        } else {
            EMIT("\"");
            for (uint32_t j = 0; j < v[i].len; j++) {
                unsigned char c = (unsigned char)scratch[v[i].off + j];
                if (c == '"' || c == '\\')
                    EMIT("\\%c", c);
                else if (c < 0x20)
                    EMIT("\\u%04x", c);
                else
                    EMIT("%c", c);
            }
            EMIT("\"");
        }
    }
    if (extra) EMIT("%s\"zz_unknown\":1", first ? "" : ",");
    EMIT("}");
#undef EMIT
    return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char scratch[1 << 16], scratch2[1 << 16], json[1 << 17];
    if (size > sizeof scratch) return 0;
    ra_wdto_value_t v[N_FIELDS], w[N_FIELDS];
    ra_wdto_error_t err;
    int rc = ra_wdto_decode((const char *)data, size, SCHEMA, N_FIELDS, v, scratch, sizeof scratch,
                            &err);
    if (rc) {
        check_error(rc, &err, size);
        return 0;
    }
    size_t used = 0;
    for (size_t i = 0; i < N_FIELDS; i++) {
        if (SCHEMA[i].required && !v[i].present) abort();
        if (!v[i].present) continue;
        if (v[i].pos >= size) abort();
        if (SCHEMA[i].type == RA_WDTO_UINT && (v[i].u < SCHEMA[i].min || v[i].u > SCHEMA[i].max))
            abort();
        if (SCHEMA[i].type == RA_WDTO_BOOL && v[i].u > 1) abort();
        if (SCHEMA[i].type == RA_WDTO_STRING) {
            if (v[i].len < SCHEMA[i].min || v[i].len > SCHEMA[i].max) abort();
            if ((size_t)v[i].off + v[i].len > size) abort();
            used += v[i].len;
        }
    }
    if (used > size) abort();
    size_t n = encode(v, scratch, N_FIELDS, 0, json, sizeof json);
    if (ra_wdto_decode(json, n, SCHEMA, N_FIELDS, w, scratch2, sizeof scratch2, &err)) abort();
    for (size_t i = 0; i < N_FIELDS; i++) {
        if (w[i].present != v[i].present || w[i].u != v[i].u || w[i].len != v[i].len) abort();
        if (memcmp(scratch + v[i].off, scratch2 + w[i].off, v[i].len) != 0) abort();
    }
    n = encode(v, scratch, N_FIELDS, 1, json, sizeof json);
    if (ra_wdto_decode(json, n, SCHEMA, N_FIELDS, w, scratch2, sizeof scratch2, &err) !=
        RA_WDTO_EUNKNOWN_FIELD)
        abort();
    n = encode(v, scratch, 0, 0, json, sizeof json); /* "from" is required */
    if (ra_wdto_decode(json, n, SCHEMA, N_FIELDS, w, scratch2, sizeof scratch2, &err) !=
        RA_WDTO_EMISSING_FIELD)
        abort();
    return 0;
}
