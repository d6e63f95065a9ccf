/* libFuzzer harness for the wallet's request decoder (ra_wdto_decode, host/lua/
 * wallet_dto.c, over the shared scanner json_scan.c). Any input gives either a typed error
 * that points inside the input, or values that agree with it; never a crash, a hang, an
 * out-of-bounds access (ASan) or undefined behaviour (UBSan). On every accepted input:
 *   - bounds: every required field present, strings and numbers within the schema's
 *     bounds, strings inside the scratch area;
 *   - round trip: the values, written back as canonical JSON, decode to the same values;
 *   - strictness: the canonical JSON with one more field is UNKNOWN_FIELD, and with a
 *     required field left out MISSING_FIELD. */
#include "fuzz-dto.h"
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
    fuzz_dto_check_error(rc, RA_WDTO_ERRNO_MIN, RA_WDTO_EUSAGE, e->code, e->detail, e->pos, size,
                         ra_wdto_reason(rc), e->field, sizeof e->field);
}

/* Canonical JSON of the values, skipping field `skip` (N_FIELDS: none) and adding an
 * unknown field when `extra`; returns its length. */
static size_t encode(const ra_wdto_value_t *v, const char *scratch, size_t skip, int extra,
                     char *out, size_t cap) {
    fuzz_json_t j = {out, cap, 0};
    int first = 1;
    fuzz_json(&j, "{");
    for (size_t i = 0; i < N_FIELDS; i++) {
        if (!v[i].present || i == skip) continue;
        fuzz_json(&j, "%s\"%s\":", first ? "" : ",", SCHEMA[i].name);
        first = 0;
        if (SCHEMA[i].type == RA_WDTO_UINT)
            fuzz_json(&j, "%llu", (unsigned long long)v[i].u);
        else if (SCHEMA[i].type == RA_WDTO_BOOL)
            fuzz_json(&j, "%s", v[i].u ? "true" : "false");
        else
            fuzz_json_string(&j, scratch + v[i].off, v[i].len);
    }
    if (extra) fuzz_json(&j, "%s\"zz_unknown\":1", first ? "" : ",");
    fuzz_json(&j, "}");
    return j.len;
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
