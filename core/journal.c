/* The seal-to-WAL journal: the meter's side of its write-ahead log (wal.c is the files).
 * At open, recovery of every un-ACKed slice into the pending ring and of every stream head;
 * then a rollover's room and group commit, the ACK bookkeeping, compaction with the heads
 * checkpoint, and the degraded flag while the WAL is full. No lock here: the callers
 * (meter.c, seal.c) hold the seal lock, and nothing here calls back up into them. */
#include "internal.h"
#include "wal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void note_reserve(ra_meter_t *m);
static void room_again(ra_meter_t *m, int64_t now_ms);

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

/* A stream whose replayed chain skips seqs: the slices between were in a segment that is
 * gone or damaged. Nothing downstream can accept the later ones (gap) until an operator
 * accepts the loss (docs: failure modes), so it is said here, once per break, with the
 * stream and the range, and counted (accounting_wal_chain_breaks_total). */
static void chain_break(recover_t *r, const uint8_t tenant[16], int dim, uint64_t from, uint64_t to,
                        uint64_t at) {
    ra_tenant_t t;
    char ts[RA_UUID_STR_LEN + 1];
    memcpy(t.b, tenant, 16);
    ra_tenant_format(&t, ts);
    r->m->wal->stats.chain_breaks++;
    ra__log(r->m, RA_LOG_ERROR,
            "wal recovery: stream %s/%s misses seq %" PRIu64 "..%" PRIu64 " before seq %" PRIu64
            " (a segment is gone or damaged): the downstream will answer gap for this "
            "stream until the loss is accepted (ron-accounting streams accept-loss)",
            ts, r->m->dim_names[dim], from, to, at);
}

/* Each un-ACKed slice goes to the pending ring exactly once, in WAL order (seq order per
 * stream), until the ring is full; the rest stays on disk (the backlog) and is read back as
 * ACKs make room. Its stream's head follows it either way. */
