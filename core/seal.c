/* Sealing (C-3): turn every ended, unsealed window into slices.
 *
 *   1. Scan: visit the slots marked in the bitmap. LIVE entries with a count stamped in an
 *      ended window become candidate rows; idle entries are retired so their slots can be
 *      reused (I-7).
 *   2. Plan: sort candidates by (window, tenant, dimension, subject); take streams in that
 *      order while their slices fit in the pending ring and their heads in the head table.
 *      What does not fit stays in the plane, counted, and the next rollover retries it:
 *      nothing is lost and nothing is merged. The boundary counter passes a window only
 *      when all its streams are sealed.
 *   3. Drain: one 16-byte CAS per entry swaps its count to zero. An add lands either before
 *      that CAS (in this slice) or after it (in a later one): exactly once (PRODUCT.md §6).
 *   4. Build: per stream, merge duplicate subjects, encode v1, BLAKE3, link prev_b3, assign
 *      seq = head + 1, push to the pending ring, advance the head and the boundary counter.
 *
 * Runs under the meter's seal mutex, in the plane's one sealer process. Writers are never
 * waited for. A row whose window was sealed already (a writer preempted across the
 * boundary) is sealed into the oldest window being sealed now and counted in
 * accounting_late_rows_total: late, never lost, never twice. */
#include "internal.h"

#include <stdlib.h>

static int cmp_rows(const void *pa, const void *pb) {
    const ra__seal_row_t *a = pa, *b = pb;
    if (a->win != b->win) return a->win < b->win ? -1 : 1;
    int c = memcmp(a->tenant, b->tenant, 16);
    if (c) return c;
    if (a->dim != b->dim) return a->dim < b->dim ? -1 : 1;
    return memcmp(a->subject, b->subject, 16);
}

static bool same_stream(const ra__seal_row_t *a, const ra__seal_row_t *b) {
    return a->win == b->win && a->dim == b->dim && memcmp(a->tenant, b->tenant, 16) == 0;
}

static uint64_t head_hash(const uint8_t tenant[16], uint32_t dim) {
    static const uint8_t zero[16];
    return ra__key_hash(tenant, zero, dim + 0x5eed);
}

/* The head of a stream, created empty (seq 0, prev all zero) when absent. NULL when the
 * table is at its bound (3/4 of heads_cap keeps probes short). */
static ra__head_t *head_get(ra_meter_t *m, const uint8_t tenant[16], uint32_t dim, bool create) {
    uint32_t cap = m->hdr->heads_cap, mask = cap - 1;
    uint32_t i = (uint32_t)head_hash(tenant, dim) & mask;
    for (uint32_t n = 0; n < cap; n++, i = (i + 1) & mask) {
        ra__head_t *h = &m->heads[i];
        if (!h->used) {
            if (!create) return NULL;
            uint32_t used = atomic_load_explicit(&m->hdr->heads_used, memory_order_relaxed);
            if ((uint64_t)used + 1 > (uint64_t)cap * 3 / 4) return NULL;
            memset(h, 0, sizeof *h);
            memcpy(h->tenant, tenant, 16);
            h->dim = (uint16_t)dim;
            h->used = 1;
            atomic_store_explicit(&m->hdr->heads_used, used + 1, memory_order_relaxed);
            return h;
        }
        if (h->dim == dim && memcmp(h->tenant, tenant, 16) == 0) return h;
    }
    return NULL;
}

/* Retires an idle LIVE entry (count 0, stamped in a sealed window). The TOMB stamp makes
 * every later CAS by a writer holding this generation fail; the bit is cleared before the
 * slot becomes DEAD (claimable), so a new claim's mark can never be erased. */
static bool retire_live(ra_meter_t *m, uint32_t idx, ra__slot_t *s, uint64_t id, ra__u128 seen) {
    uint32_t gen = ra__ident_gen(id);
    ra__u128 tomb = ra__pair_make(0, ra__stamp(RA_WIN_TOMB, gen));
    if (!ra__pair_cas(&s->pair, &seen, tomb)) return false; /* a writer got there first */
    atomic_fetch_and_explicit(&m->bitmap[idx / 64], ~(1ull << (idx % 64)), memory_order_acq_rel);
    atomic_store_explicit(&s->ident, ra__ident(gen, 0, RA_SLOT_DEAD), memory_order_release);
    atomic_fetch_sub_explicit(&m->hdr->live_entries, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->hdr->metrics.reclaimed, 1, memory_order_relaxed);
    return true;
}

