/* Sealing (C-3): turn every ended, unsealed window into slices.
 *
 *   1. Scan: visit the slots marked in the bitmap. LIVE entries with a count stamped in an
 *      ended window become candidate rows (in slot order); idle entries are retired so
 *      their slots can be reused (I-7).
 *   2. Group and order: rows are grouped by stream-window (window, tenant, dimension) with
 *      a hash table, the groups sorted, the rows counting-sorted into their groups and each
 *      group sorted by subject: O(n) plus small sorts, no comparison sort over all rows.
 *   3. Plan: take streams in (window, tenant, dimension) order while their slices fit in
 *      the pending ring and their heads in the head table. What does not fit stays in the
 *      plane, counted, and the next rollover retries it: nothing is lost and nothing is
 *      merged. The boundary counter passes a window only when all its streams are sealed.
 *   4. Take the counts, in slot order (cache- and TLB-friendly), one 16-byte CAS per entry.
 *      Without a WAL the CAS drains the count to zero. With a WAL it FREEZES the pair: the
 *      count stays in the plane, and no writer adds to it, until the segment is durable.
 *      Either way an add lands before that CAS (in this slice) or after it (in a later
 *      one): exactly once (PRODUCT.md §6).
 *   5. Build: per stream, merge duplicate subjects, encode v1, BLAKE3, link prev_b3, assign
 *      seq = head + 1, advance the head.
 *   6. Commit (journal.c, not here). With a WAL the batch is one segment (group commit,
 *      P-9); once it is durable the frozen pairs are released (drained), otherwise they are
 *      unfrozen, the heads put back, and nothing is reported sealed. A sealer killed in
 *      between leaves seal_intent in the plane: the next sealer releases the frozen pairs if
 *      the segment made it to disk, and unfreezes them if not (ra__seal_recover).
 *   7. Publish: the slices go to the pending ring (with a WAL, those the ring has no room
 *      for wait in the WAL: journal.c's backlog) and the boundary counter advances; a
 *      plan that stopped short (step 3) is counted and answered.
 *
 * ra__seal_begin runs steps 1-5 and hands the batch back; meter.c gives it to the journal
 * (step 6, ra__journal_commit), then ra__seal_end settles the taken counts by the outcome
 * and runs step 7. Both run under the meter's seal lock (taken by meter.c, the only place
 * that takes it), in the plane's one sealer process, and call down only: heads.c,
 * pending.c, journal.c (room, publish; never the WAL's files), seal_sort.c. Writers are
 * never waited for. A row whose window was sealed already (a writer preempted across the boundary)
 * is sealed into the oldest window being sealed now and counted in accounting_late_rows_total:
 * late, never lost, never twice. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- scratch ------------------------------------------------------------------------ */

void ra__seal_scratch_free(ra__seal_scratch_t *sc) {
    free(sc->batch);
    free(sc->undo);
    free(sc->pre);
    free(sc->rows);
    free(sc->streams);
    free(sc->table);
    free(sc->keys);
    memset(sc, 0, sizeof *sc);
}

/* Grows *p to hold at least `need` elements (doubling). False when out of memory. */
static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 1024;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

/* Big-endian reads make unsigned word order equal byte (memcmp) order. */
static inline uint64_t be64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return v;
}

static inline uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* ---- step 1: scan --------------------------------------------------------------------- */

/* Retires an idle LIVE entry (count 0, stamped in a sealed window). The TOMB stamp makes
 * every later CAS by a writer holding this generation fail; the bit is cleared before the
 * slot becomes DEAD (claimable), so a new claim's mark can never be erased. */
