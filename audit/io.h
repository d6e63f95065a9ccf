/* The audit log's I/O seam: the core's (core/io.h, ra__io_t), the one small interface every
 * file operation of the writer and of recovery goes through (STYLE rule 7), so tests can
 * inject faults and power cuts through the one simulator, tests/sim-fs.c: a machine whose
 * unsynced writes are lost, torn or reordered at a cut, whose fdatasync fails with EIO (and
 * then forgets the dirty pages, as Linux did in the fsyncgate reports), a full disk and
 * short writes. libronaudit compiles core/io.c into itself; this header is the only way
 * audit/ sees the core (tools/check-layers.lua). audit verify stays on plain POSIX reads. */
#ifndef RAU_IO_H
#define RAU_IO_H

#include "../core/io.h"

/* A whole file of at most max bytes into a malloc'd buffer (RAU_ codes: RAU_ENOTFOUND,
 * RAU_EIO, RAU_ESIZE, RAU_ENOMEM). */
int rau__io_read_file(const ra__io_t *io, const char *path, size_t max, uint8_t **buf, size_t *len);
/* Writes a whole small file so that it is either there whole or not at all: a temporary
 * file, fdatasync, rename over path, fsync of the directory (RAU_EIO). */
int rau__io_replace(const ra__io_t *io, const char *dir, const char *path, const void *buf,
                    size_t n);

#endif
