/* What the request decoders' fuzz harnesses share (fuzz-ingest-dto.c, fuzz-wallet-dto.c):
 * the checks on a typed error, and a bounded writer of the canonical JSON they decode again.
 * Header-only: each harness is built from its one .c file. */
#ifndef RA_FUZZ_DTO_H
#define RA_FUZZ_DTO_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A decoder's error: a negative code of its map (USAGE is the caller's fault, never the
 * input's), the code repeated, a detail, a position inside the input, a known reason, and
 * a field name that is NUL-terminated in its array and safe to echo (no quotes, no
 * controls). */
static inline void fuzz_dto_check_error(int rc, int min, int usage, int code, const char *detail,
                                        size_t pos, size_t size, const char *reason,
                                        const char *field, size_t field_cap) {
    if (rc >= 0 || rc < min || rc == usage) abort();
    if (code != rc || !detail || pos > size) abort();
    if (strcmp(reason, "unknown") == 0) abort();
    if (memchr(field, '\0', field_cap) == NULL) abort();
    for (const char *c = field; *c; c++)
        if (*c < 0x20 || *c > 0x7e || *c == '"' || *c == '\\') abort();
}

/* JSON written into out[0..cap); overflow aborts (the buffers are sized for the worst case). */
typedef struct {
    char *out;
    size_t cap, len;
} fuzz_json_t;

static inline void __attribute__((format(printf, 2, 3)))
fuzz_json(fuzz_json_t *j, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(j->out + j->len, j->cap - j->len, fmt, ap);
    va_end(ap);
    if (w < 0 || (size_t)w >= j->cap - j->len) abort();
    j->len += (size_t)w;
}

/* s[0..len) as a JSON string, quotes included: '"' and '\' escaped, controls as \u00XX. */
static inline void fuzz_json_string(fuzz_json_t *j, const char *s, uint32_t len) {
    fuzz_json(j, "\"");
    for (uint32_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fuzz_json(j, "\\%c", c);
        else if (c < 0x20)
            fuzz_json(j, "\\u%04x", c);
        else
            fuzz_json(j, "%c", c);
    }
    fuzz_json(j, "\"");
}

#endif