static void retire_live(ra_meter_t *m, uint32_t idx, ra__slot_t *s, uint64_t id, ra__u128 seen) {
    uint32_t gen = ra__ident_gen(id);
    ra__u128 tomb = ra__pair_make(0, ra__stamp(RA_WIN_TOMB, gen));
    if (!ra__pair_cas(&s->pair, &seen, tomb)) return; /* a writer got there first */
    atomic_fetch_and_explicit(&m->bitmap[idx / 64], ~(1ull << (idx % 64)), memory_order_acq_rel);
    atomic_store_explicit(&s->ident, ra__ident(gen, 0, RA_SLOT_DEAD), memory_order_release);
    atomic_fetch_sub_explicit(&m->hdr->live_entries, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->hdr->metrics.reclaimed, 1, memory_order_relaxed);
}

static size_t scan(ra_meter_t *m, uint32_t w_end, int64_t sealed, uint32_t cur) {
    ra__seal_scratch_t *sc = &m->seal;
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
            ra__u128 p = ra__pair_read(&s->pair);
            uint64_t st = ra__pair_stamp(p);
            uint32_t w = ra__stamp_win(st);
            if (ra__stamp_gen(st) != ra__ident_gen(id) || w == RA_WIN_TOMB) continue;
            if (ra__pair_count(p) == 0) {
                /* Idle for a whole sealed window: give the slot back. */
                if ((int64_t)w <= sealed) retire_live(m, idx, s, id, p);
                continue;
            }
            if (w > w_end) continue; /* current (or future) window: not ended */
            if (n == sc->rows_cap && (n == sc->rows_max || !grow((void **)&sc->rows, &sc->rows_cap,
                                                                 n + 1, sizeof *sc->rows)))
                goto done; /* the rest waits for the next rollover (late, not lost) */
            ra__seal_row_t *r = &sc->rows[n++];
            r->slot = idx;
            r->stamp = st;
            r->late = (int64_t)w <= sealed;
            /* Late rows go to the oldest window sealed now (never to a sealed one). */
            r->win = r->late ? (uint32_t)(sealed + 1) : w;
            r->dim = (uint16_t)ra__ident_dim(id);
            memcpy(r->tenant, s->tenant, 16);
            memcpy(r->subject, s->subject, 16);
            r->count = 0;
        }
    }
done:
    atomic_store_explicit(&m->hdr->metrics.stale_claims, stale, memory_order_relaxed);
    return n;
}

/* ---- step 2: group and order ---------------------------------------------------------- */

static void stream_key(const ra__seal_row_t *r, uint64_t k[3]) {
    k[0] = (uint64_t)r->win << 32 | be32(r->tenant);
    k[1] = be64(r->tenant + 4);
    k[2] = (uint64_t)be32(r->tenant + 12) << 32 | r->dim;
}

/* Returns the number of stream-windows, or 0 with rc set when memory ran out. After it,
 * sc->keys[0..S) holds the streams in (window, tenant, dimension) order (v = sid) and
 * sc->keys[S + first .. S + first + rows) each stream's rows in subject order (v = row). */
