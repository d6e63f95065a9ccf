/* The strict POST /v1/records decoder: see ingest_dto.h for the contract.
 *
 * A hand-written one-pass parser for exactly one schema, not a general JSON parser: every
 * value it meets is either a known field's (string, integer, array of objects) or an error,
 * so it never has to skip an arbitrary value, never recurses and never allocates. What it
 * does check of JSON itself (RFC 8259): whitespace, string escapes (\uXXXX with surrogate
 * pairs), UTF-8 validity of every string (no overlongs, no surrogates, nothing above
 * U+10FFFF), control characters, literals, number grammar, and that nothing follows the
 * document. The first fault in document order is reported, with its byte offset and the
 * JSON path of the field. */
#include "ingest_dto.h"
#include "dto.h"
#include "json_scan.h"

#include <stdio.h>
#include <string.h>

/* Local buffers: a field name longer than the longest known one is unknown anyway; a
 * tenant longer than a UUID is bad anyway. Strings longer than their buffer are still
 * scanned (validated) to the end, only not stored. */
enum { KEY_BUF = 16, TENANT_BUF = 40, DIM_BUF = 64 };

enum { F_TENANT = 1, F_SUBJECT = 2, F_DIMENSION = 4, F_VALUE = 8, F_ALL = 15 };

/* The dimension names the decoder matches against, with their lengths computed once per
 * call (RA_DIM_MAX is the meter's own bound). */
enum { DIMS_MAX = RA_DIM_MAX };

typedef struct {
    ra_json_scan_t s;
    ra_ingest_error_t *err;
    int32_t record; /* -1 outside records[] */
    int32_t dim;    /* the current record's dimension, once decoded */
    /* A batch usually names one tenant over and over: the last one parsed is kept, and an
     * identical text is not parsed again. */
    char last_tenant[RA_UUID_STR_LEN];
    int have_last_tenant;
    ra_tenant_t last_tenant_id;
    size_t dim_len[DIMS_MAX];
} parser_t;

static int fail(parser_t *ps, const unsigned char *at, int code, const char *detail,
                const char *field) {
    ra_ingest_error_t *e = ps->err;
    e->pos = (uint32_t)(at - ps->s.base);
    e->record = ps->record;
    e->dimension = ps->dim;
    e->code = code;
    e->detail = detail;
    if (ps->record >= 0)
        snprintf(e->field, sizeof e->field, "records[%d]%s%s", (int)ps->record, field[0] ? "." : "",
                 field);
    else
        snprintf(e->field, sizeof e->field, "%s", field);
    return code;
}

static int malformed(parser_t *ps, const unsigned char *at, const char *detail) {
    at = ra_json_malformed_at(&ps->s, at, &detail);
    return fail(ps, at, RA_INGEST_EMALFORMED, detail, "");
}

static void skip_ws(parser_t *ps) {
    ra_json_skip_ws(&ps->s);
}

static int string(parser_t *ps, char *out, size_t cap, size_t *len_out) {
    if (ra_json_string(&ps->s, out, cap, len_out) == 0) return 0;
    return malformed(ps, ps->s.fault_at, ps->s.fault);
}

/* A value of the wrong type where `want` was expected (or garbage: malformed). */
static int wrong_type(parser_t *ps, const char *detail, const char *field) {
    if (!ra_json_value_start(&ps->s)) return malformed(ps, ps->s.p, "expected a JSON value");
    return fail(ps, ps->s.p, RA_INGEST_EWRONG_TYPE, detail, field);
}

/* A field name and its ':'. *which gets the F_* bit of a known name (0: unknown). */
static int key(parser_t *ps, const char *const *names, const size_t *lens, const unsigned *bits,
               size_t n_names, unsigned *which, const unsigned char **key_at, char *name_out,
               size_t name_cap) {
    char buf[KEY_BUF];
    size_t len;
    if (ra_json_name(&ps->s, buf, sizeof buf, &len, key_at))
        return malformed(ps, ps->s.fault_at, ps->s.fault);
    *which = 0;
    for (size_t i = 0; i < n_names; i++)
        if (len == lens[i] && memcmp(buf, names[i], len) == 0) *which = bits[i];
    if (!*which) ra_json_sanitize(buf, len, sizeof buf, name_out, name_cap);
    if (ra_json_colon(&ps->s)) return malformed(ps, ps->s.fault_at, ps->s.fault);
    return 0;
}

