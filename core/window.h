/* UTC windows (window.c; the record path's halves inline here): the window of a time,
 * the meter's clock (I-3, I-15). */
#ifndef RA_WINDOW_H
#define RA_WINDOW_H

RA_INTERNAL int64_t ra__clock_system_ms(void);
RA_INTERNAL int ra__window_of_ms(const ra_meter_t *m, int64_t now_ms, uint32_t *win);
RA_INTERNAL int64_t ra__meter_now_ms(const ra_meter_t *m);

/* The window of a time in seconds, through a one-word cache of the last window seen: the
 * division by window_len_s only runs when a boundary is crossed. The cache is a pure
 * function's memo, so racing threads can only store correct values. Inline, with the two
 * below: they are on the record path. */
static inline int ra__window_of_s_cached(ra_meter_t *m, uint64_t s, uint32_t *win) {
    uint64_t c = atomic_load_explicit(&m->cached_win, memory_order_relaxed);
    uint64_t start = c * m->window_len_s;
    if (RA_LIKELY(s >= start && s - start < m->window_len_s)) {
        *win = (uint32_t)c;
        return 0;
    }
    c = s / m->window_len_s;
    if (RA_UNLIKELY(c >= RA_WIN_TOMB)) return RA_EINVAL;
    atomic_store_explicit(&m->cached_win, c, memory_order_relaxed);
    *win = (uint32_t)c;
    return 0;
}

static inline int ra__window_of_ms_cached(ra_meter_t *m, int64_t now_ms, uint32_t *win) {
    if (RA_UNLIKELY(now_ms < 0)) return RA_EINVAL;
    return ra__window_of_s_cached(m, (uint64_t)now_ms / 1000, win);
}

/* The record path's clock: time(), the UTC seconds of the last clock tick. On x86-64
 * glibc binds it straight to the vDSO (one read of the kernel's timekeeping page, no
 * clock_gettime dispatch); elsewhere it is the coarse realtime clock. Its tick resolution
 * (~4 ms) is far inside the 500 ms skew tolerance, and windows need only seconds. */
static inline int ra__window_now(ra_meter_t *m, uint32_t *win) {
    if (m->clock) return ra__window_of_ms(m, m->clock(m->clock_ud), win);
    time_t now = time(NULL);
    if (RA_UNLIKELY(now < 0)) return RA_EINVAL;
    return ra__window_of_s_cached(m, (uint64_t)now, win);
}

#endif /* RA_WINDOW_H */