static size_t group(ra_meter_t *m, size_t n, int *rc) {
    ra__seal_scratch_t *sc = &m->seal;
    size_t tcap = 64;
    while (tcap < 2 * n)
        tcap *= 2;
    if (!grow((void **)&sc->table, &sc->table_cap, tcap, sizeof *sc->table) ||
        !grow((void **)&sc->streams, &sc->streams_cap, n, sizeof *sc->streams)) {
        *rc = RA_ENOMEM;
        return 0;
    }
    memset(sc->table, 0, tcap * sizeof *sc->table);
    size_t S = 0, mask = tcap - 1;
    for (size_t i = 0; i < n; i++) {
        ra__seal_row_t *r = &sc->rows[i];
        uint64_t k[3];
        stream_key(r, k);
        size_t h = (size_t)((k[0] * 0x9E3779B97F4A7C15ull) ^ (k[1] * 0xC2B2AE3D27D4EB4Full) ^
                            (k[2] * 0x165667B19E3779F9ull));
        h ^= h >> 29;
        for (size_t p = h & mask;; p = (p + 1) & mask) {
            uint32_t e = sc->table[p];
            if (e == 0) {
                ra__seal_stream_t *st = &sc->streams[S];
                memcpy(st->k, k, sizeof k);
                st->rows = 0;
                sc->table[p] = (uint32_t)++S;
                r->sid = (uint32_t)(S - 1);
                break;
            }
            ra__seal_stream_t *st = &sc->streams[e - 1];
            if (st->k[0] == k[0] && st->k[1] == k[1] && st->k[2] == k[2]) {
                r->sid = e - 1;
                break;
            }
        }
        sc->streams[r->sid].rows++;
    }
    if (!grow((void **)&sc->keys, &sc->keys_cap, S + n, sizeof *sc->keys)) {
        *rc = RA_ENOMEM;
        return 0;
    }
    ra__sort_key_t *by_rank = sc->keys, *order = sc->keys + S;
    for (size_t s = 0; s < S; s++) {
        memcpy(by_rank[s].k, sc->streams[s].k, sizeof by_rank[s].k);
        by_rank[s].v = (uint32_t)s;
    }
    ra__sort_keys(by_rank, S);
    uint32_t pos = 0;
    for (size_t r = 0; r < S; r++) {
        ra__seal_stream_t *st = &sc->streams[by_rank[r].v];
        st->rank = (uint32_t)r;
        st->first = st->fill = pos;
        pos += st->rows;
    }
    for (size_t i = 0; i < n; i++) { /* counting sort into groups, scan order kept */
        const ra__seal_row_t *r = &sc->rows[i];
        ra__sort_key_t *o = &order[sc->streams[r->sid].fill++];
        o->k[0] = be64(r->subject);
        o->k[1] = be64(r->subject + 8);
        o->k[2] = 0;
        o->v = (uint32_t)i;
    }
    for (size_t s = 0; s < S; s++)
        ra__sort_keys(order + sc->streams[s].first, sc->streams[s].rows);
    return S;
}

/* ---- steps 4 and 5 --------------------------------------------------------------------- */

/* Takes the entry's count. The stamp cannot change while the count is non-zero (writers
 * only restamp drained pairs, only the sealer drains), so the CAS loop only races with
 * adds; the stamp check is the belt to those braces. */
static uint64_t drain(ra_meter_t *m, const ra__seal_row_t *r) {
    ra__slot_t *s = &m->slots[r->slot];
    ra__u128 cur = ra__pair_peek(&s->pair);
    for (;;) {
        uint64_t c = ra__pair_count(cur);
        if (c == 0 || ra__pair_stamp(cur) != r->stamp) return 0;
        if (ra__pair_cas(&s->pair, &cur, ra__pair_make(0, r->stamp))) return c;
    }
}

/* With a WAL: marks the pair frozen and returns its count, which stays in the plane. */
static uint64_t freeze(ra_meter_t *m, const ra__seal_row_t *r) {
    ra__slot_t *s = &m->slots[r->slot];
    ra__u128 cur = ra__pair_peek(&s->pair);
    uint64_t frozen = r->stamp | RA_STAMP_FROZEN;
    for (;;) {
        uint64_t c = ra__pair_count(cur);
        if (c == 0 || ra__pair_stamp(cur) != r->stamp) return 0;
        if (ra__pair_cas(&s->pair, &cur, ra__pair_make(c, frozen))) return c;
    }
}

/* Ends a freeze: drained (the segment is durable) or restored (it is not). Nobody else
 * changes a frozen pair, so the expected value is exact. */
static void thaw(ra_meter_t *m, uint32_t slot, uint64_t count, uint64_t stamp, bool drained) {
    ra__slot_t *s = &m->slots[slot];
    ra__u128 want = ra__pair_make(count, stamp | RA_STAMP_FROZEN);
    ra__u128 cur = want;
    bool ok = ra__pair_cas(&s->pair, &cur, ra__pair_make(drained ? 0 : count, stamp));
    RA_ASSERT(ok);
}

