/* The hash chain of every (tenant, dimension) stream in a WAL, for `verify` and `wal
 * inspect`: consecutive slices in the WAL have seq + 1 and prev_b3 = the previous b3; a
 * stream's first slice links to the heads checkpoint's head when the checkpoint's seq is
 * lower, and has the checkpoint's b3 when the seqs are equal; a gap is allowed only below
 * the checkpoint's seq (those slices were ACKed and compacted). One link is judged by the
 * one chain checker every verify uses (chain.c). */
#include "chain.h"
#include "walscan.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- streams: open addressing on (tenant, dimension) -------------------------------- */

static uint64_t stream_hash(const uint8_t tenant[16], const char *dim) {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < 16; i++)
        h = (h ^ tenant[i]) * 1099511628211ull;
    for (const char *p = dim; *p; p++)
        h = (h ^ (uint8_t)*p) * 1099511628211ull;
    return h ^ (h >> 29);
}

static ra_host_wstream_t *stream_get(ra_host_wscan_t *sc, const uint8_t tenant[16],
                                     const char *dim) {
    if ((sc->nstreams + 1) * 2 > sc->streams_cap) {
        size_t cap = sc->streams_cap ? sc->streams_cap * 2 : 1024;
        ra_host_wstream_t *t = calloc(cap, sizeof *t);
        if (!t) {
            sc->oom = true;
            return NULL;
        }
        for (size_t i = 0; i < sc->streams_cap; i++) {
            ra_host_wstream_t *o = &sc->streams[i];
            if (!o->used) continue;
            size_t j = stream_hash(o->tenant, o->dim) & (cap - 1);
            while (t[j].used)
                j = (j + 1) & (cap - 1);
            t[j] = *o;
        }
        free(sc->streams);
        sc->streams = t;
        sc->streams_cap = cap;
    }
    size_t j = stream_hash(tenant, dim) & (sc->streams_cap - 1);
    while (sc->streams[j].used) {
        ra_host_wstream_t *s = &sc->streams[j];
        if (memcmp(s->tenant, tenant, 16) == 0 && strcmp(s->dim, dim) == 0) return s;
        j = (j + 1) & (sc->streams_cap - 1);
    }
    ra_host_wstream_t *s = &sc->streams[j];
    s->used = true;
    memcpy(s->tenant, tenant, 16);
    snprintf(s->dim, sizeof s->dim, "%s", dim);
    sc->nstreams++;
    return s;
}

static void chain_break(ra_host_wscan_t *sc, const ra_host_wevent_t *e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void chain_break(ra_host_wscan_t *sc, const ra_host_wevent_t *e, const char *fmt, ...) {
    sc->breaks++;
    if (sc->nbreak_lines >= RA_HOST_WAL_MAX_BREAKS) return;
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    ra_tenant_t t;
    memcpy(t.b, e->tenant, 16);
    char ts[37];
    ra_tenant_format(&t, ts);
    const char *file = sc->nsegs ? sc->segs[sc->nsegs - 1].info.path : "?";
    ra_host_wscan_line(sc, &sc->break_lines, &sc->nbreak_lines, &sc->break_lines_cap,
                       ra_host_fmt_alloc("CHAIN BREAK %s/%s: slice seq %" PRIu64
                                         " (frame seq %" PRIu64 " in %s): %s",
                                         ts, e->dim, e->id.seq, e->frame_seq, file, what));
}

static void hex_prefix(const uint8_t *b, char *out) {
    ra_hex(b, 8, out); /* 16 hex digits */
}

/* The chain rules of the header comment, for one slice in WAL order. */
void ra_host_wchain_check(ra_host_wscan_t *sc, const ra_host_wevent_t *e) {
    ra_host_wstream_t *st = stream_get(sc, e->tenant, e->dim);
    if (!st) return;
    uint64_t seq = e->id.seq;
    char a[17], b[17];
    sc->links_checked++;
    char why[160];
    if (seq == 1 && ra_host_chain_link(0, NULL, 1, e->prev_b3) == RA_LINK_FIRST)
        chain_break(sc, e, "%s",
                    ra_host_chain_describe(RA_LINK_FIRST, 0, NULL, 1, e->prev_b3, why, sizeof why));
    if (st->has_head && seq == st->head_seq && memcmp(e->b3, st->head_b3, 32) != 0) {
        hex_prefix(e->b3, a);
        hex_prefix(st->head_b3, b);
        chain_break(sc, e, "b3 %s... differs from the heads checkpoint's b3 %s... for this seq", a,
                    b);
    }
    bool linked = false;
    if (st->has_last) {
        if (seq == st->last_seq + 1) {
            ra_host_link_t link = ra_host_chain_link(st->last_seq, st->last_b3, seq, e->prev_b3);
            if (link == RA_LINK_PREV)
                chain_break(sc, e, "%s",
                            ra_host_chain_describe(link, st->last_seq, st->last_b3, seq, e->prev_b3,
                                                   why, sizeof why));
            linked = true;
        } else if (seq <= st->last_seq) {
            chain_break(sc, e,
                        "seq goes back: seq %" PRIu64 " came earlier in the WAL (a replayed "
                        "or duplicated slice)",
                        st->last_seq);
            linked = true; /* reported; keep the newest position */
        }
    }
    if (!linked && !sc->file_mode) {
        /* The stream's first slice in the WAL, or the first after a gap. */
        if (st->has_head && st->head_seq >= seq) {
            /* sealed before the checkpoint: earlier slices were ACKed and compacted */
        } else if (st->has_head && seq == st->head_seq + 1) {
            ra_host_link_t link = ra_host_chain_link(st->head_seq, st->head_b3, seq, e->prev_b3);
            if (link == RA_LINK_PREV)
                chain_break(sc, e, "%s (the heads checkpoint's)",
                            ra_host_chain_describe(link, st->head_seq, st->head_b3, seq, e->prev_b3,
                                                   why, sizeof why));
        } else if (st->has_head) {
            uint64_t from =
                st->has_last && st->last_seq > st->head_seq ? st->last_seq : st->head_seq;
            chain_break(sc, e, "seq %" PRIu64 "..%" PRIu64 " missing (last known seq %" PRIu64 ")",
                        from + 1, seq - 1, from);
        } else if (st->has_last) {
            chain_break(sc, e,
                        "seq %" PRIu64 "..%" PRIu64 " missing and no heads checkpoint covers them",
                        st->last_seq + 1, seq - 1);
        } else if (seq != 1) {
            chain_break(sc, e,
                        "the stream starts at seq %" PRIu64 " but no heads checkpoint covers "
                        "seq 1..%" PRIu64,
                        seq, seq - 1);
        }
    } else if (!linked && sc->file_mode && st->has_last) {
        chain_break(sc, e, "seq %" PRIu64 "..%" PRIu64 " missing in this file", st->last_seq + 1,
                    seq - 1);
    }
    if (!st->has_last || seq > st->last_seq) {
        st->has_last = true;
        st->last_seq = seq;
        memcpy(st->last_b3, e->b3, 32);
    }
}

void ra_host_wchain_head(ra_host_wscan_t *sc, const uint8_t tenant[16], const char *dim,
                         uint64_t seq, const uint8_t b3[32]) {
    ra_host_wstream_t *st = stream_get(sc, tenant, dim);
    if (!st) return;
    st->has_head = true;
    st->head_seq = seq;
    memcpy(st->head_b3, b3, 32);
}
