/* `verify PATH` and `wal inspect PATH [--json]`: read-only tools over a WAL directory (or
 * one segment file), docs/FORMAT.md §4 and docs/ops/wal.md.
 *
 * Both run the core's own recovery scan, ra__wal_open(..., read_only = true, visitor), so
 * the tools and the meter can never disagree about what a byte means. The scan goes
 * through a read-only I/O layer (below): every call that could change the directory
 * (create, write, fsync, rename, unlink, truncate, mkdir, lock) fails with EROFS, so
 * neither command can modify the WAL, whatever the core would like to repair. The same
 * layer tells us which segment file the scan is reading (the core reads a segment whole,
 * then walks its frames), which gives each frame and each problem its file.
 *
 * On top of the core's checks (header checksums, lengths, payload BLAKE3 = trailer, strictly
 * increasing frame seq, the strict slice decoder), verify checks the hash chains per
 * (tenant, dimension) stream: consecutive slices in the WAL have seq + 1 and prev_b3 = the
 * previous b3; a stream's first slice links to the heads checkpoint's head when the
 * checkpoint's seq is lower, and has the checkpoint's b3 when the seqs are equal; a gap is
 * allowed only below the checkpoint's seq (those slices were ACKed and compacted). */
#include "chain.h"
#include "host.h"

#include "internal.h"
#include "io.h"
#include "wal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Printed in full up to these counts; beyond them only counted. */
#define MAX_PRINTED_PROBLEMS 1000
#define MAX_PRINTED_BREAKS 1000

/* ---- small helpers ------------------------------------------------------------------- */

static uint64_t now_ms_mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

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

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* ---- what the scan found ----------------------------------------------------------- */

typedef struct seg_info {
    char *path;
    uint64_t id;
    uint64_t bytes;
    bool readable; /* its size could be read */
    bool hdr_ok;   /* magic, checksum and id of its 32-byte header hold */
    int64_t created_ms;
    uint32_t hdr_frames; /* the frame count its header announces */
    uint32_t frames;     /* valid slice frames found in it */
    uint32_t problems;
} seg_info_t;

enum { EV_FRAME = 1, EV_PROBLEM = 2 };

typedef struct event {
    int kind;
    /* EV_FRAME */
    uint64_t frame_seq;
    uint8_t tenant[16];
    char dim[RA_DIM_NAME_MAX + 1];
    ra_slice_id_t id;
    uint32_t rows;
    uint8_t b3[32], prev_b3[32];
    /* EV_PROBLEM */
    char *what, *detail, *file;
    uint64_t offset;
} event_t;

/* One (tenant, dimension) stream's chain state. */
typedef struct stream {
    bool used, has_head, has_last;
    uint8_t tenant[16];
    char dim[RA_DIM_NAME_MAX + 1];
    uint64_t head_seq, last_seq;
    uint8_t head_b3[32], last_b3[32];
} stream_t;

typedef struct scan {
    /* set up by the command */
    const char *cmd;    /* "verify" or "wal inspect" */
    const char *target; /* as given on the command line */
    char dir[PATH_MAX];
    bool file_mode; /* one segment file, not a directory */
    char real_file[PATH_MAX];
    char virt_path[PATH_MAX + 32]; /* the name the core sees for it */
    bool progress;
    bool inspect, json;

    /* directory listing */
    uint64_t n_seg_files, n_tmp, n_broken, n_empty_broken, n_other;
    bool has_heads, has_lock, has_reserve;

    /* segments, in the order the core scans them */
    seg_info_t *segs;
    size_t nsegs, segs_cap;
    int cur_fd; /* the descriptor of the segment being read, -1 */

    /* inspect: events of the current segment, printed when it is complete */
    event_t *ev;
    size_t nev, ev_cap;

    /* chains */
    stream_t *streams;
    size_t streams_cap, nstreams;
    uint64_t heads, links_checked, breaks, breaks_printed;
    char **break_lines;
    size_t nbreak_lines, break_lines_cap;

    /* totals */
    uint64_t frames, bytes, problems, problems_printed;
    char **problem_lines;
    size_t nproblem_lines, problem_lines_cap;

    /* progress */
    uint64_t t0, last_progress, segs_scanned;
    bool oom;
} scan_t;

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

