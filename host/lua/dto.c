/* The strict request decoders' shared tables: see dto.h. */
#include "dto.h"

static const ra_dto_code_t *find(const ra_dto_code_t *codes, size_t n, int code) {
    for (size_t i = 0; i < n; i++)
        if (codes[i].code == code) return &codes[i];
    return NULL;
}

const char *ra_dto_reason(const ra_dto_code_t *codes, size_t n, int code) {
    const ra_dto_code_t *c = find(codes, n, code);
    return code == 0 ? "ok" : c ? c->reason : "unknown";
}

const char *ra_dto_message(const ra_dto_code_t *codes, size_t n, int code) {
    const ra_dto_code_t *c = find(codes, n, code);
    return code == 0 ? "ok" : c ? c->message : "unknown error code";
}
