/* The one small I/O interface the meter's WAL and the audit log go through (STYLE rule 7),
 * so tests can inject faults and power cuts the way SQLite's VFS and LevelDB's Env do. It
 * is the core's seam, shared: libronaudit compiles core/io.c into itself and sees this
 * header through audit/io.h, and nothing else of the core (tools/check-layers.lua). Every
 * call returns 0 (or a count, or a descriptor) on success and a negative errno on failure.
 * The POSIX backend is the default; tests/sim-fs.c is the one power-cut simulator. */
#ifndef RA_IO_H
#define RA_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* open's flags: one access mode, optionally RA__IO_PRIVATE. */
enum {
    RA__IO_READ = 0,    /* an existing file, read only */
    RA__IO_APPEND = 1,  /* an existing file, writes go to its end */
    RA__IO_CREATE = 2,  /* create or truncate, writes go to its end */
    RA__IO_WRITE = 3,   /* an existing file, written in place with pwrite */
    RA__IO_MODE = 3,    /* the mask of the access mode */
    RA__IO_PRIVATE = 16 /* the meter's files: mode 0600 (0700 for mkdir), never a symlink;
                           without it 0644 (0755) */
};

typedef struct ra__io {
    void *ud;
    int (*open)(void *ud, const char *path, int flags);            /* a descriptor >= 0 */
    ssize_t (*write)(void *ud, int fd, const void *buf, size_t n); /* may be short */
    ssize_t (*pread)(void *ud, int fd, void *buf, size_t n, uint64_t off);
    ssize_t (*pwrite)(void *ud, int fd, const void *buf, size_t n, uint64_t off); /* WRITE */
    int (*fsync)(void *ud, int fd);                                               /* fdatasync */
    int (*close)(void *ud, int fd);
    int (*fsize)(void *ud, int fd, uint64_t *out);
    int (*fsync_dir)(void *ud, const char *dir);
    int (*rename)(void *ud, const char *from, const char *to);
    int (*unlink)(void *ud, const char *path);
    int (*truncate)(void *ud, const char *path, uint64_t len);
    int (*size)(void *ud, const char *path, uint64_t *out); /* a regular file's, else -EINVAL */
    int (*mkdir)(void *ud, const char *path, int flags);    /* -EEXIST if present */
    /* calls cb for every entry name of dir (no "." or ".."); cb returning non-zero stops */
    int (*list)(void *ud, const char *dir, int (*cb)(void *cbud, const char *name), void *cbud);
    /* an exclusive, non-blocking lock held until unlock (-EWOULDBLOCK when taken) */
    int (*lock)(void *ud, const char *path, int *handle);
    void (*unlock)(void *ud, int handle);
    /* Size of the WAL's space reserve on this medium; 0: the default (4 MiB). An
     * in-memory test file system sets a small one. */
    uint64_t reserve_bytes;
} ra__io_t;

/* The real file system. */
const ra__io_t *ra__io_posix(void);

/* Writes all n bytes (a short write is continued; a write that makes no progress fails
 * with -EIO, never spins). */
int ra__io_write_all(const ra__io_t *io, int fd, const void *buf, size_t n);
/* Reads all n bytes at off; a file shorter than that is -EIO. */
int ra__io_pread_all(const ra__io_t *io, int fd, void *buf, size_t n, uint64_t off);
/* Reads a whole file of at most max bytes into a malloc'd buffer (-EFBIG when larger). */
int ra__io_read_file(const ra__io_t *io, const char *path, uint64_t max, uint8_t **buf,
                     size_t *len);

#endif