static size_t max_rows_per_slice(const ra_meter_t *m, uint32_t dim) {
    ra__slice_hdr_in_t in = {
        .dimension = m->dim_names[dim], .host = m->host, .version = RA_VERSION_STRING};
    return (RA_FRAME_MAX - ra__encode_size(&in)) / RA_ENC_ROW;
}

/* Merges rows of one subject (duplicate entries, late rows) into the first of them,
 * in place over the stream's sorted range; returns the merged length. */
static size_t merge_dups(ra_meter_t *m, ra__sort_key_t *o, size_t n) {
    ra__seal_row_t *rows = m->seal.rows;
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        ra__seal_row_t *r = &rows[o[i].v];
        if (r->count == 0) continue; /* the stamp moved since the scan: not this slice's */
        if (w > 0 && o[w - 1].k[0] == o[i].k[0] && o[w - 1].k[1] == o[i].k[1]) {
            ra__seal_row_t *into = &rows[o[w - 1].v];
            uint64_t s = into->count + r->count;
            if (s < r->count) { /* I-16 */
                s = UINT64_MAX;
                atomic_fetch_add_explicit(&m->hdr->metrics.overflow[r->dim], 1,
                                          memory_order_relaxed);
            }
            into->count = s;
        } else {
            o[w++] = o[i];
        }
    }
    return w;
}

/* One stream-window: its merged rows o[0..n) become one slice, or several consecutive ones
 * when they exceed the 1 MiB frame, encoded into the buffers allocated before the drain
 * (pre[0..), sized for the rows before merging: merging only shrinks them). */
static void build_stream(ra_meter_t *m, const ra__sort_key_t *o, size_t n, ra_slice_t **pre,
                         size_t *n_built) {
    ra__seal_scratch_t *sc = &m->seal;
    const ra__seal_row_t *rows = sc->rows, *r0 = &rows[o[0].v];
    ra__head_t *h = ra__head_get(m, r0->tenant, r0->dim, true);
    RA_ASSERT(h);                  /* reserved during planning */
    sc->undo[sc->n_undo].head = h; /* to put the chain back if the WAL refuses the batch */
    /* cppcheck-suppress nullPointerRedundantCheck ; RA_ASSERT does not return on NULL */
    sc->undo[sc->n_undo++].old = *h;
    ra__slice_hdr_in_t in = {
        .tenant = r0->tenant,
        .dimension = m->dim_names[r0->dim],
        .window_start_s = (int64_t)r0->win * m->window_len_s,
        .window_len_s = m->window_len_s,
        .amnesia = (int)m->hdr->amnesia,
        .host = m->host,
        .version = RA_VERSION_STRING,
    };
    size_t per = max_rows_per_slice(m, r0->dim), a = 0;
    while (a < n) {
        size_t k = n - a < per ? n - a : per;
        in.row_count = (uint32_t)k;
        in.seq = h->seq + 1;
        in.prev_b3 = h->b3;
        ra_slice_t *s = *pre;
        *pre++ = NULL;
        ra__slice_set_len(s, ra__encode_size(&in));
        uint8_t *p = ra__slice_buffer(s);
        p += ra__encode_header(&in, p);
        for (size_t i = 0; i < k; i++, p += RA_ENC_ROW) {
            const ra__seal_row_t *r = &rows[o[a + i].v];
            ra__encode_row(p, r->subject, r->count);
        }
        int rc = ra__slice_finish(s);
        RA_ASSERT(rc == 0); /* the sealer must never emit a non-canonical slice */
        h->seq = in.seq;
        h->last_window_start_s = in.window_start_s;
        memcpy(h->b3, ra_slice_b3(s), RA_B3_LEN);
        sc->batch[(*n_built)++] = s;
        a += k;
    }
}

/* Allocates every slice the chosen streams can need, before anything is drained: running
 * out of memory then leaves all counts in the plane instead of losing drained ones. */
