/* What the host's strict request decoders (ingest_dto.c: POST /v1/records; wallet_dto.c:
 * the wallet's routes) share besides the JSON scanner (json_scan.h): the table behind their
 * reason and message functions, made from each one's X-macro error map. Each decoder keeps
 * its own schema, error struct and codes (their ABI is their Lua side's cdef). */
#ifndef RA_HOST_DTO_H
#define RA_HOST_DTO_H

#include <stddef.h>

typedef struct ra_dto_code {
    int code;
    const char *reason;  /* the metric label and the response's "reason" */
    const char *message; /* for people */
} ra_dto_code_t;

/* One row per XX(suffix, value, reason, message) of an error map:
 *   static const ra_dto_code_t CODES[] = {RA_INGEST_ERR_MAP(RA_DTO_CODE_ROW)}; */
#define RA_DTO_CODE_ROW(suffix, value, reason, msg) {value, reason, msg},

/* "ok" for 0; the code's reason, or "unknown" for a code not in the table. */
const char *ra_dto_reason(const ra_dto_code_t *codes, size_t n, int code);
/* "ok" for 0; the code's message, or "unknown error code"; never NULL. */
const char *ra_dto_message(const ra_dto_code_t *codes, size_t n, int code);

#endif /* RA_HOST_DTO_H */
