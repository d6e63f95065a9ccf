/* What the decoder harnesses (fuzz-slice-decode.c, fuzz-wal-frame.c, fuzz-audit-record.c)
 * share: libFuzzer's entry point, declared once, and the check on a refusal. Header-only:
 * each harness is built from its one .c file. */
#ifndef RA_FUZZ_CHECK_H
#define RA_FUZZ_CHECK_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A refused input: the decoder gave nothing out (out: its result, NULL when it has none)
 * and returned a negative code its library names (err_name: "Unknown" for any other). */
static inline void fuzz_check_refusal(int rc, const void *out, const char *name) {
    if (out != NULL || rc >= 0 || strcmp(name, "Unknown") == 0) abort();
}

#endif /* RA_FUZZ_CHECK_H */