static int preallocate(ra_meter_t *m, size_t fit, size_t need) {
    ra__seal_scratch_t *sc = &m->seal;
    if (!grow((void **)&sc->pre, &sc->pre_cap, need, sizeof *sc->pre)) return RA_ENOMEM;
    size_t np = 0;
    const ra__sort_key_t *order = sc->keys + sc->n_streams;
    for (size_t k = 0; k < fit; k++) {
        const ra__seal_stream_t *st = &sc->streams[sc->keys[k].v];
        const ra__seal_row_t *r0 = &sc->rows[order[st->first].v];
        ra__slice_hdr_in_t in = {
            .dimension = m->dim_names[r0->dim], .host = m->host, .version = RA_VERSION_STRING};
        size_t per = max_rows_per_slice(m, r0->dim);
        for (size_t left = st->rows; left > 0;) {
            size_t chunk = left < per ? left : per;
            in.row_count = (uint32_t)chunk;
            ra_slice_t *s = ra__slice_alloc(ra__encode_size(&in));
            if (!s) {
                while (np > 0)
                    ra__slice_free_unfinished(sc->pre[--np]);
                return RA_ENOMEM;
            }
            sc->pre[np++] = s;
            left -= chunk;
        }
    }
    return 0;
}

/* ---- step 6 with a WAL ------------------------------------------------------------------- */

static void thaw_all(ra_meter_t *m, size_t n, size_t fit, bool drained) {
    ra__seal_scratch_t *sc = &m->seal;
    for (size_t i = 0; i < n; i++) {
        const ra__seal_row_t *r = &sc->rows[i];
        if (sc->streams[r->sid].rank < fit && r->taken)
            thaw(m, r->slot, r->taken, r->stamp, drained);
    }
}

static void undo_heads(ra__seal_scratch_t *sc) {
    while (sc->n_undo > 0) {
        sc->n_undo--;
        *sc->undo[sc->n_undo].head = sc->undo[sc->n_undo].old;
    }
}

/* Step 6's outcome (the journal's group commit): durable → the frozen pairs are released;
 * refused or failed → the heads go back, the slices are dropped and the pairs unfrozen, so
 * nothing is reported sealed and nothing is lost; in doubt → the pairs stay frozen and
 * seal_intent names the segment, for a restart to decide from the disk. */
static int settle(ra_meter_t *m, const ra__seal_batch_t *b, int commit_rc) {
    ra__seal_scratch_t *sc = &m->seal;
    bool wal = ra__journal_on(m);
    if (commit_rc == 0) {
        if (wal && b->taken) {
            thaw_all(m, b->plan.n, b->plan.fit, true);
            atomic_store_explicit(&m->hdr->seal_intent, 0, memory_order_release);
        }
        return 0;
    }
    undo_heads(sc);
    for (size_t i = 0; i < b->n; i++)
        ra_slice_unref(sc->batch[i]);
    if (commit_rc == RA__EINDOUBT) return RA_EIO;
    thaw_all(m, b->plan.n, b->plan.fit, false);
    atomic_store_explicit(&m->hdr->seal_intent, 0, memory_order_release);
    return commit_rc;
}

/* A sealer killed between freezing pairs and finishing its commit left seal_intent set.
 * The segment it names decides: durable (its slices were just replayed from the WAL) →
 * the frozen counts are drained; absent → they are unfrozen and sealed again later. */
