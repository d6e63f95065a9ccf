/* The I/O interface wrapper that remembers the last failing call (audit/iotrack.h). */
#include "iotrack.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static void failed(rau__iotrack_t *t, long rc, const char *op, const char *path) {
    if (rc >= 0) return;
    t->err = (int)-rc;
    t->failures++;
    snprintf(t->op, sizeof t->op, "%s", op);
    snprintf(t->path, sizeof t->path, "%s", path ? path : "?");
}

static const char *fd_path(rau__iotrack_t *t, int fd) {
    for (int i = 0; i < RAU__TRACK_FDS; i++)
        if (t->fds[i].fd == fd) return t->fds[i].path;
    return NULL;
}

static int tr_open(void *ud, const char *path, int flags) {
    rau__iotrack_t *t = ud;
    int fd = t->inner->open(t->inner->ud, path, flags);
    static const char *const ops[] = {"open", "open for appending", "create", "open for writing"};
    failed(t, fd, ops[flags & RA__IO_MODE], path);
    if (fd >= 0)
        for (int i = 0; i < RAU__TRACK_FDS; i++)
            if (t->fds[i].fd < 0) {
                t->fds[i].fd = fd;
                snprintf(t->fds[i].path, sizeof t->fds[i].path, "%s", path);
                break;
            }
    return fd;
}

static ssize_t tr_write(void *ud, int fd, const void *buf, size_t n) {
    rau__iotrack_t *t = ud;
    ssize_t r = t->inner->write(t->inner->ud, fd, buf, n);
    failed(t, r, "write", fd_path(t, fd));
    return r;
}

static ssize_t tr_pread(void *ud, int fd, void *buf, size_t n, uint64_t off) {
    rau__iotrack_t *t = ud;
    ssize_t r = t->inner->pread(t->inner->ud, fd, buf, n, off);
    failed(t, r, "read", fd_path(t, fd));
    return r;
}

static ssize_t tr_pwrite(void *ud, int fd, const void *buf, size_t n, uint64_t off) {
    rau__iotrack_t *t = ud;
    ssize_t r = t->inner->pwrite(t->inner->ud, fd, buf, n, off);
    failed(t, r, "write", fd_path(t, fd));
    return r;
}

static int tr_fsync(void *ud, int fd) {
    rau__iotrack_t *t = ud;
    int r = t->inner->fsync(t->inner->ud, fd);
    failed(t, r, "fdatasync", fd_path(t, fd));
    return r;
}

static int tr_close(void *ud, int fd) {
    rau__iotrack_t *t = ud;
    for (int i = 0; i < RAU__TRACK_FDS; i++)
        if (t->fds[i].fd == fd) t->fds[i].fd = -1;
    return t->inner->close(t->inner->ud, fd);
}

static int tr_fsize(void *ud, int fd, uint64_t *out) {
    rau__iotrack_t *t = ud;
    int r = t->inner->fsize(t->inner->ud, fd, out);
    failed(t, r, "stat", fd_path(t, fd));
    return r;
}

static int tr_truncate(void *ud, const char *path, uint64_t len) {
    rau__iotrack_t *t = ud;
    int r = t->inner->truncate(t->inner->ud, path, len);
    failed(t, r, "truncate", path);
    return r;
}

static int tr_rename(void *ud, const char *from, const char *to) {
    rau__iotrack_t *t = ud;
    int r = t->inner->rename(t->inner->ud, from, to);
    failed(t, r, "rename", to);
    return r;
}

static int tr_unlink(void *ud, const char *path) {
    rau__iotrack_t *t = ud;
    int r = t->inner->unlink(t->inner->ud, path);
    failed(t, r, "unlink", path);
    return r;
}

static int tr_fsync_dir(void *ud, const char *dir) {
    rau__iotrack_t *t = ud;
    int r = t->inner->fsync_dir(t->inner->ud, dir);
    failed(t, r, "fsync", dir);
    return r;
}

static int tr_mkdir(void *ud, const char *path, int flags) {
    rau__iotrack_t *t = ud;
    int r = t->inner->mkdir(t->inner->ud, path, flags);
    if (r != -EEXIST) failed(t, r, "mkdir", path);
    return r;
}

static int tr_list(void *ud, const char *dir, int (*cb)(void *, const char *), void *cbud) {
    rau__iotrack_t *t = ud;
    int r = t->inner->list(t->inner->ud, dir, cb, cbud);
    failed(t, r, "list", dir);
    return r;
}

static int tr_size(void *ud, const char *path, uint64_t *out) {
    rau__iotrack_t *t = ud;
    int r = t->inner->size(t->inner->ud, path, out);
    failed(t, r, "stat", path);
    return r;
}

static int tr_lock(void *ud, const char *path, int *handle) {
    rau__iotrack_t *t = ud;
    int r = t->inner->lock(t->inner->ud, path, handle);
    failed(t, r, "lock", path);
    return r;
}

static void tr_unlock(void *ud, int handle) {
    rau__iotrack_t *t = ud;
    t->inner->unlock(t->inner->ud, handle);
}

void rau__iotrack_init(rau__iotrack_t *t, const ra__io_t *inner) {
    memset(t, 0, sizeof *t);
    t->inner = inner;
    for (int i = 0; i < RAU__TRACK_FDS; i++)
        t->fds[i].fd = -1;
    t->io = (ra__io_t){.ud = t,
                       .open = tr_open,
                       .write = tr_write,
                       .pread = tr_pread,
                       .pwrite = tr_pwrite,
                       .fsync = tr_fsync,
                       .close = tr_close,
                       .fsize = tr_fsize,
                       .fsync_dir = tr_fsync_dir,
                       .rename = tr_rename,
                       .unlink = tr_unlink,
                       .truncate = tr_truncate,
                       .size = tr_size,
                       .mkdir = tr_mkdir,
                       .list = tr_list,
                       .lock = tr_lock,
                       .unlock = tr_unlock,
                       .reserve_bytes = inner->reserve_bytes};
}

void rau__iotrack_text(const rau__iotrack_t *t, char *buf, size_t cap) {
    if (!cap) return;
    if (!t->err) {
        buf[0] = 0;
        return;
    }
    const char *name = strerrorname_np(t->err);
    snprintf(buf, cap, "%s %s: %s (%s)", t->op, t->path, strerror(t->err), name ? name : "?");
}
