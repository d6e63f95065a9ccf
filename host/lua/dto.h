/* What the host's strict request decoders (ingest_dto.c: POST /v1/records; wallet_dto.c:
 * the wallet's routes) share besides the JSON scanner (json_scan.h): the table behind their
 * reason and message functions, made from each one's X-macro error map. Each decoder keeps
 * its own schema, error struct and codes (their ABI is their Lua side's cdef). */
#ifndef RA_HOST_DTO_H
#define RA_HOST_DTO_H

#include <stddef.h>
#include <stdint.h>

/* The largest integer a request may carry: I-JSON (RFC 7493 §2.2), 2^53-1, since integers
 * beyond it do not survive every JSON implementation (a client could not be sure what it
 * sent). */
#define RA_DTO_UINT_MAX ((uint64_t)9007199254740991u)

typedef struct ra_dto_code {
    int code;
    const char *reason;  /* the metric label and the response's "reason" */
    const char *message; /* for people */
} ra_dto_code_t;

/* One row per XX(suffix, value, reason, message) of an error map:
 *   static const ra_dto_code_t CODES[] = {RA_INGEST_ERR_MAP(RA_DTO_CODE_ROW)}; */
#define RA_DTO_CODE_ROW(suffix, value, reason, msg) {value, reason, msg},

/* Defines <prefix>_reason(int code) and <prefix>_message(int code) (declared in the
 * decoder's header) over the table of error map MAP:
 *   RA_DTO_DEFINE_NAMES(ra_ingest, RA_INGEST_ERR_MAP) */
#define RA_DTO_DEFINE_NAMES(prefix, MAP)                                                           \
    static const ra_dto_code_t prefix##_codes[] = {MAP(RA_DTO_CODE_ROW)};                          \
    enum { prefix##_n_codes = sizeof prefix##_codes / sizeof prefix##_codes[0] };                  \
    const char *prefix##_reason(int code) {                                                        \
        return ra_dto_reason(prefix##_codes, prefix##_n_codes, code);                              \
    }                                                                                              \
    const char *prefix##_message(int code) {                                                       \
        return ra_dto_message(prefix##_codes, prefix##_n_codes, code);                             \
    }

/* "ok" for 0; the code's reason, or "unknown" for a code not in the table. */
const char *ra_dto_reason(const ra_dto_code_t *codes, size_t n, int code);
/* "ok" for 0; the code's message, or "unknown error code"; never NULL. */
const char *ra_dto_message(const ra_dto_code_t *codes, size_t n, int code);

#endif /* RA_HOST_DTO_H */
