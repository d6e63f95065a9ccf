/* The chain-link check shared by every verify (chain.h). */
#include "chain.h"

#include "ron/accounting.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const uint8_t zero_b3[32];

ra_host_link_t ra_host_chain_link(uint64_t head_seq, const uint8_t head_b3[32], uint64_t seq,
                                  const uint8_t prev_b3[32]) {
    if (seq <= head_seq) return RA_LINK_BACK;
    if (seq != head_seq + 1) return RA_LINK_GAP;
    const uint8_t *want = head_seq == 0 ? zero_b3 : head_b3;
    if (memcmp(prev_b3, want, 32) == 0) return RA_LINK_OK;
    return head_seq == 0 ? RA_LINK_FIRST : RA_LINK_PREV;
}

const char *ra_host_chain_describe(ra_host_link_t link, uint64_t head_seq,
                                   const uint8_t head_b3[32], uint64_t seq,
                                   const uint8_t prev_b3[32], char *out, size_t n) {
    char a[65], b[65];
    ra_hex(prev_b3, 32, a);
    switch (link) {
    case RA_LINK_OK:
        snprintf(out, n, "seq %" PRIu64 " links to seq %" PRIu64, seq, head_seq);
        break;
    case RA_LINK_GAP:
    case RA_LINK_BACK:
        snprintf(out, n, "seq %" PRIu64 " follows seq %" PRIu64 " (expected %" PRIu64 ")", seq,
                 head_seq, head_seq + 1);
        break;
    case RA_LINK_FIRST:
        snprintf(out, n, "seq 1 has prev_b3 %.16s..., not zero", a);
        break;
    case RA_LINK_PREV:
        ra_hex(head_b3, 32, b);
        snprintf(out, n,
                 "seq %" PRIu64 " has prev_b3 %.16s..., not the b3 %.16s... of seq %" PRIu64, seq,
                 a, b, head_seq);
        break;
    }
    return out;
}

/* An accepted-loss record (lua/ron/accounting/export/loss.lua's seq() is the same check),
 * little-endian: RONL, 1,
 * 0, 0 0, tenant[16], accepted_at_s u64, 0 u32, seq u64, prev_b3[32], link_b3[32], first
 * u64, last u64, d u8, dimension[d], r u8, reason[r] (printable ASCII), nothing after. */
static uint64_t le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

bool ra_host_loss_decode(const uint8_t *b, uint32_t n, ra_host_loss_t *l) {
    static const uint8_t head[8] = {'R', 'O', 'N', 'L', 1, 0, 0, 0};
    static const uint8_t zero4[4] = {0};
    if (n < 127 || memcmp(b, head, 8) != 0 || memcmp(b + 32, zero4, 4) != 0) return false;
    uint32_t d = b[124];
    if (d < 1 || d > 32 || 126 + d > n) return false;
    uint32_t r = b[125 + d];
    if (r > 200 || 126 + d + r != n) return false;
    for (uint32_t i = 0; i < r; i++)
        if (b[126 + d + i] < 0x20 || b[126 + d + i] > 0x7e) return false;
    l->tenant = b + 8;
    l->accepted_at_s = le64(b + 24);
    l->seq = le64(b + 36);
    l->prev_b3 = b + 44;
    l->link_b3 = b + 76;
    l->first = le64(b + 108);
    l->last = le64(b + 116);
    if (l->first < 1 || l->seq < l->first || l->seq > l->last) return false;
    memcpy(l->dim, b + 125, d);
    l->dim[d] = '\0';
    memcpy(l->reason, b + 126 + d, r);
    l->reason[r] = '\0';
    return true;
}
