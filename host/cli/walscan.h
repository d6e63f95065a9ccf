/* `verify` and `wal inspect` of a WAL (docs/FORMAT.md §4, docs/ops/wal.md): the state of
 * one scan, shared by the files that make the two verbs, one concern each:
 *
 *   walcmd.c    the verbs: arguments, what PATH is, verify's report, inspect's summary
 *   walscan.c   the scan: the core's read-only scan (core/wal_reader.h) and what it found
 *   walchain.c  the hash chain of every (tenant, dimension) stream, slice by slice
 *   walprint.c  inspect's listing: segments, frames, heads, problems (text or JSON lines)
 *
 * Only the core's public header and its read-only scan API: never its internals. */
#ifndef RA_HOST_WALSCAN_H
#define RA_HOST_WALSCAN_H

#include "ron/accounting.h"
#include "wal_reader.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Printed in full up to these counts; beyond them only counted. */
#define RA_HOST_WAL_MAX_PROBLEMS 1000
#define RA_HOST_WAL_MAX_BREAKS 1000

typedef struct ra_host_wseg {
    ra__walscan_segment_t info; /* info.path: owned (strdup) */
    uint32_t frames;            /* valid slice frames found in it */
    uint32_t problems;
} ra_host_wseg_t;

enum { RA_HOST_EV_FRAME = 1, RA_HOST_EV_PROBLEM = 2 };

typedef struct ra_host_wevent {
    int kind;
    /* a frame */
    uint64_t frame_seq;
    uint8_t tenant[16];
    char dim[RA_DIM_NAME_MAX + 1];
    ra_slice_id_t id;
    uint32_t rows;
    uint8_t b3[32], prev_b3[32];
    /* a problem */
    char *what, *detail, *file;
    uint64_t offset;
} ra_host_wevent_t;

/* One (tenant, dimension) stream's chain state. */
typedef struct ra_host_wstream {
    bool used, has_head, has_last;
    uint8_t tenant[16];
    char dim[RA_DIM_NAME_MAX + 1];
    uint64_t head_seq, last_seq;
    uint8_t head_b3[32], last_b3[32];
} ra_host_wstream_t;

typedef struct ra_host_wscan {
    /* set up by the command */
    const char *cmd;    /* "verify" or "wal inspect" */
    const char *target; /* as given on the command line */
    bool file_mode;     /* one segment file, not a directory */
    bool progress;
    bool inspect, json;

    ra__walscan_result_t found; /* the directory listing, torn bytes, corrupt frames */

    /* segments, in the order the core scans them */
    ra_host_wseg_t *segs;
    size_t nsegs, segs_cap;

    /* inspect: events of the current segment, printed when it is complete */
    ra_host_wevent_t *ev;
    size_t nev, ev_cap;

    /* chains */
    ra_host_wstream_t *streams;
    size_t streams_cap, nstreams;
    uint64_t heads, links_checked, breaks;
    char **break_lines;
    size_t nbreak_lines, break_lines_cap;

    /* totals */
    uint64_t frames, bytes, problems;
    char **problem_lines;
    size_t nproblem_lines, problem_lines_cap;

    /* progress */
    uint64_t t0, last_progress, segs_scanned;
    bool oom;
} ra_host_wscan_t;

/* walscan.c: runs the scan of sc->target (err gets why it stopped); frees what it found. */
int ra_host_wscan_run(ra_host_wscan_t *sc, char *err, size_t errlen);
void ra_host_wscan_free(ra_host_wscan_t *sc);
/* Appends a line (NULL: out of memory) to a list the scan prints at the end. */
void ra_host_wscan_line(ra_host_wscan_t *sc, char ***lines, size_t *n, size_t *cap, char *line);
char *ra_host_fmt_alloc(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* walchain.c: a checkpointed head; a slice in WAL order against its stream's chain. */
void ra_host_wchain_head(ra_host_wscan_t *sc, const uint8_t tenant[16], const char *dim,
                         uint64_t seq, const uint8_t b3[32]);
void ra_host_wchain_check(ra_host_wscan_t *sc, const ra_host_wevent_t *e);

/* walprint.c: inspect's lines. */
void ra_host_wprint_head(const ra_host_wscan_t *sc, const uint8_t tenant[16], const char *dim,
                         uint64_t seq, int64_t last_ws, const uint8_t b3[32]);
/* The segment being scanned, with its buffered frames and problems (which it frees);
 * problems found before any segment (the heads checkpoint) on their own. */
void ra_host_wprint_flush(ra_host_wscan_t *sc);

#endif /* RA_HOST_WALSCAN_H */