void ra__seal_recover(ra_meter_t *m) {
    uint64_t intent = atomic_load_explicit(&m->hdr->seal_intent, memory_order_acquire);
    if (intent == 0) return;
    bool durable = intent != RA_INTENT_FREEZING && ra__journal_has_segment(m, intent);
    size_t nslots = (size_t)m->hdr->shards * m->hdr->slots_per_shard, n = 0;
    for (size_t wi = 0; wi < (nslots + 63) / 64; wi++) {
        uint64_t bits = atomic_load_explicit(&m->bitmap[wi], memory_order_acquire);
        for (; bits; bits &= bits - 1) {
            uint32_t idx = (uint32_t)(wi * 64 + (size_t)__builtin_ctzll(bits));
            ra__slot_t *s = &m->slots[idx];
            uint64_t id = atomic_load_explicit(&s->ident, memory_order_acquire);
            if (ra__ident_state(id) != RA_SLOT_LIVE) continue;
            ra__u128 p = ra__pair_load(&s->pair);
            uint64_t st = ra__pair_stamp(p);
            if (!(st & RA_STAMP_FROZEN) || (ra__stamp_gen(st) & RA_GEN_MASK) != ra__ident_gen(id))
                continue;
            thaw(m, idx, ra__pair_count(p), st & ~(uint64_t)RA_STAMP_FROZEN, durable);
            n++;
        }
    }
    atomic_store_explicit(&m->hdr->seal_intent, 0, memory_order_release);
    ra__log(m, RA_LOG_WARN,
            "recovered a seal interrupted by a crash: %zu frozen counter entries %s", n,
            durable ? "drained (their segment is in the WAL)"
                    : "restored (their segment never reached the WAL)");
}

/* ---- the rollover: the steps of the header comment, in order -------------------------- */

/* Step 3: how many streams fit: with a WAL, under its caps (what the pending ring cannot
 * hold waits in the WAL: journal.c, the backlog); without one, in the pending ring. */
static void plan(ra_meter_t *m, int64_t now_ms, uint32_t w_end, ra__seal_plan_t *pl) {
    ra__seal_scratch_t *sc = &m->seal;
    const ra__sort_key_t *by_rank = sc->keys, *order = sc->keys + pl->S;
    size_t room = ra__journal_on(m) ? SIZE_MAX : ra__pending_room(&m->pending), need = 0, fit = 0;
    ra__journal_room_t wal_room;
    ra__journal_room_init(m, now_ms, &wal_room);
    int stop_reason = -1;
    for (; fit < pl->S; fit++) {
        const ra__seal_stream_t *st = &sc->streams[by_rank[fit].v];
        const ra__seal_row_t *r0 = &sc->rows[order[st->first].v];
        size_t per = max_rows_per_slice(m, r0->dim);
        size_t slices = (st->rows + per - 1) / per;
        if (need + slices > room) {
            stop_reason = RA_REJ_PENDING_FULL;
            break;
        }
        ra__slice_hdr_in_t in = {
            .dimension = m->dim_names[r0->dim], .host = m->host, .version = RA_VERSION_STRING};
        uint64_t bytes = (uint64_t)slices * ra__encode_size(&in) +
                         (uint64_t)st->rows * RA_ENC_ROW; /* an upper bound: merging shrinks */
        if (!ra__journal_fits(m, &wal_room, slices, bytes)) {
            stop_reason = RA_REJ_WAL_FULL;
            break;
        }
        if (!ra__head_get(m, r0->tenant, r0->dim, true)) {
            stop_reason = RA_REJ_HEADS_FULL;
            break;
        }
        need += slices;
    }
    pl->fit = fit;
    pl->need = need;
    pl->stop_reason = stop_reason;
    /* Every window before the first unsealed stream's is complete. */
    pl->w_fit = stop_reason >= 0 ? (int64_t)(by_rank[fit].k[0] >> 32) - 1 : (int64_t)w_end;
}

/* Step 4: take the chosen streams' counts, in slot order. Returns the late rows taken. */
static uint64_t take(ra_meter_t *m, const ra__seal_plan_t *pl) {
    ra__seal_scratch_t *sc = &m->seal;
    bool wal = ra__journal_on(m);
    if (wal && pl->fit)
        atomic_store_explicit(&m->hdr->seal_intent, RA_INTENT_FREEZING, memory_order_release);
    uint64_t late = 0;
    for (size_t i = 0; i < pl->n; i++) {
        ra__seal_row_t *r = &sc->rows[i];
        if (sc->streams[r->sid].rank >= pl->fit) continue;
        r->count = wal ? freeze(m, r) : drain(m, r);
        late += r->late && r->count;
    }
    /* Taken counts, in slot order, before merging folds them together (thaw needs each). */
    if (wal) {
        for (size_t i = 0; i < pl->n; i++)
            sc->rows[i].taken = sc->rows[i].count;
    }
    return late;
}

