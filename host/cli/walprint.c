/* `wal inspect`'s listing: every segment, then its frames and problems, and the heads
 * checkpoint's entries; as text lines, or with --json as one JSON object a line (the
 * "type" field says which: segment, frame, problem, head, summary). */
#include "walscan.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* "2025-01-01T00:05:00.000Z" (with_ms) or "2025-01-01T00:05:00Z". */
static void iso_utc(int64_t ms, bool with_ms, char *out, size_t n) {
    int64_t s = ms >= 0 ? ms / 1000 : (ms - 999) / 1000;
    int msr = (int)(ms - s * 1000);
    time_t t = (time_t)s;
    struct tm tm;
    if (!gmtime_r(&t, &tm)) {
        snprintf(out, n, "?");
        return;
    }
    char base[32];
    if (strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm) == 0) base[0] = '\0';
    if (with_ms)
        snprintf(out, n, "%.24s.%03dZ", base, msr % 1000);
    else
        snprintf(out, n, "%.24sZ", base);
}

/* A JSON string literal (quotes included) for s. */
static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static void print_segment(const ra_host_wscan_t *sc, const ra_host_wseg_t *seg) {
    const ra__walscan_segment_t *s = &seg->info;
    char created[48] = "?";
    if (s->header_ok) iso_utc(s->created_ms, true, created, sizeof created);
    char id[17];
    snprintf(id, sizeof id, "%016" PRIx64, s->id);
    if (sc->json) {
        printf("{\"type\":\"segment\",\"id\":\"%s\",\"file\":", id);
        json_str(stdout, s->path);
        printf(",\"bytes\":%" PRIu64 ",\"frames\":%u,\"header_ok\":%s", s->bytes, seg->frames,
               s->header_ok ? "true" : "false");
        if (s->header_ok)
            printf(",\"header_frames\":%u,\"created_ms\":%" PRId64 ",\"created\":\"%s\"",
                   s->header_frames, s->created_ms, created);
        printf(",\"problems\":%u}\n", seg->problems);
    } else {
        printf("segment id=%s file=%s bytes=%" PRIu64 " frames=%u created=%s%s\n", id, s->path,
               s->bytes, seg->frames, created,
               !s->readable   ? " UNREADABLE"
               : s->header_ok ? ""
                              : " BAD-HEADER");
    }
}

static void print_event(const ra_host_wscan_t *sc, const ra_host_wevent_t *e,
                        const ra_host_wseg_t *seg) {
    char id[17] = "";
    if (seg) snprintf(id, sizeof id, "%016" PRIx64, seg->info.id);
    if (e->kind == RA_HOST_EV_PROBLEM) {
        if (sc->json) {
            printf("{\"type\":\"problem\",\"segment\":\"%s\",\"file\":", id);
            json_str(stdout, e->file ? e->file : "");
            printf(",\"offset\":%" PRIu64 ",\"what\":", e->offset);
            json_str(stdout, e->what ? e->what : "");
            printf(",\"detail\":");
            json_str(stdout, e->detail ? e->detail : "");
            printf("}\n");
        } else {
            printf("%sproblem file=%s offset=%" PRIu64 " %s%s%s\n", seg ? "  " : "",
                   e->file ? e->file : "?", e->offset, e->what ? e->what : "",
                   e->detail && e->detail[0] ? ": " : "", e->detail ? e->detail : "");
        }
        return;
    }
    ra_tenant_t t;
    memcpy(t.b, e->tenant, 16);
    char ts[37], b3[65], prev[65], ws[48];
    ra_tenant_format(&t, ts);
    ra_hex(e->b3, 32, b3);
    ra_hex(e->prev_b3, 32, prev);
    iso_utc(e->id.window_start_s * 1000, false, ws, sizeof ws);
    if (sc->json) {
        printf("{\"type\":\"frame\",\"segment\":\"%s\",\"seq\":%" PRIu64 ",\"tenant\":\"%s\","
               "\"dimension\":\"%s\",\"window_start_s\":%" PRId64 ",\"window_start\":\"%s\","
               "\"window_len_s\":%u,\"slice_seq\":%" PRIu64 ",\"rows\":%u,\"b3\":\"%s\","
               "\"prev_b3\":\"%s\",\"state\":\"pending\"}\n",
               id, e->frame_seq, ts, e->dim, e->id.window_start_s, ws, e->id.window_len_s,
               e->id.seq, e->rows, b3, prev);
    } else {
        printf("  frame seq=%" PRIu64 " tenant=%s dimension=%s window=%s slice_seq=%" PRIu64
               " rows=%u b3=%.16s state=pending\n",
               e->frame_seq, ts, e->dim, ws, e->id.seq, e->rows, b3);
    }
}

/* Prints the segment that was being scanned and its buffered frames and problems. Problems
 * found before any segment (the heads checkpoint) are printed on their own. */
void ra_host_wprint_flush(ra_host_wscan_t *sc) {
    if (!sc->inspect) return;
    ra_host_wseg_t *seg = NULL;
    if (sc->nsegs) seg = &sc->segs[sc->nsegs - 1];
    if (seg) print_segment(sc, seg);
    for (size_t i = 0; i < sc->nev; i++) {
        print_event(sc, &sc->ev[i], seg);
        free(sc->ev[i].what);
        free(sc->ev[i].detail);
        free(sc->ev[i].file);
    }
    sc->nev = 0;
}

void ra_host_wprint_head(const ra_host_wscan_t *sc, const uint8_t tenant[16], const char *dimension,
                         uint64_t seq, int64_t last_ws, const uint8_t b3[32]) {
    ra_tenant_t t;
    memcpy(t.b, tenant, 16);
    char ts[37], hx[65], ws[48];
    ra_tenant_format(&t, ts);
    ra_hex(b3, 32, hx);
    iso_utc(last_ws * 1000, false, ws, sizeof ws);
    if (sc->json) {
        printf("{\"type\":\"head\",\"tenant\":\"%s\",\"dimension\":", ts);
        json_str(stdout, dimension);
        printf(",\"seq\":%" PRIu64 ",\"last_window_start_s\":%" PRId64
               ",\"last_window_start\":\"%s\",\"b3\":\"%s\"}\n",
               seq, last_ws, ws, hx);
    } else {
        printf("head tenant=%s dimension=%s seq=%" PRIu64 " last_window=%s b3=%.16s\n", ts,
               dimension, seq, ws, hx);
    }
}