/* After a value: 1 when another follows (',' taken), 0 at `close`, or the error. */
static int next(parser_t *ps, char close, const char *fault, int *rc) {
    int more = ra_json_next(&ps->s, close, fault);
    *rc = more < 0 ? malformed(ps, ps->s.fault_at, ps->s.fault) : 0;
    return more > 0;
}

/* value: an integer 0..2^53-1 in plain JSON notation, nothing else. What each way of being
 * something else answers (a scanner result without a row: malformed JSON): */
static const struct {
    int scan, code;
    const char *msg;
} NOT_AN_INTEGER[] = {
    {RA_JSON_NEGATIVE, RA_INGEST_EBAD_VALUE, "value must not be negative"},
    {RA_JSON_NOT_NUMBER, RA_INGEST_EWRONG_TYPE, "value must be an integer (a JSON number)"},
    {RA_JSON_LEADING_ZERO, RA_INGEST_EBAD_VALUE, "value has a leading zero"},
    {RA_JSON_TOO_BIG, RA_INGEST_EBAD_VALUE, "value is above 2^53-1"},
    {RA_JSON_FRACTION, RA_INGEST_EBAD_VALUE, "value must be an integer (no fraction)"},
    {RA_JSON_EXPONENT, RA_INGEST_EBAD_VALUE, "value must be a plain integer (no exponent)"},
};

static int integer(parser_t *ps, uint64_t *out) {
    const unsigned char *at = ps->s.p;
    int scan = ra_json_uint(&ps->s, RA_INGEST_VALUE_MAX, out);
    if (scan == 0) return 0;
    for (size_t i = 0; i < sizeof NOT_AN_INTEGER / sizeof NOT_AN_INTEGER[0]; i++)
        if (NOT_AN_INTEGER[i].scan == scan)
            return fail(ps, at, NOT_AN_INTEGER[i].code, NOT_AN_INTEGER[i].msg, "value");
    return malformed(ps, ps->s.fault_at, ps->s.fault);
}

/* tenant: a UUID; a batch usually names one tenant over and over, so the last one parsed
 * is kept and an identical text is not parsed again. */
static int tenant(parser_t *ps, ra_ingest_record_t *r) {
    const unsigned char *at = ps->s.p;
    char buf[TENANT_BUF];
    size_t len;
    int rc = string(ps, buf, sizeof buf, &len);
    if (rc) return rc;
    if (len == RA_UUID_STR_LEN && ps->have_last_tenant &&
        memcmp(buf, ps->last_tenant, RA_UUID_STR_LEN) == 0) {
        r->tenant = ps->last_tenant_id;
        return 0;
    }
    if (len != RA_UUID_STR_LEN || ra_tenant_parse(buf, len, &r->tenant) != 0)
        return fail(ps, at, RA_INGEST_EBAD_TENANT, "tenant must be a UUID (8-4-4-4-12 hex digits)",
                    "tenant");
    memcpy(ps->last_tenant, buf, RA_UUID_STR_LEN);
    ps->last_tenant_id = r->tenant;
    ps->have_last_tenant = 1;
    return 0;
}

/* subject: 1..256 bytes, unescaped into scratch. */
static int subject(parser_t *ps, ra_ingest_record_t *r, char *scratch, size_t scratch_cap,
                   size_t *scratch_used) {
    const unsigned char *at = ps->s.p;
    size_t len, room = scratch_cap - *scratch_used;
    int rc = string(ps, scratch + *scratch_used,
                    room < RA_INGEST_SUBJECT_MAX ? room : RA_INGEST_SUBJECT_MAX, &len);
    if (rc) return rc;
    if (len == 0) return fail(ps, at, RA_INGEST_EBAD_SUBJECT, "subject is empty", "subject");
    if (len > RA_INGEST_SUBJECT_MAX)
        return fail(ps, at, RA_INGEST_EBAD_SUBJECT, "subject is longer than 256 bytes", "subject");
    r->subject_off = (uint32_t)*scratch_used;
    r->subject_len = (uint32_t)len;
    *scratch_used += len;
    return 0;
}

