/* The audit log's helpers over the shared I/O seam (audit/io.h, core/io.c). */
#include "io.h"

#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

int rau__io_read_file(const ra__io_t *io, const char *path, size_t max, uint8_t **buf,
                      size_t *len) {
    *buf = NULL;
    *len = 0;
    int fd = io->open(io->ud, path, RA__IO_READ);
    if (fd < 0) return fd == -ENOENT ? RAU_ENOTFOUND : RAU_EIO;
    uint64_t size;
    int rc = io->fsize(io->ud, fd, &size) ? RAU_EIO : size > max ? RAU_ESIZE : 0;
    uint8_t *b = rc ? NULL : malloc(size ? (size_t)size : 1);
    if (!rc && !b) rc = RAU_ENOMEM;
    if (!rc && ra__io_pread_all(io, fd, b, (size_t)size, 0)) rc = RAU_EIO;
    io->close(io->ud, fd);
    if (rc) {
        free(b);
        return rc;
    }
    *buf = b;
    *len = (size_t)size;
    return 0;
}

int rau__io_replace(const ra__io_t *io, const char *dir, const char *path, const void *buf,
                    size_t n) {
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = io->open(io->ud, tmp, RA__IO_CREATE);
    if (fd < 0) return RAU_EIO;
    int rc = ra__io_write_all(io, fd, buf, n) || io->fsync(io->ud, fd) ? RAU_EIO : 0;
    if (io->close(io->ud, fd) && !rc) rc = RAU_EIO;
    if (!rc && io->rename(io->ud, tmp, path)) rc = RAU_EIO;
    if (!rc && io->fsync_dir(io->ud, dir)) rc = RAU_EIO;
    if (rc) io->unlink(io->ud, tmp);
    return rc;
}