static int on_slice(void *ud, ra_slice_t *s, uint64_t frame_seq) {
    recover_t *r = ud;
    ra_meter_t *m = r->m;
    int d = dim_of(r, ra_slice_dimension(s));
    int rc = d < 0 ? RA_EINCOMPAT : 0;
    if (rc == 0) {
        ra_slice_id_t id;
        ra_tenant_t t;
        ra_slice_get_id(s, &id);
        ra_slice_get_tenant(s, &t);
        ra__head_t *h = ra__head_get(m, t.b, (uint32_t)d, false);
        uint64_t prev = h ? h->seq : 0;
        if (id.seq > prev + 1) chain_break(r, t.b, d, prev + 1, id.seq - 1, id.seq);
        rc = advance_head(r, t.b, d, id.seq, id.window_start_s, ra_slice_b3(s));
    }
    if (rc != 0) {
        ra_slice_unref(s);
        return rc;
    }
    ra__slice_set_wal_seq(s, frame_seq);
    ra__journal_publish(m, &s, 1);
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
    uint32_t entries = cfg->wal_max_entries ? cfg->wal_max_entries : RA_WAL_ENTRIES_DEFAULT;
    int rc = ra__wal_open(m->wal, m->io, cfg->wal_dir, cfg->wal_max_bytes, entries,
                          cfg->wal_max_age_s, false, &v, err, errlen);
    if (rc != 0) {
        free(m->wal);
        m->wal = NULL;
        return rc;
    }
    const ra__wal_stats_t *st = &m->wal->stats;
    ra__log(m, RA_LOG_INFO,
            "wal %s: %zu segments, %" PRIu64 " slices replayed (%" PRIu64
            " of them wait on disk for room in pending), %" PRIu64
            " corrupt frames skipped, %" PRIu64 " torn bytes cut, %" PRIu64 " chain breaks",
            cfg->wal_dir, m->wal->nsegs, st->replayed, m->backlog.spilled, st->corrupt_frames,
            st->torn_bytes, st->chain_breaks);
    note_reserve(m);
    room_again(m, ra__meter_now_ms(m));
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
void ra__journal_refused(ra_meter_t *m) {
    if (!m->wal) return;
    m->wal->stats.full_refusals++;
    atomic_fetch_or_explicit(&m->hdr->degraded, RA_DEGRADED_WAL, memory_order_relaxed);
}

static void room_again(ra_meter_t *m, int64_t now_ms) {
    if (!m->wal) return;
    _Atomic uint32_t *d = &m->hdr->degraded;
    if ((atomic_load_explicit(d, memory_order_relaxed) & RA_DEGRADED_WAL) &&
        ra__wal_check_room(m->wal, 1, RA_FRAME_MAX, now_ms) == 0) {
        atomic_fetch_and_explicit(d, ~RA_DEGRADED_WAL, memory_order_relaxed);
        ra__log(m, RA_LOG_WARN, "wal has room again: no longer degraded");
    }
}

/* The compaction reserve (wal.c) is best effort; when it cannot be made, compaction on a
 * full disk may not be able to free space: said once per failure, and when it is back. */
static void note_reserve(ra_meter_t *m) {
    ra__wal_t *w = m->wal;
    if (w->reserve_errno && !w->reserve_logged) {
        ra__log(m, RA_LOG_WARN,
                "wal %s: cannot make the compaction reserve (%s): on a full disk, compaction "
                "may then be unable to free space",
                w->dir, strerror(w->reserve_errno));
        w->reserve_logged = true;
    } else if (!w->reserve_errno && w->reserve_logged) {
        ra__log(m, RA_LOG_WARN, "wal %s: the compaction reserve is back", w->dir);
        w->reserve_logged = false;
    }
}

/* ACKed frames count against the caps until compaction drops them (meter.c on request,
 * ra__journal_fits before a rollover's plan stops for a full WAL). */
int ra__journal_compact(ra_meter_t *m) {
    if (!m->wal) return 0;
    size_t removed = 0;
    int rc = ra__wal_compact(m->wal, ra__heads_each, m, &removed);
    note_reserve(m);
    room_again(m, ra__meter_now_ms(m));
    return rc;
}

bool ra__journal_in_doubt(const ra_meter_t *m) {
    return m->wal && m->wal->failed;
}

bool ra__journal_has_segment(const ra_meter_t *m, uint64_t id) {
    return m->wal && ra__wal_has_segment(m->wal, id);
}

/* ---- a rollover's side: room for its plan, its group commit ---------------------------- */

void ra__journal_room_init(ra_meter_t *m, int64_t now_ms, ra__journal_room_t *r) {
    memset(r, 0, sizeof *r);
    r->frames = r->bytes = UINT64_MAX;
    r->now_ms = now_ms;
    if (m->wal) ra__wal_room(m->wal, now_ms, &r->frames, &r->bytes);
}

bool ra__journal_fits(ra_meter_t *m, ra__journal_room_t *r, uint64_t n, uint64_t payload_bytes) {
    uint64_t bytes = payload_bytes + n * (RA_WAL_FRAME_HDR + RA_WAL_FRAME_TRAILER);
    bool fits = r->frames_used + n <= r->frames && r->bytes_used + bytes <= r->bytes;
    if (!fits && !r->reclaimed && m->wal) {
        r->reclaimed = true;
        if (ra__journal_compact(m) == 0) {
            ra__wal_room(m->wal, r->now_ms, &r->frames, &r->bytes);
            fits = r->frames_used + n <= r->frames && r->bytes_used + bytes <= r->bytes;
        }
    }
    if (fits) {
        r->frames_used += n;
        r->bytes_used += bytes;
    }
    return fits;
}

/* Why a group commit failed, said once: a full file system (the caps were checked by the
 * plan, so it is the disk itself), or another write error. */
static void commit_failed(ra_meter_t *m, int rc) {
    ra__wal_t *w = m->wal;
    if (rc == RA__EINDOUBT) {
        /* The pairs stay frozen (nothing lost while this process lives) and seal_intent
         * names the segment: a restart looks at the disk and releases or unfreezes them. */
        ra__log(m, RA_LOG_ERROR,
                "wal: a segment's directory entry could not be made durable or undone; "
                "sealing stops until a restart (counts are kept in the plane)");
    } else if (rc == RA_EPERSISTFULL) {
        ra__count_reject(m, RA_REJ_WAL_FULL);
        ra__journal_refused(m);
        ra__log(m, RA_LOG_ERROR,
                "rollover: the file system holding the WAL %s is full (%s; the WAL holds "
                "%llu slices, %llu bytes, within its caps); nothing is sealed until space is "
                "freed, counts stay in the plane, the meter is degraded",
                w->dir, strerror(w->last_errno ? w->last_errno : ENOSPC),
                (unsigned long long)w->entries, (unsigned long long)w->bytes);
    } else {
        ra__log(m, RA_LOG_ERROR,
                "rollover: writing the WAL %s failed (%s); nothing is sealed, "
                "counts stay in the plane and the next rollover retries",
                w->dir, w->last_errno ? strerror(w->last_errno) : ra_strerror(rc));
    }
}

int ra__journal_commit(ra_meter_t *m, ra_slice_t *const *batch, size_t n, int64_t now_ms) {
    if (!m->wal) return 0;
    uint64_t bytes = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        ra_slice_bytes(batch[i], &len);
        bytes += RA_WAL_FRAME_HDR + len + RA_WAL_FRAME_TRAILER;
    }
    int rc = n ? ra__wal_check_room(m->wal, n, bytes + RA_WAL_SEG_HDR, now_ms) : 0;
    if (rc == 0 && n) rc = ra__wal_append(m->wal, batch, n, now_ms, &m->hdr->seal_intent, &first);
    if (rc != 0) {
        commit_failed(m, rc);
        return rc;
    }
    for (size_t i = 0; i < n; i++)
        ra__slice_set_wal_seq(batch[i], first + i);
    room_again(m, now_ms);
    return 0;
}

