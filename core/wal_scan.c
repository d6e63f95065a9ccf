/* The read-only scan of a WAL for tools (wal_reader.h): the core's recovery scan
 * (ra__wal_open, read_only) over an I/O layer that refuses every change and reports each
 * segment before the scan reads its frames. In one-file mode the layer shows the scan a
 * directory holding that one file under a canonical name, and hides everything else. */
#include "wal.h"
#include "wal_reader.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct scan {
    const ra__walscan_visitor_t *v;
    ra__walscan_result_t *out;
    char dir[PATH_MAX];
    bool one_file;
    char real_file[PATH_MAX];
    char virt_path[PATH_MAX + 32]; /* the name the core sees for it */
} scan_t;

static bool ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static bool canonical_seg_name(const char *name) {
    return strlen(name) == 20 && ends_with(name, ".seg") && strspn(name, "0123456789abcdef") == 16;
}

/* The path the core asks for, mapped to the real file (one-file mode only differs). */
static const char *real_path(const scan_t *sc, const char *path) {
    if (sc->one_file && strcmp(path, sc->virt_path) == 0) return sc->real_file;
    return path;
}

/* One-file mode shows the core a directory with that one file in it. */
static bool hidden(const scan_t *sc, const char *path) {
    return sc->one_file && strcmp(path, sc->virt_path) != 0;
}

static const ra__io_t *base(void) {
    return ra__io_posix();
}

/* ---- every call that could change the directory fails -------------------------------- */

static ssize_t ro_write(void *ud, int fd, const void *buf, size_t n) {
    (void)ud, (void)fd, (void)buf, (void)n;
    return -EROFS;
}
static int ro_fsync(void *ud, int fd) {
    (void)ud, (void)fd;
    return -EROFS;
}
static ssize_t ro_pwrite(void *ud, int fd, const void *buf, size_t n, uint64_t off) {
    (void)ud, (void)fd, (void)buf, (void)n, (void)off;
    return -EROFS;
}
static int ro_path_op(void *ud, const char *path) {
    (void)ud, (void)path;
    return -EROFS;
}
static int ro_mkdir(void *ud, const char *path, int flags) {
    (void)ud, (void)path, (void)flags;
    return -EROFS;
}
static int ro_rename(void *ud, const char *from, const char *to) {
    (void)ud, (void)from, (void)to;
    return -EROFS;
}
static int ro_truncate(void *ud, const char *path, uint64_t len) {
    (void)ud, (void)path, (void)len;
    return -EROFS;
}
static int ro_lock(void *ud, const char *path, int *handle) {
    (void)ud, (void)path, (void)handle;
    return -EROFS;
}
static void ro_unlock(void *ud, int handle) {
    (void)ud, (void)handle;
}

/* ---- reads, passed through --------------------------------------------------------- */

/* The segment header, for the caller's listing (the core validates it on its own). */
static void read_header(ra__walscan_segment_t *s) {
    int fd = base()->open(NULL, s->path, RA__IO_READ | RA__IO_PRIVATE);
    if (fd < 0) return;
    uint8_t h[RA_WAL_SEG_HDR], d[32];
    if (base()->pread(NULL, fd, h, sizeof h, 0) == (ssize_t)sizeof h) {
        ra_b3(h, 28, d);
        s->header_ok = memcmp(h, RA_WAL_SEG_MAGIC, 8) == 0 &&
                       ra__get_u32(h + 28) == ra__get_u32(d) && ra__get_u64(h + 8) == s->id;
    }
    if (s->header_ok) {
        s->created_ms = (int64_t)ra__get_u64(h + 16);
        s->header_frames = ra__get_u32(h + 24);
    }
    base()->close(NULL, fd);
}

static int ro_size(void *ud, const char *path, uint64_t *size) {
    scan_t *sc = ud;
    if (hidden(sc, path)) return -ENOENT;
    int rc = base()->size(NULL, real_path(sc, path), size);
    if (!ends_with(path, ".seg")) return rc;
    /* The core sizes a segment first, then reads its frames: from here on, frames and
     * problems belong to this segment. */
    ra__walscan_segment_t s = {.path = real_path(sc, path), .readable = rc == 0};
    const char *b = base_name(path);
    for (int i = 0; i < 16 && b[i]; i++)
        s.id = s.id << 4 | (uint64_t)(b[i] <= '9' ? b[i] - '0' : b[i] - 'a' + 10);
    if (rc == 0) {
        s.bytes = *size;
        read_header(&s);
    }
    if (sc->v->segment) sc->v->segment(sc->v->ud, &s);
    return rc;
}

/* Reads only: an open to write fails like every call that could change the directory. */
static int ro_open(void *ud, const char *path, int flags) {
    scan_t *sc = ud;
    if ((flags & RA__IO_MODE) != RA__IO_READ) return -EROFS;
    if (hidden(sc, path)) return -ENOENT;
    return base()->open(NULL, real_path(sc, path), flags);
}

static int ro_fsize(void *ud, int fd, uint64_t *out) {
    (void)ud;
    return base()->fsize(NULL, fd, out);
}

static ssize_t ro_pread(void *ud, int fd, void *buf, size_t n, uint64_t off) {
    (void)ud;
    return base()->pread(NULL, fd, buf, n, off);
}

static int ro_close(void *ud, int fd) {
    (void)ud;
    return base()->close(NULL, fd);
}

