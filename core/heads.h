/* Stream heads (heads.c): the chain state per (tenant, dimension), in the plane, written
 * by the plane's one sealer under the seal lock. */
#ifndef RA_HEADS_H
#define RA_HEADS_H

/* The head of a stream, created empty (seq 0) when absent and create is set; NULL when
 * absent, or when the table is at its bound. */
RA_INTERNAL struct ra__head *ra__head_get(ra_meter_t *m, const uint8_t tenant[16], uint32_t dim,
                                          bool create);
RA_INTERNAL int ra__heads_seed(ra_meter_t *m, const uint8_t tenant[16], uint32_t dim, uint64_t seq,
                               const uint8_t b3[32], int64_t window_start_s);
RA_INTERNAL int ra__heads_advance(ra_meter_t *m, const uint8_t tenant[16], uint32_t dim,
                                  uint64_t seq, int64_t last_ws, const uint8_t b3[32]);
RA_INTERNAL void ra__heads_reset(ra_meter_t *m);
RA_INTERNAL int ra__heads_each(void *ud,
                               int (*emit)(void *, const uint8_t[16], const char *, uint64_t,
                                           int64_t, const uint8_t[32]),
                               void *eud);

#endif /* RA_HEADS_H */
