/* The scan behind `verify` and `wal inspect`: the core's read-only scan of the WAL
 * (core/wal_reader.h) and what it found, segment by segment: frames counted and checked
 * against their stream's chain (walchain.c), problems kept for the report, and for
 * inspect every event buffered until its segment is complete (walprint.c prints it). */
#include "walscan.h"
#include "host.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t now_ms_mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void *grow(void *p, size_t *cap, size_t need, size_t elem, bool *oom) {
    if (need <= *cap) return p;
    size_t c = *cap ? *cap * 2 : 64;
    while (c < need)
        c *= 2;
    void *q = realloc(p, c * elem);
    if (!q) {
        *oom = true;
        return NULL;
    }
    *cap = c;
    return q;
}

void ra_host_wscan_line(ra_host_wscan_t *sc, char ***lines, size_t *n, size_t *cap, char *line) {
    if (!line) {
        sc->oom = true;
        return;
    }
    char **p = grow(*lines, cap, *n + 1, sizeof **lines, &sc->oom);
    if (!p) {
        free(line);
        return;
    }
    *lines = p;
    (*lines)[(*n)++] = line;
}

char *ra_host_fmt_alloc(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) s = NULL;
    va_end(ap);
    return s;
}

static void progress(ra_host_wscan_t *sc, bool force) {
    if (!sc->progress) return;
    uint64_t now = now_ms_mono();
    if (!force && now - sc->last_progress < 1000) return;
    sc->last_progress = now;
    fprintf(
        stderr, RA_HOST_NAME " %s: %" PRIu64 "/%" PRIu64 " segments, %" PRIu64 " frames (%.1f s)\n",
        sc->cmd, sc->segs_scanned, sc->found.segments, sc->frames, (double)(now - sc->t0) / 1000.0);
}

/* ---- what the core's scan reports ------------------------------------------------- */

static void on_segment(void *ud, const ra__walscan_segment_t *info) {
    ra_host_wscan_t *sc = ud;
    ra_host_wprint_flush(sc); /* the previous segment is complete */
    ra_host_wseg_t *p = grow(sc->segs, &sc->segs_cap, sc->nsegs + 1, sizeof *sc->segs, &sc->oom);
    if (!p) return;
    sc->segs = p;
    ra_host_wseg_t *s = &sc->segs[sc->nsegs++];
    memset(s, 0, sizeof *s);
    s->info = *info;
    s->info.path = strdup(info->path);
    sc->bytes += info->bytes;
    sc->segs_scanned++;
    progress(sc, sc->segs_scanned % 1000 == 0);
}

static int on_head(void *ud, const uint8_t tenant[16], const char *dimension, uint64_t seq,
                   int64_t last_ws, const uint8_t b3[32]) {
    ra_host_wscan_t *sc = ud;
    sc->heads++;
    ra_host_wchain_head(sc, tenant, dimension, seq, b3);
    if (sc->inspect) ra_host_wprint_head(sc, tenant, dimension, seq, last_ws, b3);
    return 0;
}
static ra_host_wevent_t *new_event(ra_host_wscan_t *sc) {
    ra_host_wevent_t *p = grow(sc->ev, &sc->ev_cap, sc->nev + 1, sizeof *sc->ev, &sc->oom);
    if (!p) return NULL;
    sc->ev = p;
    ra_host_wevent_t *e = &sc->ev[sc->nev++];
    memset(e, 0, sizeof *e);
    return e;
}

static int on_slice(void *ud, ra_slice_t *s, uint64_t frame_seq) {
    ra_host_wscan_t *sc = ud;
    ra_host_wevent_t tmp, *e = &tmp;
    memset(e, 0, sizeof *e);
    if (sc->inspect && !(e = new_event(sc))) e = &tmp;
    e->kind = RA_HOST_EV_FRAME;
    e->frame_seq = frame_seq;
    ra_tenant_t t;
    ra_slice_get_tenant(s, &t);
    memcpy(e->tenant, t.b, 16);
    snprintf(e->dim, sizeof e->dim, "%s", ra_slice_dimension(s));
    ra_slice_get_id(s, &e->id);
    e->rows = (uint32_t)ra_slice_row_count(s);
    memcpy(e->b3, ra_slice_b3(s), 32);
    memcpy(e->prev_b3, ra_slice_prev_b3(s), 32);
    ra_slice_unref(s);
    sc->frames++;
    if (sc->nsegs) sc->segs[sc->nsegs - 1].frames++;
    ra_host_wchain_check(sc, e);
    if ((sc->frames & 4095) == 0) progress(sc, false);
    return 0;
}

static void on_problem(void *ud, const char *what, const char *file, uint64_t off,
                       const char *detail) {
    ra_host_wscan_t *sc = ud;
    sc->problems++;
    if (sc->nsegs && strcmp(file, sc->segs[sc->nsegs - 1].info.path) == 0)
        sc->segs[sc->nsegs - 1].problems++;
    const char *f = file;
    if (sc->inspect) {
        ra_host_wevent_t *e = new_event(sc);
        if (e) {
            e->kind = RA_HOST_EV_PROBLEM;
            e->what = strdup(what);
            e->detail = strdup(detail);
            e->file = strdup(f);
            e->offset = off;
        }
        return;
    }
    if (sc->nproblem_lines < RA_HOST_WAL_MAX_PROBLEMS)
        ra_host_wscan_line(sc, &sc->problem_lines, &sc->nproblem_lines, &sc->problem_lines_cap,
                           ra_host_fmt_alloc("CORRUPT %s: %s at offset %" PRIu64 "%s%s", f, what,
                                             off, detail[0] ? ": " : "", detail));
}

/* ---- running a scan ----------------------------------------------------------------- */

void ra_host_wscan_free(ra_host_wscan_t *sc) {
    for (size_t i = 0; i < sc->nsegs; i++)
        free((char *)sc->segs[i].info.path);
    free(sc->segs);
    for (size_t i = 0; i < sc->nev; i++) {
        free(sc->ev[i].what);
        free(sc->ev[i].detail);
        free(sc->ev[i].file);
    }
    free(sc->ev);
    free(sc->streams);
    for (size_t i = 0; i < sc->nbreak_lines; i++)
        free(sc->break_lines[i]);
    free(sc->break_lines);
    for (size_t i = 0; i < sc->nproblem_lines; i++)
        free(sc->problem_lines[i]);
    free(sc->problem_lines);
}

int ra_host_wscan_run(ra_host_wscan_t *sc, char *err, size_t errlen) {
    ra__walscan_visitor_t v = {sc, on_segment, on_head, on_slice, on_problem};
    sc->t0 = sc->last_progress = now_ms_mono();
    int rc = ra__walscan(sc->target, sc->file_mode, &v, &sc->found, err, errlen);
    ra_host_wprint_flush(sc);
    if (sc->progress && now_ms_mono() - sc->t0 >= 1000) progress(sc, true);
    return rc;
}