/* Step 5: every chosen stream-window into slices (sc->batch[0..built)), heads advanced.
 * Returns the rows sealed (after merging). */
static uint64_t build(ra_meter_t *m, const ra__seal_plan_t *pl, size_t *built) {
    ra__seal_scratch_t *sc = &m->seal;
    const ra__sort_key_t *by_rank = sc->keys;
    ra__sort_key_t *order = sc->keys + pl->S;
    ra_slice_t **pre = sc->pre;
    uint64_t rows_sealed = 0;
    *built = 0;
    sc->n_undo = 0;
    for (size_t k = 0; k < pl->fit; k++) {
        const ra__seal_stream_t *st = &sc->streams[by_rank[k].v];
        const ra__seal_row_t *r0 = &sc->rows[order[st->first].v];
        size_t per = max_rows_per_slice(m, r0->dim), slots = (st->rows + per - 1) / per;
        size_t merged = merge_dups(m, order + st->first, st->rows);
        if (merged) build_stream(m, order + st->first, merged, pre, built);
        for (size_t i = 0; i < slots; i++) /* buffers merging made unnecessary */
            if (pre[i]) ra__slice_free_unfinished(pre[i]);
        pre += slots;
        rows_sealed += merged;
    }
    return rows_sealed;
}

/* Step 7: the slices into the pending ring, the metrics, the boundary counter; a plan that
 * stopped short is counted, logged and answered. */
static int publish(ra_meter_t *m, const ra__seal_batch_t *b, size_t *in_ring) {
    ra__seal_scratch_t *sc = &m->seal;
    const ra__seal_plan_t *pl = &b->plan;
    int64_t sealed = b->sealed;
    *in_ring = ra__journal_publish(m, sc->batch, b->n);
    ra__plane_metrics_t *mt = &m->hdr->metrics;
    atomic_fetch_add_explicit(&mt->late_rows, b->late, memory_order_relaxed);
    atomic_fetch_add_explicit(&mt->sealed_rows, b->rows_sealed, memory_order_relaxed);
    atomic_fetch_add_explicit(&mt->sealed_slices, b->n, memory_order_relaxed);
    if (pl->w_fit > sealed) {
        /* The first rollover counts from the first window that held counts. */
        int64_t first = sealed == RA_SEALED_NONE
                            ? (pl->S ? (int64_t)(sc->keys[0].k[0] >> 32) : pl->w_fit + 1)
                            : sealed + 1;
        if (first <= pl->w_fit)
            atomic_fetch_add_explicit(&mt->sealed_windows, (uint64_t)(pl->w_fit - first + 1),
                                      memory_order_relaxed);
        atomic_store_explicit(&m->hdr->sealed_through, pl->w_fit, memory_order_release);
    }
    if (pl->stop_reason < 0) return 0;
    ra__count_reject(m, pl->stop_reason);
    static const char *const why[RA_REJ_COUNT] = {
        [RA_REJ_PENDING_FULL] = "pending ring full",
        [RA_REJ_HEADS_FULL] = "stream head table full",
        [RA_REJ_WAL_FULL] = "the WAL is at its caps (wal_max_entries, wal_max_bytes or "
                            "wal_max_age_s; the meter is degraded until ACKs make room)"};
    ra__log(m, RA_LOG_WARN,
            "rollover: %s; counts from window index %lld on stay in the plane until "
            "there is room (pending %zu/%zu)",
            why[pl->stop_reason], (long long)(pl->w_fit + 1), ra__pending_count(&m->pending),
            m->pending.cap);
    if (pl->stop_reason == RA_REJ_WAL_FULL) {
        ra__journal_refused(m);
        return RA_EPERSISTFULL;
    }
    return RA_ECAPACITY;
}