/* dimension: one of the registered names (its index is the meter's dimension id). */
static int dimension(parser_t *ps, const char *const *dims, size_t n_dims, ra_ingest_record_t *r) {
    const unsigned char *at = ps->s.p;
    char buf[DIM_BUF];
    size_t len;
    int rc = string(ps, buf, sizeof buf, &len);
    if (rc) return rc;
    r->dimension = -1;
    for (size_t i = 0; len <= sizeof buf && i < n_dims; i++)
        if (ps->dim_len[i] == len && memcmp(dims[i], buf, len) == 0) {
            r->dimension = (int32_t)i;
            break;
        }
    if (r->dimension < 0)
        return fail(ps, at, RA_INGEST_EUNKNOWN_DIMENSION, "dimension is not registered",
                    "dimension");
    ps->dim = r->dimension;
    return 0;
}

static const char *const REC_NAMES[] = {"tenant", "subject", "dimension", "value"};
static const size_t REC_LENS[] = {6, 7, 9, 5};
static const unsigned REC_BITS[] = {F_TENANT, F_SUBJECT, F_DIMENSION, F_VALUE};

static int record(parser_t *ps, const char *const *dims, size_t n_dims, ra_ingest_record_t *r,
                  char *scratch, size_t scratch_cap, size_t *scratch_used) {
    if (ps->s.p >= ps->s.end || *ps->s.p != '{')
        return wrong_type(ps, "a record must be a JSON object", "");
    r->pos = (uint32_t)(ps->s.p - ps->s.base);
    ps->s.p++;
    skip_ws(ps);
    unsigned seen = 0;
    if (ps->s.p < ps->s.end && *ps->s.p == '}') goto close;
    for (;;) {
        unsigned which;
        const unsigned char *key_at;
        char name[32];
        int rc = key(ps, REC_NAMES, REC_LENS, REC_BITS, 4, &which, &key_at, name, sizeof name);
        if (rc) return rc;
        if (!which) return fail(ps, key_at, RA_INGEST_EUNKNOWN_FIELD, "unknown field", name);
        const char *fname = which == F_TENANT      ? "tenant"
                            : which == F_SUBJECT   ? "subject"
                            : which == F_DIMENSION ? "dimension"
                                                   : "value";
        if (seen & which)
            return fail(ps, key_at, RA_INGEST_EDUPLICATE_FIELD, "field given twice", fname);
        seen |= which;
        if (which == F_VALUE) {
            rc = integer(ps, &r->value);
        } else if (ps->s.p >= ps->s.end || *ps->s.p != '"') {
            return wrong_type(ps,
                              which == F_TENANT    ? "tenant must be a string"
                              : which == F_SUBJECT ? "subject must be a string"
                                                   : "dimension must be a string",
                              fname);
        } else if (which == F_TENANT) {
            rc = tenant(ps, r);
        } else if (which == F_SUBJECT) {
            rc = subject(ps, r, scratch, scratch_cap, scratch_used);
        } else {
            rc = dimension(ps, dims, n_dims, r);
        }
        if (rc) return rc;
        if (next(ps, '}', "expected ',' or '}' in a record", &rc)) continue;
        if (rc) return rc;
        break;
    }
close:
    if (seen != F_ALL) {
        for (size_t i = 0; i < 4; i++)
            if (!(seen & REC_BITS[i]))
                return fail(ps, ps->s.p, RA_INGEST_EMISSING_FIELD, "required field missing",
                            REC_NAMES[i]);
    }
    ps->s.p++; /* '}' */
    return 0;
}

