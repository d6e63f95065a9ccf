/* libFuzzer harness for the slice decoder (ra_slice_decode): any input must give either a
 * typed error or a slice whose accessors agree with the bytes, never a crash, a hang, an
 * out-of-bounds read (ASan) or undefined behaviour (UBSan). */
#include "fuzz-check.h"
#include "ron/accounting.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ra_slice_t *s = NULL;
    int rc = ra_slice_decode(data, size, &s);
    if (rc != 0) {
        fuzz_check_refusal(rc, s, ra_err_name(rc));
        return 0;
    }
    size_t len = 0;
    const uint8_t *b = ra_slice_bytes(s, &len);
    if (len != size || memcmp(b, data, size) != 0) abort();
    uint8_t d[32];
    ra_b3(data, size, d);
    if (memcmp(d, ra_slice_b3(s), 32) != 0) abort();
    ra_slice_id_t id;
    ra_slice_get_id(s, &id);
    if (id.seq == 0 || id.window_len_s < 60 || id.window_len_s > 3600) abort();
    size_t n = ra_slice_row_count(s);
    ra_subject_t prev, cur;
    for (size_t i = 0; i < n; i++) {
        uint64_t inc = 0;
        if (ra_slice_row(s, i, &cur, &inc) != 0 || inc == 0) abort();
        if (i && memcmp(prev.b, cur.b, 16) >= 0) abort();
        prev = cur;
    }
    if (ra_slice_row(s, n, &cur, NULL) == 0) abort();
    (void)strlen(ra_slice_dimension(s));
    (void)strlen(ra_slice_host(s));
    ra_slice_unref(s);
    return 0;
}
