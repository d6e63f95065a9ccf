/* UTC windows (I-3, I-15). A window index is floor(unix_seconds / window_len_s); window w
 * covers [w * len, (w + 1) * len). Writers compute it from their own clock, so a record's
 * window never depends on when the sealer runs. */
#include "internal.h"

#include <time.h>

int64_t ra__clock_system_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t ra__meter_now_ms(const ra_meter_t *m) {
    return m->clock ? m->clock(m->clock_ud) : ra__clock_system_ms();
}

int ra__window_of_ms(const ra_meter_t *m, int64_t now_ms, uint32_t *win) {
    if (RA_UNLIKELY(now_ms < 0)) return RA_EINVAL;
    uint64_t w = (uint64_t)(now_ms / 1000) / m->window_len_s;
    if (RA_UNLIKELY(w >= RA_WIN_TOMB)) return RA_EINVAL;
    *win = (uint32_t)w;
    return 0;
}

/* The window of a time in seconds, through a one-word cache of the last window seen: the
 * division by window_len_s only runs when a boundary is crossed. The cache is a pure
 * function's memo, so racing threads can only store correct values. */
static inline int window_of_s_cached(ra_meter_t *m, uint64_t s, uint32_t *win) {
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

int ra__window_of_ms_cached(ra_meter_t *m, int64_t now_ms, uint32_t *win) {
    if (RA_UNLIKELY(now_ms < 0)) return RA_EINVAL;
    return window_of_s_cached(m, (uint64_t)now_ms / 1000, win);
}

/* The record path's clock: the coarse realtime clock (a vDSO read of the last tick, a few
 * ns; its ~4 ms resolution is far inside the 500 ms skew tolerance), and a one-word cache of
 * the current window so the division only runs when a boundary is crossed. */
int ra__window_now(ra_meter_t *m, uint32_t *win) {
    if (m->clock) return ra__window_of_ms(m, m->clock(m->clock_ud), win);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    return window_of_s_cached(m, (uint64_t)ts.tv_sec, win);
}