/* Step 1. Returns the number of candidate rows. */
static size_t scan(ra_meter_t *m, uint32_t w_end, int64_t sealed, uint32_t cur) {
    size_t nslots = (size_t)m->hdr->shards * m->hdr->slots_per_shard;
    size_t nwords = (nslots + 63) / 64, n = 0;
    uint64_t stale = 0;
    for (size_t wi = 0; wi < nwords; wi++) {
        uint64_t bits = atomic_load_explicit(&m->bitmap[wi], memory_order_acquire);
        while (bits) {
            uint32_t idx = (uint32_t)(wi * 64 + (size_t)__builtin_ctzll(bits));
            bits &= bits - 1;
            ra__slot_t *s = &m->slots[idx];
            uint64_t id = atomic_load_explicit(&s->ident, memory_order_acquire);
            uint32_t state = ra__ident_state(id);
            if (state == RA_SLOT_CLAIMED) {
                /* A claim still open a window later belongs to a writer that died (or
                 * stalls) between claiming and publishing. It is never retired: a stalled
                 * writer that resumed would write its key over the slot's next owner. The
                 * slot is lost to this plane (one per such death), and counted. */
                uint32_t cw = atomic_load_explicit(&s->claim_win, memory_order_relaxed);
                if ((int64_t)cw + 1 < (int64_t)cur) stale++;
                continue;
            }
            if (state != RA_SLOT_LIVE) continue;
            ra__u128 p = ra__pair_load(&s->pair);
            uint64_t st = ra__pair_stamp(p);
            uint32_t w = ra__stamp_win(st);
            if (ra__stamp_gen(st) != ra__ident_gen(id) || w == RA_WIN_TOMB) continue;
            if (ra__pair_count(p) == 0) {
                /* Idle for a whole sealed window: give the slot back. */
                if ((int64_t)w <= sealed) retire_live(m, idx, s, id, p);
                continue;
            }
            if (w > w_end) continue; /* current (or future) window: not ended */
            if (n == m->rows_cap) break; /* cannot happen: LIVE entries <= entries_cap */
            ra__seal_row_t *r = &m->rows[n++];
            r->slot = idx;
            r->stamp = st;
            /* Late rows go to the oldest window sealed now (never to a sealed one). */
            r->win = (int64_t)w <= sealed ? (uint32_t)(sealed + 1) : w;
            r->dim = (uint16_t)ra__ident_dim(id);
            memcpy(r->tenant, s->tenant, 16);
            memcpy(r->subject, s->subject, 16);
            r->count = (int64_t)w <= sealed ? 1 : 0; /* marks a late row until drained */
        }
    }
    atomic_store_explicit(&m->hdr->metrics.stale_claims, stale, memory_order_relaxed);
    return n;
}

/* Step 3: take the entry's count. The stamp cannot change while the count is non-zero
 * (writers only restamp drained pairs, only the sealer drains), so the CAS loop only races
 * with adds; the stamp check is the belt to those braces. */
static uint64_t drain(ra_meter_t *m, const ra__seal_row_t *r) {
    ra__slot_t *s = &m->slots[r->slot];
    ra__u128 cur = ra__pair_peek(&s->pair);
    for (;;) {
        uint64_t c = ra__pair_count(cur);
        if (c == 0 || ra__pair_stamp(cur) != r->stamp) return 0;
        if (ra__pair_cas(&s->pair, &cur, ra__pair_make(0, r->stamp))) return c;
    }
}

static size_t max_rows_per_slice(size_t header_len) {
    return (RA_FRAME_MAX - header_len) / RA_ENC_ROW;
}

/* Step 4 for one stream-window: rows [a, b) are sorted and merged. */
static int build_stream(ra_meter_t *m, const ra__seal_row_t *rows, size_t a, size_t b,
                        size_t *n_sealed) {
    const ra__seal_row_t *r0 = &rows[a];
    ra__head_t *h = head_get(m, r0->tenant, r0->dim, true);
    RA_ASSERT(h); /* reserved during planning */
    ra__slice_hdr_in_t in = {
        .tenant = r0->tenant,
        .dimension = m->dim_names[r0->dim],
        .window_start_s = (int64_t)r0->win * m->window_len_s,
        .window_len_s = m->window_len_s,
        .amnesia = (int)m->hdr->amnesia,
        .host = m->host,
        .version = RA_VERSION_STRING,
    };
    in.row_count = 0;
    size_t per = max_rows_per_slice(ra__encode_size(&in));
    while (a < b) {
        size_t n = b - a < per ? b - a : per;
        in.row_count = (uint32_t)n;
        in.seq = h->seq + 1;
        in.prev_b3 = h->b3;
        size_t len = ra__encode_size(&in);
        ra_slice_t *s = ra__slice_alloc(len);
        if (!s) return RA_ENOMEM;
        uint8_t *p = ra__slice_buffer(s);
        p += ra__encode_header(&in, p);
        for (size_t i = 0; i < n; i++, p += RA_ENC_ROW)
            ra__encode_row(p, rows[a + i].subject, rows[a + i].count);
        int rc = ra__slice_finish(s);
        RA_ASSERT(rc == 0); /* the sealer must never emit a non-canonical slice */
        h->seq = in.seq;
        h->last_window_start_s = in.window_start_s;
        memcpy(h->b3, ra_slice_b3(s), RA_B3_LEN);
        ra__pending_push(&m->pending, s);
        (*n_sealed)++;
        a += n;
    }
    return 0;
}

