/* The write-ahead log: format, group commit, recovery, compaction (see wal.h and
 * docs/FORMAT.md §4). Every byte read from disk is checked before it is trusted: a length
 * against the 1 MiB frame limit and against the bytes left, before anything is allocated;
 * a frame against its header checksum, its payload checksum, its position (strictly
 * increasing seq) and the slice decoder. Recovery never stops at a bad frame: a bad tail
 * of the newest segment is a torn write (truncated, its bytes kept as .broken), anything
 * else is corruption (skipped, counted, reported, and the scan resynchronises on the next
 * valid frame). No input makes it crash or loop, and no file is read whole: segments go
 * through a bounded window (wal_reader.c), whatever their size says. */
#include "wal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* ---- helpers ------------------------------------------------------------------------ */

/* The taxonomy code of a failed system call; the errno itself is kept (last_errno) so the
 * meter's log can say what happened ("No space left on device", "Read-only file system")
 * instead of the code's generic message (issue 14 item 13). */
static int errno_code(ra__wal_t *w, int neg_errno) {
    w->last_errno = -neg_errno;
    switch (-neg_errno) {
    case ENOSPC:
    case EDQUOT:
        return RA_EPERSISTFULL;
    case ENOMEM:
        return RA_ENOMEM;
    case EWOULDBLOCK:
        return RA_EBUSY;
    case ENOENT:
        return RA_ENOTFOUND;
    default:
        return RA_EIO;
    }
}

static void seg_path(const ra__wal_t *w, uint64_t id, const char *suffix, char *out, size_t n) {
    snprintf(out, n, "%s/%016" PRIx64 ".seg%s", w->dir, id, suffix);
}

static void dir_path(const ra__wal_t *w, const char *name, char *out, size_t n) {
    snprintf(out, n, "%s/%s", w->dir, name);
}

/* A fresh temporary name for every write: a file whose fsync failed is never written and
 * fsynced again under the same name (its inode may have lost dirty pages and report later
 * fsyncs as successful: the fsyncgate lesson), even when unlinking it failed too. Such
 * leftovers end in .tmp and are removed at the next open. */
static void tmp_name(ra__wal_t *w, const char *stem, char *out, size_t n) {
    snprintf(out, n, "%s/%s.%" PRIu64 ".tmp", w->dir, stem, ++w->tmp_counter);
}

/* The 4-byte header checksums are the first bytes of BLAKE3 over the header. */
static uint32_t hdr_sum(const uint8_t *p, size_t n) {
    uint8_t d[32];
    ra_b3(p, n, d);
    return ra__get_u32(d);
}

static uint64_t mono_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* A blocking fsync cannot be interrupted; what the core can do is measure it. One over the
 * budget is counted (accounting_wal_io_timeouts_total{op="fsync"}) and logged by the meter;
 * the runtime that calls rollover owns the deadline around it. */
static void fsync_note(ra__wal_t *w, uint64_t us) {
    w->stats.fsyncs++;
    if (us > w->stats.fsync_max_us) w->stats.fsync_max_us = us;
    if (us > RA_WAL_FSYNC_BUDGET_US) w->stats.slow_fsyncs++;
}

static void fsync_took(ra__wal_t *w, uint64_t t0) {
    fsync_note(w, mono_us() - t0);
}

static int fsync_dir(ra__wal_t *w) {
    if (w->test_flags & RA_WAL_TEST_SKIP_DIR_FSYNC) return 0; /* negative control only */
    uint64_t t0 = mono_us();
    int rc = w->io->fsync_dir(w->io->ud, w->dir);
    fsync_took(w, t0);
    return rc;
}

/* ---- frames ------------------------------------------------------------------------- */

size_t ra__wal_frame_parse(const uint8_t *buf, size_t len, uint64_t *seq, const uint8_t **payload,
                           size_t *payload_len) {
    if (len < RA_WAL_FRAME_HDR + RA_WAL_FRAME_TRAILER) return 0;
    if (memcmp(buf, RA_WAL_FRAME_MAGIC, 4) != 0) return 0;
    if (ra__get_u32(buf + 20) != hdr_sum(buf, 20)) return 0; /* before trusting length */
    uint32_t n = ra__get_u32(buf + 4);
    if (n > RA_FRAME_MAX || buf[16] != RA_WAL_FRAME_SLICE || buf[17] || buf[18] || buf[19])
        return 0;
    if ((size_t)n > len - RA_WAL_FRAME_HDR - RA_WAL_FRAME_TRAILER) return 0;
    uint8_t d[32];
    ra_b3(buf + RA_WAL_FRAME_HDR, n, d);
    if (memcmp(d, buf + RA_WAL_FRAME_HDR + n, 32) != 0) return 0;
    *seq = ra__get_u64(buf + 8);
    if (*seq == 0 || *seq > RA_WAL_SEQ_MAX) return 0;
    *payload = buf + RA_WAL_FRAME_HDR;
    *payload_len = n;
    return RA_WAL_FRAME_HDR + (size_t)n + RA_WAL_FRAME_TRAILER;
}

static size_t frame_encode(uint8_t *out, uint64_t seq, const ra_slice_t *s) {
    size_t n;
    const uint8_t *bytes = ra_slice_bytes(s, &n);
    memcpy(out, RA_WAL_FRAME_MAGIC, 4);
    ra__put_u32(out + 4, (uint32_t)n);
    ra__put_u64(out + 8, seq);
    out[16] = RA_WAL_FRAME_SLICE;
    out[17] = out[18] = out[19] = 0;
    ra__put_u32(out + 20, hdr_sum(out, 20));
    memcpy(out + RA_WAL_FRAME_HDR, bytes, n);
    memcpy(out + RA_WAL_FRAME_HDR + n, ra_slice_b3(s), 32); /* b3 = BLAKE3(payload) */
    return RA_WAL_FRAME_HDR + n + RA_WAL_FRAME_TRAILER;
}

