/* libFuzzer harness for the WAL frame parser (ra__wal_frame_parse, docs/FORMAT.md §4).
 *
 * Input: byte 0 is a mode, the rest is the bytes handed to the parser.
 *   bit 0  fix up first: write the right header checksum (and, when the length fits, the
 *          right payload trailer), so the fuzzer gets past the checksums and explores the
 *          length, type and reserved checks and the payload;
 *   bit 1  also force the type byte to 1 and the reserved bytes to 0.
 *
 * Invariants: the parser's verdict equals an independent reading of the rules of §4
 * (magic; header checksum = first 4 bytes of BLAKE3 over bytes 0..19, little-endian; length
 * <= 1 MiB and <= the bytes left; type 1; reserved 0; trailer = BLAKE3(payload)); an
 * accepted frame's size, payload pointer, length and seq are exactly its fields; extra
 * bytes after a frame never change the verdict; a payload that decodes as a slice has the
 * trailer as its b3. No crash, no out-of-bounds read (ASan), no UB (UBSan). */
#include "fuzz-check.h"
#include "ron/accounting.h"

#include "internal.h"
#include "wal.h"

#include <stdlib.h>
#include <string.h>

static uint32_t hdr_sum(const uint8_t *p) {
    uint8_t d[32];
    ra_b3(p, 20, d);
    return (uint32_t)d[0] | (uint32_t)d[1] << 8 | (uint32_t)d[2] << 16 | (uint32_t)d[3] << 24;
}

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p) {
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

/* The rules, read independently of core/wal.c. Returns the frame size or 0. */
static size_t reference(const uint8_t *b, size_t len) {
    if (len < 24 + 32) return 0;
    if (memcmp(b, "RWF1", 4) != 0) return 0;
    if (le32(b + 20) != hdr_sum(b)) return 0;
    uint32_t n = le32(b + 4);
    if (n > (1u << 20)) return 0;
    if (b[16] != 1 || b[17] || b[18] || b[19]) return 0;
    if ((uint64_t)n + 24 + 32 > len) return 0;
    uint8_t d[32];
    ra_b3(b + 24, n, d);
    if (memcmp(d, b + 24 + n, 32) != 0) return 0;
    uint64_t seq = le64(b + 8);
    if (seq == 0 || seq > ((uint64_t)1 << 62)) return 0; /* FORMAT.md §4: 1 <= seq <= 2^62 */
    return 24 + (size_t)n + 32;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint8_t mode = data[0];
    size_t len = size - 1;
    /* An exact-size copy, so ASan catches any read past the input. */
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf) return 0;
    memcpy(buf, data + 1, len);
    if ((mode & 1) && len >= 24) {
        if (mode & 2) {
            buf[16] = 1;
            buf[17] = buf[18] = buf[19] = 0;
        }
        uint32_t s = hdr_sum(buf);
        buf[20] = (uint8_t)s;
        buf[21] = (uint8_t)(s >> 8);
        buf[22] = (uint8_t)(s >> 16);
        buf[23] = (uint8_t)(s >> 24);
        uint32_t n = le32(buf + 4);
        if (n <= (1u << 20) && (uint64_t)n + 24 + 32 <= len) ra_b3(buf + 24, n, buf + 24 + n);
    }

    uint64_t seq = 0;
    const uint8_t *payload = NULL;
    size_t plen = 0;
    size_t got = ra__wal_frame_parse(buf, len, &seq, &payload, &plen);
    size_t want = reference(buf, len);
    if (got != want) abort();
    if (got) {
        if (got > len || payload != buf + 24 || plen != le32(buf + 4) || got != 24 + plen + 32 ||
            seq != le64(buf + 8))
            abort();
        /* Bytes after the frame do not matter: the parse of exactly the frame agrees. */
        uint64_t seq2;
        const uint8_t *p2;
        size_t l2;
        if (ra__wal_frame_parse(buf, got, &seq2, &p2, &l2) != got || seq2 != seq || l2 != plen)
            abort();
        ra_slice_t *s = NULL;
        int rc = ra_slice_decode(payload, plen, &s);
        if (rc == 0) {
            if (memcmp(ra_slice_b3(s), buf + 24 + plen, 32) != 0) abort();
            ra_slice_unref(s);
        } else {
            fuzz_check_refusal(rc, s, ra_err_name(rc));
        }
    } else if (len >= 1) {
        /* A rejected frame stays rejected with fewer bytes available. */
        uint64_t seq2;
        const uint8_t *p2;
        size_t l2;
        if (ra__wal_frame_parse(buf, len - 1, &seq2, &p2, &l2) != 0) abort();
    }
    free(buf);
    return 0;
}