/* Merges rows of the same key (duplicate entries, late rows) in place; returns new end. */
static size_t merge_dups(ra_meter_t *m, ra__seal_row_t *rows, size_t a, size_t b) {
    size_t w = a;
    for (size_t i = a; i < b; i++) {
        if (rows[i].count == 0) continue; /* drained to zero by nothing: skip */
        if (w > a && memcmp(rows[w - 1].subject, rows[i].subject, 16) == 0) {
            uint64_t s = rows[w - 1].count + rows[i].count;
            if (s < rows[i].count) { /* I-16 */
                s = UINT64_MAX;
                atomic_fetch_add_explicit(&m->hdr->metrics.overflow[rows[i].dim], 1,
                                          memory_order_relaxed);
            }
            rows[w - 1].count = s;
        } else {
            rows[w++] = rows[i];
        }
    }
    return w;
}

int ra__seal(ra_meter_t *m, int64_t now_ms, size_t *n_sealed) {
    *n_sealed = 0;
    uint32_t cur;
    int rc = ra__window_of_ms(m, now_ms, &cur);
    if (rc != 0) return rc;
    int64_t sealed = atomic_load_explicit(&m->hdr->sealed_through, memory_order_acquire);
    /* I-15: the boundary counter only moves forward. A clock that drifts or jumps back
     * finds nothing to seal; a boundary is sealed once. */
    if ((int64_t)cur - 1 <= sealed) return 0;
    uint32_t w_end = cur - 1;

    size_t n = scan(m, w_end, sealed, cur);
    qsort(m->rows, n, sizeof *m->rows, cmp_rows);

    /* Step 2: how many streams fit? Streams are taken in (window, tenant, dimension)
     * order until the ring or the head table is full; the boundary counter only passes
     * windows whose every stream was sealed. */
    size_t room = ra__pending_room(&m->pending);
    size_t fit_rows = 0, need = 0;
    int stop_reason = -1;
    for (size_t j = 0; j < n;) {
        size_t k = j + 1;
        while (k < n && same_stream(&m->rows[j], &m->rows[k])) k++;
        ra__slice_hdr_in_t in = {.dimension = m->dim_names[m->rows[j].dim],
                                 .host = m->host, .version = RA_VERSION_STRING};
        size_t per = max_rows_per_slice(ra__encode_size(&in));
        size_t slices = (k - j + per - 1) / per;
        if (need + slices > room) {
            stop_reason = RA_REJ_PENDING_FULL;
            break;
        }
        if (!head_get(m, m->rows[j].tenant, m->rows[j].dim, true)) {
            stop_reason = RA_REJ_HEADS_FULL;
            break;
        }
        need += slices;
        fit_rows = k;
        j = k;
    }
    /* Every window before the first unsealed stream's is complete. */
    int64_t w_fit = stop_reason < 0 ? (int64_t)w_end : (int64_t)m->rows[fit_rows].win - 1;

    /* Step 3 + 4 */
    uint64_t late = 0, rows_sealed = 0;
    for (size_t i = 0; i < fit_rows; i++) {
        if (m->rows[i].count) late++;
        m->rows[i].count = drain(m, &m->rows[i]);
    }
    for (size_t i = 0; i < fit_rows;) {
        size_t j = i + 1;
        while (j < fit_rows && same_stream(&m->rows[i], &m->rows[j])) j++;
        size_t end = merge_dups(m, m->rows, i, j);
        if (end > i) {
            rows_sealed += end - i;
            rc = build_stream(m, m->rows, i, end, n_sealed);
            if (rc != 0) break;
        }
        i = j;
    }
    ra__plane_metrics_t *mt = &m->hdr->metrics;
    atomic_fetch_add_explicit(&mt->late_rows, late, memory_order_relaxed);
    atomic_fetch_add_explicit(&mt->sealed_rows, rows_sealed, memory_order_relaxed);
    atomic_fetch_add_explicit(&mt->sealed_slices, *n_sealed, memory_order_relaxed);
    if (w_fit > sealed) {
        /* The first rollover counts from the first window that held counts. */
        int64_t first = sealed == RA_SEALED_NONE
                            ? (fit_rows ? (int64_t)m->rows[0].win : w_fit + 1)
                            : sealed + 1;
        atomic_fetch_add_explicit(&mt->sealed_windows, (uint64_t)(w_fit - first + 1),
                                  memory_order_relaxed);
        atomic_store_explicit(&m->hdr->sealed_through, w_fit, memory_order_release);
    }
    if (rc != 0) return rc;
    if (stop_reason >= 0) {
        ra__count_reject(m, stop_reason);
        ra__log(m, RA_LOG_WARN,
                "rollover: %s; counts from window index %lld on stay in the plane until "
                "there is room (pending %zu/%zu)",
                stop_reason == RA_REJ_PENDING_FULL ? "pending ring full"
                                                   : "stream head table full",
                (long long)(w_fit + 1), m->pending.live, m->pending.cap);
        return RA_ECAPACITY;
    }
    return 0;
}