typedef struct {
    scan_t *sc;
    int (*cb)(void *, const char *);
    void *cbud;
} list_ctx_t;

static int ro_list_entry(void *ud, const char *name) {
    list_ctx_t *l = ud;
    ra__walscan_result_t *o = l->sc->out;
    if (canonical_seg_name(name))
        o->segments++;
    else if (ends_with(name, ".tmp"))
        o->tmp++;
    else if (ends_with(name, ".empty.broken"))
        o->empty_broken++;
    else if (ends_with(name, ".broken"))
        o->broken++;
    else if (strcmp(name, "heads") == 0)
        o->has_heads = true;
    else if (strcmp(name, "LOCK") == 0)
        o->has_lock = true;
    else if (strcmp(name, "reserve") == 0)
        o->has_reserve = true;
    else
        o->other++;
    return l->cb(l->cbud, name);
}

static int ro_list(void *ud, const char *dir, int (*cb)(void *, const char *), void *cbud) {
    scan_t *sc = ud;
    if (sc->one_file) {
        sc->out->segments = 1;
        return cb(cbud, base_name(sc->virt_path));
    }
    list_ctx_t l = {sc, cb, cbud};
    return base()->list(NULL, dir, ro_list_entry, &l);
}

/* ---- the visitor, with real paths ------------------------------------------------------ */

static int on_head(void *ud, const uint8_t tenant[16], const char *dimension, uint64_t seq,
                   int64_t last_ws, const uint8_t b3[32]) {
    const scan_t *sc = ud;
    return sc->v->head ? sc->v->head(sc->v->ud, tenant, dimension, seq, last_ws, b3) : 0;
}

static int on_slice(void *ud, ra_slice_t *s, uint64_t frame_seq) {
    const scan_t *sc = ud;
    if (sc->v->slice) return sc->v->slice(sc->v->ud, s, frame_seq);
    ra_slice_unref(s);
    return 0;
}

static void on_problem(void *ud, const char *what, const char *file, uint64_t off,
                       const char *detail) {
    const scan_t *sc = ud;
    if (sc->v->problem) sc->v->problem(sc->v->ud, what, real_path(sc, file), off, detail);
}

/* One segment file: its directory, and the canonical name the core will see it under. */
static int one_file_setup(scan_t *sc, const char *path, char *err, size_t errlen) {
    if (!realpath(path, sc->real_file)) {
        ra__errbuf(err, errlen, "%s", strerror(errno));
        return RA_ENOTFOUND;
    }
    snprintf(sc->dir, sizeof sc->dir, "%s", sc->real_file);
    char *slash = strrchr(sc->dir, '/');
    if (slash == sc->dir)
        slash[1] = '\0';
    else if (slash)
        *slash = '\0';
    const char *b = base_name(sc->real_file);
    char vname[32];
    if (canonical_seg_name(b)) {
        snprintf(vname, sizeof vname, "%.20s", b); /* 20: canonical */
    } else {
        uint64_t id = 0;
        uint8_t h[16];
        int fd = base()->open(NULL, sc->real_file, RA__IO_READ | RA__IO_PRIVATE);
        if (fd >= 0) {
            if (base()->pread(NULL, fd, h, 16, 0) == 16 && memcmp(h, RA_WAL_SEG_MAGIC, 8) == 0)
                id = ra__get_u64(h + 8);
            base()->close(NULL, fd);
        }
        snprintf(vname, sizeof vname, "%016" PRIx64 ".seg", id);
    }
    snprintf(sc->virt_path, sizeof sc->virt_path, "%s/%s", sc->dir, vname);
    return 0;
}

int ra__walscan(const char *path, bool one_file, const ra__walscan_visitor_t *v,
                ra__walscan_result_t *out, char *err, size_t errlen) {
    if (err && errlen) err[0] = '\0';
    memset(out, 0, sizeof *out);
    scan_t sc = {.v = v, .out = out, .one_file = one_file};
    if (strlen(path) >= sizeof sc.dir - 64) {
        ra__errbuf(err, errlen, "path too long");
        return RA_EINVAL;
    }
    if (one_file) {
        int rc = one_file_setup(&sc, path, err, errlen);
        if (rc != 0) return rc;
    } else {
        snprintf(sc.dir, sizeof sc.dir, "%s", path);
    }
    ra__io_t io = {
        .ud = &sc,
        .open = ro_open,
        .write = ro_write,
        .pread = ro_pread,
        .pwrite = ro_pwrite,
        .fsync = ro_fsync,
        .close = ro_close,
        .fsize = ro_fsize,
        .fsync_dir = ro_path_op,
        .rename = ro_rename,
        .unlink = ro_path_op,
        .truncate = ro_truncate,
        .size = ro_size,
        .mkdir = ro_mkdir,
        .list = ro_list,
        .lock = ro_lock,
        .unlock = ro_unlock,
    };
    ra__wal_visitor_t wv = {&sc, on_head, on_slice, on_problem};
    ra__wal_t w;
    int rc = ra__wal_open(&w, &io, sc.dir, UINT64_MAX, UINT32_MAX, 0, true, &wv, err, errlen);
    if (rc != 0) return rc;
    out->torn_bytes = w.stats.torn_bytes;
    out->corrupt_frames = w.stats.corrupt_frames;
    ra__wal_close(&w);
    return 0;
}
