/* A wrapper of the audit log's I/O interface (audit/io.h) that remembers the last call that
 * failed: its errno, the call and the file. The log writes and recovers through it, so a
 * failed log can say why (a write of seg-...rau refused with ENOSPC) instead of only
 * "input/output error" (AUD-I-14, rau_log_failure), and a refused open names the path and
 * the system's reason. It forwards every call unchanged; the backend (POSIX, or the tests'
 * power-loss simulator) stays as it is. */
#ifndef RAU_IOTRACK_H
#define RAU_IOTRACK_H

#include "io.h"

enum { RAU__TRACK_FDS = 8, RAU__TRACK_PATH = 4200 };

typedef struct rau__iotrack_s {
    ra__io_t io; /* the interface to use (its ud is this struct) */
    const ra__io_t *inner;
    int err;           /* errno of the last failing call, 0: none yet */
    uint64_t failures; /* failing calls so far (a new one changes it) */
    char op[16];
    char path[RAU__TRACK_PATH];
    struct {
        int fd;
        char path[RAU__TRACK_PATH];
    } fds[RAU__TRACK_FDS]; /* the open files' paths, for the calls that take a descriptor */
} rau__iotrack_t;

/* t must stay where it is while it is used (t->io.ud points at it). */
void rau__iotrack_init(rau__iotrack_t *t, const ra__io_t *inner);
/* "<op> <path>: <strerror> (<ERRNO>)" of the last failure, or "" when none. */
void rau__iotrack_text(const rau__iotrack_t *t, char *buf, size_t cap);

#endif
