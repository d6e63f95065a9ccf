/* libronaudit internals: shared by the files of audit/ only. */
#ifndef RAU_INTERNAL_H
#define RAU_INTERNAL_H

#include "ron/audit.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Assertions that stay on in release builds: programmer errors, never operating errors. */
#define RAU_ASSERT(e) ((e) ? (void)0 : rau__assert_fail(#e, __FILE__, __LINE__))
void rau__assert_fail(const char *expr, const char *file, int line);

/* Version prefix of canonical records (docs/AUDIT-FORMAT.md §1): "rau" then version 1. */
#define RAU__MAGIC "rau\x01"
#define RAU__MAGIC_LEN 4
/* Fixed offsets of the positional fields (AUD-I-2). */
#define RAU__OFF_SEQ 4
#define RAU__OFF_PREV 12
#define RAU__OFF_BODY 44

/* BLAKE3 (the same C library the meter uses, core/b3.c). */
void rau__b3(const void *buf, size_t len, uint8_t *out32);
void rau__b3_dedupe(const uint8_t *canon, size_t len, uint8_t *out32);
/* SHA-256 (libsodium). */
void rau__sha256_2(const void *a, size_t alen, const void *b, size_t blen, uint8_t *out32);

/* Store big-endian. */
static inline void rau__be64(uint8_t *p, uint64_t v) {
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}
static inline uint64_t rau__rd64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}
static inline void rau__be32(uint8_t *p, uint32_t v) {
    for (int i = 3; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}
static inline uint32_t rau__rd32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

void rau__errf(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- compact Merkle range: the root of a growing tree in O(log n) (audit/merkle.c) ---- */
typedef struct rau__mrange_s {
    uint64_t n;
    uint8_t nodes[64][32]; /* nodes[k]: root of the 2^k subtree when bit k of n is set */
} rau__mrange_t;
void rau__mrange_push(rau__mrange_t *r, const uint8_t *leaf_hash);
void rau__mrange_root(const rau__mrange_t *r, uint8_t *out32);

/* ---- durable sink frames (audit/sink.c; docs/AUDIT-FORMAT.md §4) ---- */
#define RAU__SEG_MAGIC "RAUSEG01"
#define RAU__SEG_HDR 24        /* magic 8, first seq 8, dedupe window 4, zero 4 */
#define RAU__FRAME_OVERHEAD 12 /* len 4 + check 8 */
/* Parses one frame at p (avail bytes). 1: frame ok (*payload, *plen, *flen set); 0: not
 * enough bytes (torn); -1: bad frame. */
int rau__frame_parse(const uint8_t *p, size_t avail, const uint8_t **payload, size_t *plen,
                     size_t *flen);
/* The segment header's check: BLAKE3(bytes 0..20)[0..4]. */
void rau__seg_check(const uint8_t *hdr, uint8_t *out4);
size_t rau__frame_write(uint8_t *dst, const uint8_t *payload, size_t plen);

/* Segment files of a log directory, in order. */
typedef struct rau__seglist_s {
    size_t n;
    char (*names)[64];
    uint64_t *first_seq;
} rau__seglist_t;
int rau__seglist(const char *dir, rau__seglist_t *out);
/* "seg-<20 digits>.rau" -> 1 and its first seq, else 0. */
int rau__seg_name(const char *s, uint64_t *first);
void rau__seglist_free(rau__seglist_t *l);
int rau__read_file(const char *path, uint8_t **buf, size_t *len, size_t max);

/* A segment read through a fixed window (the log's recovery and verify: memory does not
 * grow with the segment): b[0..have) holds the file's bytes from offset base. */
enum { RAU__WIN = 1 << 20 };
typedef struct rau__win_s {
    int fd, eof;
    uint8_t *b; /* RAU__WIN bytes */
    size_t have;
    uint64_t base;
} rau__win_t;
/* Keeps b[*off..have), reads more behind it; *off becomes 0. RAU_EIO. */
int rau__win_refill(rau__win_t *w, size_t *off);

/* ---- the dedupe index: the last `cap` events of a chain (audit/dedupe.c, AUD-I-6) ---- */
typedef struct rau__dent_s {
    uint8_t key[32];
    uint8_t hash[32];
    uint64_t seq;
} rau__dent_t;
typedef struct rau__dedupe_s {
    rau__dent_t *ents; /* ring, oldest at (head + cap - count) % cap */
    uint64_t *slots;   /* open addressing: key's first 4 bytes << 32 | ring index + 1; 0 = empty */
    uint32_t cap, count, head, mask;
} rau__dedupe_t;
int rau__dedupe_init(rau__dedupe_t *d, uint32_t cap);
void rau__dedupe_free(rau__dedupe_t *d);
const rau__dent_t *rau__dedupe_find(const rau__dedupe_t *d, const uint8_t *key);
void rau__dedupe_add(rau__dedupe_t *d, const uint8_t *key, uint64_t seq, const uint8_t *hash);
int rau__b64_32(const char *s, size_t n, uint8_t *out32);
/* A checkpoint's text (c2sp.org/tlog-checkpoint): origin length, size, root (audit/note.c).
 * rau__checkpoint_parse: the same from a whole note, its signatures not checked. */
int rau__checkpoint_body(const char *text, size_t len, size_t *origin_len, uint64_t *size_out,
                         uint8_t *root_out);
int rau__checkpoint_parse(const char *note, size_t len, uint64_t *size, uint8_t *root);

/* A record's frame: the first seq of its segment (the file's name) and its offset. */
typedef struct rau__pos_s {
    uint64_t seg, off;
} rau__pos_t;

/* How the last open went: the public rau_log_open_info_t (include/ron/audit.h). */
typedef rau_log_open_info_t rau__open_info_t;
void rau__log_open_info(const rau_log_t *l, rau__open_info_t *out);

/* rau_log_open with the I/O interface given (audit/io.h): the tests' fault and power-cut
 * simulator (tests/sim-fs.c). io must outlive the log. */
struct ra__io;
int rau__log_open_io(const rau_log_config_t *cfg, const struct ra__io *io, rau_log_t **out,
                     char *err, size_t errlen);

#endif
