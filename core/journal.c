/* The seal-to-WAL journal: the meter's side of its write-ahead log (wal.c is the files).
 * At open, recovery of every un-ACKed slice into the pending ring and of every stream head;
 * then the ACK bookkeeping, compaction with the heads checkpoint, and the degraded flag
 * while the WAL is full. No lock here: the callers (meter.c, seal.c) hold the seal lock,
 * and nothing here calls back up into them. */
#include "internal.h"
#include "wal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct {
    ra_meter_t *m;
    char *err;
    size_t errlen;
} recover_t;

static int dim_of(recover_t *r, const char *dimension) {
    int d = ra__dimension_of(r->m, dimension, strlen(dimension));
    if (d < 0)
        ra__errbuf(r->err, r->errlen,
                   "the WAL holds dimension '%s', which this meter does not register: add it "
                   "to the dimensions",
                   dimension);
    return d;
}

static int advance_head(recover_t *r, const uint8_t tenant[16], int dim, uint64_t seq,
                        int64_t last_ws, const uint8_t b3[32]) {
    int rc = ra__heads_advance(r->m, tenant, (uint32_t)dim, seq, last_ws, b3);
    if (rc == RA_ECAPACITY)
        ra__errbuf(r->err, r->errlen,
                   "the WAL holds more streams than the stream-head table "
                   "(2 x capacity_rows): raise capacity_rows");
    return rc;
}

static int on_head(void *ud, const uint8_t tenant[16], const char *dimension, uint64_t seq,
                   int64_t last_ws, const uint8_t b3[32]) {
    recover_t *r = ud;
    int d = dim_of(r, dimension);
    return d < 0 ? RA_EINCOMPAT : advance_head(r, tenant, d, seq, last_ws, b3);
}

/* Each un-ACKed slice goes to the pending ring exactly once, in WAL order (seq order per
 * stream); its stream's head follows it. */
static int on_slice(void *ud, ra_slice_t *s, uint64_t frame_seq) {
    recover_t *r = ud;
    ra_meter_t *m = r->m;
    int d = dim_of(r, ra_slice_dimension(s));
    int rc = d < 0 ? RA_EINCOMPAT : 0;
    if (rc == 0 && ra__pending_room(&m->pending) == 0) {
        ra__errbuf(r->err, r->errlen,
                   "the WAL holds more un-ACKed slices than pending_slices_cap (%zu): raise "
                   "pending_slices_cap",
                   m->pending.cap);
        rc = RA_ECAPACITY;
    }
    if (rc == 0) {
        ra_slice_id_t id;
        ra_tenant_t t;
        ra_slice_get_id(s, &id);
        ra_slice_get_tenant(s, &t);
        rc = advance_head(r, t.b, d, id.seq, id.window_start_s, ra_slice_b3(s));
    }
    if (rc != 0) {
        ra_slice_unref(s);
        return rc;
    }
    ra__slice_set_wal_seq(s, frame_seq);
    ra__pending_push(&m->pending, s);
    return 0;
}

static void on_problem(void *ud, const char *what, const char *file, uint64_t off,
                       const char *detail) {
    recover_t *r = ud;
    ra__log(r->m, RA_LOG_WARN, "wal recovery: %s in %s at offset %" PRIu64 "%s%s", what, file, off,
            detail[0] ? ": " : "", detail);
}

int ra__journal_open(ra_meter_t *m, const ra_config_t *cfg, char *err, size_t errlen) {
    if (m->shm_fd >= 0) {
        /* The WAL belongs to the plane's one sealer. */
        int rc = ra__plane_sealer_lock(m);
        if (rc != 0) {
            ra__errbuf(err, errlen,
                       rc == RA_EBUSY ? "another process seals the plane %s: only the sealer "
                                        "opens a WAL"
                                      : "cannot lock the plane %s",
                       cfg->shm_path);
            return rc;
        }
    }
    m->wal = calloc(1, sizeof *m->wal);
    if (!m->wal) return RA_ENOMEM;
    /* The WAL is the authority on chains: heads a crashed sealer advanced for a batch that
     * never became durable must not survive. They are rebuilt from the checkpoint and the
     * segments. */
    ra__heads_reset(m);
    recover_t r = {m, err, errlen};
    ra__wal_visitor_t v = {&r, on_head, on_slice, on_problem};
    uint32_t entries = cfg->wal_max_entries ? cfg->wal_max_entries : cfg->pending_slices_cap;
    int rc = ra__wal_open(m->wal, m->io, cfg->wal_dir, cfg->wal_max_bytes, entries,
                          cfg->wal_max_age_s, false, &v, err, errlen);
    if (rc != 0) {
        free(m->wal);
        m->wal = NULL;
        return rc;
    }
    const ra__wal_stats_t *st = &m->wal->stats;
    ra__log(m, RA_LOG_INFO,
            "wal %s: %zu segments, %" PRIu64 " slices replayed into pending, %" PRIu64
            " corrupt frames skipped, %" PRIu64 " torn bytes cut",
            cfg->wal_dir, m->wal->nsegs, st->replayed, st->corrupt_frames, st->torn_bytes);
    ra__journal_room_changed(m, ra__meter_now_ms(m), false);
    return 0;
}

void ra__journal_close(ra_meter_t *m) {
    if (!m->wal) return;
    ra__wal_close(m->wal);
    free(m->wal);
    m->wal = NULL;
}

void ra__journal_acked(ra_meter_t *m, uint64_t wal_seq) {
    if (m->wal) ra__wal_acked(m->wal, wal_seq);
}

/* While the WAL refuses rollovers the meter is degraded (I-8: writes fail first, readiness
 * says so); it recovers once ACKs and compaction have made room. */
void ra__journal_room_changed(ra_meter_t *m, int64_t now_ms, bool refused) {
    if (!m->wal) return;
    _Atomic uint32_t *d = &m->hdr->degraded;
    if (refused) {
        atomic_fetch_or_explicit(d, RA_DEGRADED_WAL, memory_order_relaxed);
        return;
    }
    if ((atomic_load_explicit(d, memory_order_relaxed) & RA_DEGRADED_WAL) &&
        ra__wal_check_room(m->wal, 1, RA_FRAME_MAX, now_ms) == 0) {
        atomic_fetch_and_explicit(d, ~RA_DEGRADED_WAL, memory_order_relaxed);
        ra__log(m, RA_LOG_WARN, "wal has room again: no longer degraded");
    }
}

/* ACKed frames count against the caps until compaction drops them (meter.c on request,
 * seal.c before it refuses a rollover for a full WAL). */
int ra__journal_compact(ra_meter_t *m) {
    if (!m->wal) return 0;
    size_t removed = 0;
    int rc = ra__wal_compact(m->wal, ra__heads_each, m, &removed);
    ra__journal_room_changed(m, ra__meter_now_ms(m), false);
    return rc;
}
