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

/* The record path's halves (the cached window, the clock read) are inline in internal.h. */