/* ---- the backlog: the WAL beyond the pending ring ------------------------------------- */

/* The backlog's counters change under the seal lock and are read without it (metrics,
 * ra_meter_backlog): atomic adds. */
static void bump(uint64_t *c, int64_t d) {
    __atomic_fetch_add(c, (uint64_t)d, __ATOMIC_RELAXED);
}

size_t ra__journal_publish(ra_meter_t *m, ra_slice_t *const *batch, size_t n) {
    ra__backlog_t *b = &m->backlog;
    size_t pushed = 0;
    for (size_t i = 0; i < n; i++) {
        ra_slice_t *s = batch[i];
        if (b->spill_seq == 0 && ra__pending_room(&m->pending) > 0) {
            ra__pending_push(&m->pending, s);
            pushed++;
            continue;
        }
        /* Without a WAL the plan (seal.c step 3) never takes more than the ring holds. */
        RA_ASSERT(m->wal && ra__slice_wal_seq(s) != 0);
        if (b->spill_seq == 0) b->spill_seq = ra__slice_wal_seq(s);
        bump(&b->spilled, 1);
        bump(&b->spilled_total, 1);
        ra_slice_unref(s); /* durable in its segment: read back when there is room */
    }
    return pushed;
}

/* Reads one frame of a segment into a slice; NULL when it is no longer readable. */
static ra_slice_t *read_frame(ra__segr_t *r, uint64_t off) {
    size_t avail;
    int rc;
    const uint8_t *fb = ra__segr_at(r, off, RA_WAL_FRAME_MAX_BYTES, &avail, &rc);
    uint64_t seq;
    const uint8_t *payload;
    size_t plen;
    ra_slice_t *s = NULL;
    if (!fb || !ra__wal_frame_parse(fb, avail, &seq, &payload, &plen) ||
        ra__slice_decode_trusted(payload, plen, payload + plen, &s) != 0)
        return NULL;
    return s;
}

void ra__journal_refill(ra_meter_t *m) {
    ra__backlog_t *b = &m->backlog;
    if (!m->wal || b->spill_seq == 0 || ra__pending_room(&m->pending) == 0) return;
    ra__wal_t *w = m->wal;
    for (size_t i = 0; i < w->nsegs; i++) {
        ra__wal_seg_t *sg = &w->segs[i];
        if (sg->frames == 0 || sg->seqs[sg->frames - 1] < b->spill_seq) continue;
        char path[4200];
        snprintf(path, sizeof path, "%s/%016" PRIx64 ".seg", w->dir, sg->id);
        ra__segr_t r;
        if (ra__segr_open(&r, w->io, path) != 0) {
            bump(&b->refill_errors, 1);
            ra__log(m, RA_LOG_ERROR, "backlog: cannot read %s; its slices wait in the WAL", path);
            return; /* retried at the next ACK or rollover */
        }
        for (uint32_t k = 0; k < sg->frames; k++) {
            uint64_t seq = sg->seqs[k];
            if (seq < b->spill_seq || sg->acked[k]) continue;
            if (ra__pending_room(&m->pending) == 0) {
                b->spill_seq = seq;
                ra__segr_close(&r);
                return;
            }
            ra_slice_t *s = read_frame(&r, sg->offs[k]);
            bump(&b->spilled, -1);
            if (!s) {
                /* Damaged since recovery read it: lost like a corrupt frame, and its
                 * stream will stop on a gap that the operator resolves. */
                bump(&b->refill_errors, 1);
                w->stats.corrupt_frames++;
                ra__wal_acked(w, seq);
                ra__log(m, RA_LOG_ERROR,
                        "backlog: frame seq %" PRIu64 " in %s is no longer "
                        "readable; its slice is lost",
                        seq, path);
                continue;
            }
            ra__slice_set_wal_seq(s, seq);
            ra__pending_push(&m->pending, s);
            bump(&b->refilled_total, 1);
            b->spill_seq = seq + 1; /* the frames after it may still wait */
        }
        ra__segr_close(&r);
    }
    b->spill_seq = 0; /* everything spilled is back in the ring */
    __atomic_store_n(&b->spilled, 0, __ATOMIC_RELAXED);
}
