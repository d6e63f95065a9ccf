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
    const unsigned char *base, *p, *end;
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
    e->pos = (uint32_t)(at - ps->base);
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
    if (at >= ps->end)
        return fail(ps, ps->end, RA_INGEST_EMALFORMED, "unexpected end of input", "");
    return fail(ps, at, RA_INGEST_EMALFORMED, detail, "");
}

static void skip_ws(parser_t *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

/* Is there a syntactically possible JSON value at p (so a type mismatch, not garbage)?
 * Literals are checked whole; strings, numbers and containers by their first byte. */
static int value_start(const parser_t *ps) {
    const unsigned char *p = ps->p;
    size_t left = (size_t)(ps->end - p);
    if (left == 0) return 0;
    switch (*p) {
    case '"':
    case '{':
    case '[':
    case '-':
    case '0':
    case '1':
    case '2':
    case '3':
    case '4':
    case '5':
    case '6':
    case '7':
    case '8':
    case '9':
        return 1;
    case 't':
        return left >= 4 && memcmp(p, "true", 4) == 0;
    case 'f':
        return left >= 5 && memcmp(p, "false", 5) == 0;
    case 'n':
        return left >= 4 && memcmp(p, "null", 4) == 0;
    default:
        return 0;
    }
}

/* A value of the wrong type where `want` was expected (or garbage: malformed). */
static int wrong_type(parser_t *ps, const char *detail, const char *field) {
    if (!value_start(ps)) return malformed(ps, ps->p, "expected a JSON value");
    return fail(ps, ps->p, RA_INGEST_EWRONG_TYPE, detail, field);
}

/* The length of the valid UTF-8 sequence at p (2..4 bytes), or 0 (Unicode Table 3-7). */
static size_t utf8_seq(const unsigned char *p, const unsigned char *end) {
    unsigned c = p[0], lo = 0x80, hi = 0xBF;
    size_t n;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
    } else if (c == 0xE0) {
        n = 3;
        lo = 0xA0; /* no overlong 3-byte forms */
    } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
        n = 3;
    } else if (c == 0xED) {
        n = 3;
        hi = 0x9F; /* no UTF-16 surrogates */
    } else if (c == 0xF0) {
        n = 4;
        lo = 0x90; /* no overlong 4-byte forms */
    } else if (c >= 0xF1 && c <= 0xF3) {
        n = 4;
    } else if (c == 0xF4) {
        n = 4;
        hi = 0x8F; /* nothing above U+10FFFF */
    } else {
        return 0; /* ASCII is not handled here; C0, C1, F5..FF never start a sequence */
    }
    if ((size_t)(end - p) < n || p[1] < lo || p[1] > hi) return 0;
    for (size_t i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF) return 0;
    return n;
}

static int hex4(const unsigned char *p, const unsigned char *end, unsigned *out) {
    if (end - p < 4) return 0;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = p[i], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return 0;
        v = v << 4 | d;
    }
    *out = v;
    return 1;
}

/* Stores byte c at out[*n] while *n < cap; *n counts every byte (the full length). */
static inline void put(char *out, size_t cap, size_t *n, unsigned c) {
    if (*n < cap) out[*n] = (char)c;
    (*n)++;
}

/* The string at ps->p (which is '"'), unescaped into out[0..cap); *len_out gets its full
 * unescaped length (which may exceed cap: then only cap bytes were stored). */