static void seg_header(uint8_t *out, uint64_t id, int64_t created_ms, uint32_t frames) {
    memcpy(out, RA_WAL_SEG_MAGIC, 8);
    ra__put_u64(out + 8, id);
    ra__put_u64(out + 16, (uint64_t)created_ms);
    ra__put_u32(out + 24, frames);
    ra__put_u32(out + 28, hdr_sum(out, 28));
}

/* ---- the space reserve ------------------------------------------------------------------ */

/* Compaction must write the heads checkpoint before it may unlink anything; on a full disk
 * it could then never free space. A small reserve file, given back only for that write,
 * keeps that path open. Best effort: without a reserve, compaction works while there is
 * space. */
#define RA_WAL_RESERVE_BYTES (4u << 20)

static void ensure_reserve(ra__wal_t *w) {
    char path[4200];
    snprintf(path, sizeof path, "%s/reserve", w->dir);
    uint64_t size = 0, want = w->io->reserve_bytes ? w->io->reserve_bytes : RA_WAL_RESERVE_BYTES;
    if (w->io->size(w->io->ud, path, &size) == 0 && size >= want) {
        w->reserve_errno = 0;
        return;
    }
    static const uint8_t zeros[65536];
    int fd = w->io->open(w->io->ud, path, RA__IO_CREATE | RA__IO_PRIVATE);
    if (fd < 0) {
        w->reserve_errno = -fd; /* the journal logs it (ra__journal_note_reserve) */
        return;
    }
    int rc = 0;
    for (uint64_t done = 0; rc == 0 && done < want; done += sizeof zeros)
        rc = ra__io_write_all(w->io, fd, zeros,
                              want - done < sizeof zeros ? want - done : sizeof zeros);
    if (rc == 0) rc = w->io->fsync(w->io->ud, fd);
    w->io->close(w->io->ud, fd);
    if (rc != 0) w->io->unlink(w->io->ud, path); /* a partial reserve only wastes space */
    w->reserve_errno = rc != 0 ? -rc : 0;
}

static bool release_reserve(ra__wal_t *w) {
    char path[4200];
    snprintf(path, sizeof path, "%s/reserve", w->dir);
    return w->io->unlink(w->io->ud, path) == 0 && fsync_dir(w) == 0;
}

/* ---- recovery ------------------------------------------------------------------------ */

#define RA_WAL_HEADS_MAX_BYTES ((uint64_t)256 << 20)

typedef struct {
    uint64_t *ids;
    size_t n, cap;
    ra__wal_t *w;
    bool read_only;
} listing_t;

