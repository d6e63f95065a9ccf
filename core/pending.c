/* The pending ring: sealed slices not yet ACKed downstream, in seal order (so in seq order
 * per stream). Bounded by pending_slices_cap (I-7). An ACK may arrive out of order across
 * streams: it leaves a hole that the head skips; when holes pin the ring at its end, it is
 * compacted in place (O(cap), amortised over the ACKs that made the holes).
 *
 * Each slice remembers its absolute ring index (ra__slice_pending_pos), so the ACK of the
 * very slice object the ring holds is O(1); an ACK with an equal copy (a decoded slice,
 * another reference) falls back to a scan. With thousands of slices in flight the scan
 * made every ACK O(pending).
 *
 * A pure data structure: no meter, no lock. The meter (meter.c) owns one and calls in
 * under its seal lock; only ra__pending_count may be read without it. */
#include "internal.h"

#include <stdlib.h>

int ra__pending_init(ra__pending_t *p, size_t cap) {
    p->ring = calloc(cap, sizeof *p->ring);
    if (!p->ring) return RA_ENOMEM;
    p->cap = cap;
    p->head = p->tail = p->live = 0;
    return 0;
}

void ra__pending_free(ra__pending_t *p) {
    if (!p->ring) return;
    for (size_t i = p->head; i < p->tail; i++)
        ra_slice_unref(p->ring[i % p->cap]);
    free(p->ring);
    p->ring = NULL;
}

size_t ra__pending_room(const ra__pending_t *p) {
    return p->cap - p->live;
}

static void reverse(ra_slice_t **a, size_t lo, size_t hi) { /* [lo, hi) */
    while (lo + 1 < hi) {
        ra_slice_t *t = a[lo];
        a[lo++] = a[--hi];
        a[hi] = t;
    }
}

/* Called when the span head..tail covers the whole ring but holes exist: rotate the ring so
 * the oldest entry is at index 0 (three reversals, in place), then squeeze out the holes. */
static void compact(ra__pending_t *p) {
    size_t h = p->head % p->cap;
    reverse(p->ring, 0, h);
    reverse(p->ring, h, p->cap);
    reverse(p->ring, 0, p->cap);
    size_t w = 0;
    for (size_t i = 0; i < p->cap; i++) {
        ra_slice_t *s = p->ring[i];
        p->ring[i] = NULL;
        if (s) {
            ra__slice_set_pending_pos(s, w);
            p->ring[w++] = s; /* w <= i: never overwrites an unread entry */
        }
    }
    p->head = 0;
    p->tail = w;
}

void ra__pending_push(ra__pending_t *p, ra_slice_t *s) {
    RA_ASSERT(p->live < p->cap); /* callers reserve room first */
    if (p->tail - p->head == p->cap) compact(p);
    ra__slice_set_pending_pos(s, p->tail);
    ra__slice_set_ring_seq(s, ++p->pushed);
    p->ring[p->tail % p->cap] = s;
    p->tail++;
    __atomic_fetch_add(&p->live, 1, __ATOMIC_RELAXED); /* read without the lock: count */
}

static void take(ra__pending_t *p, size_t i, uint64_t *wal_seq) {
    ra_slice_t *e = p->ring[i % p->cap];
    p->ring[i % p->cap] = NULL;
    __atomic_fetch_sub(&p->live, 1, __ATOMIC_RELAXED);
    *wal_seq = ra__slice_wal_seq(e);
    ra_slice_unref(e);
    while (p->head < p->tail && !p->ring[p->head % p->cap])
        p->head++;
    if (p->head == p->tail) p->head = p->tail = 0;
}

int ra__pending_remove(ra__pending_t *p, const ra_slice_t *s, uint64_t *wal_seq) {
    size_t pos = ra__slice_pending_pos(s);
    if (pos >= p->head && pos < p->tail && p->ring[pos % p->cap] == s) {
        take(p, pos, wal_seq);
        return 0;
    }
    for (size_t i = p->head; i < p->tail; i++) {
        ra_slice_t *e = p->ring[i % p->cap];
        if (e && ra__slice_same(e, s) &&
            strcmp(ra_slice_dimension(e), ra_slice_dimension(s)) == 0) {
            ra_tenant_t a, b;
            ra_slice_get_tenant(e, &a);
            ra_slice_get_tenant(s, &b);
            if (memcmp(a.b, b.b, 16) != 0) continue;
            take(p, i, wal_seq);
            return 0;
        }
    }
    return RA_ENOTFOUND;
}

/* References to the n newest live entries, oldest of them first, into out[0..cap). */
void ra__pending_newest(const ra__pending_t *p, size_t n, ra_slice_t **out, size_t cap) {
    if (n > p->live) n = p->live;
    size_t i = p->tail, found = 0;
    while (found < n && i > p->head) { /* walk back over holes to the n-th newest */
        i--;
        if (p->ring[i % p->cap]) found++;
    }
    for (size_t k = 0; i < p->tail && k < cap; i++) {
        ra_slice_t *s = p->ring[i % p->cap];
        if (!s) continue;
        ra_slice_ref(s);
        out[k++] = s;
    }
}

/* References to the live entries from the from-th on (0-based, seal order), at most cap;
 * *n_out is how many. */
size_t ra__pending_list(const ra__pending_t *p, size_t from, ra_slice_t **out, size_t cap) {
    size_t n = 0, k = 0;
    for (size_t i = p->head; i < p->tail && n < cap; i++) {
        ra_slice_t *s = p->ring[i % p->cap];
        if (!s || k++ < from) continue;
        ra_slice_ref(s);
        out[n++] = s;
    }
    return n;
}

/* A reference to the idx-th live entry (0-based, seal order), or NULL. */
ra_slice_t *ra__pending_get(const ra__pending_t *p, size_t idx) {
    if (idx >= p->live) return NULL;
    ra_slice_t *found = NULL;
    if (p->tail - p->head == p->live) { /* no holes: direct index */
        found = p->ring[(p->head + idx) % p->cap];
    } else {
        for (size_t i = p->head, k = 0; i < p->tail; i++) {
            ra_slice_t *s = p->ring[i % p->cap];
            if (s && k++ == idx) {
                found = s;
                break;
            }
        }
    }
    if (found) ra_slice_ref(found);
    return found;
}

/* Exact at some instant without the lock: every change of `live` is an atomic RMW. */
size_t ra__pending_count(const ra__pending_t *p) {
    return __atomic_load_n(&p->live, __ATOMIC_RELAXED);
}

/* References to the live entries that entered the ring after push number `after`, oldest
 * first, at most cap; *last is the newest one's push number (after, when none). Entries are
 * in push order, so the walk goes back from the tail and stops at the first older one:
 * O(what is new), whatever the ring holds. */
size_t ra__pending_since(const ra__pending_t *p, uint64_t after, ra_slice_t **out, size_t cap,
                         uint64_t *last) {
    *last = after;
    size_t i = p->tail;
    while (i > p->head) {
        ra_slice_t *s = p->ring[(i - 1) % p->cap];
        if (s && ra__slice_ring_seq(s) <= after) break;
        i--;
    }
    size_t n = 0;
    for (; i < p->tail && n < cap; i++) {
        ra_slice_t *s = p->ring[i % p->cap];
        if (!s) continue;
        ra_slice_ref(s);
        out[n++] = s;
        *last = ra__slice_ring_seq(s);
    }
    return n;
}