static int string(parser_t *ps, char *out, size_t cap, size_t *len_out) {
    const unsigned char *p = ps->p + 1, *end = ps->end;
    size_t n = 0;
    for (;;) {
        /* the common case: a run of printable ASCII, copied at once */
        const unsigned char *run = p;
        while (p < end && *p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\')
            p++;
        if (p > run) {
            size_t k = (size_t)(p - run);
            if (n < cap) memcpy(out + n, run, k < cap - n ? k : cap - n);
            n += k;
        }
        if (p >= end) return malformed(ps, end, "unterminated string");
        unsigned c = *p;
        if (c == '"') break;
        if (c < 0x20) return malformed(ps, p, "control character in a string");
        if (c < 0x80 && c != '\\') {
            put(out, cap, &n, c);
            p++;
            continue;
        }
        if (c >= 0x80) {
            size_t k = utf8_seq(p, end);
            if (!k) return malformed(ps, p, "invalid UTF-8 in a string");
            for (size_t i = 0; i < k; i++)
                put(out, cap, &n, p[i]);
            p += k;
            continue;
        }
        /* an escape */
        if (end - p < 2) return malformed(ps, end, "unterminated string");
        const unsigned char *esc = p;
        unsigned cp;
        switch (p[1]) {
        case '"':
            cp = '"';
            break;
        case '\\':
            cp = '\\';
            break;
        case '/':
            cp = '/';
            break;
        case 'b':
            cp = '\b';
            break;
        case 'f':
            cp = '\f';
            break;
        case 'n':
            cp = '\n';
            break;
        case 'r':
            cp = '\r';
            break;
        case 't':
            cp = '\t';
            break;
        case 'u':
            if (!hex4(p + 2, end, &cp)) return malformed(ps, esc, "bad \\u escape");
            if (cp >= 0xDC00 && cp <= 0xDFFF) return malformed(ps, esc, "lone low surrogate");
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned lo;
                if (end - p < 12 || p[6] != '\\' || p[7] != 'u' || !hex4(p + 8, end, &lo) ||
                    lo < 0xDC00 || lo > 0xDFFF)
                    return malformed(ps, esc, "lone high surrogate");
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                p += 6;
            }
            p += 4;
            break;
        default:
            return malformed(ps, esc, "bad escape in a string");
        }
        p += 2;
        if (cp < 0x80) {
            put(out, cap, &n, cp);
        } else if (cp < 0x800) {
            put(out, cap, &n, 0xC0 | cp >> 6);
            put(out, cap, &n, 0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            put(out, cap, &n, 0xE0 | cp >> 12);
            put(out, cap, &n, 0x80 | (cp >> 6 & 0x3F));
            put(out, cap, &n, 0x80 | (cp & 0x3F));
        } else {
            put(out, cap, &n, 0xF0 | cp >> 18);
            put(out, cap, &n, 0x80 | (cp >> 12 & 0x3F));
            put(out, cap, &n, 0x80 | (cp >> 6 & 0x3F));
            put(out, cap, &n, 0x80 | (cp & 0x3F));
        }
    }
    ps->p = p + 1;
    *len_out = n;
    return 0;
}

/* An unknown field's name, made safe for a response and a log: [A-Za-z0-9_-] kept, any
 * other byte '?', at most 24 bytes then "...". */
static void sanitize(const char *name, size_t len, size_t stored, char *out, size_t cap) {
    size_t n = 0, keep = len < stored ? len : stored;
    if (keep > 24) keep = 24;
    for (size_t i = 0; i < keep && n + 1 < cap; i++) {
        unsigned char c = (unsigned char)name[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '_' || c == '-';
        out[n++] = ok ? (char)c : '?';
    }
    if (len > keep)
        for (int i = 0; i < 3 && n + 1 < cap; i++)
            out[n++] = '.';
    out[n] = '\0';
}

/* A field name and its ':'. *which gets the F_* bit of a known name (0: unknown). */
static int key(parser_t *ps, const char *const *names, const size_t *lens, const unsigned *bits,
               size_t n_names, unsigned *which, const unsigned char **key_at, char *name_out,
               size_t name_cap) {
    if (ps->p >= ps->end || *ps->p != '"')
        return malformed(ps, ps->p, "expected a field name (a string)");
    *key_at = ps->p;
    char buf[KEY_BUF];
    size_t len;
    int rc = string(ps, buf, sizeof buf, &len);
    if (rc) return rc;
    *which = 0;
    for (size_t i = 0; i < n_names; i++)
        if (len == lens[i] && memcmp(buf, names[i], len) == 0) *which = bits[i];
    if (!*which) sanitize(buf, len, sizeof buf, name_out, name_cap);
    skip_ws(ps);
    if (ps->p >= ps->end || *ps->p != ':') return malformed(ps, ps->p, "expected ':'");
    ps->p++;
    skip_ws(ps);
    return 0;
}

/* value: an integer 0..2^53-1 in plain JSON notation, nothing else. */
static int integer(parser_t *ps, uint64_t *out) {
    const unsigned char *p = ps->p, *end = ps->end, *at = p;
    if (p < end && *p == '-')
        return fail(ps, at, RA_INGEST_EBAD_VALUE, "value must not be negative", "value");
    if (p >= end || *p < '0' || *p > '9')
        return wrong_type(ps, "value must be an integer (a JSON number)", "value");
    if (*p == '0' && p + 1 < end && p[1] >= '0' && p[1] <= '9')
        return fail(ps, at, RA_INGEST_EBAD_VALUE, "value has a leading zero", "value");
    uint64_t v = 0;
    while (p < end && *p >= '0' && *p <= '9') {
        v = v * 10 + (uint64_t)(*p - '0');
        if (v > RA_INGEST_VALUE_MAX)
            return fail(ps, at, RA_INGEST_EBAD_VALUE, "value is above 2^53-1", "value");
        p++;
    }
    if (p < end && *p == '.')
        return fail(ps, at, RA_INGEST_EBAD_VALUE, "value must be an integer (no fraction)",
                    "value");
    if (p < end && (*p == 'e' || *p == 'E'))
        return fail(ps, at, RA_INGEST_EBAD_VALUE, "value must be a plain integer (no exponent)",
                    "value");
    ps->p = p;
    *out = v;
    return 0;
}

static const char *const REC_NAMES[] = {"tenant", "subject", "dimension", "value"};
static const size_t REC_LENS[] = {6, 7, 9, 5};
static const unsigned REC_BITS[] = {F_TENANT, F_SUBJECT, F_DIMENSION, F_VALUE};

static int record(parser_t *ps, const char *const *dims, size_t n_dims, ra_ingest_record_t *r,
                  char *scratch, size_t scratch_cap, size_t *scratch_used) {
    if (ps->p >= ps->end || *ps->p != '{')
        return wrong_type(ps, "a record must be a JSON object", "");
    r->pos = (uint32_t)(ps->p - ps->base);
    ps->p++;
    skip_ws(ps);
    unsigned seen = 0;
    if (ps->p < ps->end && *ps->p == '}') goto close;
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
        const unsigned char *at = ps->p;
        size_t len;
        if (which == F_VALUE) {
            rc = integer(ps, &r->value);
            if (rc) return rc;
        } else if (ps->p >= ps->end || *ps->p != '"') {
            return wrong_type(ps,
                              which == F_TENANT    ? "tenant must be a string"
                              : which == F_SUBJECT ? "subject must be a string"
                                                   : "dimension must be a string",
                              fname);
        } else if (which == F_TENANT) {
            char buf[TENANT_BUF];
            rc = string(ps, buf, sizeof buf, &len);
            if (rc) return rc;
            if (len == RA_UUID_STR_LEN && ps->have_last_tenant &&
                memcmp(buf, ps->last_tenant, RA_UUID_STR_LEN) == 0) {
                r->tenant = ps->last_tenant_id;
            } else {
                if (len != RA_UUID_STR_LEN || ra_tenant_parse(buf, len, &r->tenant) != 0)
                    return fail(ps, at, RA_INGEST_EBAD_TENANT,
                                "tenant must be a UUID (8-4-4-4-12 hex digits)", fname);
                memcpy(ps->last_tenant, buf, RA_UUID_STR_LEN);
                ps->last_tenant_id = r->tenant;
                ps->have_last_tenant = 1;
            }
        } else if (which == F_SUBJECT) {
            size_t room = scratch_cap - *scratch_used;
            rc = string(ps, scratch + *scratch_used,
                        room < RA_INGEST_SUBJECT_MAX ? room : RA_INGEST_SUBJECT_MAX, &len);
            if (rc) return rc;
            if (len == 0) return fail(ps, at, RA_INGEST_EBAD_SUBJECT, "subject is empty", fname);
            if (len > RA_INGEST_SUBJECT_MAX)
                return fail(ps, at, RA_INGEST_EBAD_SUBJECT, "subject is longer than 256 bytes",
                            fname);
            r->subject_off = (uint32_t)*scratch_used;
            r->subject_len = (uint32_t)len;
            *scratch_used += len;
        } else {
            char buf[DIM_BUF];
            rc = string(ps, buf, sizeof buf, &len);
            if (rc) return rc;
            r->dimension = -1;
            for (size_t i = 0; len <= sizeof buf && i < n_dims; i++)
                if (ps->dim_len[i] == len && memcmp(dims[i], buf, len) == 0) {
                    r->dimension = (int32_t)i;
                    break;
                }
            if (r->dimension < 0)
                return fail(ps, at, RA_INGEST_EUNKNOWN_DIMENSION, "dimension is not registered",
                            fname);
            ps->dim = r->dimension;
        }
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            skip_ws(ps);
            continue;
        }
        if (ps->p < ps->end && *ps->p == '}') break;
        return malformed(ps, ps->p, "expected ',' or '}' in a record");
    }
close:
    if (seen != F_ALL) {
        for (size_t i = 0; i < 4; i++)
            if (!(seen & REC_BITS[i]))
                return fail(ps, ps->p, RA_INGEST_EMISSING_FIELD, "required field missing",
                            REC_NAMES[i]);
    }
    ps->p++; /* '}' */
    return 0;
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
    ps.base = ps.p = (const unsigned char *)body;
    ps.end = ps.base + len;
    ps.err = err;
    ps.record = ps.dim = -1;
    for (size_t i = 0; i < n_dims; i++) /* a NULL name never matches */
        ps.dim_len[i] = dims[i] ? strlen(dims[i]) : SIZE_MAX;
    skip_ws(&ps);
    if (ps.p >= ps.end) return fail(&ps, ps.p, RA_INGEST_EEMPTY, "the body is empty", "");
    if (*ps.p != '{') return wrong_type(&ps, "the body must be a JSON object", "");
    ps.p++;
    skip_ws(&ps);
    int have = 0;
    size_t n = 0, used = 0;
    if (ps.p < ps.end && *ps.p == '}')
        return fail(&ps, ps.p, RA_INGEST_EMISSING_FIELD, "required field missing", "records");
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
        if (ps.p >= ps.end || *ps.p != '[')
            return wrong_type(&ps, "records must be a JSON array", "records");
        const unsigned char *open = ps.p;
        ps.p++;
        skip_ws(&ps);
        if (ps.p < ps.end && *ps.p == ']')
            return fail(&ps, open, RA_INGEST_ENO_RECORDS, "records is empty", "records");
        for (;;) {
            if (n == max_records) {
                ps.record = (int32_t)n;
                return fail(&ps, ps.p, RA_INGEST_ETOO_MANY, "more records than the batch limit",
                            "");
            }
            ps.record = (int32_t)n;
            ps.dim = -1;
            rc = record(&ps, dims, n_dims, &out[n], scratch, scratch_cap, &used);
            if (rc) return rc;
            n++;
            ps.record = -1;
            ps.dim = -1;
            skip_ws(&ps);
            if (ps.p < ps.end && *ps.p == ',') {
                ps.p++;
                skip_ws(&ps);
                continue;
            }
            if (ps.p < ps.end && *ps.p == ']') break;
            return malformed(&ps, ps.p, "expected ',' or ']' after a record");
        }
        ps.p++; /* ']' */
        skip_ws(&ps);
        if (ps.p < ps.end && *ps.p == ',') {
            ps.p++;
            skip_ws(&ps);
            continue;
        }
        if (ps.p < ps.end && *ps.p == '}') break;
        return malformed(&ps, ps.p, "expected ',' or '}'");
    }
    ps.p++; /* '}' */
    skip_ws(&ps);
    if (ps.p < ps.end) return malformed(&ps, ps.p, "bytes after the JSON document");
    *n_out = n;
    memset(err, 0, sizeof *err);
    err->record = err->dimension = -1;
    return 0;
}

const char *ra_ingest_reason(int code) {
    switch (code) {
#define RA__INGEST_REASON(suffix, value, reason, msg)                                              \
    case value:                                                                                    \
        return reason;
        RA_INGEST_ERR_MAP(RA__INGEST_REASON)
#undef RA__INGEST_REASON
    case 0:
        return "ok";
    default:
        return "unknown";
    }
}

const char *ra_ingest_message(int code) {
    switch (code) {
#define RA__INGEST_MSG(suffix, value, reason, msg)                                                 \
    case value:                                                                                    \
        return msg;
        RA_INGEST_ERR_MAP(RA__INGEST_MSG)
#undef RA__INGEST_MSG
    case 0:
        return "ok";
    default:
        return "unknown error code";
    }
}

int ra_ingest_dto_abi(size_t *record_size, size_t *error_size) {
    if (record_size) *record_size = sizeof(ra_ingest_record_t);
    if (error_size) *error_size = sizeof(ra_ingest_error_t);
    return RA_INGEST_ABI;
}
