/* The POSIX backend of the I/O interface (core/io.h) and its helpers. Self-contained (no
 * core/internal.h): libronaudit compiles it too. */
#include "io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static int neg(void) {
    return errno ? -errno : -EIO;
}

static int px_open(void *ud, const char *path, int flags) {
    (void)ud;
    int mode = flags & RA__IO_MODE, priv = flags & RA__IO_PRIVATE;
    int fl = mode == RA__IO_READ     ? O_RDONLY
             : mode == RA__IO_APPEND ? O_WRONLY | O_APPEND
             : mode == RA__IO_WRITE  ? O_WRONLY
                                     : O_WRONLY | O_CREAT | O_TRUNC | O_APPEND;
    int fd = open(path, fl | O_CLOEXEC | (priv ? O_NOFOLLOW : 0), priv ? 0600 : 0644);
    return fd < 0 ? neg() : fd;
}

static ssize_t px_write(void *ud, int fd, const void *buf, size_t n) {
    (void)ud;
    ssize_t w;
    do
        w = write(fd, buf, n);
    while (w < 0 && errno == EINTR);
    return w < 0 ? neg() : w;
}

static ssize_t px_pread(void *ud, int fd, void *buf, size_t n, uint64_t off) {
    (void)ud;
    ssize_t r;
    do
        r = pread(fd, buf, n, (off_t)off);
    while (r < 0 && errno == EINTR);
    return r < 0 ? neg() : r;
}

static ssize_t px_pwrite(void *ud, int fd, const void *buf, size_t n, uint64_t off) {
    (void)ud;
    ssize_t w;
    do
        w = pwrite(fd, buf, n, (off_t)off);
    while (w < 0 && errno == EINTR);
    return w < 0 ? neg() : w;
}

static int px_fsync(void *ud, int fd) {
    (void)ud;
    return fdatasync(fd) != 0 ? neg() : 0;
}

static int px_close(void *ud, int fd) {
    (void)ud;
    return close(fd) != 0 ? neg() : 0;
}

static int px_fsize(void *ud, int fd, uint64_t *out) {
    (void)ud;
    struct stat st;
    if (fstat(fd, &st) != 0) return neg();
    *out = (uint64_t)st.st_size;
    return 0;
}

static int px_fsync_dir(void *ud, const char *dir) {
    (void)ud;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return neg();
    int rc = fsync(fd) != 0 ? neg() : 0;
    close(fd);
    return rc;
}

static int px_rename(void *ud, const char *from, const char *to) {
    (void)ud;
    return rename(from, to) != 0 ? neg() : 0;
}

static int px_unlink(void *ud, const char *path) {
    (void)ud;
    return unlink(path) != 0 ? neg() : 0;
}

static int px_truncate(void *ud, const char *path, uint64_t len) {
    (void)ud;
    return truncate(path, (off_t)len) != 0 ? neg() : 0;
}

static int px_size(void *ud, const char *path, uint64_t *out) {
    (void)ud;
    struct stat st;
    if (lstat(path, &st) != 0) return neg();
    if (!S_ISREG(st.st_mode)) return -EINVAL;
    *out = (uint64_t)st.st_size;
    return 0;
}

static int px_mkdir(void *ud, const char *path, int flags) {
    (void)ud;
    return mkdir(path, flags & RA__IO_PRIVATE ? 0700 : 0755) != 0 ? neg() : 0;
}

static int px_list(void *ud, const char *dir, int (*cb)(void *, const char *), void *cbud) {
    (void)ud;
    DIR *d = opendir(dir);
    if (!d) return neg();
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if ((rc = cb(cbud, e->d_name)) != 0) break;
    }
    closedir(d);
    return rc;
}

static int px_lock(void *ud, const char *path, int *handle) {
    (void)ud;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return neg();
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int rc = neg();
        close(fd);
        return rc;
    }
    *handle = fd;
    return 0;
}

static void px_unlock(void *ud, int handle) {
    (void)ud;
    close(handle);
}

static const ra__io_t posix_io = {
    .ud = NULL,
    .open = px_open,
    .write = px_write,
    .pread = px_pread,
    .pwrite = px_pwrite,
    .fsync = px_fsync,
    .close = px_close,
    .fsize = px_fsize,
    .fsync_dir = px_fsync_dir,
    .rename = px_rename,
    .unlink = px_unlink,
    .truncate = px_truncate,
    .size = px_size,
    .mkdir = px_mkdir,
    .list = px_list,
    .lock = px_lock,
    .unlock = px_unlock,
};

const ra__io_t *ra__io_posix(void) {
    return &posix_io;
}

int ra__io_write_all(const ra__io_t *io, int fd, const void *buf, size_t n) {
    const uint8_t *p = buf;
    while (n > 0) {
        ssize_t w = io->write(io->ud, fd, p, n);
        if (w < 0) return (int)w;
        if (w == 0) return -EIO; /* no progress: treat as an error, never spin */
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int ra__io_pread_all(const ra__io_t *io, int fd, void *buf, size_t n, uint64_t off) {
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t r = io->pread(io->ud, fd, p, n, off);
        if (r < 0) return (int)r;
        if (r == 0) return -EIO;
        p += r;
        off += (uint64_t)r;
        n -= (size_t)r;
    }
    return 0;
}

int ra__io_read_file(const ra__io_t *io, const char *path, uint64_t max, uint8_t **buf,
                     size_t *len) {
    uint64_t size;
    int rc = io->size(io->ud, path, &size);
    if (rc != 0) return rc;
    if (size > max) return -EFBIG;
    int fd = io->open(io->ud, path, RA__IO_READ | RA__IO_PRIVATE);
    if (fd < 0) return fd;
    uint8_t *b = malloc(size ? size : 1);
    if (!b) {
        io->close(io->ud, fd);
        return -ENOMEM;
    }
    size_t got = 0;
    while (got < size) {
        ssize_t r = io->pread(io->ud, fd, b + got, size - got, got);
        if (r < 0) {
            free(b);
            io->close(io->ud, fd);
            return (int)r;
        }
        if (r == 0) break; /* shrank while reading: take what is there */
        got += (size_t)r;
    }
    io->close(io->ud, fd);
    *buf = b;
    *len = got;
    return 0;
}
