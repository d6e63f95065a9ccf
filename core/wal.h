/* The write-ahead log of sealed slices (docs/FORMAT.md §4 is the byte-level description).
 *
 * One segment per rollover (group commit, P-9): <dir>/<first frame seq, 16 hex>.seg,
 * written as .tmp, fsynced, renamed, and made durable by an fsync of the directory. A
 * segment is removed once every slice in it is ACKed; the stream heads (last seq and b3
 * per stream) and the next frame seq are kept in <dir>/heads, rewritten atomically before
 * any segment is removed, so chains continue across restarts even with no segment left. */
#ifndef RA_WAL_H
#define RA_WAL_H

#include "internal.h"
#include "io.h"
#include "wal_reader.h"

#define RA_WAL_SEG_MAGIC "RONWSEG1"
#define RA_WAL_SEG_HDR 32
#define RA_WAL_FRAME_MAGIC "RWF1"
#define RA_WAL_FRAME_HDR 24
#define RA_WAL_FRAME_TRAILER 32
#define RA_WAL_FRAME_SLICE 1
#define RA_WAL_HEADS_MAGIC "RONWHDS1"
#define RA_WAL_SEQ_MAX ((uint64_t)1 << 62) /* frame seqs and segment ids stay below */
#define RA_WAL_ENTRIES_DEFAULT 200000u     /* seed 000 appendix A: wal.max_entries */

/* Test knobs (never set outside tests). */
enum { RA_WAL_TEST_SKIP_DIR_FSYNC = 1 };

typedef struct ra__wal_seg {
    uint64_t id;      /* its file name; <= the seq of its first frame */
    uint32_t frames;  /* slices it holds */
    uint32_t unacked; /* of those, not ACKed yet */
    uint64_t bytes;
    int64_t created_ms;
    uint64_t *seqs; /* its frames' seqs, ascending */
    uint64_t *offs; /* its frames' byte offsets in the file (the backlog reads them back) */
    uint8_t *acked; /* per frame: ACKed (memory only; compaction acts on it) */
} ra__wal_seg_t;

typedef struct ra__wal_stats {
    uint64_t corrupt_frames, torn_bytes, fsyncs, replayed, write_errors, segments_written,
        segments_removed, full_refusals;
    uint64_t slow_fsyncs;        /* over the 5 s per-op budget of seed 001 §5 */
    uint64_t missing_frames;     /* declared by a segment header, not found */
    uint64_t segments_rewritten; /* by compaction, keeping only un-ACKed frames */
    uint64_t fsync_max_us;       /* the slowest fsync seen */
    uint64_t chain_breaks;       /* streams whose replayed chain misses seqs (recovery) */
} ra__wal_stats_t;

#define RA_WAL_FSYNC_BUDGET_US 5000000u

typedef struct ra__wal {
    const ra__io_t *io;
    char dir[4096];
    int lock_handle;
    uint64_t max_bytes;
    uint32_t max_entries, max_age_s;
    ra__wal_seg_t *segs; /* ordered by id */
    size_t nsegs, segs_cap;
    uint64_t next_seq;
    uint64_t bytes, entries; /* totals over segs: bytes, and frames retained — un-ACKed, or
                                ACKed in a segment not compacted yet: a restart replays all
                                of them, so the caps bound them (and pending_slices_cap) */
    uint64_t unacked;        /* of those, not ACKed */
    bool heads_dirty;        /* heads advanced since the last checkpoint */
    bool failed;             /* in doubt after a failed directory fsync: refuse to seal */
    int last_errno;          /* of the last failed system call (errno_code), for messages */
    int reserve_errno;       /* 0, or why the compaction reserve could not be made */
    bool reserve_logged;     /* the journal said so (once per failure) */
    uint64_t tmp_counter;    /* makes every temporary file name unique */
    uint32_t test_flags;
    ra__wal_stats_t stats;
} ra__wal_t;

/* What recovery hands back, through callbacks, in order (wal_reader.h says what each is). */
typedef struct ra__wal_visitor {
    void *ud;
    ra__wal_head_fn head;
    ra__wal_slice_fn slice;
    ra__wal_problem_fn problem;
} ra__wal_visitor_t;

/* Opens (creating it 0700 if absent) and locks the WAL directory, removes leftover .tmp
 * files, reads the heads checkpoint and every segment (repairing a torn tail, skipping
 * corrupt frames), and reports what it found to the visitor. read_only: no lock, no repair
 * (verify / inspect). */
