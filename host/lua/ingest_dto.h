/* The strict decoder of POST /v1/records bodies (docs/ops/ingest.md): exactly
 *
 *   {"records":[{"tenant":"<uuid>","subject":"<string>","dimension":"<name>","value":<int>},...]}
 *
 * and nothing else (C-8, G-6.1: unknown fields are errors, like serde's deny_unknown_fields).
 *
 * Why here (core/host/) and not in libronacct: the DTO is the daemon's HTTP wire format, not
 * the metering library's API, so it makes no ABI promise in include/ron/accounting.h. It is
 * plain C (no h2o, no Lua, no allocation): the fuzz harness (tests/fuzz/fuzz-ingest-dto.c)
 * builds it with the core alone, and the daemon's Lua (ron.node.ingest) calls it
 * through ffi.C, because the host exports its symbols (-rdynamic). ra_ingest_dto_abi lets the Lua
 * cdef check the struct sizes it was written against.
 *
 * Memory: the caller owns every buffer; the decoder writes only into `out` (max_records
 * entries), `scratch` (unescaped subjects; scratch_cap >= len always suffices, since an
 * unescaped string is never longer than its JSON text) and `err`. No allocation, no global
 * state, one pass, no recursion (the schema has no nesting beyond records[]), O(len). */
#ifndef RA_HOST_INGEST_DTO_H
#define RA_HOST_INGEST_DTO_H

#ifndef RA_INGEST_CDEF /* tools/gen-cdef.sh: the region below, preprocessed alone */
#include "dto.h"
#include "ron/accounting.h"

#include <stddef.h>
#include <stdint.h>
#endif

/* RA_INGEST_CDEF_BEGIN */
/* Limits of the schema (FFI-clean enums; the value bound 2^53-1 is RA_INGEST_VALUE_MAX). */
enum {
    RA_INGEST_SUBJECT_MAX = 256, /* bytes of an unescaped subject; at least 1 */
    RA_INGEST_FIELD_LEN = 64,    /* ra_ingest_error_t.field, NUL included */
    RA_INGEST_ABI = 1            /* bump when a struct below changes */
};
/* RA_INGEST_CDEF_END */
/* I-JSON's bound (dto.h); the meter itself takes any uint64. */
#define RA_INGEST_VALUE_MAX RA_DTO_UINT_MAX

/* XX(suffix, value, reason, message): reason is the metric label and the response's
 * "reason"; every one of them is a 400 (SchemaViolation) except USAGE, a programmer error. */
#define RA_INGEST_ERR_MAP(XX)                                                                      \
    XX(EMPTY, -1, "empty_body", "the body is empty")                                               \
    XX(MALFORMED, -2, "malformed_json", "the body is not valid JSON")                              \
    XX(UNKNOWN_FIELD, -3, "unknown_field", "unknown field")                                        \
    XX(DUPLICATE_FIELD, -4, "duplicate_field", "a field appears twice")                            \
    XX(MISSING_FIELD, -5, "missing_field", "a required field is missing")                          \
    XX(WRONG_TYPE, -6, "wrong_type", "a field has the wrong JSON type")                            \
    XX(BAD_VALUE, -7, "bad_value", "value must be an integer in 0..2^53-1")                        \
    XX(BAD_TENANT, -8, "bad_tenant", "tenant must be a UUID string")                               \
    XX(UNKNOWN_DIMENSION, -9, "unknown_dimension", "dimension is not registered")                  \
    XX(BAD_SUBJECT, -10, "bad_subject", "subject must be 1..256 bytes")                            \
    XX(NO_RECORDS, -11, "no_records", "records is empty")                                          \
    XX(TOO_MANY, -12, "too_many_records", "more records than the batch limit")                     \
    XX(USAGE, -13, "usage", "bad arguments to ra_ingest_decode")

enum {
#define RA__INGEST_ENUM(suffix, value, reason, msg) RA_INGEST_E##suffix = value,
    RA_INGEST_ERR_MAP(RA__INGEST_ENUM)
#undef RA__INGEST_ENUM
        RA_INGEST_ERRNO_MIN = -13
};
/* The codes stay out of the Lua cdef: the Lua side reads ra_*_reason(). */
/* RA_INGEST_CDEF_BEGIN */

/* One decoded record. */
typedef struct ra_ingest_record {
    ra_tenant_t tenant;   /* parsed UUID */
    uint64_t value;       /* 0..RA_INGEST_VALUE_MAX */
    uint32_t subject_off; /* the unescaped subject: scratch[subject_off .. +subject_len) */
    uint32_t subject_len; /* 1..RA_INGEST_SUBJECT_MAX */
    int32_t dimension;    /* index into the caller's dimension names */
    uint32_t pos;         /* byte offset of the record's '{' in the body */
} ra_ingest_record_t;

/* Where and why decoding stopped; the first fault in document order. */
typedef struct ra_ingest_error {
    uint32_t pos;       /* byte offset of the offending token (len for a truncated body) */
    int32_t record;     /* index of the record at fault, or -1 outside records[] */
    int32_t dimension;  /* that record's dimension index when it was decoded before the
                           fault (for I-14 logs), else -1 */
    int32_t code;       /* the RA_INGEST_E* code, as returned */
    const char *detail; /* static text, more precise than the code's message */
    char field[RA_INGEST_FIELD_LEN]; /* JSON path: "", "records", "records[3].value";
                                        an unknown name sanitized to [A-Za-z0-9_-], others
                                        '?', cut at 24 bytes ("...") */
} ra_ingest_error_t;

/* Decodes body[0..len). dims[0..n_dims) are the registered dimension names (index =
 * the meter's dimension id). Returns 0 with *n_out records in out[0..*n_out) (1 <=
 * *n_out <= max_records), or a negative RA_INGEST_E* code with *err filled (out and
 * scratch then hold garbage). USAGE: a NULL pointer, max_records == 0, scratch_cap < len,
 * len > UINT32_MAX or n_dims > RA_DIM_MAX. */
int ra_ingest_decode(const char *body, size_t len, const char *const *dims, size_t n_dims,
                     ra_ingest_record_t *out, size_t max_records, size_t *n_out, char *scratch,
                     size_t scratch_cap, ra_ingest_error_t *err);

/* "unknown_field" for RA_INGEST_EUNKNOWN_FIELD, ...; "unknown" for foreign codes. */
const char *ra_ingest_reason(int code);
/* The code's message ("unknown field"); never NULL. */
const char *ra_ingest_message(int code);
/* RA_INGEST_ABI; *record_size and *error_size get the sizes of the two structs. */
int ra_ingest_dto_abi(size_t *record_size, size_t *error_size);
/* RA_INGEST_CDEF_END */

#endif
