/* The one chain-link check of every `verify` (WAL directories, file ledgers, PostgreSQL
 * ledgers): a stream's slices form one ordered chain (I-6, I-17): seq 1 has a prev_b3 of 32
 * zero bytes, and each next slice has seq = head + 1 and prev_b3 = the head's b3. The
 * verifies differ in where the head comes from (the previous record, a heads checkpoint)
 * and in how they name a place; the rule and its wording live here once. */
#ifndef RA_HOST_CHAIN_H
#define RA_HOST_CHAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum ra_host_link {
    RA_LINK_OK = 0,
    RA_LINK_GAP,   /* seq > head + 1: slices head+1 .. seq-1 are missing */
    RA_LINK_BACK,  /* seq <= head: replayed, duplicated or reordered */
    RA_LINK_FIRST, /* seq 1 with a prev_b3 that is not zero */
    RA_LINK_PREV,  /* seq = head + 1 but prev_b3 is not the head's b3 */
} ra_host_link_t;

/* Checks the slice (seq, prev_b3) against the stream's head (head_seq, head_b3); a stream
 * with no slice yet has head_seq 0 and any head_b3 (it is not read: the zero digest is
 * what seq 1 must cite). */
ra_host_link_t ra_host_chain_link(uint64_t head_seq, const uint8_t head_b3[32], uint64_t seq,
                                  const uint8_t prev_b3[32]);

/* Describes a link that is not OK, without a place ("seq 3 follows seq 1 (expected 2)",
 * "seq 1 has prev_b3 0a1b...., not zero", "seq 5 has prev_b3 0a1b..., not the b3 2c3d... of
 * seq 4"); digests are shown by their first 16 hex digits. Returns out. */
const char *ra_host_chain_describe(ra_host_link_t link, uint64_t head_seq,
                                   const uint8_t head_b3[32], uint64_t seq,
                                   const uint8_t prev_b3[32], char *out, size_t n);

/* An operator's accepted loss (docs/EXPORT.md §2, "Accepted losses"): a ledger record whose
 * bytes start with RA_HOST_LOSS_MAGIC stands for a given-up seq; its trailer (the file
 * ledger) or b3 column (PostgreSQL) is its link_b3, not a digest. */
#define RA_HOST_LOSS_MAGIC "RONL"
typedef struct ra_host_loss {
    uint64_t accepted_at_s, seq, first, last;
    const uint8_t *tenant, *prev_b3, *link_b3; /* into the record's bytes */
    char dim[33], reason[201];
} ra_host_loss_t;

/* Decodes a loss record (every field checked, nothing after it); false when it is not one. */
bool ra_host_loss_decode(const uint8_t *b, uint32_t n, ra_host_loss_t *l);

#endif /* RA_HOST_CHAIN_H */