int ra__wal_open(ra__wal_t *w, const ra__io_t *io, const char *dir, uint64_t max_bytes,
                 uint32_t max_entries, uint32_t max_age_s, bool read_only,
                 const ra__wal_visitor_t *v, char *err, size_t errlen);
void ra__wal_close(ra__wal_t *w);

/* RA_EPERSISTFULL when n more slices of `bytes` encoded bytes would break a cap. */
int ra__wal_check_room(const ra__wal_t *w, size_t n, uint64_t bytes, int64_t now_ms);
/* What a rollover may still add: frames and bytes (both 0 when the age cap is hit). */
void ra__wal_room(const ra__wal_t *w, int64_t now_ms, uint64_t *frames, uint64_t *bytes);

/* Group commit of n slices as one new segment. *intent_seg (in the counter plane) gets the
 * segment id before the segment can become visible. Returns 0 (durable), a negative
 * RA_E* code when the segment is certainly not in the WAL, or RA__EINDOUBT when it may
 * or may not be (the WAL is then failed: nothing more is sealed until a restart). */
int ra__wal_append(ra__wal_t *w, ra_slice_t *const *slices, size_t n, int64_t now_ms,
                   _Atomic uint64_t *intent_seg, uint64_t *first_seq);

/* An ACKed slice's frame: its segment's un-ACKed count drops. */
void ra__wal_acked(ra__wal_t *w, uint64_t frame_seq);

/* Removes every fully ACKed segment, after checkpointing the heads. Heads come from the
 * callback: it is called for every head the meter knows (NULL: a WAL with no streams to
 * checkpoint, as the benchmarks and fuzzers drive it without a meter). */
typedef int (*ra__wal_heads_fn)(void *ud, ra__wal_head_fn emit, void *eud);
int ra__wal_compact(ra__wal_t *w, ra__wal_heads_fn heads, void *heads_ud, size_t *removed);

/* Whether a segment with this id is in the WAL. */
bool ra__wal_has_segment(const ra__wal_t *w, uint64_t id);

/* Bounded file access (wal_reader.c): a window of RA_WAL_WINDOW bytes over a segment for
 * reading, a buffer of the same size for writing. RA_WAL_WINDOW holds the largest frame
 * (24 + 1 MiB + 32 bytes) with room to spare, so a frame is always readable in one piece. */
#define RA_WAL_WINDOW (4u << 20)
#define RA_WAL_FRAME_MAX_BYTES (RA_WAL_FRAME_HDR + RA_FRAME_MAX + RA_WAL_FRAME_TRAILER)
typedef struct ra__segr {
    const ra__io_t *io;
    int fd;
    uint64_t size; /* of the file, when opened */
    uint8_t *buf;  /* bytes [base, base + len) of the file */
    size_t cap, len;
    uint64_t base;
} ra__segr_t;
/* 0 or a negative errno (a non-regular file is refused by the I/O layer's size). */
int ra__segr_open(ra__segr_t *r, const ra__io_t *io, const char *path);
void ra__segr_close(ra__segr_t *r);
/* Bytes from off, at least want of them when the file has them (want <= the window);
 * *avail is how many are readable at the pointer. NULL and *rc < 0 on an I/O error. */
const uint8_t *ra__segr_at(ra__segr_t *r, uint64_t off, size_t want, size_t *avail, int *rc);

typedef struct ra__segw {
    const ra__io_t *io;
    int fd, err;
    uint8_t *buf;
    size_t len;
    uint64_t written;
} ra__segw_t;
int ra__segw_open(ra__segw_t *o, const ra__io_t *io, const char *path); /* create, 0600 */
int ra__segw_write(ra__segw_t *o, const void *p, size_t n);
int ra__segw_copy(ra__segw_t *o, ra__segr_t *r, uint64_t off, uint64_t n);
/* Flushes, fsyncs (when asked; its duration in *fsync_us), closes: 0 or the first error. */
int ra__segw_finish(ra__segw_t *o, bool do_fsync, uint64_t *fsync_us);
void ra__segw_abandon(ra__segw_t *o);

/* Frame codec, shared with verify and the fuzz harness: parses one frame at buf (len bytes
 * available). Returns the frame's size, 0 when buf does not start a valid frame. */
size_t ra__wal_frame_parse(const uint8_t *buf, size_t len, uint64_t *seq, const uint8_t **payload,
                           size_t *payload_len);

#endif