static int on_entry(void *ud, const char *name) {
    listing_t *l = ud;
    size_t len = strlen(name);
    if (len > 4 && strcmp(name + len - 4, ".tmp") == 0) {
        if (!l->read_only) { /* never renamed into place: never durable, never reported */
            char p[4200];
            dir_path(l->w, name, p, sizeof p);
            l->w->io->unlink(l->w->io->ud, p);
        }
        return 0;
    }
    if (len != 20 || strcmp(name + 16, ".seg") != 0) return 0;
    uint64_t id = 0;
    for (int i = 0; i < 16; i++) {
        char c = name[i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v < 0) return 0;
        id = id << 4 | (uint64_t)v;
    }
    /* No WAL of ours gets near 2^62 frames; a name up there was not written by us, and
     * honouring it would wrap the next id. Left alone (verify reports it as foreign). */
    if (id == 0 || id > RA_WAL_SEQ_MAX) return 0;
    if (l->n == l->cap) {
        size_t c = l->cap ? l->cap * 2 : 64;
        uint64_t *p = realloc(l->ids, c * sizeof *p);
        if (!p) return -ENOMEM;
        l->ids = p;
        l->cap = c;
    }
    l->ids[l->n++] = id;
    return 0;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void problem(const ra__wal_visitor_t *v, const char *what, const char *file, uint64_t off,
                    const char *detail) {
    if (v && v->problem) v->problem(v->ud, what, file, off, detail ? detail : "");
}

/* The next offset after `from` where a valid frame with a seq above `last` starts; the end
 * of the file when there is none (or the file cannot be read: *rc). */
static uint64_t resync(ra__segr_t *r, uint64_t from, uint64_t last, int *rc) {
    uint64_t off = from;
    while (off + RA_WAL_FRAME_HDR + RA_WAL_FRAME_TRAILER <= r->size) {
        size_t avail;
        const uint8_t *b = ra__segr_at(r, off, RA_WAL_FRAME_MAX_BYTES, &avail, rc);
        if (!b) return r->size;
        /* Candidates are the magic's first byte, found with memchr: a long damaged stretch
         * (a 2 GB hole of zeros) is skipped at memory speed, one window at a time. Only
         * starts whose whole largest frame fits in the window are tried in this pass. */
        bool at_end = r->base + r->len >= r->size;
        size_t scan =
            at_end ? avail : (avail > RA_WAL_FRAME_MAX_BYTES ? avail - RA_WAL_FRAME_MAX_BYTES : 1);
        const uint8_t *m = memchr(b, RA_WAL_FRAME_MAGIC[0], scan);
        if (!m) {
            off += scan;
            continue;
        }
        off += (uint64_t)(m - b);
        b = ra__segr_at(r, off, RA_WAL_FRAME_MAX_BYTES, &avail, rc);
        if (!b) return r->size;
        uint64_t seq;
        const uint8_t *p;
        size_t pl;
        if (ra__wal_frame_parse(b, avail, &seq, &p, &pl) && seq > last) return off;
        off++;
    }
    return r->size;
}

/* Describes what a damaged frame at buf was, if enough of it is readable. */
static void describe_damage(const uint8_t *buf, size_t len, char *out, size_t n) {
    out[0] = '\0';
    if (len < RA_WAL_FRAME_HDR || memcmp(buf, RA_WAL_FRAME_MAGIC, 4) != 0) return;
    uint32_t pl = ra__get_u32(buf + 4);
    uint64_t seq = ra__get_u64(buf + 8);
    if (pl > RA_FRAME_MAX || pl > len - RA_WAL_FRAME_HDR) {
        snprintf(out, n, "frame seq %" PRIu64 "?, length %u", seq, pl);
        return;
    }
    ra__decoded_t d;
    if (ra__decode(buf + RA_WAL_FRAME_HDR, pl, &d) == 0) {
        ra_tenant_t t;
        char ts[37];
        memcpy(t.b, d.tenant, 16);
        ra_tenant_format(&t, ts);
        snprintf(out, n, "frame seq %" PRIu64 ": slice %s/%.*s window %" PRId64 " seq %" PRIu64,
                 seq, ts, (int)d.dimension_len, (const char *)d.dimension, d.window_start_s, d.seq);
    } else {
        snprintf(out, n, "frame seq %" PRIu64 "? (payload unreadable)", seq);
    }
}

static int grow_segs(ra__wal_t *w) {
    if (w->nsegs < w->segs_cap) return 0;
    size_t c = w->segs_cap ? w->segs_cap * 2 : 64;
    ra__wal_seg_t *p = realloc(w->segs, c * sizeof *p);
    if (!p) return RA_ENOMEM;
    w->segs = p;
    w->segs_cap = c;
    return 0;
}

/* Takes ownership of seqs and offs (frames entries each, ascending). */
static int add_seg(ra__wal_t *w, uint64_t id, uint32_t frames, uint64_t bytes, int64_t created,
                   uint64_t *seqs, uint64_t *offs) {
    uint8_t *acked = calloc(frames ? frames : 1, 1);
    if (!acked || grow_segs(w) != 0) {
        free(acked);
        free(seqs);
        free(offs);
        return RA_ENOMEM;
    }
    w->segs[w->nsegs++] = (ra__wal_seg_t){id, frames, frames, bytes, created, seqs, offs, acked};
    w->bytes += bytes;
    w->entries += frames;
    w->unacked += frames;
    /* cppcheck-suppress memleak ; acked is owned by the segment (the compound literal) */
    return 0;
}

/* Writes `head` (may be NULL) then bytes [off, off + n) of r's file to path, and fsyncs it:
 * a copy through the bounded buffer, never the whole range in memory. */
static int copy_durable(ra__wal_t *w, const char *path, const uint8_t *head, size_t head_len,
                        ra__segr_t *r, uint64_t off, uint64_t n) {
    ra__segw_t o;
    int rc = ra__segw_open(&o, w->io, path);
    if (rc != 0) return rc;
    if (head) ra__segw_write(&o, head, head_len);
    ra__segw_copy(&o, r, off, n);
    uint64_t us = 0;
    rc = ra__segw_finish(&o, true, &us);
    if (us) fsync_note(w, us);
    return rc;
}

/* Repairs a torn newest segment: the bytes after `off` are kept next to it as .broken, and
 * the segment is rewritten (tmp, fsync, rename, directory fsync) holding the valid prefix
 * with its header's frame count set to the frames recovered, so the next open finds a
 * clean segment. On any failure the segment stays as it was (recovery is repeatable). */
static void cut_torn_tail(ra__wal_t *w, uint64_t id, ra__segr_t *r, uint64_t off, uint32_t frames,
                          bool header_ok) {
    char seg[4200], broken[4200], tmp[4200], stem[64];
    seg_path(w, id, "", seg, sizeof seg);
    seg_path(w, id, ".broken", broken, sizeof broken);
    snprintf(stem, sizeof stem, "%016" PRIx64 ".seg.repair", id);
    tmp_name(w, stem, tmp, sizeof tmp);
    if (off < r->size) copy_durable(w, broken, NULL, 0, r, off, r->size - off);
    if (!header_ok || off < RA_WAL_SEG_HDR) {
        if (w->io->truncate(w->io->ud, seg, off) == 0) fsync_dir(w);
        return;
    }
    size_t avail;
    int rc;
    const uint8_t *h = ra__segr_at(r, 0, RA_WAL_SEG_HDR, &avail, &rc);
    if (!h || avail < RA_WAL_SEG_HDR) return;
    uint8_t hdr[RA_WAL_SEG_HDR];
    memcpy(hdr, h, sizeof hdr);
    ra__put_u32(hdr + 24, frames);
    ra__put_u32(hdr + 28, hdr_sum(hdr, 28));
    if (copy_durable(w, tmp, hdr, sizeof hdr, r, RA_WAL_SEG_HDR, off - RA_WAL_SEG_HDR) == 0 &&
        w->io->rename(w->io->ud, tmp, seg) == 0)
        fsync_dir(w);
    else
        w->io->unlink(w->io->ud, tmp);
}

/* Grows the per-frame arrays of a segment being scanned. */
static bool grow_frames(uint64_t **seqs, uint64_t **offs, size_t *cap, size_t need) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap * 2 : 64;
    uint64_t *a = realloc(*seqs, c * sizeof *a);
    if (!a) return false;
    *seqs = a;
    uint64_t *b = realloc(*offs, c * sizeof *b);
    if (!b) return false;
    *offs = b;
    *cap = c;
    return true;
}