/* records: a non-empty array of at most max_records records, into out[*n..). */
static int records(parser_t *ps, const char *const *dims, size_t n_dims, ra_ingest_record_t *out,
                   size_t max_records, size_t *n, char *scratch, size_t scratch_cap, size_t *used) {
    const unsigned char *open = ps->s.p;
    ps->s.p++;
    skip_ws(ps);
    if (ps->s.p < ps->s.end && *ps->s.p == ']')
        return fail(ps, open, RA_INGEST_ENO_RECORDS, "records is empty", "records");
    for (;;) {
        ps->record = (int32_t)*n;
        if (*n == max_records)
            return fail(ps, ps->s.p, RA_INGEST_ETOO_MANY, "more records than the batch limit", "");
        ps->dim = -1;
        int rc = record(ps, dims, n_dims, &out[*n], scratch, scratch_cap, used);
        if (rc) return rc;
        (*n)++;
        ps->record = -1;
        ps->dim = -1;
        if (next(ps, ']', "expected ',' or ']' after a record", &rc)) continue;
        if (rc) return rc;
        ps->s.p++; /* ']' */
        return 0;
    }
}

static const char *const DOC_NAMES[] = {"records"};
static const size_t DOC_LENS[] = {7};
static const unsigned DOC_BITS[] = {1};

int ra_ingest_decode(const char *body, size_t len, const char *const *dims, size_t n_dims,
                     ra_ingest_record_t *out, size_t max_records, size_t *n_out, char *scratch,
                     size_t scratch_cap, ra_ingest_error_t *err) {
    if (!err) return RA_INGEST_EUSAGE;
    memset(err, 0, sizeof *err);
    err->record = err->dimension = -1;
    err->code = RA_INGEST_EUSAGE;
    err->detail = "bad arguments to ra_ingest_decode";
    if ((!body && len) || (!dims && n_dims) || !out || !max_records || !n_out ||
        (!scratch && scratch_cap) || scratch_cap < len || len > UINT32_MAX || n_dims > DIMS_MAX)
        return RA_INGEST_EUSAGE;
    *n_out = 0;
    parser_t ps;
    memset(&ps, 0, sizeof ps);
    ra_json_init(&ps.s, body, len);
    ps.err = err;
    ps.record = ps.dim = -1;
    for (size_t i = 0; i < n_dims; i++) /* a NULL name never matches */
        ps.dim_len[i] = dims[i] ? strlen(dims[i]) : SIZE_MAX;
    skip_ws(&ps);
    if (ps.s.p >= ps.s.end) return fail(&ps, ps.s.p, RA_INGEST_EEMPTY, "the body is empty", "");
    if (*ps.s.p != '{') return wrong_type(&ps, "the body must be a JSON object", "");
    ps.s.p++;
    skip_ws(&ps);
    int have = 0;
    size_t n = 0, used = 0;
    if (ps.s.p < ps.s.end && *ps.s.p == '}')
        return fail(&ps, ps.s.p, RA_INGEST_EMISSING_FIELD, "required field missing", "records");
    for (;;) {
        unsigned which;
        const unsigned char *key_at;
        char name[32];
        int rc = key(&ps, DOC_NAMES, DOC_LENS, DOC_BITS, 1, &which, &key_at, name, sizeof name);
        if (rc) return rc;
        if (!which) return fail(&ps, key_at, RA_INGEST_EUNKNOWN_FIELD, "unknown field", name);
        if (have)
            return fail(&ps, key_at, RA_INGEST_EDUPLICATE_FIELD, "field given twice", "records");
        have = 1;
        if (ps.s.p >= ps.s.end || *ps.s.p != '[')
            return wrong_type(&ps, "records must be a JSON array", "records");
        rc = records(&ps, dims, n_dims, out, max_records, &n, scratch, scratch_cap, &used);
        if (rc) return rc;
        if (next(&ps, '}', "expected ',' or '}'", &rc)) continue;
        if (rc) return rc;
        break;
    }
    ps.s.p++; /* '}' */
    skip_ws(&ps);
    if (ps.s.p < ps.s.end) return malformed(&ps, ps.s.p, "bytes after the JSON document");
    *n_out = n;
    memset(err, 0, sizeof *err);
    err->record = err->dimension = -1;
    return 0;
}

/* ra_ingest_reason, ra_ingest_message */
RA_DTO_DEFINE_NAMES(ra_ingest, RA_INGEST_ERR_MAP)

int ra_ingest_dto_abi(size_t *record_size, size_t *error_size) {
    if (record_size) *record_size = sizeof(ra_ingest_record_t);
    if (error_size) *error_size = sizeof(ra_ingest_error_t);
    return RA_INGEST_ABI;
}
