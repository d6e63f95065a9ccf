/* The pending ring (pending.c): sealed slices not ACKed yet, in seal order. A pure data
 * structure: the meter owns one and calls in under its seal lock. */
#ifndef RA_PENDING_H
#define RA_PENDING_H

#include "ron/accounting.h"

#include <stddef.h>
#include <stdint.h>

#ifndef RA_INTERNAL
#define RA_INTERNAL __attribute__((visibility("hidden")))
#endif

typedef struct ra__pending {
    ra_slice_t **ring; /* cap entries; NULL marks an ACKed hole */
    size_t cap, head, tail, live;
    uint64_t pushed; /* pushes so far: each slice's ring_seq, what pending_since reads */
} ra__pending_t;

RA_INTERNAL int ra__pending_init(ra__pending_t *p, size_t cap);
RA_INTERNAL void ra__pending_free(ra__pending_t *p);
RA_INTERNAL size_t ra__pending_room(const ra__pending_t *p);
RA_INTERNAL void ra__pending_push(ra__pending_t *p, ra_slice_t *s);
RA_INTERNAL int ra__pending_remove(ra__pending_t *p, const ra_slice_t *s, uint64_t *wal_seq);
RA_INTERNAL void ra__pending_newest(const ra__pending_t *p, size_t n, ra_slice_t **out, size_t cap);

RA_INTERNAL size_t ra__pending_list(const ra__pending_t *p, size_t from, ra_slice_t **out,
                                    size_t cap);
RA_INTERNAL ra_slice_t *ra__pending_get(const ra__pending_t *p, size_t idx);
RA_INTERNAL size_t ra__pending_count(const ra__pending_t *p);
RA_INTERNAL size_t ra__pending_since(const ra__pending_t *p, uint64_t after, ra_slice_t **out,
                                     size_t cap, uint64_t *last);

#endif /* RA_PENDING_H */