static int scan_segment(ra__wal_t *w, uint64_t id, bool newest, bool read_only, uint64_t *last_seq,
                        const ra__wal_visitor_t *v) {
    char path[4200];
    seg_path(w, id, "", path, sizeof path);
    ra__segr_t r;
    int rc = ra__segr_open(&r, w->io, path);
    if (rc != 0) {
        /* An I/O error is not corruption: skipping the segment would lose reported slices
         * (and a later append could reuse its id). Refuse to open instead. */
        problem(v, "unreadable segment", path, 0, strerror(-rc));
        return RA_EIO;
    }
    uint64_t len = r.size;
    int io_rc = 0; /* a failed read (negative errno), apart from the visitor's codes in rc */
    size_t avail;
    const uint8_t *hdr = ra__segr_at(&r, 0, RA_WAL_SEG_HDR, &avail, &rc);
    if (!hdr) {
        ra__segr_close(&r);
        problem(v, "unreadable segment", path, 0, strerror(-rc));
        return RA_EIO;
    }
    int64_t created = -1; /* unknown until the header is read: no age-cap verdict on it */
    uint32_t declared = 0;
    bool header_ok = false;
    uint64_t off = RA_WAL_SEG_HDR;
    if (avail < RA_WAL_SEG_HDR || memcmp(hdr, RA_WAL_SEG_MAGIC, 8) != 0 ||
        ra__get_u32(hdr + 28) != hdr_sum(hdr, 28) || ra__get_u64(hdr + 8) != id) {
        if (newest && len < RA_WAL_SEG_HDR) { /* torn before its header was complete */
            w->stats.torn_bytes += len;
            problem(v, "torn segment header", path, 0, "");
            if (!read_only) cut_torn_tail(w, id, &r, 0, 0, false);
            off = len;
        } else {
            /* Nothing of the header is trusted, its sizes least of all: the scan looks
             * for frames, one bounded window at a time. */
            w->stats.corrupt_frames++;
            problem(v, "corrupt segment header", path, 0, "");
            off = resync(&r, RA_WAL_SEG_HDR < len ? RA_WAL_SEG_HDR : len, *last_seq, &io_rc);
        }
    } else {
        created = (int64_t)ra__get_u64(hdr + 16);
        declared = ra__get_u32(hdr + 24);
        header_ok = true;
    }
    uint32_t frames = 0, corrupt_here = 0;
    bool torn = false;
    uint64_t *seqs = NULL, *offs = NULL;
    size_t frames_cap = 0;
    while (off < len && rc == 0 && io_rc == 0) {
        uint64_t seq;
        const uint8_t *payload;
        size_t plen;
        const uint8_t *fb = ra__segr_at(&r, off, RA_WAL_FRAME_MAX_BYTES, &avail, &io_rc);
        if (!fb) break;
        size_t size = ra__wal_frame_parse(fb, avail, &seq, &payload, &plen);
        if (size && (seq <= *last_seq || seq < id)) { /* valid bytes in the wrong place */
            w->stats.corrupt_frames++;
            corrupt_here++;
            char d[200];
            snprintf(d, sizeof d, "frame seq %" PRIu64 " after seq %" PRIu64, seq, *last_seq);
            problem(v, "misplaced frame", path, off, d);
            off += size;
            continue;
        }
        ra_slice_t *s = NULL;
        if (size && ra__slice_decode_trusted(payload, plen, payload + plen, &s) != 0) {
            /* Checksums hold, so its extent is right, but it is no valid slice (written
             * by a broken or foreign producer): skip exactly this frame. */
            w->stats.corrupt_frames++;
            corrupt_here++;
            char d[200];
            snprintf(d, sizeof d, "frame seq %" PRIu64 ": payload is not a valid slice", seq);
            problem(v, "invalid slice in frame", path, off, d);
            off += size;
            continue;
        }
        if (size) {
            if (!grow_frames(&seqs, &offs, &frames_cap, (size_t)frames + 1)) {
                ra_slice_unref(s);
                rc = RA_ENOMEM;
                break;
            }
            seqs[frames] = seq;
            offs[frames] = off;
            *last_seq = seq;
            frames++;
            w->stats.replayed++;
            rc = v && v->slice ? v->slice(v->ud, s, seq) : (ra_slice_unref(s), 0);
            off += size;
            continue;
        }
        char d[300];
        describe_damage(fb, avail, d, sizeof d);
        uint64_t next = resync(&r, off + 1, *last_seq, &io_rc);
        if (io_rc != 0) break;
        if (next == len && newest) { /* nothing valid after it: the tail was torn */
            w->stats.torn_bytes += len - off;
            problem(v, "torn tail", path, off, d);
            if (!read_only) cut_torn_tail(w, id, &r, off, frames, header_ok);
            len = off;
            torn = true;
            break;
        }
        w->stats.corrupt_frames++;
        corrupt_here++;
        problem(v, "corrupt frame", path, off, d);
        off = next;
    }
    if (io_rc != 0) { /* a read failed mid-scan: not corruption either */
        problem(v, "unreadable segment", path, off, strerror(-io_rc));
        rc = RA_EIO;
    }
    if (rc != 0) {
        ra__segr_close(&r);
        free(seqs);
        free(offs);
        return rc;
    }
    /* The header says how many frames the segment holds: nothing may vanish silently, not
     * even whole frames cut at a frame boundary. */
    if (header_ok && !torn && frames + corrupt_here < declared) {
        uint32_t missing = declared - frames - corrupt_here;
        char d[160];
        snprintf(d, sizeof d, "segment declares %u frames, %u recovered", declared, frames);
        if (newest) { /* a clean cut at a frame boundary: a torn tail without torn bytes */
            problem(v, "torn tail at a frame boundary", path, len, d);
            if (!read_only) cut_torn_tail(w, id, &r, len, frames, true);
        } else {
            problem(v, "missing frames", path, len, d);
            w->stats.corrupt_frames += missing;
        }
        w->stats.missing_frames += missing;
    }
    ra__segr_close(&r);
    if (frames == 0) {
        free(seqs);
        free(offs);
        if (!read_only) {
            /* Nothing to replay: keep the bytes for forensics, out of the way. */
            char broken[4200];
            seg_path(w, id, ".empty.broken", broken, sizeof broken);
            w->io->rename(w->io->ud, path, broken);
            fsync_dir(w);
        }
        return 0;
    }
    return add_seg(w, id, frames, len, created, seqs, offs);
}

