/* The strict decoder of the wallet's request bodies (docs/WALLET.md, issue 17): one flat
 * JSON object whose fields a schema names, and nothing else (unknown fields, duplicates,
 * wrong types, out-of-range numbers and over-long strings are typed errors, like the
 * ingest DTO's; C-8). One decoder for every route: the route passes its schema.
 *
 * Like ingest_dto.c it is part of the host (the wallet's HTTP wire format, not a library
 * API), plain C with no allocation, no recursion (the bodies are flat) and no global state,
 * O(len); the Lua (ron.wallet.dto) reaches it through ffi.C, the fuzz harness
 * (tests/fuzz/fuzz-wallet-dto.c) builds it alone. The JSON itself is read by the shared
 * scanner (json_scan.h). What a field means (a UUID, an asset code, an enum) is the
 * route's business in Lua: here a field is a string of min..max bytes, an integer in
 * min..max or a boolean. */
#ifndef RA_HOST_WALLET_DTO_H
#define RA_HOST_WALLET_DTO_H

#ifndef RA_WDTO_CDEF /* tools/gen-cdef.sh: the region below, preprocessed alone */
#include "dto.h"

#include <stddef.h>
#include <stdint.h>
#endif

/* RA_WDTO_CDEF_BEGIN */
enum {
    RA_WDTO_MAX_FIELDS = 16, /* fields of one schema */
    RA_WDTO_NAME_MAX = 31,   /* bytes of a field name */
    RA_WDTO_FIELD_LEN = 40,  /* ra_wdto_error_t.field, NUL included */
    RA_WDTO_STRING = 1,      /* field types */
    RA_WDTO_UINT = 2,
    RA_WDTO_BOOL = 3,
    RA_WDTO_ABI = 1 /* bump when a struct below changes */
};
/* RA_WDTO_CDEF_END */
/* I-JSON's bound (dto.h). */
#define RA_WDTO_UINT_MAX RA_DTO_UINT_MAX

/* XX(suffix, value, reason, message); every one is a 400 except USAGE (a programmer's). */
#define RA_WDTO_ERR_MAP(XX)                                                                        \
    XX(EMPTY, -1, "empty_body", "the body is empty")                                               \
    XX(MALFORMED, -2, "malformed_json", "the body is not valid JSON")                              \
    XX(NOT_OBJECT, -3, "not_object", "the body must be a JSON object")                             \
    XX(UNKNOWN_FIELD, -4, "unknown_field", "unknown field")                                        \
    XX(DUPLICATE_FIELD, -5, "duplicate_field", "a field appears twice")                            \
    XX(MISSING_FIELD, -6, "missing_field", "a required field is missing")                          \
    XX(WRONG_TYPE, -7, "wrong_type", "a field has the wrong JSON type")                            \
    XX(BAD_NUMBER, -8, "bad_number", "a number is out of range or not a plain integer")            \
    XX(BAD_STRING, -9, "bad_string", "a string is too short, too long or not Unicode text")        \
    XX(USAGE, -10, "usage", "bad arguments to ra_wdto_decode")

enum {
#define RA__WDTO_ENUM(suffix, value, reason, msg) RA_WDTO_E##suffix = value,
    RA_WDTO_ERR_MAP(RA__WDTO_ENUM)
#undef RA__WDTO_ENUM
        RA_WDTO_ERRNO_MIN = -10
};
/* The codes stay out of the Lua cdef: the Lua side reads ra_*_reason(). */
/* RA_WDTO_CDEF_BEGIN */

/* One field of a schema. For a string, min..max bound its unescaped length in bytes
 * (max <= UINT32_MAX); for an integer, its value (max <= RA_WDTO_UINT_MAX); ignored for a
 * boolean. A null value is never accepted: an optional field is left out. */
typedef struct ra_wdto_field {
    const char *name; /* 1..RA_WDTO_NAME_MAX bytes, [A-Za-z0-9_] */
    uint32_t type;    /* RA_WDTO_STRING, _UINT, _BOOL */
    uint32_t required;
    uint64_t min, max;
} ra_wdto_field_t;

/* What the decoder found for field i of the schema (out[i]). */
typedef struct ra_wdto_value {
    uint32_t present;
    uint32_t pos; /* byte offset of the value in the body */
    uint64_t u;   /* an integer's value; a boolean's 0/1 */
    uint32_t off; /* a string: scratch[off .. off+len), unescaped UTF-8 */
    uint32_t len;
} ra_wdto_value_t;

/* Where and why decoding stopped: the first fault in document order. */
typedef struct ra_wdto_error {
    uint32_t pos;       /* byte offset of the offending token (len for a truncated body) */
    int32_t code;       /* the RA_WDTO_E* code, as returned */
    const char *detail; /* static text, more precise than the code's message */
    char field[RA_WDTO_FIELD_LEN]; /* the field at fault ("" for the document); an unknown
                                      name sanitized to [A-Za-z0-9_-], others '?', cut at 24
                                      bytes ("...") */
} ra_wdto_error_t;

/* Decodes body[0..len) against fields[0..n_fields). Returns 0 with out[0..n_fields)
 * filled, or a negative RA_WDTO_E* code with *err filled. scratch gets the unescaped
 * strings (scratch_cap >= len always suffices). USAGE: a NULL pointer, n_fields of 0 or
 * above RA_WDTO_MAX_FIELDS, a bad schema (name, type, min > max, a bound beyond its type's),
 * scratch_cap < len or len > UINT32_MAX. */
int ra_wdto_decode(const char *body, size_t len, const ra_wdto_field_t *fields, size_t n_fields,
                   ra_wdto_value_t *out, char *scratch, size_t scratch_cap, ra_wdto_error_t *err);

/* "unknown_field" for RA_WDTO_EUNKNOWN_FIELD, ...; "unknown" for foreign codes. */
const char *ra_wdto_reason(int code);
/* The code's message; never NULL. */
const char *ra_wdto_message(int code);
/* RA_WDTO_ABI; the sizes of the three structs, for the Lua cdef's check. */
int ra_wdto_abi(size_t *field_size, size_t *value_size, size_t *error_size);
/* RA_WDTO_CDEF_END */

#endif
