/* Bounded reading and writing of WAL segment files (wal.h): recovery, verify, compaction
 * and the backlog's refill see a segment through a window of RA_WAL_WINDOW bytes and
 * write through a buffer of the same size, so memory never depends on what a file claims
 * to hold — a 2 GB segment, or a sparse one, costs one window (I-7). */
#include "wal.h"

#include <errno.h>
#include <stdlib.h>

int ra__segr_open(ra__segr_t *r, const ra__io_t *io, const char *path) {
    memset(r, 0, sizeof *r);
    r->io = io;
    r->fd = -1;
    int rc = io->size(io->ud, path, &r->size);
    if (rc != 0) return rc;
    r->fd = io->open(io->ud, path, RA__IO_READ | RA__IO_PRIVATE);
    if (r->fd < 0) {
        rc = r->fd;
        r->fd = -1;
        return rc;
    }
    r->cap = (size_t)(r->size < RA_WAL_WINDOW ? r->size : RA_WAL_WINDOW);
    r->buf = malloc(r->cap ? r->cap : 1);
    if (!r->buf) {
        ra__segr_close(r);
        return -ENOMEM;
    }
    return 0;
}

void ra__segr_close(ra__segr_t *r) {
    if (r->fd >= 0) r->io->close(r->io->ud, r->fd);
    r->fd = -1;
    free(r->buf);
    r->buf = NULL;
}

const uint8_t *ra__segr_at(ra__segr_t *r, uint64_t off, size_t want, size_t *avail, int *rc) {
    *rc = 0;
    *avail = 0;
    if (off >= r->size) return r->buf;
    uint64_t left = r->size - off;
    size_t need = want < left ? want : (size_t)left;
    if (need > r->cap) need = r->cap;
    if (off < r->base || off + need > r->base + r->len) {
        /* Refill from off: as much as fits, so a run of frames is read in one call. */
        size_t fill = r->cap < left ? r->cap : (size_t)left;
        size_t got = 0;
        while (got < fill) {
            ssize_t n = r->io->pread(r->io->ud, r->fd, r->buf + got, fill - got, off + got);
            if (n < 0) {
                *rc = (int)n;
                r->len = 0;
                return NULL;
            }
            if (n == 0) break; /* the file shrank under us: what is there is all there is */
            got += (size_t)n;
        }
        r->base = off;
        r->len = got;
        if (got < need) need = got;
    }
    *avail = (size_t)(r->base + r->len - off);
    return r->buf + (off - r->base);
}

int ra__segw_open(ra__segw_t *o, const ra__io_t *io, const char *path) {
    memset(o, 0, sizeof *o);
    o->io = io;
    o->buf = malloc(RA_WAL_WINDOW);
    if (!o->buf) return -ENOMEM;
    o->fd = io->open(io->ud, path, RA__IO_CREATE | RA__IO_PRIVATE);
    if (o->fd < 0) {
        int rc = o->fd;
        free(o->buf);
        o->buf = NULL;
        return rc;
    }
    return 0;
}

static int segw_flush(ra__segw_t *o) {
    if (o->err || o->len == 0) return o->err;
    o->err = ra__io_write_all(o->io, o->fd, o->buf, o->len);
    o->len = 0;
    return o->err;
}

int ra__segw_write(ra__segw_t *o, const void *p, size_t n) {
    const uint8_t *b = p;
    while (n > 0 && !o->err) {
        if (o->len == RA_WAL_WINDOW) segw_flush(o);
        size_t k = RA_WAL_WINDOW - o->len < n ? RA_WAL_WINDOW - o->len : n;
        memcpy(o->buf + o->len, b, k);
        o->len += k;
        o->written += k;
        b += k;
        n -= k;
    }
    return o->err;
}

int ra__segw_copy(ra__segw_t *o, ra__segr_t *r, uint64_t off, uint64_t n) {
    while (n > 0 && !o->err) {
        size_t avail;
        int rc;
        const uint8_t *p =
            ra__segr_at(r, off, n < RA_WAL_WINDOW ? (size_t)n : RA_WAL_WINDOW, &avail, &rc);
        if (!p) return o->err = rc;
        if (avail == 0) return o->err = -EIO; /* shorter than it said */
        size_t k = avail < n ? avail : (size_t)n;
        ra__segw_write(o, p, k);
        off += k;
        n -= k;
    }
    return o->err;
}

int ra__segw_finish(ra__segw_t *o, bool do_fsync, uint64_t *fsync_us_out) {
    int rc = segw_flush(o);
    if (rc == 0 && do_fsync) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        rc = o->io->fsync(o->io->ud, o->fd);
        clock_gettime(CLOCK_MONOTONIC, &b);
        if (fsync_us_out)
            *fsync_us_out = (uint64_t)(b.tv_sec - a.tv_sec) * 1000000u +
                            (uint64_t)((b.tv_nsec - a.tv_nsec) / 1000);
    }
    int crc = o->io->close(o->io->ud, o->fd);
    o->fd = -1;
    free(o->buf);
    o->buf = NULL;
    return rc ? rc : crc;
}

void ra__segw_abandon(ra__segw_t *o) {
    if (o->fd >= 0) o->io->close(o->io->ud, o->fd);
    o->fd = -1;
    free(o->buf);
    o->buf = NULL;
}