static int read_heads(ra__wal_t *w, const ra__wal_visitor_t *v) {
    char path[4200];
    dir_path(w, "heads", path, sizeof path);
    uint8_t *buf = NULL;
    size_t len = 0;
    /* The checkpoint is read whole (its checksum covers it all), so its size is checked
     * first: one entry is at most 17 + 32 + 48 bytes, and 256 MiB hold 2.7 M streams. */
    uint64_t size = 0;
    int rc = w->io->size(w->io->ud, path, &size);
    if (rc == -ENOENT) return 0;
    if (rc == 0 && size > RA_WAL_HEADS_MAX_BYTES) {
        w->stats.corrupt_frames++;
        problem(v, "heads checkpoint too large", path, 0,
                "stream heads before the oldest segment are lost");
        return 0;
    }
    if (rc == 0) rc = ra__io_read_file(w->io, path, RA_WAL_HEADS_MAX_BYTES, &buf, &len);
    if (rc == -ENOENT) return 0;
    if (rc != 0) { /* not corruption: going on would restart chains at seq 1 (a fork) */
        problem(v, "unreadable heads checkpoint", path, 0, strerror(-rc));
        return RA_EIO;
    }
    uint8_t d[32];
    bool ok = len >= 24 + 32 && memcmp(buf, RA_WAL_HEADS_MAGIC, 8) == 0;
    if (ok) {
        ra_b3(buf, len - 32, d);
        ok = memcmp(d, buf + len - 32, 32) == 0;
    }
    if (!ok) {
        /* Chains would restart from seq 1 and fork downstream: say so loudly. */
        w->stats.corrupt_frames++;
        problem(v, "corrupt heads checkpoint", path, 0,
                "stream heads before the oldest segment are lost");
        free(buf);
        return 0;
    }
    uint64_t next = ra__get_u64(buf + 8);
    uint32_t count = ra__get_u32(buf + 16);
    if (next > RA_WAL_SEQ_MAX) { /* checksummed, yet not something this WAL writes */
        w->stats.corrupt_frames++;
        problem(v, "heads checkpoint names an impossible next frame seq", path, 8, "");
        next = 0;
    }
    size_t off = 24, end = len - 32;
    for (uint32_t i = 0; i < count; i++) {
        if (off + 17 > end) break;
        size_t dl = buf[off + 16];
        if (dl < 1 || dl > RA_DIM_NAME_MAX || off + 17 + dl + 48 > end ||
            !ra__dimension_name_valid((const char *)buf + off + 17, dl)) {
            /* checksummed yet malformed: written by something else; heads after it lost */
            w->stats.corrupt_frames++;
            problem(v, "malformed heads checkpoint entry", path, off, "");
            break;
        }
        char dim[RA_DIM_NAME_MAX + 1];
        memcpy(dim, buf + off + 17, dl);
        dim[dl] = '\0';
        const uint8_t *p = buf + off + 17 + dl;
        if (v && v->head &&
            (rc = v->head(v->ud, buf + off, dim, ra__get_u64(p), (int64_t)ra__get_u64(p + 8),
                          p + 16)) != 0) {
            free(buf);
            return rc;
        }
        off += 17 + dl + 48;
    }
    if (next > w->next_seq) w->next_seq = next;
    free(buf);
    return 0;
}

/* The writer's directory: created (0700) and made durable when new, then locked (one
 * process per WAL). 0, or a typed error with err set. */
static int open_dir(ra__wal_t *w, const ra__io_t *io, const char *dir, char *err, size_t errlen) {
    int rc = io->mkdir(io->ud, dir, RA__IO_PRIVATE);
    if (rc != 0 && rc != -EEXIST) {
        ra__errbuf(err, errlen, "cannot create wal dir %s: %s", dir, strerror(-rc));
        return errno_code(w, rc);
    }
    if (rc == 0) {
        /* A new directory is durable only once its parent's entry is. */
        char parent[4096];
        snprintf(parent, sizeof parent, "%s", dir);
        char *slash = strrchr(parent, '/');
        if (slash == parent)
            parent[1] = '\0';
        else if (slash)
            *slash = '\0';
        else
            snprintf(parent, sizeof parent, ".");
        rc = io->fsync_dir(io->ud, parent);
        if (rc != 0) {
            ra__errbuf(err, errlen, "cannot make wal dir %s durable: %s", dir, strerror(-rc));
            return errno_code(w, rc);
        }
    }
    char lock[4200];
    dir_path(w, "LOCK", lock, sizeof lock);
    rc = io->lock(io->ud, lock, &w->lock_handle);
    if (rc != 0) {
        ra__errbuf(err, errlen,
                   rc == -EWOULDBLOCK ? "wal dir %s is in use by another process (its LOCK is held)"
                                      : "cannot lock wal dir %s: %s",
                   dir, strerror(-rc));
        w->lock_handle = -1;
        return errno_code(w, rc);
    }
    return 0;
}

int ra__wal_open(ra__wal_t *w, const ra__io_t *io, const char *dir, uint64_t max_bytes,
                 uint32_t max_entries, uint32_t max_age_s, bool read_only,
                 const ra__wal_visitor_t *v, char *err, size_t errlen) {
    memset(w, 0, sizeof *w);
    w->io = io;
    w->lock_handle = -1;
    w->max_bytes = max_bytes;
    w->max_entries = max_entries;
    w->max_age_s = max_age_s;
    w->next_seq = 1;
    w->tmp_counter = mono_us() << 8; /* distinct from any earlier process's names */
    if (strlen(dir) >= sizeof w->dir - 64) {
        ra__errbuf(err, errlen, "wal dir too long: %s", dir);
        return RA_EINVAL;
    }
    snprintf(w->dir, sizeof w->dir, "%s", dir);
    if (!read_only) {
        int rc = open_dir(w, io, dir, err, errlen);
        if (rc != 0) return rc;
    }
    listing_t l = {.w = w, .read_only = read_only};
    int rc = io->list(io->ud, dir, on_entry, &l);
    if (rc != 0) {
        free(l.ids);
        ra__errbuf(err, errlen, "cannot list wal dir %s: %s", dir, strerror(-rc));
        ra__wal_close(w);
        return errno_code(w, rc);
    }
    if (l.n) qsort(l.ids, l.n, sizeof *l.ids, cmp_u64);
    if (l.n && l.ids[l.n - 1] + 1 > w->next_seq)
        w->next_seq = l.ids[l.n - 1] + 1; /* ids are
                                   never reused */
    rc = read_heads(w, v);
    uint64_t last = 0;
    for (size_t i = 0; i < l.n && rc == 0; i++)
        rc = scan_segment(w, l.ids[i], i + 1 == l.n, read_only, &last, v);
    free(l.ids);
    if (rc != 0) {
        if (err && errlen && !err[0]) /* the visitor's own explanation wins */
            ra__errbuf(err, errlen, "wal recovery stopped: %s", ra_strerror(rc));
        ra__wal_close(w);
        return rc;
    }
    if (last + 1 > w->next_seq) w->next_seq = last + 1;
    if (!read_only) ensure_reserve(w);
    return 0;
}

