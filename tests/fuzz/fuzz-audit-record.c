/* libFuzzer harness for the audit record decoder (rau_record_decode, docs/AUDIT-FORMAT.md):
 * any input must give either a typed error or a record that encodes back to exactly the
 * input (AUD-I-7) with the self_hash and dedupe key of those bytes, never a crash, a hang,
 * an out-of-bounds read (ASan) or undefined behaviour (UBSan). The second half of the input
 * is also fed to the encoder as an attribute value, so NFC normalization and the size limits
 * (AUD-I-3, AUD-I-4) see arbitrary bytes. */
#include "fuzz-check.h"
#include "ron/audit.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    rau_record_t *r = NULL;
    int rc = rau_record_decode(data, size, &r);
    if (rc != 0) {
        fuzz_check_refusal(rc, r, rau_err_name(rc));
    } else {
        size_t n = 0;
        const uint8_t *b = rau_record_bytes(r, &n);
        if (n != size || memcmp(b, data, size) != 0) abort();
        rau_attr_t a[RAU_ATTR_COUNT_MAX];
        size_t na = rau_record_attr_count(r);
        if (na > RAU_ATTR_COUNT_MAX) abort();
        for (size_t i = 0; i < na; i++)
            if (rau_record_attr(r, i, &a[i]) != 0) abort();
        const char *kind = rau_record_kind(r);
        rau_event_t ev = {kind, strlen(kind), rau_record_ts_ms(r), a, na};
        uint8_t again[RAU_RECORD_MAX], h[32];
        size_t alen = 0;
        if (rau_record_encode(rau_record_writer_id(r), rau_record_stream(r), rau_record_seq(r),
                              rau_record_prev(r), &ev, again, sizeof again, &alen) != 0)
            abort();
        if (alen != size || memcmp(again, data, size) != 0) abort();
        rau_record_hash(data, size, h);
        if (memcmp(h, rau_record_self_hash(r), 32) != 0) abort();
        if (rau_record_dedupe_key(data, size, h) != 0 || memcmp(h, rau_record_dedupe(r), 32))
            abort();
        rau_record_free(r);
    }
    /* The encoder over arbitrary text: typed error or canonical bytes. */
    size_t half = size / 2;
    rau_attr_t at[2] = {{(const char *)data, half < 80 ? half : 80, RAU_ATTR_STR,
                         (const char *)data + half, size - half, 0},
                        {"k", 1, RAU_ATTR_INT, NULL, 0, (int64_t)size}};
    rau_event_t ev = {"fuzz", 4, 1, at, 2};
    uint8_t out[RAU_RECORD_MAX];
    size_t n = 0;
    rc = rau_record_encode("w", "s", 1, NULL, &ev, out, sizeof out, &n);
    if (rc == 0) {
        if (rau_record_decode(out, n, &r) != 0) abort();
        rau_record_free(r);
    } else {
        fuzz_check_refusal(rc, NULL, rau_err_name(rc));
    }
    return 0;
}
