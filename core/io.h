/* The one small I/O interface the WAL goes through (STYLE rule 7), so tests can inject
 * faults and power cuts the way SQLite's VFS and LevelDB's Env do. Every call returns 0
 * (or a count) on success and a negative errno on failure. The POSIX backend is the
 * default; tests/sim-fs.c is the power-cut simulator. */
#ifndef RA_IO_H
#define RA_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct ra__io {
    void *ud;
    /* open for writing: create, truncate; mode 0600 */
    int (*create)(void *ud, const char *path);
    /* open an existing file for reading */
    int (*open_read)(void *ud, const char *path);
    ssize_t (*write)(void *ud, int fd, const void *buf, size_t n);
    ssize_t (*pread)(void *ud, int fd, void *buf, size_t n, uint64_t off);
    int (*fsync)(void *ud, int fd);
    int (*close)(void *ud, int fd);
    int (*fsync_dir)(void *ud, const char *dir);
    int (*rename)(void *ud, const char *from, const char *to);
    int (*unlink)(void *ud, const char *path);
    int (*truncate)(void *ud, const char *path, uint64_t len);
    int (*size)(void *ud, const char *path, uint64_t *out);
    int (*mkdir)(void *ud, const char *path); /* mode 0700; -EEXIST if present */
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

/* Writes all n bytes (a short write is retried; a write that makes no progress fails). */
int ra__io_write_all(const ra__io_t *io, int fd, const void *buf, size_t n);
/* Reads a whole file of at most max bytes into a malloc'd buffer. */
int ra__io_read_file(const ra__io_t *io, const char *path, uint64_t max, uint8_t **buf,
                     size_t *len);

#endif