void ra__wal_close(ra__wal_t *w) {
    if (w->lock_handle >= 0) w->io->unlock(w->io->ud, w->lock_handle);
    w->lock_handle = -1;
    for (size_t i = 0; i < w->nsegs; i++) {
        free(w->segs[i].seqs);
        free(w->segs[i].offs);
        free(w->segs[i].acked);
    }
    free(w->segs);
    w->segs = NULL;
    w->nsegs = w->segs_cap = 0;
}

/* ---- writing ------------------------------------------------------------------------- */

static bool too_old(const ra__wal_t *w, int64_t now_ms) {
    if (!w->max_age_s) return false;
    for (size_t i = 0; i < w->nsegs; i++) {
        if (w->segs[i].unacked == 0) continue;   /* ACKed, waiting for compaction */
        if (w->segs[i].created_ms < 0) continue; /* header unreadable: age unknown */
        /* the downstream has not taken the oldest slices in time */
        return now_ms - w->segs[i].created_ms > (int64_t)w->max_age_s * 1000;
    }
    return false;
}

void ra__wal_room(const ra__wal_t *w, int64_t now_ms, uint64_t *frames, uint64_t *bytes) {
    *frames = w->entries < w->max_entries ? w->max_entries - w->entries : 0;
    *bytes =
        w->bytes + RA_WAL_SEG_HDR < w->max_bytes ? w->max_bytes - w->bytes - RA_WAL_SEG_HDR : 0;
    if (too_old(w, now_ms)) *frames = *bytes = 0;
}

int ra__wal_check_room(const ra__wal_t *w, size_t n, uint64_t bytes, int64_t now_ms) {
    if (w->entries + n > w->max_entries || w->bytes + bytes > w->max_bytes) return RA_EPERSISTFULL;
    return too_old(w, now_ms) ? RA_EPERSISTFULL : 0;
}

static int write_durable(ra__wal_t *w, const char *path, const uint8_t *buf, size_t len) {
    int fd = w->io->open(w->io->ud, path, RA__IO_CREATE | RA__IO_PRIVATE);
    if (fd < 0) return fd;
    int rc = ra__io_write_all(w->io, fd, buf, len);
    if (rc == 0) {
        uint64_t t0 = mono_us();
        rc = w->io->fsync(w->io->ud, fd);
        fsync_took(w, t0);
    }
    int crc = w->io->close(w->io->ud, fd);
    return rc ? rc : crc;
}

int ra__wal_append(ra__wal_t *w, ra_slice_t *const *slices, size_t n, int64_t now_ms,
                   _Atomic uint64_t *intent_seg, uint64_t *first_seq) {
    if (w->failed) return RA_EIO;
    if (w->next_seq + 2 * (uint64_t)n > RA_WAL_SEQ_MAX) return RA_EIO; /* 2^62 frames: never */
    size_t total = RA_WAL_SEG_HDR;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        ra_slice_bytes(slices[i], &len);
        total += RA_WAL_FRAME_HDR + len + RA_WAL_FRAME_TRAILER;
    }
    /* Everything the segment record needs, first: once it is durable nothing may fail. */
    uint64_t *seqs = malloc(n * sizeof *seqs), *offs = malloc(n * sizeof *offs);
    uint8_t *acked = calloc(n, 1);
    uint8_t *buf = malloc(total);
    if (!seqs || !offs || !acked || !buf || grow_segs(w) != 0) {
        free(seqs);
        free(offs);
        free(acked);
        free(buf);
        return RA_ENOMEM;
    }
    char tmp[4200], seg[4200];
    uint64_t id = 0;
    int rc = 0;
    /* A failed fsync is never retried on the same file and trusted (the 2018 PostgreSQL
     * lesson): the frames go to a new segment under a new id, once; then the error. */
    for (int attempt = 0; attempt < 2; attempt++) {
        id = w->next_seq;
        w->next_seq += n; /* ids of a failed attempt are burnt, never reused */
        seg_header(buf, id, now_ms, (uint32_t)n);
        size_t off = RA_WAL_SEG_HDR;
        for (size_t i = 0; i < n; i++) {
            offs[i] = off;
            off += frame_encode(buf + off, id + i, slices[i]);
        }
        char stem[64];
        snprintf(stem, sizeof stem, "%016" PRIx64 ".seg", id);
        tmp_name(w, stem, tmp, sizeof tmp);
        rc = write_durable(w, tmp, buf, total);
        if (rc == 0) break;
        w->stats.write_errors++;
        w->io->unlink(w->io->ud, tmp);
    }
    free(buf);
    if (rc != 0) {
        free(seqs);
        free(offs);
        free(acked);
        return errno_code(w, rc);
    }
    atomic_store_explicit(intent_seg, id, memory_order_release);
    seg_path(w, id, "", seg, sizeof seg);
    rc = w->io->rename(w->io->ud, tmp, seg);
    if (rc != 0) {
        /* A rename can fail and still have happened: look before treating it as undone. */
        w->stats.write_errors++;
        uint64_t sz;
        if (w->io->size(w->io->ud, seg, &sz) != 0) {
            w->io->unlink(w->io->ud, tmp);
            free(seqs);
            free(offs);
            free(acked);
            return errno_code(w, rc);
        }
    }
    if (rc == 0) rc = fsync_dir(w);
    if (rc != 0) {
        /* The rename may or may not survive a crash. Take it back; if even that cannot be
         * made durable, nobody knows: stop sealing until a restart decides from disk. */
        w->stats.write_errors++;
        free(seqs);
        free(offs);
        free(acked);
        if (w->io->unlink(w->io->ud, seg) == 0 && fsync_dir(w) == 0) return errno_code(w, rc);
        w->failed = true;
        return RA__EINDOUBT;
    }
    for (size_t i = 0; i < n; i++)
        seqs[i] = id + i;
    w->segs[w->nsegs++] =
        (ra__wal_seg_t){id, (uint32_t)n, (uint32_t)n, total, now_ms, seqs, offs, acked};
    w->bytes += total;
    w->entries += n;
    w->unacked += n;
    w->stats.segments_written++;
    w->heads_dirty = true;
    *first_seq = id;
    return 0;
}

