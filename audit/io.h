/* The one small I/O interface the audit log's writer and recovery go through (STYLE rule 7;
 * the same idea as the core's core/io.h, SQLite's VFS and LevelDB's Env), so tests can
 * inject faults and power cuts: tests/audit/powerfs.c simulates a machine whose unsynced
 * writes are lost, torn or reordered at a cut, whose fdatasync fails with EIO (and then
 * forgets the dirty pages, as Linux did in the fsyncgate reports), a full disk and short
 * writes. Every call returns 0 (or a count, or a descriptor) on success and a negative errno
 * on failure. The POSIX backend is the default; audit verify stays on plain POSIX reads. */
#ifndef RAU_IO_H
#define RAU_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum {
    RAU__IO_READ = 0,   /* an existing file, read only */
    RAU__IO_APPEND = 1, /* an existing file, writes go to its end */
    RAU__IO_CREATE = 2, /* create or truncate (mode 0644), writes go to its end */
    RAU__IO_WRITE = 3   /* an existing file, written in place with pwrite */
};

typedef struct rau__io_s {
    void *ud;
    int (*open)(void *ud, const char *path, int mode);             /* a descriptor >= 0 */
    ssize_t (*write)(void *ud, int fd, const void *buf, size_t n); /* may be short */
    ssize_t (*pread)(void *ud, int fd, void *buf, size_t n, uint64_t off);
    ssize_t (*pwrite)(void *ud, int fd, const void *buf, size_t n, uint64_t off); /* WRITE */
    int (*fdatasync)(void *ud, int fd);
    int (*close)(void *ud, int fd);
    int (*fsize)(void *ud, int fd, uint64_t *out);
    int (*truncate)(void *ud, const char *path, uint64_t len);
    int (*rename)(void *ud, const char *from, const char *to);
    int (*unlink)(void *ud, const char *path);
    int (*fsync_dir)(void *ud, const char *dir);
    int (*mkdir)(void *ud, const char *path); /* -EEXIST when present */
    /* cb for every entry name of dir (no "." or ".."); cb returning non-zero stops */
    int (*list)(void *ud, const char *dir, int (*cb)(void *cbud, const char *name), void *cbud);
} rau__io_t;

/* The real file system. */
const rau__io_t *rau__io_posix(void);

/* Writes all n bytes: a short write is continued, a write that makes no progress fails
 * (-EIO), never spins. */
int rau__io_write_all(const rau__io_t *io, int fd, const void *buf, size_t n);
/* Reads all n bytes at off; a file shorter than that is -EIO. */
int rau__io_pread_all(const rau__io_t *io, int fd, void *buf, size_t n, uint64_t off);
/* A whole file of at most max bytes into a malloc'd buffer (RAU_ codes: RAU_EIO, RAU_ESIZE,
 * RAU_ENOMEM). */
int rau__io_read_file(const rau__io_t *io, const char *path, size_t max, uint8_t **buf,
                      size_t *len);
/* Writes a whole small file so that it is either there whole or not at all: a temporary
 * file, fdatasync, rename over path, fsync of the directory (RAU_EIO). */
int rau__io_replace(const rau__io_t *io, const char *dir, const char *path, const void *buf,
                    size_t n);

#endif
