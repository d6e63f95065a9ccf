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