bool ra__wal_has_segment(const ra__wal_t *w, uint64_t id) {
    for (size_t i = 0; i < w->nsegs; i++)
        if (w->segs[i].id == id) return true;
    return false;
}

void ra__wal_acked(ra__wal_t *w, uint64_t frame_seq) {
    /* Segments are ordered by id and cover [id, id + frames): binary search. */
    size_t lo = 0, hi = w->nsegs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (w->segs[mid].id <= frame_seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0) return;
    ra__wal_seg_t *s = &w->segs[lo - 1]; /* the segment whose range holds frame_seq */
    size_t a = 0, b = s->frames;
    while (a < b) {
        size_t mid = (a + b) / 2;
        if (s->seqs[mid] < frame_seq)
            a = mid + 1;
        else
            b = mid;
    }
    if (a < s->frames && s->seqs[a] == frame_seq && !s->acked[a]) {
        s->acked[a] = 1;
        s->unacked--;
        w->unacked--;
    }
}

/* ---- compaction and the heads checkpoint ---------------------------------------------- */

typedef struct {
    uint8_t *buf;
    size_t len, cap;
    uint32_t count;
    int err;
} heads_buf_t;

static int emit_head(void *ud, const uint8_t tenant[16], const char *dimension, uint64_t seq,
                     int64_t last_window_start_s, const uint8_t b3[32]) {
    heads_buf_t *h = ud;
    size_t dl = strlen(dimension), need = 17 + dl + 48;
    if (h->len + need > h->cap) {
        size_t c = h->cap ? h->cap * 2 : 4096;
        while (c < h->len + need)
            c *= 2;
        uint8_t *p = realloc(h->buf, c);
        if (!p) return h->err = RA_ENOMEM;
        h->buf = p;
        h->cap = c;
    }
    uint8_t *p = h->buf + h->len;
    memcpy(p, tenant, 16);
    p[16] = (uint8_t)dl;
    memcpy(p + 17, dimension, dl);
    ra__put_u64(p + 17 + dl, seq);
    ra__put_u64(p + 25 + dl, (uint64_t)last_window_start_s);
    memcpy(p + 33 + dl, b3, 32);
    h->len += need;
    h->count++;
    return 0;
}

static int write_heads(ra__wal_t *w, ra__wal_heads_fn heads, void *ud) {
    heads_buf_t h = {.buf = malloc(4096), .cap = 4096, .len = 24}; /* 24: the header */
    if (!h.buf) return RA_ENOMEM;
    int rc = heads ? heads(ud, emit_head, &h) : 0;
    if (rc == 0) rc = h.err;
    if (rc == 0 && h.len + 32 > h.cap) {
        uint8_t *p = realloc(h.buf, h.len + 32);
        if (!p)
            rc = RA_ENOMEM;
        else
            h.buf = p;
    }
    if (rc != 0) {
        free(h.buf);
        return rc;
    }
    memcpy(h.buf, RA_WAL_HEADS_MAGIC, 8);
    ra__put_u64(h.buf + 8, w->next_seq);
    ra__put_u32(h.buf + 16, h.count);
    ra__put_u32(h.buf + 20, 0);
    ra_b3(h.buf, h.len, h.buf + h.len);
    char tmp[4200], final[4200];
    tmp_name(w, "heads", tmp, sizeof tmp);
    dir_path(w, "heads", final, sizeof final);
    rc = write_durable(w, tmp, h.buf, h.len + 32);
    free(h.buf);
    if (rc == 0) rc = w->io->rename(w->io->ud, tmp, final);
    if (rc == 0) rc = fsync_dir(w);
    if (rc != 0) {
        w->stats.write_errors++;
        w->io->unlink(w->io->ud, tmp);
        return errno_code(w, rc);
    }
    w->heads_dirty = false;
    return 0;
}

/* Rewrites a segment keeping only its un-ACKed frames (byte for byte, same seqs), under the
 * same file name: tmp, fsync, rename over, directory fsync. A crash at any point leaves
 * either the old segment or the new one, never both. Streams through the bounded reader
 * and writer; the header goes first with the count memory expects, and a file that turns
 * out not to hold exactly those frames is left alone. */
