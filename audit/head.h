/* The head file's slot (audit/head.c, docs/AUDIT-FORMAT.md §4.1). */
#ifndef RAU_HEAD_H
#define RAU_HEAD_H

#include "internal.h"

#define RAU__HEAD_MAGIC "RAUHEAD1"
#define RAU__HEAD_NAME "head.rau"
enum { RAU__HEAD_SLOT = 4096, RAU__HEAD_FILE = 2 * RAU__HEAD_SLOT };
/* The slot's fields, up to the check, fit in it: */
_Static_assert(256 + 64 * 32 + 8 <= RAU__HEAD_SLOT, "head slot layout");

typedef struct rau__head_s {
    uint64_t gen, last_seq;
    uint8_t last_hash[32];
    uint64_t rec_seg, rec_off, end_seg, end_off, win_seq, win_seg, win_off;
    uint32_t dedupe_window;
    char writer_id[RAU_ID_MAX + 1], stream[RAU_ID_MAX + 1];
    rau__mrange_t mr; /* mr.n == last_seq */
} rau__head_t;

/* Fills a whole slot (RAU__HEAD_SLOT bytes). */
void rau__head_encode(const rau__head_t *h, uint8_t *slot);
/* 0, or -1 when the slot is not a whole, checksummed head. */
int rau__head_decode(const uint8_t *slot, rau__head_t *h);

#endif
