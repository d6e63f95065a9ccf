/* libFuzzer harness for the POST /v1/records decoder (ra_ingest_decode, host/lua/
 * ingest_dto.c). Any input gives either a typed error that points inside the input, or
 * records that agree with it; never a crash, a hang, an out-of-bounds access (ASan) or
 * undefined behaviour (UBSan). Properties checked on every accepted input:
 *   - bounds: 1 <= n <= the limit, every record's '{' at its pos, subjects packed in
 *     order inside the scratch bound, dimension ids in range, values <= 2^53-1;
 *   - round trip: the records, written back as canonical JSON, decode to the same records;
 *   - the limit is exact: with max_records = n - 1 the same input is TOO_MANY at record
 *     n - 1 (every record before it was valid, so that is the first fault). */
#include "fuzz-dto.h"
#include "lua/ingest_dto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_RECORDS 8
static const char *const DIMS[] = {"bytes", "requests", "cpu_units", "egress"};
#define N_DIMS (sizeof DIMS / sizeof DIMS[0])

static void check_error(int rc, const ra_ingest_error_t *e, size_t size) {
    fuzz_dto_check_error(rc, RA_INGEST_ERRNO_MIN, RA_INGEST_EUSAGE, e->code, e->detail, e->pos,
                         size, ra_ingest_reason(rc), e->field, sizeof e->field);
    if (e->dimension < -1 || e->dimension >= (int32_t)N_DIMS) abort();
}

/* Canonical JSON of the records; returns its length. */
static size_t encode(const ra_ingest_record_t *r, size_t n, const char *scratch, char *out,
                     size_t cap) {
    fuzz_json_t j = {out, cap, 0};
    fuzz_json(&j, "{\"records\":[");
    for (size_t i = 0; i < n; i++) {
        char uuid[RA_UUID_STR_LEN + 1];
        ra_tenant_format(&r[i].tenant, uuid);
        uuid[RA_UUID_STR_LEN] = '\0';
        fuzz_json(&j, "%s{\"tenant\":\"%s\",\"subject\":", i ? "," : "", uuid);
        fuzz_json_string(&j, scratch + r[i].subject_off, r[i].subject_len);
        fuzz_json(&j, ",\"dimension\":\"%s\",\"value\":%llu}", DIMS[r[i].dimension],
                  (unsigned long long)r[i].value);
    }
    fuzz_json(&j, "]}");
    return j.len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ra_ingest_record_t out[MAX_RECORDS];
    ra_ingest_error_t err;
    size_t n = 0;
    char *scratch = malloc(size ? size : 1);
    if (!scratch) return 0;
    int rc = ra_ingest_decode((const char *)data, size, DIMS, N_DIMS, out, MAX_RECORDS, &n, scratch,
                              size, &err);
    if (rc != 0) {
        check_error(rc, &err, size);
        free(scratch);
        return 0;
    }
    if (n < 1 || n > MAX_RECORDS) abort();
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        if (out[i].pos >= size || data[out[i].pos] != '{') abort();
        if (i && out[i].pos <= out[i - 1].pos) abort();
        if (out[i].subject_off != used || out[i].subject_len < 1 ||
            out[i].subject_len > RA_INGEST_SUBJECT_MAX)
            abort();
        used += out[i].subject_len;
        if (out[i].dimension < 0 || out[i].dimension >= (int32_t)N_DIMS) abort();
        if (out[i].value > RA_INGEST_VALUE_MAX) abort();
    }
    if (used > size) abort();

    /* round trip */
    static char canon[MAX_RECORDS * (RA_INGEST_SUBJECT_MAX * 6 + 160) + 32];
    size_t clen = encode(out, n, scratch, canon, sizeof canon);
    ra_ingest_record_t again[MAX_RECORDS];
    size_t n2 = 0;
    char *scratch2 = malloc(clen);
    if (!scratch2) abort();
    rc = ra_ingest_decode(canon, clen, DIMS, N_DIMS, again, MAX_RECORDS, &n2, scratch2, clen, &err);
    if (rc != 0 || n2 != n) abort();
    for (size_t i = 0; i < n; i++) {
        if (memcmp(out[i].tenant.b, again[i].tenant.b, 16) != 0 || out[i].value != again[i].value ||
            out[i].dimension != again[i].dimension || out[i].subject_len != again[i].subject_len ||
            memcmp(scratch + out[i].subject_off, scratch2 + again[i].subject_off,
                   out[i].subject_len) != 0)
            abort();
    }
    free(scratch2);

    /* the limit is exact */
    if (n > 1) {
        rc = ra_ingest_decode((const char *)data, size, DIMS, N_DIMS, out, n - 1, &n2, scratch,
                              size, &err);
        if (rc != RA_INGEST_ETOO_MANY || err.record != (int32_t)(n - 1)) abort();
    }
    free(scratch);
    return 0;
}
