/* Refusals as events: the record path's rejects, kept in a ring in the plane so the daemon
 * can put each one in the audit trail (I-14, AUD-I-35) whichever process refused it (nginx
 * workers have no trail of their own).
 *
 * Writers (any process, any thread) take an append number with one fetch-add and fill the
 * entry it lands on; they never wait and never fail: past RA_REFUSALS unread entries the
 * oldest is overwritten. A reader keeps its own cursor and validates every entry with the
 * entry's seq, before and after copying it (a seqlock), so an entry overwritten or torn
 * meanwhile is counted as lost, never returned wrong. What a reader missed it knows
 * exactly: the append numbers it skipped. The read cursor lives in the plane, so a reader
 * that restarts (the sidecar) goes on where the last one stopped: one reader at a time. */
#include "internal.h"

#include <time.h>
#include <unistd.h>

static const char *const reasons[RA_REJ_COUNT] = {[RA_REJ_CAPACITY] = "capacity",
                                                  [RA_REJ_INVALID] = "invalid",
                                                  [RA_REJ_DEGRADED] = "degraded",
                                                  [RA_REJ_PENDING_FULL] = "pending_full",
                                                  [RA_REJ_HEADS_FULL] = "stream_heads_full",
                                                  [RA_REJ_CONFIG] = "config_change",
                                                  [RA_REJ_WAL_FULL] = "wal_full"};

const char *ra__reject_reason(int reason) {
    return reason >= 0 && reason < RA_REJ_COUNT ? reasons[reason] : "unknown";
}

static void put(_Atomic uint64_t *w, uint64_t v) {
    atomic_store_explicit(w, v, memory_order_relaxed);
}

void ra__note_refusal(ra_meter_t *m, int reason, const ra_tenant_t *t, const ra_subject_t *s,
                      int dim) {
    uint64_t n = atomic_fetch_add_explicit(&m->hdr->refusals_next, 1, memory_order_relaxed);
    ra__refusal_t *e = &m->refusals[n & (RA_REFUSALS - 1)];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    uint64_t words[7] = {(uint64_t)((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000)};
    if (t) memcpy(&words[1], t->b, 16);
    if (s) memcpy(&words[3], s->b, 16);
    words[5] = (uint64_t)(uint32_t)getpid() << 32 |
               (uint64_t)(uint16_t)(dim < 0 ? 0xFFFF : dim) << 16 | (uint64_t)(uint8_t)reason << 8;
    words[6] = 0;
    atomic_store_explicit(&e->seq, 0, memory_order_relaxed);
    atomic_thread_fence(memory_order_release); /* seq 0 is seen before any new word */
    for (int i = 0; i < 7; i++)
        put(&e->w[i], words[i]);
    atomic_store_explicit(&e->seq, n + 1, memory_order_release);
}

int ra_meter_refusals(ra_meter_t *m, ra_refusal_t *out, size_t cap, size_t *n_out,
                      uint64_t *lost_out) {
    if (!m || (cap && !out) || !n_out || !lost_out) return RA_EINVAL;
    uint64_t next = atomic_load_explicit(&m->hdr->refusals_next, memory_order_acquire);
    uint64_t r0 = atomic_load_explicit(&m->hdr->refusals_read, memory_order_acquire);
    uint64_t r = r0, lost = 0;
    size_t k = 0;
    if (next - r > RA_REFUSALS) { /* lapped: those are gone */
        lost += next - r - RA_REFUSALS;
        r = next - RA_REFUSALS;
    }
    while (r < next && k < cap) {
        ra__refusal_t *e = &m->refusals[r & (RA_REFUSALS - 1)];
        uint64_t s1 = atomic_load_explicit(&e->seq, memory_order_acquire);
        if (s1 == r + 1) {
            uint64_t w[7];
            for (int i = 0; i < 7; i++)
                w[i] = atomic_load_explicit(&e->w[i], memory_order_relaxed);
            atomic_thread_fence(memory_order_acquire);
            if (atomic_load_explicit(&e->seq, memory_order_relaxed) == s1) {
                ra_refusal_t *o = &out[k++];
                o->n = r;
                o->at_ms = (int64_t)w[0];
                memcpy(o->tenant.b, &w[1], 16);
                memcpy(o->subject.b, &w[3], 16);
                o->pid = (uint32_t)(w[5] >> 32);
                uint16_t d = (uint16_t)(w[5] >> 16);
                o->dim = d == 0xFFFF ? -1 : (int)d;
                o->reason = ra__reject_reason((int)(uint8_t)(w[5] >> 8));
            } else {
                lost++; /* overwritten while copied */
            }
            r++;
            continue;
        }
        if (s1 > r + 1) { /* a later lap's entry: this one is gone */
            lost++;
            r++;
            continue;
        }
        /* Being written. A live writer finishes within nanoseconds; one found half-written
         * on two reads in a row died there (kill -9 between its fetch-add and its seq). */
        if (m->refusals_stall == r + 1) {
            lost++;
            r++;
            m->refusals_stall = 0;
            continue;
        }
        m->refusals_stall = r + 1;
        break;
    }
    /* The cursor is the plane's: a restarted daemon goes on where the last one stopped
     * (each refusal read once per plane). A second reader meanwhile: this read is void. */
    if (!atomic_compare_exchange_strong_explicit(&m->hdr->refusals_read, &r0, r,
                                                 memory_order_acq_rel, memory_order_acquire))
        return RA_EBUSY;
    *n_out = k;
    *lost_out = lost;
    return 0;
}
