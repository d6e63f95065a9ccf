/* The POSIX backend of the audit log's I/O interface (audit/io.h) and its helpers. */
#include "io.h"

#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int neg(void) {
    return errno ? -errno : -EIO;
}

static int px_open(void *ud, const char *path, int mode) {
    (void)ud;
    int fl = mode == RAU__IO_READ     ? O_RDONLY
             : mode == RAU__IO_APPEND ? O_WRONLY | O_APPEND
             : mode == RAU__IO_WRITE  ? O_WRONLY
                                      : O_WRONLY | O_CREAT | O_TRUNC | O_APPEND;
    int fd = open(path, fl | O_CLOEXEC, 0644);
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

static int px_fdatasync(void *ud, int fd) {
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

static int px_truncate(void *ud, const char *path, uint64_t len) {
    (void)ud;
    return truncate(path, (off_t)len) != 0 ? neg() : 0;
}

static int px_rename(void *ud, const char *from, const char *to) {
    (void)ud;
    return rename(from, to) != 0 ? neg() : 0;
}

static int px_unlink(void *ud, const char *path) {
    (void)ud;
    return unlink(path) != 0 ? neg() : 0;
}

static int px_fsync_dir(void *ud, const char *dir) {
    (void)ud;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return neg();
    int rc = fsync(fd) != 0 ? neg() : 0;
    close(fd);
    return rc;
}

static int px_mkdir(void *ud, const char *path) {
    (void)ud;
    return mkdir(path, 0755) != 0 ? neg() : 0;
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

static const rau__io_t posix_io = {
    .ud = NULL,
    .open = px_open,
    .write = px_write,
    .pread = px_pread,
    .pwrite = px_pwrite,
    .fdatasync = px_fdatasync,
    .close = px_close,
    .fsize = px_fsize,
    .truncate = px_truncate,
    .rename = px_rename,
    .unlink = px_unlink,
    .fsync_dir = px_fsync_dir,
    .mkdir = px_mkdir,
    .list = px_list,
};

const rau__io_t *rau__io_posix(void) {
    return &posix_io;
}

int rau__io_write_all(const rau__io_t *io, int fd, const void *buf, size_t n) {
    const uint8_t *p = buf;
    while (n > 0) {
        ssize_t w = io->write(io->ud, fd, p, n);
        if (w < 0) return (int)w;
        if (w == 0) return -EIO;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int rau__io_pread_all(const rau__io_t *io, int fd, void *buf, size_t n, uint64_t off) {
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

int rau__io_read_file(const rau__io_t *io, const char *path, size_t max, uint8_t **buf,
                      size_t *len) {
    *buf = NULL;
    *len = 0;
    int fd = io->open(io->ud, path, RAU__IO_READ);
    if (fd < 0) return fd == -ENOENT ? RAU_ENOTFOUND : RAU_EIO;
    uint64_t size;
    int rc = io->fsize(io->ud, fd, &size) ? RAU_EIO : size > max ? RAU_ESIZE : 0;
    uint8_t *b = rc ? NULL : malloc(size ? (size_t)size : 1);
    if (!rc && !b) rc = RAU_ENOMEM;
    if (!rc && rau__io_pread_all(io, fd, b, (size_t)size, 0)) rc = RAU_EIO;
    io->close(io->ud, fd);
    if (rc) {
        free(b);
        return rc;
    }
    *buf = b;
    *len = (size_t)size;
    return 0;
}

int rau__io_replace(const rau__io_t *io, const char *dir, const char *path, const void *buf,
                    size_t n) {
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = io->open(io->ud, tmp, RAU__IO_CREATE);
    if (fd < 0) return RAU_EIO;
    int rc = rau__io_write_all(io, fd, buf, n) || io->fdatasync(io->ud, fd) ? RAU_EIO : 0;
    if (io->close(io->ud, fd) && !rc) rc = RAU_EIO;
    if (!rc && io->rename(io->ud, tmp, path)) rc = RAU_EIO;
    if (!rc && io->fsync_dir(io->ud, dir)) rc = RAU_EIO;
    if (rc) io->unlink(io->ud, tmp);
    return rc;
}