int ra__seal_begin(ra_meter_t *m, int64_t now_ms, ra__seal_batch_t *b) {
    memset(b, 0, sizeof *b);
    /* A segment in doubt: seal_intent names it and frozen pairs wait for a restart to look
     * at the disk. Sealing anything now would overwrite that record. */
    if (ra__journal_in_doubt(m)) return RA_EIO;
    uint32_t cur;
    int rc = ra__window_of_ms(m, now_ms, &cur);
    if (rc != 0) return rc;
    int64_t sealed = atomic_load_explicit(&m->hdr->sealed_through, memory_order_acquire);
    /* The mark is ahead of the clock: a window that has not begun counts as sealed. A
     * sealer's clock stepped forward while it sealed, or the header is damaged; left alone,
     * sealing would stop until real time caught up (a day for a +1 day step) while the
     * plane fills. I-15's one exception: the mark is set back to the last window that
     * ended, loudly (ERROR, accounting_sealed_through_rewinds_total), and sealing goes on;
     * counts already sealed stay sealed, nothing is sealed twice (issue 14 item 3). */
    if (sealed != RA_SEALED_NONE && sealed > (int64_t)cur) {
        ra__log(m, RA_LOG_ERROR,
                "rollover: the plane's sealed-through mark (window index %lld) is ahead of the "
                "clock (window index %u): a clock stepped forward while this plane was sealed, "
                "or its header is damaged; set back to window index %u so sealing goes on (a "
                "stream's later slices may then carry earlier windows than the ones sealed "
                "ahead)",
                (long long)sealed, cur, cur - 1);
        atomic_store_explicit(&m->hdr->sealed_through, (int64_t)cur - 1, memory_order_release);
        m->sealed_rewinds++;
        return 0;
    }
    /* I-15: the boundary counter only moves forward. A clock that drifts or jumps back
     * finds nothing to seal; a boundary is sealed once. */
    if ((int64_t)cur - 1 <= sealed) return 0;
    uint32_t w_end = cur - 1;
    ra__seal_scratch_t *sc = &m->seal;

    ra__seal_plan_t *pl = &b->plan;
    pl->n = scan(m, w_end, sealed, cur);      /* step 1 */
    pl->S = pl->n ? group(m, pl->n, &rc) : 0; /* step 2 */
    if (rc != 0) return rc;                   /* nothing drained: the counts wait in the plane */
    plan(m, now_ms, w_end, pl);               /* step 3 */
    sc->n_streams = pl->S;
    if (pl->need && ((rc = preallocate(m, pl->fit, pl->need)) != 0 ||
                     !grow((void **)&sc->batch, &sc->batch_cap, pl->need, sizeof *sc->batch) ||
                     !grow((void **)&sc->undo, &sc->undo_cap, pl->fit, sizeof *sc->undo)))
        return rc ? rc : RA_ENOMEM; /* nothing taken from the plane yet */
    b->now_ms = now_ms;
    b->sealed = sealed;
    b->open = true;
    b->taken = pl->fit > 0;
    b->late = take(m, pl);                /* step 4 */
    b->rows_sealed = build(m, pl, &b->n); /* step 5 */
    b->slices = sc->batch;
    return 0;
}

int ra__seal_end(ra_meter_t *m, ra__seal_batch_t *b, int commit_rc, size_t *n_sealed,
                 size_t *n_in_ring) {
    *n_sealed = *n_in_ring = 0;
    int rc = settle(m, b, commit_rc); /* step 6's outcome */
    b->open = false;
    if (rc != 0) return rc; /* nothing sealed; the counts are back in (or kept in) the plane */
    *n_sealed = b->n;
    return publish(m, b, n_in_ring); /* step 7 */
}