static int rewrite_segment(ra__wal_t *w, ra__wal_seg_t *s) {
    char path[4200], tmp[4200], stem[64];
    seg_path(w, s->id, "", path, sizeof path);
    snprintf(stem, sizeof stem, "%016" PRIx64 ".seg.compact", s->id);
    tmp_name(w, stem, tmp, sizeof tmp);
    ra__segr_t r;
    int rc = ra__segr_open(&r, w->io, path);
    if (rc != 0) return errno_code(w, rc);
    ra__segw_t o;
    rc = ra__segw_open(&o, w->io, tmp);
    if (rc != 0) {
        ra__segr_close(&r);
        return errno_code(w, rc);
    }
    uint8_t hdr[RA_WAL_SEG_HDR];
    seg_header(hdr, s->id, s->created_ms < 0 ? 0 : s->created_ms, s->unacked);
    ra__segw_write(&o, hdr, sizeof hdr);
    /* Exactly the frames recovery (or the append) accepted: the same rules as scan_segment
     * — checksums, a seq above the last accepted one and not below the segment id, a valid
     * slice — so a damaged twin with the seq of a real frame can never take its place. */
    uint64_t off = RA_WAL_SEG_HDR, w_off = RA_WAL_SEG_HDR, last = 0;
    size_t k = 0, kept = 0;
    while (off < r.size && k < s->frames && rc == 0) {
        size_t avail;
        const uint8_t *fb = ra__segr_at(&r, off, RA_WAL_FRAME_MAX_BYTES, &avail, &rc);
        if (!fb) break;
        uint64_t seq;
        const uint8_t *p;
        size_t pl, size = ra__wal_frame_parse(fb, avail, &seq, &p, &pl);
        if (!size) { /* damage recovery already skipped: skip it again */
            off = resync(&r, off + 1, last, &rc);
            continue;
        }
        ra__decoded_t d;
        if (seq <= last || seq < s->id || ra__decode(p, pl, &d) != 0) {
            off += size;
            continue;
        }
        last = seq;
        while (k < s->frames && s->seqs[k] < seq)
            k++;
        if (k < s->frames && s->seqs[k] == seq) {
            if (!s->acked[k]) {
                ra__segw_write(&o, fb, size);
                s->seqs[kept] = seq; /* the arrays shrink as the file does */
                s->offs[kept] = w_off;
                s->acked[kept] = 0;
                w_off += size;
                kept++;
            }
            k++;
        }
        off += size;
    }
    ra__segr_close(&r);
    if (rc != 0 || kept != s->unacked) { /* unreadable, or not what memory says: leave it */
        ra__segw_abandon(&o);
        w->io->unlink(w->io->ud, tmp);
        return rc != 0 ? errno_code(w, rc) : RA_EWALCORRUPT;
    }
    uint64_t us = 0;
    rc = ra__segw_finish(&o, true, &us);
    if (us) fsync_note(w, us);
    if (rc == 0) rc = w->io->rename(w->io->ud, tmp, path);
    if (rc == 0) rc = fsync_dir(w);
    if (rc != 0) {
        w->stats.write_errors++;
        w->io->unlink(w->io->ud, tmp);
        return errno_code(w, rc); /* the arrays were only shrunk in a copy below */
    }
    w->entries -= s->frames - kept;
    w->bytes -= s->bytes - w_off;
    s->frames = (uint32_t)kept;
    s->bytes = w_off;
    w->stats.segments_rewritten++;
    return 0;
}

/* Whether compaction should rewrite a segment: at least half of it ACKed, and not all of
 * it (then it is simply removed). */
static bool worth_rewriting(const ra__wal_seg_t *s) {
    return s->unacked > 0 && (uint64_t)(s->frames - s->unacked) * 2 >= s->frames;
}

int ra__wal_compact(ra__wal_t *w, ra__wal_heads_fn heads, void *heads_ud, size_t *removed) {
    *removed = 0;
    size_t n = 0;
    for (size_t i = 0; i < w->nsegs; i++)
        n += w->segs[i].unacked == 0 || worth_rewriting(&w->segs[i]);
    if (n == 0) return 0;
    /* Heads first: once a segment is gone, the checkpoint is the only record of its
     * streams' last seq and b3. */
    int rc = write_heads(w, heads, heads_ud);
    if (rc == RA_EPERSISTFULL && release_reserve(w)) rc = write_heads(w, heads, heads_ud);
    if (rc != 0) return rc;
    size_t k = 0;
    int rw = 0;
    for (size_t i = 0; i < w->nsegs; i++) {
        ra__wal_seg_t *s = &w->segs[i];
        char path[4200];
        seg_path(w, s->id, "", path, sizeof path);
        if (s->unacked == 0 && w->io->unlink(w->io->ud, path) == 0) {
            w->bytes -= s->bytes;
            w->entries -= s->frames;
            free(s->seqs);
            free(s->offs);
            free(s->acked);
            (*removed)++;
            continue;
        }
        if (worth_rewriting(s)) {
            /* Work on copies: a failed rewrite must leave memory matching the old file. */
            ra__wal_seg_t copy = *s;
            copy.seqs = malloc(s->frames * sizeof *copy.seqs);
            copy.offs = malloc(s->frames * sizeof *copy.offs);
            copy.acked = malloc(s->frames);
            if (copy.seqs && copy.offs && copy.acked) {
                memcpy(copy.seqs, s->seqs, s->frames * sizeof *copy.seqs);
                memcpy(copy.offs, s->offs, s->frames * sizeof *copy.offs);
                memcpy(copy.acked, s->acked, s->frames);
                int r = rewrite_segment(w, &copy);
                if (r == 0) {
                    free(s->seqs);
                    free(s->offs);
                    free(s->acked);
                    *s = copy;
                    copy.seqs = copy.offs = NULL;
                    copy.acked = NULL;
                } else if (!rw) {
                    rw = r;
                }
            }
            free(copy.seqs);
            free(copy.offs);
            free(copy.acked);
        }
        w->segs[k++] = *s;
    }
    w->nsegs = k;
    w->stats.segments_removed += *removed;
    /* A crash before this fsync brings removed segments back: their slices are resent and
     * the downstream answers dup. Harmless by design. */
    rc = fsync_dir(w) == 0 ? 0 : RA_EIO;
    if (rc == 0) ensure_reserve(w); /* taken back if compaction needed it */
    return rc ? rc : rw;
}
