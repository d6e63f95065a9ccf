/* Sealing (seal.c, the rollover's numbered steps; seal_sort.c, its sort): the sealer's
 * scratch, grown on demand up to entries_cap rows, process-private. */
#ifndef RA_SEAL_H
#define RA_SEAL_H

#include "ron/accounting.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ra__seal_row {
    uint32_t slot;
    uint32_t win;   /* the window the row is sealed into (late rows: the oldest open one) */
    uint64_t stamp; /* the pair's stamp when scanned: drained only if unchanged */
    uint32_t sid;   /* stream-window index */
    uint16_t dim;
    uint8_t late;
    uint8_t pad_;
    uint8_t tenant[16];
    uint8_t subject[16];
    uint64_t count;
    uint64_t taken; /* with a WAL: the frozen count of this entry (merging changes count) */
} ra__seal_row_t;
_Static_assert(sizeof(ra__seal_row_t) == 72, "seal row layout");

typedef struct ra__seal_stream { /* one (window, tenant, dimension) of a rollover */
    uint64_t k[3];               /* sort key: window, tenant (big-endian), dimension */
    uint32_t rows;               /* candidate rows */
    uint32_t first;              /* its range in the order array */
    uint32_t fill;               /* cursor while the order array is filled */
    uint32_t rank;               /* position in (window, tenant, dimension) order */
} ra__seal_stream_t;

typedef struct ra__sort_key { /* what the sealer sorts: three words, then a payload */
    uint64_t k[3];
    uint32_t v;
    uint32_t pad_;
} ra__sort_key_t;

typedef struct ra__seal_scratch {
    ra__seal_row_t *rows;      /* candidates, in scan (slot) order */
    size_t rows_cap, rows_max; /* allocated, and the bound (entries_cap) */
    ra__seal_stream_t *streams;
    size_t streams_cap;
    uint32_t *table; /* stream lookup: sid + 1, 0 = empty */
    size_t table_cap;
    ra__sort_key_t *keys; /* streams by rank, then each stream's rows by subject */
    size_t keys_cap;
    size_t n_streams;
    ra_slice_t **pre; /* slices allocated before the drain */
    size_t pre_cap;
    ra_slice_t **batch; /* slices built by this rollover, in seal order */
    size_t batch_cap;
    struct ra__head_undo { /* heads as they were, should the WAL refuse the batch */
        struct ra__head *head;
        struct ra__head old;
    } * undo;
    size_t undo_cap, n_undo;
} ra__seal_scratch_t;

/* What step 3 decided: the first `fit` stream-windows (in rank order) are sealed now, as
 * `need` slices; what stopped it (an RA_REJ_* reason, or -1: everything fits), and the last
 * window index that is then complete. */
typedef struct ra__seal_plan {
    size_t n;        /* candidate rows (step 1) */
    size_t S;        /* stream-windows (step 2) */
    size_t fit;      /* of those, sealed now */
    size_t need;     /* slices they make (an upper bound: merging only shrinks rows) */
    int stop_reason; /* RA_REJ_* or -1 */
    int64_t w_fit;   /* every window <= w_fit is complete after this rollover */
} ra__seal_plan_t;

/* A rollover's batch, between its two halves. */
typedef struct ra__seal_batch {
    ra_slice_t *const *slices; /* built by steps 1-5, in seal order (the scratch's array) */
    size_t n;
    bool open;  /* ra__seal_end must finish it */
    bool taken; /* counts were taken from the plane (frozen, with a WAL) for these slices */
    int64_t now_ms, sealed;
    uint64_t late, rows_sealed;
    ra__seal_plan_t plan;
} ra__seal_batch_t;

/* seal.c: the rollover in two halves (under the seal lock, in the plane's one sealer), and
 * the recovery of a seal a crash interrupted (at open, after the journal recovered the WAL).
 * meter.c runs them:
 *
 *   ra__seal_begin(m, now, &b);                          steps 1-5: the batch, counts taken
 *   commit_rc = b.taken ? ra__journal_commit(m, b.slices, b.n, now) : 0;     step 6
 *   if (b.open) ra__seal_end(m, &b, commit_rc, ...);     step 6's outcome, step 7
 *
 * so sealing never names the WAL: the journal owns the commit and its room. begin returns 0
 * or a negative RA_E* code (then nothing was taken and b.open is false); end returns what
 * the rollover answers. */
RA_INTERNAL int ra__seal_begin(ra_meter_t *m, int64_t now_ms, ra__seal_batch_t *b);
RA_INTERNAL int ra__seal_end(ra_meter_t *m, ra__seal_batch_t *b, int commit_rc, size_t *n_sealed,
                             size_t *n_in_ring);
RA_INTERNAL void ra__seal_scratch_free(ra__seal_scratch_t *sc);
RA_INTERNAL void ra__seal_recover(ra_meter_t *m);
/* seal_sort.c */
RA_INTERNAL void ra__sort_keys(ra__sort_key_t *a, size_t n);

#endif /* RA_SEAL_H */
