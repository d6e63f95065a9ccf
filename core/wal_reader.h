/* The WAL, read only, for tools: the one entry point the host's `verify` and `wal inspect`
 * (host/cli/walscan.c) use, so they need none of the core's internals (internal.h, wal.h).
 *
 * The scan is the core's own recovery scan (wal.c, read-only mode: no lock, no repair), so
 * the tools and the meter never disagree about what a byte means. It runs behind an I/O
 * layer (wal_scan.c) on which every call that could change the directory (create, write,
 * fsync, rename, unlink, truncate, mkdir, lock) fails with EROFS, whatever the core would
 * like to repair; the same layer tells the caller which segment is being read, so each
 * frame and each problem has its file. */
#ifndef RA_WAL_READER_H
#define RA_WAL_READER_H

#include "ron/accounting.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A segment file as the scan starts reading it, before its frames and problems. */
typedef struct ra__walscan_segment {
    const char *path;       /* the real file (valid during the call) */
    uint64_t id;            /* from its name */
    uint64_t bytes;         /* its size, when readable */
    bool readable;          /* its size could be read */
    bool header_ok;         /* magic, checksum and id of its 32-byte header hold */
    int64_t created_ms;     /* header_ok: when it was written */
    uint32_t header_frames; /* header_ok: the frames it announces */
} ra__walscan_segment_t;

/* What the scan found: the directory's entries by name (docs/FORMAT.md §4.1), complete
 * before the first segment is reported, and the damage the scan counted. */
typedef struct ra__walscan_result {
    uint64_t segments; /* <16 hex>.seg files (1 for one segment file) */
    uint64_t tmp, broken, empty_broken, other;
    bool has_heads, has_lock, has_reserve;
    uint64_t torn_bytes, corrupt_frames;
} ra__walscan_result_t;

/* What a WAL scan reports, in order (the meter's recovery, wal.h, and the tools' scan):
 * a checkpointed head (from <dir>/heads); a valid slice frame (the visitor takes the
 * reference); a problem: what, the file, the offset, and the slice id if readable. */
typedef int (*ra__wal_head_fn)(void *ud, const uint8_t tenant[16], const char *dimension,
                               uint64_t seq, int64_t last_window_start_s, const uint8_t b3[32]);
typedef int (*ra__wal_slice_fn)(void *ud, ra_slice_t *s, uint64_t frame_seq);
typedef void (*ra__wal_problem_fn)(void *ud, const char *what, const char *file, uint64_t offset,
                                   const char *detail);

/* The scan's findings, in order; problems name the real file, and there are no heads in
 * one-file mode. Any callback may be NULL. */
typedef struct ra__walscan_visitor {
    void *ud;
    void (*segment)(void *ud, const ra__walscan_segment_t *seg);
    ra__wal_head_fn head;
    ra__wal_slice_fn slice;
    ra__wal_problem_fn problem;
} ra__walscan_visitor_t;

/* Scans path, read-only: a WAL directory, or (one_file) a single segment file, which the
 * scan sees as a directory holding only it, under its canonical name (its header's id when
 * its own name is not <16 hex>.seg) and with no heads checkpoint. *out is filled as the
 * scan goes. Returns 0, or a negative RA_E* code with err set when the scan stopped (an
 * unreadable file: the meter would refuse to open too; RA_ENOTFOUND: no such path). */
int ra__walscan(const char *path, bool one_file, const ra__walscan_visitor_t *v,
                ra__walscan_result_t *out, char *err, size_t errlen);

#endif /* RA_WAL_READER_H */