static void add_line(scan_t *sc, char ***lines, size_t *n, size_t *cap, char *line) {
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

static char *fmt_alloc(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *fmt_alloc(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) s = NULL;
    va_end(ap);
    return s;
}

/* ---- streams: open addressing on (tenant, dimension) -------------------------------- */

static uint64_t stream_hash(const uint8_t tenant[16], const char *dim) {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < 16; i++)
        h = (h ^ tenant[i]) * 1099511628211ull;
    for (const char *p = dim; *p; p++)
        h = (h ^ (uint8_t)*p) * 1099511628211ull;
    return h ^ (h >> 29);
}

static stream_t *stream_get(scan_t *sc, const uint8_t tenant[16], const char *dim) {
    if ((sc->nstreams + 1) * 2 > sc->streams_cap) {
        size_t cap = sc->streams_cap ? sc->streams_cap * 2 : 1024;
        stream_t *t = calloc(cap, sizeof *t);
        if (!t) {
            sc->oom = true;
            return NULL;
        }
        for (size_t i = 0; i < sc->streams_cap; i++) {
            stream_t *o = &sc->streams[i];
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
        stream_t *s = &sc->streams[j];
        if (memcmp(s->tenant, tenant, 16) == 0 && strcmp(s->dim, dim) == 0) return s;
        j = (j + 1) & (sc->streams_cap - 1);
    }
    stream_t *s = &sc->streams[j];
    s->used = true;
    memcpy(s->tenant, tenant, 16);
    snprintf(s->dim, sizeof s->dim, "%s", dim);
    sc->nstreams++;
    return s;
}

/* ---- the read-only I/O layer ------------------------------------------------------- */

static bool ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* The path the core asks for, mapped to the real file (file mode only differs). */
static const char *real_path(scan_t *sc, const char *path) {
    if (sc->file_mode && strcmp(path, sc->virt_path) == 0) return sc->real_file;
    return path;
}

/* File mode shows the core a directory with that one file in it. */
static bool hidden(const scan_t *sc, const char *path) {
    return sc->file_mode && strcmp(path, sc->virt_path) != 0;
}

static const ra__io_t *base_io(void) {
    return ra__io_posix();
}

static int ro_create(void *ud, const char *path) {
    (void)ud;
    (void)path;
    return -EROFS;
}

static ssize_t ro_write(void *ud, int fd, const void *buf, size_t n) {
    (void)ud;
    (void)fd;
    (void)buf;
    (void)n;
    return -EROFS;
}

static int ro_fsync(void *ud, int fd) {
    (void)ud;
    (void)fd;
    return -EROFS;
}

static int ro_path_op(void *ud, const char *path) {
    (void)ud;
    (void)path;
    return -EROFS;
}

static int ro_rename(void *ud, const char *from, const char *to) {
    (void)ud;
    (void)from;
    (void)to;
    return -EROFS;
}

static int ro_truncate(void *ud, const char *path, uint64_t len) {
    (void)ud;
    (void)path;
    (void)len;
    return -EROFS;
}

static int ro_lock(void *ud, const char *path, int *handle) {
    (void)ud;
    (void)path;
    (void)handle;
    return -EROFS;
}

static void ro_unlock(void *ud, int handle) {
    (void)ud;
    (void)handle;
}

static void progress(scan_t *sc, bool force) {
    if (!sc->progress) return;
    uint64_t now = now_ms_mono();
    if (!force && now - sc->last_progress < 1000) return;
    sc->last_progress = now;
    fprintf(
        stderr, RA_HOST_NAME " %s: %" PRIu64 "/%" PRIu64 " segments, %" PRIu64 " frames (%.1f s)\n",
        sc->cmd, sc->segs_scanned, sc->n_seg_files, sc->frames, (double)(now - sc->t0) / 1000.0);
}

static void flush_events(scan_t *sc);

static int ro_size(void *ud, const char *path, uint64_t *out) {
    scan_t *sc = ud;
    if (hidden(sc, path)) return -ENOENT;
    int rc = base_io()->size(NULL, real_path(sc, path), out);
    if (ends_with(path, ".seg")) {
        /* The core sizes a segment first, then reads it whole, then walks its frames:
         * from here on, frames and problems belong to this segment. */
        flush_events(sc);
        seg_info_t *p = grow(sc->segs, &sc->segs_cap, sc->nsegs + 1, sizeof *sc->segs, &sc->oom);
        if (!p) return -ENOMEM;
        sc->segs = p;
        seg_info_t *s = &sc->segs[sc->nsegs++];
        memset(s, 0, sizeof *s);
        s->path = strdup(real_path(sc, path));
        const char *b = base_name(path);
        for (int i = 0; i < 16 && b[i]; i++) {
            char c = b[i];
            s->id = s->id << 4 | (uint64_t)(c <= '9' ? c - '0' : c - 'a' + 10);
        }
        s->readable = rc == 0;
        if (rc == 0) s->bytes = *out;
        sc->bytes += s->bytes;
        sc->segs_scanned++;
        if (sc->segs_scanned % 1000 == 0)
            progress(sc, true);
        else
            progress(sc, false);
    }
    return rc;
}

static int ro_open_read(void *ud, const char *path) {
    scan_t *sc = ud;
    if (hidden(sc, path)) return -ENOENT;
    int fd = base_io()->open_read(NULL, real_path(sc, path));
    if (fd >= 0 && ends_with(path, ".seg")) sc->cur_fd = fd;
    return fd;
}

static ssize_t ro_pread(void *ud, int fd, void *buf, size_t n, uint64_t off) {
    scan_t *sc = ud;
    ssize_t r = base_io()->pread(NULL, fd, buf, n, off);
    if (fd == sc->cur_fd && off == 0 && r >= RA_WAL_SEG_HDR && sc->nsegs) {
        /* The segment header, for the listing (the core validates it on its own). */
        seg_info_t *s = &sc->segs[sc->nsegs - 1];
        const uint8_t *h = buf;
        uint8_t d[32];
        ra_b3(h, 28, d);
        s->hdr_ok = memcmp(h, RA_WAL_SEG_MAGIC, 8) == 0 && ra__get_u32(h + 28) == ra__get_u32(d) &&
                    ra__get_u64(h + 8) == s->id;
        if (s->hdr_ok) {
            s->created_ms = (int64_t)ra__get_u64(h + 16);
            s->hdr_frames = ra__get_u32(h + 24);
        }
    }
    return r;
}

static int ro_close(void *ud, int fd) {
    scan_t *sc = ud;
    if (fd == sc->cur_fd) sc->cur_fd = -1;
    return base_io()->close(NULL, fd);
}

typedef struct {
    scan_t *sc;
    int (*cb)(void *, const char *);
    void *cbud;
} list_ctx_t;

static int ro_list_entry(void *ud, const char *name) {
    list_ctx_t *l = ud;
    scan_t *sc = l->sc;
    size_t len = strlen(name);
    bool canonical_seg =
        len == 20 && ends_with(name, ".seg") && strspn(name, "0123456789abcdef") == 16;
    if (canonical_seg)
        sc->n_seg_files++;
    else if (ends_with(name, ".tmp"))
        sc->n_tmp++;
    else if (ends_with(name, ".empty.broken"))
        sc->n_empty_broken++;
    else if (ends_with(name, ".broken"))
        sc->n_broken++;
    else if (strcmp(name, "heads") == 0)
        sc->has_heads = true;
    else if (strcmp(name, "LOCK") == 0)
        sc->has_lock = true;
    else if (strcmp(name, "reserve") == 0)
        sc->has_reserve = true;
    else
        sc->n_other++;
    return l->cb(l->cbud, name);
}

static int ro_list(void *ud, const char *dir, int (*cb)(void *, const char *), void *cbud) {
    scan_t *sc = ud;
    if (sc->file_mode) {
        sc->n_seg_files = 1;
        return cb(cbud, base_name(sc->virt_path));
    }
    list_ctx_t l = {sc, cb, cbud};
    return base_io()->list(NULL, dir, ro_list_entry, &l);
}

static int ro_fsync_dir(void *ud, const char *dir) {
    (void)ud;
    (void)dir;
    return -EROFS;
}

/* ---- visitor ---------------------------------------------------------------------- */

static void chain_break(scan_t *sc, const event_t *e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void chain_break(scan_t *sc, const event_t *e, const char *fmt, ...) {
    sc->breaks++;
    if (sc->nbreak_lines >= MAX_PRINTED_BREAKS) return;
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    ra_tenant_t t;
    memcpy(t.b, e->tenant, 16);
    char ts[37];
    ra_tenant_format(&t, ts);
    const char *file = sc->nsegs ? sc->segs[sc->nsegs - 1].path : "?";
    add_line(sc, &sc->break_lines, &sc->nbreak_lines, &sc->break_lines_cap,
             fmt_alloc("CHAIN BREAK %s/%s: slice seq %" PRIu64 " (frame seq %" PRIu64 " in %s): %s",
                       ts, e->dim, e->id.seq, e->frame_seq, file, what));
}

static void hex_prefix(const uint8_t *b, char *out) {
    ra_hex(b, 8, out); /* 16 hex digits */
}

/* The chain rules of the header comment, for one slice in WAL order. */
static void check_chain(scan_t *sc, const event_t *e) {
    stream_t *st = stream_get(sc, e->tenant, e->dim);
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

static int on_head(void *ud, const uint8_t tenant[16], const char *dimension, uint64_t seq,
                   int64_t last_ws, const uint8_t b3[32]) {
    scan_t *sc = ud;
    sc->heads++;
    stream_t *st = stream_get(sc, tenant, dimension);
    if (st) {
        st->has_head = true;
        st->head_seq = seq;
        memcpy(st->head_b3, b3, 32);
    }
    if (sc->inspect) {
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
    return 0;
}

static event_t *new_event(scan_t *sc) {
    event_t *p = grow(sc->ev, &sc->ev_cap, sc->nev + 1, sizeof *sc->ev, &sc->oom);
    if (!p) return NULL;
    sc->ev = p;
    event_t *e = &sc->ev[sc->nev++];
    memset(e, 0, sizeof *e);
    return e;
}

static int on_slice(void *ud, ra_slice_t *s, uint64_t frame_seq) {
    scan_t *sc = ud;
    event_t tmp, *e = &tmp;
    memset(e, 0, sizeof *e);
    if (sc->inspect && !(e = new_event(sc))) e = &tmp;
    e->kind = EV_FRAME;
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
    check_chain(sc, e);
    if ((sc->frames & 4095) == 0) progress(sc, false);
    return 0;
}

static void on_problem(void *ud, const char *what, const char *file, uint64_t off,
                       const char *detail) {
    scan_t *sc = ud;
    sc->problems++;
    if (sc->nsegs && strcmp(real_path(sc, file), sc->segs[sc->nsegs - 1].path) == 0)
        sc->segs[sc->nsegs - 1].problems++;
    const char *f = real_path(sc, file);
    if (sc->inspect) {
        event_t *e = new_event(sc);
        if (e) {
            e->kind = EV_PROBLEM;
            e->what = strdup(what);
            e->detail = strdup(detail);
            e->file = strdup(f);
            e->offset = off;
        }
        return;
    }
    if (sc->nproblem_lines < MAX_PRINTED_PROBLEMS)
        add_line(sc, &sc->problem_lines, &sc->nproblem_lines, &sc->problem_lines_cap,
                 fmt_alloc("CORRUPT %s: %s at offset %" PRIu64 "%s%s", f, what, off,
                           detail[0] ? ": " : "", detail));
}

/* ---- inspect output ----------------------------------------------------------------- */

static void print_segment(scan_t *sc, const seg_info_t *s) {
    char created[48] = "?";
    if (s->hdr_ok) iso_utc(s->created_ms, true, created, sizeof created);
    char id[17];
    snprintf(id, sizeof id, "%016" PRIx64, s->id);
    if (sc->json) {
        printf("{\"type\":\"segment\",\"id\":\"%s\",\"file\":", id);
        json_str(stdout, s->path);
        printf(",\"bytes\":%" PRIu64 ",\"frames\":%u,\"header_ok\":%s", s->bytes, s->frames,
               s->hdr_ok ? "true" : "false");
        if (s->hdr_ok)
            printf(",\"header_frames\":%u,\"created_ms\":%" PRId64 ",\"created\":\"%s\"",
                   s->hdr_frames, s->created_ms, created);
        printf(",\"problems\":%u}\n", s->problems);
    } else {
        printf("segment id=%s file=%s bytes=%" PRIu64 " frames=%u created=%s%s\n", id, s->path,
               s->bytes, s->frames, created,
               !s->readable ? " UNREADABLE"
               : s->hdr_ok  ? ""
                            : " BAD-HEADER");
    }
}

static void print_event(scan_t *sc, const event_t *e, const seg_info_t *seg) {
    char id[17] = "";
    if (seg) snprintf(id, sizeof id, "%016" PRIx64, seg->id);
    if (e->kind == EV_PROBLEM) {
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
static void flush_events(scan_t *sc) {
    if (!sc->inspect) return;
    seg_info_t *seg = NULL;
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

/* ---- running a scan ----------------------------------------------------------------- */

static void scan_free(scan_t *sc) {
    for (size_t i = 0; i < sc->nsegs; i++)
        free(sc->segs[i].path);
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

/* Sets up file or directory mode for sc->target. Returns 0, or an exit status after
 * printing one line. */
static int prepare(scan_t *sc) {
    struct stat st;
    if (stat(sc->target, &st) != 0) {
        fprintf(stderr, RA_HOST_NAME " %s: %s: %s\n", sc->cmd, sc->target, strerror(errno));
        return RA_HOST_EXIT_USAGE;
    }
    if (S_ISDIR(st.st_mode)) {
        if (strlen(sc->target) >= sizeof sc->dir - 64) {
            fprintf(stderr, RA_HOST_NAME " %s: %s: path too long\n", sc->cmd, sc->target);
            return RA_HOST_EXIT_USAGE;
        }
        snprintf(sc->dir, sizeof sc->dir, "%s", sc->target);
        return 0;
    }
    if (!S_ISREG(st.st_mode)) {
        fprintf(stderr, RA_HOST_NAME " %s: %s: not a directory or a regular file\n", sc->cmd,
                sc->target);
        return RA_HOST_EXIT_USAGE;
    }
    /* One segment file: the core lists a directory holding only it, under a canonical
     * name (its header's id when its own name is not <16 hex>.seg), and finds no heads. */
    sc->file_mode = true;
    if (!realpath(sc->target, sc->real_file)) {
        fprintf(stderr, RA_HOST_NAME " %s: %s: %s\n", sc->cmd, sc->target, strerror(errno));
        return RA_HOST_EXIT_USAGE;
    }
    snprintf(sc->dir, sizeof sc->dir, "%s", sc->real_file);
    char *slash = strrchr(sc->dir, '/');
    if (slash == sc->dir)
        slash[1] = '\0';
    else if (slash)
        *slash = '\0';
    const char *b = base_name(sc->real_file);
    char vname[32];
    if (strlen(b) == 20 && ends_with(b, ".seg") && strspn(b, "0123456789abcdef") == 16) {
        snprintf(vname, sizeof vname, "%s", b);
    } else {
        uint64_t id = 0;
        uint8_t h[16];
        int fd = open(sc->real_file, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            if (pread(fd, h, 16, 0) == 16 && memcmp(h, RA_WAL_SEG_MAGIC, 8) == 0)
                id = ra__get_u64(h + 8);
            close(fd);
        }
        snprintf(vname, sizeof vname, "%016" PRIx64 ".seg", id);
    }
    /* The core only ever asks the I/O layer, which maps this name back to the file and
     * hides every other entry of the directory (the heads checkpoint included). */
    snprintf(sc->virt_path, sizeof sc->virt_path, "%s/%s", sc->dir, vname);
    return 0;
}

static bool has_entry(const char *dir, const char *name) {
    char p[PATH_MAX + 8];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return lstat(p, &st) == 0;
}

/* A WAL directory has what a meter leaves in it (FORMAT.md §4.1): its LOCK (made at the
 * first open), its heads checkpoint, or a segment. An empty directory, /proc or a daemon's
 * state directory is not one, and verify must not call it OK (issue 14 item 12). */
static bool looks_like_wal(const char *dir) {
    if (has_entry(dir, "LOCK") || has_entry(dir, "heads")) return true;
    DIR *d = opendir(dir);
    if (!d) return false;
    bool seg = false;
    struct dirent *e;
    while (!seg && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        seg = n >= 20 && strncmp(e->d_name + 16, ".seg", 4) == 0 &&
              strspn(e->d_name, "0123456789abcdef") == 16;
    }
    closedir(d);
    return seg;
}

/* A running meter holds LOCK (flock): the scan may then see segments come and go. */
static bool wal_in_use(const scan_t *sc) {
    if (sc->file_mode) return false;
    char p[PATH_MAX + 8];
    snprintf(p, sizeof p, "%s/LOCK", sc->dir);
    int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return false;
    bool busy = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd); /* releases the shared lock if we got it */
    return busy;
}

static int run_scan(scan_t *sc, ra__wal_t *w, char *err, size_t errlen) {
    ra__io_t io = {
        .ud = sc,
        .create = ro_create,
        .open_read = ro_open_read,
        .write = ro_write,
        .pread = ro_pread,
        .fsync = ro_fsync,
        .close = ro_close,
        .fsync_dir = ro_fsync_dir,
        .rename = ro_rename,
        .unlink = ro_path_op,
        .truncate = ro_truncate,
        .size = ro_size,
        .mkdir = ro_path_op,
        .list = ro_list,
        .lock = ro_lock,
        .unlock = ro_unlock,
    };
    ra__wal_visitor_t v = {sc, on_head, on_slice, on_problem};
    sc->cur_fd = -1;
    sc->t0 = sc->last_progress = now_ms_mono();
    err[0] = '\0';
    int rc = ra__wal_open(w, &io, sc->dir, UINT64_MAX, UINT32_MAX, 0, true, &v, err, errlen);
    flush_events(sc);
    if (sc->progress && now_ms_mono() - sc->t0 >= 1000) progress(sc, true);
    return rc;
}

/* ---- verify -------------------------------------------------------------------------- */

int ra_host_verify(const char *exe, int argc, char **argv) {
    /* A PostgreSQL ledger (postgres://..., postgresql://..., dbname=...): pgverify.c. */
    for (int i = 0; i < argc; i++)
        if (argv[i][0] != '-' && ra_host_is_pg_target(argv[i]))
            return ra_host_pg_verify(argc, argv);
    scan_t sc;
    memset(&sc, 0, sizeof sc);
    sc.cmd = "verify";
    sc.progress = true;
    bool totals = false;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "-q") == 0 || strcmp(argv[i], "--quiet") == 0) {
            sc.progress = false;
        } else if (strcmp(argv[i], "--totals") == 0) {
            totals = true;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr,
                    RA_HOST_NAME " verify: unknown option '%s' (usage: " RA_HOST_NAME
                                 " verify [--quiet] [--totals] PATH)\n",
                    argv[i]);
            return RA_HOST_EXIT_USAGE;
        } else if (sc.target) {
            fprintf(stderr, RA_HOST_NAME " verify: one PATH only (got '%s' and '%s')\n", sc.target,
                    argv[i]);
            return RA_HOST_EXIT_USAGE;
        } else {
            sc.target = argv[i];
        }
    }
    if (!sc.target) {
        fprintf(stderr, RA_HOST_NAME " verify: needs a PATH: " RA_HOST_NAME
                                     " verify [--quiet] WAL-DIR|SEGMENT-FILE\n");
        return RA_HOST_EXIT_USAGE;
    }
    /* A daemon's state directory (`make run`'s var/): the whole chain, chainverify.c. */
    if (ra_host_is_state_dir(sc.target)) return ra_host_chain_verify(exe, argc, argv);
    /* A file ledger (its LEDGER marker, or one <dimension>.ledger file): ledgercmd.c. */
    if (ra_host_is_ledger(sc.target)) return ra_host_ledger_verify(sc.target, totals);
    if (totals) {
        fprintf(stderr, RA_HOST_NAME " verify: --totals is for a file ledger; '%s' is not one\n",
                sc.target);
        return RA_HOST_EXIT_USAGE;
    }
    int ec = prepare(&sc);
    if (ec) return ec;
    if (!sc.file_mode && !looks_like_wal(sc.dir)) {
        fprintf(stderr,
                RA_HOST_NAME " verify: %s is neither a WAL directory (no LOCK, heads or "
                             "<16 hex>.seg) nor a file ledger (no LEDGER marker)%s\n",
                sc.target,
                has_entry(sc.dir, "wal") || has_entry(sc.dir, "ledger")
                    ? "; a daemon's state directory? verify its wal/ or ledger/"
                    : "");
        return RA_HOST_EXIT_USAGE;
    }
    bool busy = wal_in_use(&sc);

    ra__wal_t w;
    char err[512];
    int rc = run_scan(&sc, &w, err, sizeof err);
    if (rc != 0) {
        /* The scan stopped (an unreadable file: the meter would refuse to open too). */
        for (size_t i = 0; i < sc.nproblem_lines; i++)
            printf("%s\n", sc.problem_lines[i]);
        printf("FAILED: %s\n", err[0] ? err : ra_strerror(rc));
        fflush(stdout);
        fprintf(stderr, RA_HOST_NAME " verify: %s: %s\n", sc.target,
                err[0] ? err : ra_strerror(rc));
        scan_free(&sc);
        return rc == RA_ENOTFOUND ? RA_HOST_EXIT_USAGE : RA_HOST_EXIT_FAILED;
    }
    uint64_t torn = w.stats.torn_bytes, corrupt = w.stats.corrupt_frames;
    ra__wal_close(&w);

    printf("verify %s (%s)\n", sc.target, sc.file_mode ? "one segment file" : "WAL directory");
    if (busy)
        printf("  note: a running meter holds this WAL's LOCK: segments may be written or "
               "removed during the scan\n");
    printf("  segments        %zu (%" PRIu64 " bytes)\n", sc.nsegs, sc.bytes);
    printf("  frames          %" PRIu64 " valid\n", sc.frames);
    printf("  pending slices  %" PRIu64 " (every frame on disk; ACKed ones go with their "
           "segment)\n",
           sc.frames);
    printf("  digests         %" PRIu64 " verified (each payload's BLAKE3 = its frame trailer "
           "= the slice b3)\n",
           sc.frames);
    if (sc.file_mode)
        printf("  chain links     %" PRIu64 " checked within this file, %" PRIu64
               " breaks (%zu streams)\n",
               sc.links_checked, sc.breaks, sc.nstreams);
    else
        printf("  chain links     %" PRIu64 " checked, %" PRIu64 " breaks (%zu streams, %" PRIu64
               " heads in the checkpoint%s)\n",
               sc.links_checked, sc.breaks, sc.nstreams, sc.heads,
               sc.has_heads ? "" : ": no heads file");
    printf("  corrupt frames  %" PRIu64 "\n", corrupt);
    printf("  torn bytes      %" PRIu64 "\n", torn);
    if (!sc.file_mode && (sc.n_tmp || sc.n_broken || sc.n_empty_broken || sc.n_other))
        printf("  other files     %" PRIu64 " .tmp (unfinished writes, never reported sealed; "
               "the next open removes them), %" PRIu64 " .broken, %" PRIu64
               " .empty.broken (bytes kept by an earlier recovery), %" PRIu64 " unknown\n",
               sc.n_tmp, sc.n_broken, sc.n_empty_broken, sc.n_other);
    for (size_t i = 0; i < sc.nproblem_lines; i++)
        printf("%s\n", sc.problem_lines[i]);
    if (sc.problems > sc.nproblem_lines)
        printf("... and %" PRIu64 " more problems\n", sc.problems - sc.nproblem_lines);
    for (size_t i = 0; i < sc.nbreak_lines; i++)
        printf("%s\n", sc.break_lines[i]);
    if (sc.breaks > sc.nbreak_lines)
        printf("... and %" PRIu64 " more chain breaks\n", sc.breaks - sc.nbreak_lines);
    bool bad = sc.problems || sc.breaks || torn || corrupt || sc.oom;
    if (sc.oom) printf("out of memory: the report is incomplete\n");
    if (bad)
        printf("FAILED: %" PRIu64 " problems (%" PRIu64 " corrupt frames, %" PRIu64
               " torn bytes), %" PRIu64 " chain breaks\n",
               sc.problems, corrupt, torn, sc.breaks);
    else
        printf("OK\n");
    fflush(stdout);
    scan_free(&sc);
    return bad ? RA_HOST_EXIT_FAILED : RA_HOST_EXIT_OK;
}

/* ---- wal inspect ---------------------------------------------------------------------- */

static void wal_usage(FILE *out) {
    fputs("usage: " RA_HOST_NAME " wal inspect [--json] WAL-DIR|SEGMENT-FILE\n"
          "       " RA_HOST_NAME " wal verify [--quiet] WAL-DIR|SEGMENT-FILE  (= verify)\n",
          out);
}

int ra_host_wal(const char *exe, int argc, char **argv) {
    if (argc < 1) {
        fprintf(stderr, RA_HOST_NAME " wal: needs a subcommand\n");
        wal_usage(stderr);
        return RA_HOST_EXIT_USAGE;
    }
    if (strcmp(argv[0], "verify") == 0) return ra_host_verify(exe, argc - 1, argv + 1);
    if (strcmp(argv[0], "help") == 0 || strcmp(argv[0], "--help") == 0) {
        wal_usage(stdout);
        return RA_HOST_EXIT_OK;
    }
    if (strcmp(argv[0], "inspect") != 0) {
        fprintf(stderr, RA_HOST_NAME " wal: unknown subcommand '%s'\n", argv[0]);
        wal_usage(stderr);
        return RA_HOST_EXIT_USAGE;
    }
    scan_t sc;
    memset(&sc, 0, sizeof sc);
    sc.cmd = "wal inspect";
    sc.inspect = true;
    sc.progress = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            sc.json = true;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, RA_HOST_NAME " wal inspect: unknown option '%s'\n", argv[i]);
            wal_usage(stderr);
            return RA_HOST_EXIT_USAGE;
        } else if (sc.target) {
            fprintf(stderr, RA_HOST_NAME " wal inspect: one PATH only (got '%s' and '%s')\n",
                    sc.target, argv[i]);
            return RA_HOST_EXIT_USAGE;
        } else {
            sc.target = argv[i];
        }
    }
    if (!sc.target) {
        fprintf(stderr, RA_HOST_NAME " wal inspect: needs a PATH\n");
        wal_usage(stderr);
        return RA_HOST_EXIT_USAGE;
    }
    int ec = prepare(&sc);
    if (ec) return ec;
    ra__wal_t w;
    char err[512];
    int rc = run_scan(&sc, &w, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, RA_HOST_NAME " wal inspect: %s: %s\n", sc.target,
                err[0] ? err : ra_strerror(rc));
        scan_free(&sc);
        return rc == RA_ENOTFOUND ? RA_HOST_EXIT_USAGE : RA_HOST_EXIT_FAILED;
    }
    uint64_t torn = w.stats.torn_bytes, corrupt = w.stats.corrupt_frames;
    ra__wal_close(&w);
    if (sc.json)
        printf("{\"type\":\"summary\",\"segments\":%zu,\"bytes\":%" PRIu64 ",\"frames\":%" PRIu64
               ",\"heads\":%" PRIu64 ",\"problems\":%" PRIu64 ",\"corrupt_frames\":%" PRIu64
               ",\"torn_bytes\":%" PRIu64 ",\"tmp_files\":%" PRIu64 ",\"broken_files\":%" PRIu64
               "}\n",
               sc.nsegs, sc.bytes, sc.frames, sc.heads, sc.problems, corrupt, torn, sc.n_tmp,
               sc.n_broken + sc.n_empty_broken);
    else
        printf("summary segments=%zu bytes=%" PRIu64 " frames=%" PRIu64 " heads=%" PRIu64
               " problems=%" PRIu64 " corrupt_frames=%" PRIu64 " torn_bytes=%" PRIu64
               " tmp_files=%" PRIu64 " broken_files=%" PRIu64 "\n",
               sc.nsegs, sc.bytes, sc.frames, sc.heads, sc.problems, corrupt, torn, sc.n_tmp,
               sc.n_broken + sc.n_empty_broken);
    fflush(stdout);
    bool bad = sc.problems || torn || corrupt || sc.oom;
    scan_free(&sc);
    return bad ? RA_HOST_EXIT_FAILED : RA_HOST_EXIT_OK;
}
