/* The head file (docs/AUDIT-FORMAT.md §4.1, AUD-I-37): what an open needs to skip decoding
 * the records it covers. Two 4096-byte slots written in place in turn, each checksummed and
 * numbered (the newest valid one wins), so a write torn by a power cut leaves the other
 * slot whole: the file is replaced atomically without a rename. Every field is big-endian.
 *
 *   0    8  magic "RAUHEAD1"
 *   8    8  generation (the newest valid slot wins)
 *   16   8  last_seq: the last record covered (0: none)
 *   24  32  last_hash: its self_hash (zeros when last_seq is 0)
 *   56   8  rec_seg: first seq of the segment holding record last_seq (0 when none)
 *   64   8  rec_off: offset of that record's frame in it
 *   72   8  end_seg: first seq of the segment being appended when written
 *   80   8  end_off: its bytes [0, end_off) are durable (an fdatasync returned 0)
 *   88   8  win_seq: first record of the dedupe window (max(1, last_seq - window + 1))
 *   96   8  win_seg, 104 8 win_off: its segment and frame offset
 *   112  4  dedupe_window
 *   116  4  k: Merkle frontier nodes (the number of bits set in last_seq)
 *   120  1  writer_id length, 121 64 writer_id (zero padded)
 *   185  1  stream length, 186 64 stream (zero padded)
 *   250  6  zero
 *   256 32k the frontier: the root of the 2^b subtree for every bit b set in last_seq, from
 *           the highest bit to the lowest (RFC 6962 compact range)
 *   256+32k 8  check: BLAKE3(bytes 0 .. 256+32k)[0..8]
 *   the rest of the slot: zero */
#include "head.h"

#include <string.h>

#include "blake3.h"

static void check8(const uint8_t *p, size_t n, uint8_t *out) {
    blake3_hasher h;
    blake3_hasher_init(&h);
    blake3_hasher_update(&h, p, n);
    blake3_hasher_finalize(&h, out, 8);
}

void rau__head_encode(const rau__head_t *h, uint8_t *s) {
    memset(s, 0, RAU__HEAD_SLOT);
    memcpy(s, RAU__HEAD_MAGIC, 8);
    rau__be64(s + 8, h->gen);
    rau__be64(s + 16, h->last_seq);
    memcpy(s + 24, h->last_hash, 32);
    rau__be64(s + 56, h->rec_seg);
    rau__be64(s + 64, h->rec_off);
    rau__be64(s + 72, h->end_seg);
    rau__be64(s + 80, h->end_off);
    rau__be64(s + 88, h->win_seq);
    rau__be64(s + 96, h->win_seg);
    rau__be64(s + 104, h->win_off);
    rau__be32(s + 112, h->dedupe_window);
    size_t wl = strlen(h->writer_id), sl = strlen(h->stream);
    s[120] = (uint8_t)wl;
    memcpy(s + 121, h->writer_id, wl);
    s[185] = (uint8_t)sl;
    memcpy(s + 186, h->stream, sl);
    uint32_t k = 0;
    for (int b = 63; b >= 0; b--)
        if ((h->mr.n >> b) & 1) memcpy(s + 256 + 32 * k++, h->mr.nodes[b], 32);
    rau__be32(s + 116, k);
    check8(s, 256 + 32 * (size_t)k, s + 256 + 32 * k);
}

int rau__head_decode(const uint8_t *s, rau__head_t *h) {
    memset(h, 0, sizeof *h);
    if (memcmp(s, RAU__HEAD_MAGIC, 8) != 0) return -1;
    uint32_t k = rau__rd32(s + 116);
    if (k > 64) return -1;
    uint8_t c[8];
    check8(s, 256 + 32 * (size_t)k, c);
    if (memcmp(c, s + 256 + 32 * k, 8) != 0) return -1;
    h->gen = rau__rd64(s + 8);
    h->last_seq = rau__rd64(s + 16);
    memcpy(h->last_hash, s + 24, 32);
    h->rec_seg = rau__rd64(s + 56);
    h->rec_off = rau__rd64(s + 64);
    h->end_seg = rau__rd64(s + 72);
    h->end_off = rau__rd64(s + 80);
    h->win_seq = rau__rd64(s + 88);
    h->win_seg = rau__rd64(s + 96);
    h->win_off = rau__rd64(s + 104);
    h->dedupe_window = rau__rd32(s + 112);
    if (s[120] > RAU_ID_MAX || s[185] > RAU_ID_MAX) return -1;
    memcpy(h->writer_id, s + 121, s[120]);
    memcpy(h->stream, s + 186, s[185]);
    if ((uint32_t)__builtin_popcountll(h->last_seq) != k) return -1;
    h->mr.n = h->last_seq;
    uint32_t i = 0;
    for (int b = 63; b >= 0; b--)
        if ((h->mr.n >> b) & 1) memcpy(h->mr.nodes[b], s + 256 + 32 * i++, 32);
    return 0;
}
