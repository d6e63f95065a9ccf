/* The log: one chain (writer_id, stream) and its durable sink. One rau_log_t is the single
 * writer of its chain head (AUD-I-1); the caller serializes calls on it (the Lua host runs
 * it on one loop). Appends are buffered; rau_log_sync writes the batch and fdatasyncs once
 * (group commit, AUD-I-12). A failed write fails the log: the head is then ahead of the
 * disk, and going on would chain records to ones that may not exist (AUD-I-14).
 *
 * The host runs the writer's calls on the libuv threadpool (rau_log_append_packed, then
 * rau_log_sync: one pool call per batch) while the loop thread asks for rau_log_stats and
 * rau_log_latest_checkpoint (metrics, the ledger's checkpoint). Those two read a copy the
 * writer publishes under a mutex at the end of each call, never the writer's live state. */
#include "head.h"
#include "internal.h"
#include "io.h"
#include "iotrack.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

struct rau_log_s {
    char writer_id[RAU_ID_MAX + 1];
    char stream[RAU_ID_MAX + 1];
    char dir[4096];
    int amnesia, failed;
    uint64_t rotate_bytes;
    uint32_t dedupe_window, checkpoint_every, checkpoint_interval_ms;
    rau_signer_t *signer;
    const ra__io_t *io; /* every file operation of the writer and of recovery (rule 7) */
    rau__iotrack_t trk; /* io is trk.io: the backend's calls, the last failure remembered */

    uint64_t head_seq;
    uint8_t head_hash[32];
    rau__mrange_t mr;
    rau__dedupe_t dd;

    int fd;             /* current segment, O_APPEND */
    uint64_t seg_bytes; /* its size, batch excluded */
    uint64_t seg_first; /* its first seq */
    /* Frame positions of the last dedupe_window records (seq % dedupe_window): where the
     * head file says the dedupe window starts and where its last record is. */
    rau__pos_t *pos;
    /* The head file (audit/head.c, AUD-I-37): written after every fdatasync that returned
     * 0, in place, slot gen % 2. */
    int head_fd;
    uint64_t head_gen;
    uint8_t head_slot[RAU__HEAD_SLOT];
    rau__open_info_t info;
    uint8_t *batch;
    size_t batch_len, batch_cap;
    uint64_t batch_first; /* first seq in the batch */
    uint64_t last_cp;     /* size of the last checkpoint */
    uint64_t last_cp_ms;  /* monotonic ms when it was written, or of the open (0: due now) */
    /* The last checkpoint (written, or found at open): what the ledger carries so usage,
     * money and audit attest to each other (rau_log_latest_checkpoint). */
    uint8_t cp_root[32];
    char cp_note[RAU_NOTE_MAX];
    size_t cp_note_len; /* 0: none */
    rau_log_stats_t st;
    /* What other threads read (rau_log_stats, rau_log_latest_checkpoint), under mu. */
    pthread_mutex_t mu;
    rau_log_stats_t pub;
    uint64_t pub_cp_size;
    uint8_t pub_cp_root[32];
    char pub_cp_note[RAU_NOTE_MAX];
    size_t pub_cp_note_len;
    uint64_t pub_failures; /* trk.failures when fail_text was made */
    int pub_errno;
    char pub_fail[512];
};

/* Publishes the writer's state for the readers of other threads (see the header comment). */
static void publish(rau_log_t *l) {
    pthread_mutex_lock(&l->mu);
    l->pub = l->st;
    l->pub.head_seq = l->head_seq;
    memcpy(l->pub.head_hash, l->head_hash, 32);
    if (l->cp_note_len != l->pub_cp_note_len || l->last_cp != l->pub_cp_size) {
        l->pub_cp_size = l->last_cp;
        memcpy(l->pub_cp_root, l->cp_root, 32);
        memcpy(l->pub_cp_note, l->cp_note, l->cp_note_len);
        l->pub_cp_note_len = l->cp_note_len;
    }
    if (l->trk.failures != l->pub_failures) {
        l->pub_failures = l->trk.failures;
        l->pub_errno = l->trk.err;
        rau__iotrack_text(&l->trk, l->pub_fail, sizeof l->pub_fail);
    }
    pthread_mutex_unlock(&l->mu);
}

int rau_log_failure(const rau_log_t *l, char *buf, size_t cap) {
    if (!l) return 0;
    rau_log_t *w = (rau_log_t *)l; /* the mutex only: the published copy is read */
    pthread_mutex_lock(&w->mu);
    int e = l->pub_errno;
    if (buf && cap) snprintf(buf, cap, "%s", l->pub_fail);
    pthread_mutex_unlock(&w->mu);
    return e;
}

static uint64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void rau_log_config_init(rau_log_config_t *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->rotate_bytes = 64ull << 20;
    cfg->batch_bytes = 1u << 20;
    cfg->dedupe_window = 65536;
}

static void pos_set(rau_log_t *l, uint64_t seq, uint64_t seg, uint64_t off) {
    if (l->pos) l->pos[seq % l->dedupe_window] = (rau__pos_t){seg, off};
}

static int write_all(rau_log_t *l, int fd, const uint8_t *p, size_t n) {
    return ra__io_write_all(l->io, fd, p, n) ? RAU_EIO : 0;
}

static int seg_create(rau_log_t *l, uint64_t first) {
    char p[4200];
    snprintf(p, sizeof p, "%s/seg-%020llu.rau", l->dir, (unsigned long long)first);
    int fd = l->io->open(l->io->ud, p, RA__IO_CREATE);
    if (fd < 0) return RAU_EIO;
    uint8_t h[RAU__SEG_HDR] = {0};
    memcpy(h, RAU__SEG_MAGIC, 8);
    rau__be64(h + 8, first);
    rau__be32(h + 16, l->dedupe_window);
    rau__seg_check(h, h + 20);
    /* The new name must be durable before a record in it is acknowledged: fsync_dir. */
    if (write_all(l, fd, h, sizeof h) || l->io->fsync(l->io->ud, fd) ||
        l->io->fsync_dir(l->io->ud, l->dir)) {
        l->io->close(l->io->ud, fd);
        return RAU_EIO;
    }
    if (l->fd >= 0) l->io->close(l->io->ud, l->fd);
    l->fd = fd;
    l->seg_bytes = RAU__SEG_HDR;
    l->seg_first = first;
    l->st.segments++;
    return 0;
}

/* Takes one decoded record into the chain state (append and recovery). */
static void chain_take(rau_log_t *l, const uint8_t *canon, size_t len, const uint8_t *self,
                       const uint8_t *dkey) {
    uint8_t leaf[32];
    rau_merkle_leaf_hash(canon, len, leaf);
    rau__mrange_push(&l->mr, leaf);
    rau__dedupe_add(&l->dd, dkey, l->head_seq + 1, self);
    l->head_seq++;
    memcpy(l->head_hash, self, 32);
}

static int hdr_ok(const uint8_t *b) {
    uint8_t c[4];
    rau__seg_check(b, c);
    return memcmp(c, b + 20, 4) == 0;
}

/* A bad frame in the last segment is a torn tail only if nothing valid follows it. */
static int valid_after(const uint8_t *b, size_t len, size_t off) {
    for (size_t o = off + 1; o + RAU__FRAME_OVERHEAD + RAU__OFF_BODY <= len; o++) {
        const uint8_t *pl;
        size_t plen, flen;
        if (rau__frame_parse(b + o, len - o, &pl, &plen, &flen) == 1) return 1;
    }
    return 0;
}

/* valid_after over the file from pos to its end (read whole: only after a bad frame in the
 * last segment, the rare path). An unreadable rest counts as "something follows" (so the
 * damage is refused, never cut). */
static int valid_after_file(const ra__io_t *io, int fd, size_t pos, size_t len) {
    if (len <= pos) return 0;
    size_t n = len - pos;
    uint8_t *b = malloc(n);
    if (!b) return 1;
    int v = ra__io_pread_all(io, fd, b, n, pos) == 0 ? valid_after(b, n, 0) : 1;
    free(b);
    return v;
}

/* The segment names of the directory through the I/O interface, sorted (the zero-padded
 * decimal makes name order seq order). */
typedef struct names_s {
    size_t n, cap;
    char (*v)[64];
    int oom;
} names_t;

static int names_add(void *ud, const char *name) {
    names_t *ns = ud;
    size_t len = strlen(name);
    if (len >= 64) return 0;
    if (ns->n == ns->cap) {
        size_t cap = ns->cap ? ns->cap * 2 : 16;
        void *nv = realloc(ns->v, cap * sizeof *ns->v);
        if (!nv) {
            ns->oom = 1;
            return 1;
        }
        ns->v = nv, ns->cap = cap;
    }
    memcpy(ns->v[ns->n++], name, len + 1);
    return 0;
}

static int cmp_names(const void *a, const void *b) {
    return strcmp((const char *)a, (const char *)b);
}

static int list_dir(rau_log_t *l, names_t *ns) {
    memset(ns, 0, sizeof *ns);
    int rc = l->io->list(l->io->ud, l->dir, names_add, ns);
    if (ns->oom) return RAU_ENOMEM;
    if (rc) return RAU_EIO;
    if (ns->n) qsort(ns->v, ns->n, sizeof *ns->v, cmp_names);
    return 0;
}

/* The recovery's window over a segment (as rau__win_t, through the I/O interface). */
typedef struct rwin_s {
    const ra__io_t *io;
    int fd, eof;
    uint8_t *b;
    size_t have;
    uint64_t base, len;
} rwin_t;

static int rwin_refill(rwin_t *w, size_t *off) {
    memmove(w->b, w->b + *off, w->have - *off);
    w->base += *off;
    w->have -= *off;
    *off = 0;
    while (!w->eof && w->have < RAU__WIN) {
        ssize_t r =
            w->io->pread(w->io->ud, w->fd, w->b + w->have, RAU__WIN - w->have, w->base + w->have);
        if (r < 0) return RAU_EIO;
        if (r == 0) w->eof = 1;
        w->have += (size_t)r;
    }
    return 0;
}

/* fsyncgate: after a failed fdatasync Linux may have marked the dirty pages clean without
 * writing them, and a later fdatasync (this process's or the next one's) reports success
 * for them. Recovery reads such pages from the cache and would chain new records to
 * them, which a power cut then turns into a hole before acknowledged records. So the part
 * of the last segment not known to be durable (from `from` to its end: everything past
 * what an fdatasync that returned 0 covered) is written again before it is trusted, then
 * synced: what open read is what is on disk. */
static int rewrite_tail(rau_log_t *l, const char *path, uint64_t from, uint64_t len) {
    if (len <= from) return 0;
    int rfd = l->io->open(l->io->ud, path, RA__IO_READ);
    int wfd = rfd < 0 ? -1 : l->io->open(l->io->ud, path, RA__IO_WRITE);
    uint8_t *b = wfd < 0 ? NULL : malloc(RAU__WIN);
    int rc = b ? 0 : RAU_EIO;
    for (uint64_t off = from; !rc && off < len;) {
        size_t n = len - off < RAU__WIN ? (size_t)(len - off) : RAU__WIN;
        if (ra__io_pread_all(l->io, rfd, b, n, off)) rc = RAU_EIO;
        for (size_t done = 0; !rc && done < n;) {
            ssize_t w = l->io->pwrite(l->io->ud, wfd, b + done, n - done, off + done);
            if (w <= 0)
                rc = RAU_EIO;
            else
                done += (size_t)w;
        }
        off += n;
    }
    if (!rc && l->io->fsync(l->io->ud, wfd)) rc = RAU_EIO;
    if (wfd >= 0) l->io->close(l->io->ud, wfd);
    if (rfd >= 0) l->io->close(l->io->ud, rfd);
    free(b);
    return rc;
}

/* The note of the last checkpoint found at open: its root is line 3 of the body
 * (origin, size, base64 root). A note that cannot be read or parsed leaves "none";
 * `audit verify` is where a damaged note is reported. */
static void load_latest(rau_log_t *l) {
    char p[4200];
    snprintf(p, sizeof p, "%s/cp-%020llu.note", l->dir, (unsigned long long)l->last_cp);
    uint8_t *buf = NULL;
    size_t n = 0;
    if (rau__io_read_file(l->io, p, RAU_NOTE_MAX, &buf, &n) || n == 0) {
        free(buf);
        return;
    }
    const char *s = (const char *)buf, *end = s + n;
    const char *l1 = memchr(s, '\n', n);
    const char *l2 = l1 ? memchr(l1 + 1, '\n', (size_t)(end - l1 - 1)) : NULL;
    const char *l3 = l2 ? memchr(l2 + 1, '\n', (size_t)(end - l2 - 1)) : NULL;
    if (l3 && rau__b64_32(l2 + 1, (size_t)(l3 - l2 - 1), l->cp_root) == 0) {
        memcpy(l->cp_note, buf, n);
        l->cp_note_len = n;
    }
    free(buf);
}

/* Reads one segment from byte off0 on (the header's end, or past what the head file
 * covers), taking every record into the chain with full checks (frame, canonical decode,
 * seq, prev, ids). For the last segment: durable_end, when known (not 0), is where the
 * bytes an fdatasync acknowledged end (the head file's end_off): a bad frame before it is
 * damage (refused, AUD-I-16), one at or past it the unsynced tail, cut there whatever
 * follows (sectors of an unsynced write reach the disk in any order); when unknown, a bad
 * frame is a torn tail only if nothing valid follows it. The part not known durable is
 * then rewritten (rewrite_tail) and the segment reopened for appending. */
static int recover_seg(rau_log_t *l, rwin_t *w, const char *path, uint64_t first_seq, int last,
                       uint64_t off0, uint64_t durable_end, char *err, size_t errlen) {
    int rc = 0;
    w->fd = l->io->open(l->io->ud, path, RA__IO_READ);
    w->eof = 0, w->have = 0, w->base = 0;
    size_t off = 0;
    if (w->fd < 0 || l->io->fsize(l->io->ud, w->fd, &w->len) || rwin_refill(w, &off)) {
        if (w->fd >= 0) l->io->close(l->io->ud, w->fd);
        rau__errf(err, errlen, "%s: cannot read", path);
        return RAU_EIO;
    }
    uint64_t len = w->len;
    uint64_t cut = UINT64_MAX;
    if (w->have < RAU__SEG_HDR) {
        if (!last) {
            rau__errf(err, errlen, "%s: short header", path);
            rc = RAU_ECORRUPT;
        } else {
            cut = 0; /* torn at creation: rewritten below */
        }
    } else if (memcmp(w->b, RAU__SEG_MAGIC, 8) != 0 || rau__rd64(w->b + 8) != first_seq ||
               (off0 == RAU__SEG_HDR && first_seq != l->head_seq + 1) || !hdr_ok(w->b)) {
        rau__errf(err, errlen, "%s+0: bad segment header (expected first seq %llu)", path,
                  (unsigned long long)(l->head_seq + 1));
        rc = RAU_ECORRUPT;
    }
    /* (a segment begun after the head was written is only known durable up to its header,
     * and a crash during its creation may leave less: that is cut below, not damage) */
    if (!rc && last && durable_end > RAU__SEG_HDR && durable_end > len) {
        rau__errf(err, errlen, "%s: %llu bytes, but %llu were acknowledged durable (head file)",
                  path, (unsigned long long)len, (unsigned long long)durable_end);
        rc = RAU_ECORRUPT;
    }
    off = RAU__SEG_HDR;
    if (!rc && cut == UINT64_MAX && off0 > RAU__SEG_HDR) {
        /* Start past what the head file covers (its last record was checked there). */
        w->base = off0, w->have = 0, w->eof = 0, off = 0;
        if (rwin_refill(w, &off)) rc = RAU_EIO;
    }
    while (!rc && cut == UINT64_MAX) {
        /* Less than the largest frame left in the window: slide it and read on. */
        if (!w->eof && w->have - off < RAU_RECORD_MAX + RAU__FRAME_OVERHEAD &&
            rwin_refill(w, &off)) {
            rau__errf(err, errlen, "%s: cannot read", path);
            rc = RAU_EIO;
            break;
        }
        if (off >= w->have) break;
        uint64_t pos = w->base + off; /* in the file */
        const uint8_t *pl;
        size_t plen, flen;
        int fr = rau__frame_parse(w->b + off, w->have - off, &pl, &plen, &flen);
        if (fr == 1) {
            rau_record_t *rec = NULL;
            int drc = rau_record_decode(pl, plen, &rec);
            if (drc == 0 && (rau_record_seq(rec) != l->head_seq + 1 ||
                             memcmp(rau_record_prev(rec), l->head_hash, 32) != 0 ||
                             strcmp(rau_record_writer_id(rec), l->writer_id) != 0 ||
                             strcmp(rau_record_stream(rec), l->stream) != 0))
                drc = RAU_ETAMPER;
            if (drc) {
                rau__errf(err, errlen, "%s+%llu: record %llu: %s", path, (unsigned long long)pos,
                          (unsigned long long)(l->head_seq + 1), rau_err_name(drc));
                rau_record_free(rec);
                rc = RAU_ECORRUPT;
                break;
            }
            pos_set(l, l->head_seq + 1, first_seq, pos);
            chain_take(l, pl, plen, rau_record_self_hash(rec), rau_record_dedupe(rec));
            rau_record_free(rec);
            l->info.decoded++;
            off += flen;
        } else if (last && durable_end && pos >= durable_end) {
            cut = pos; /* AUD-I-12, AUD-I-36: the unsynced tail is cut, once, at open */
        } else if (last && !durable_end && (fr == 0 || !valid_after_file(l->io, w->fd, pos, len))) {
            cut = pos; /* AUD-I-12: a torn tail is cut, once, at open */
        } else if (last && durable_end) {
            rau__errf(err, errlen,
                      "%s+%llu: bad frame after record %llu, in the part an fdatasync "
                      "acknowledged",
                      path, (unsigned long long)pos, (unsigned long long)l->head_seq);
            rc = RAU_ECORRUPT;
        } else {
            rau__errf(err, errlen, "%s+%llu: bad frame after record %llu", path,
                      (unsigned long long)pos, (unsigned long long)l->head_seq);
            rc = RAU_ECORRUPT;
        }
    }
    l->io->close(l->io->ud, w->fd);
    w->fd = -1;
    if (rc || !last) return rc;
    if (cut == 0) {
        if (l->io->unlink(l->io->ud, path) != 0) return RAU_EIO;
        l->st.torn_bytes += len;
        return 0;
    }
    if (cut != UINT64_MAX) {
        if (l->io->truncate(l->io->ud, path, cut) != 0) return RAU_EIO;
        l->st.torn_bytes += len - cut;
        len = cut;
    }
    if ((rc = rewrite_tail(l, path, durable_end ? durable_end : RAU__SEG_HDR, len))) return rc;
    l->fd = l->io->open(l->io->ud, path, RA__IO_APPEND);
    if (l->fd < 0 || l->io->fsync(l->io->ud, l->fd) != 0) return RAU_EIO;
    l->seg_bytes = len;
    l->seg_first = first_seq;
    return 0;
}

/* The identity of a packed record: the canonical prefix, a body no shorter than the fixed
 * fields, and this log's writer_id and stream (so a batch cannot land on another chain). */
static int packed_ok(const rau_log_t *l, const uint8_t *p, size_t n) {
    size_t wl = strlen(l->writer_id), sl = strlen(l->stream);
    size_t need = RAU__OFF_BODY + 8 + 1 + wl + 1 + sl + 2;
    if (n < need || n > RAU_RECORD_MAX || memcmp(p, RAU__MAGIC, RAU__MAGIC_LEN) != 0) return 0;
    const uint8_t *w = p + RAU__OFF_BODY + 8;
    return w[0] == wl && memcmp(w + 1, l->writer_id, wl) == 0 && w[1 + wl] == sl &&
           memcmp(w + 2 + wl, l->stream, sl) == 0;
}

/* ---- the head file (audit/head.c, AUD-I-37) ---- */

static void head_path(const rau_log_t *l, char *p, size_t n) {
    snprintf(p, n, "%s/" RAU__HEAD_NAME, l->dir);
}

/* The newest whole slot of the head file, for this chain. 0, or -1 with the reason in
 * l->info.why (no file, no whole slot, another chain). */
static int head_read(rau_log_t *l, rau__head_t *h) {
    char p[4200];
    head_path(l, p, sizeof p);
    uint8_t *buf = NULL;
    size_t n = 0;
    int rc = rau__io_read_file(l->io, p, RAU__HEAD_FILE, &buf, &n);
    if (rc) {
        snprintf(l->info.why, sizeof l->info.why, "%s",
                 rc == RAU_ENOTFOUND ? "no head file" : "head file unreadable");
        return -1;
    }
    int found = 0;
    for (size_t i = 0; i < 2 && (i + 1) * RAU__HEAD_SLOT <= n; i++) {
        rau__head_t t;
        if (rau__head_decode(buf + i * RAU__HEAD_SLOT, &t) != 0) continue;
        if (t.gen > l->head_gen) l->head_gen = t.gen;
        if (!found || t.gen > h->gen) *h = t, found = 1;
    }
    free(buf);
    if (!found) {
        snprintf(l->info.why, sizeof l->info.why, "head file: no whole slot");
        return -1;
    }
    if (strcmp(h->writer_id, l->writer_id) || strcmp(h->stream, l->stream)) {
        snprintf(l->info.why, sizeof l->info.why, "head file of another chain");
        return -1;
    }
    return 0;
}

/* Writes the head after an fdatasync that returned 0 (and at open): the slot the last write
 * did not use, then fdatasync; the file is created whole (temporary file, rename). */
static int head_write(rau_log_t *l) {
    rau__head_t h;
    memset(&h, 0, sizeof h);
    h.gen = l->head_gen + 1;
    h.last_seq = l->head_seq;
    memcpy(h.last_hash, l->head_hash, 32);
    if (l->head_seq) {
        const rau__pos_t *r = &l->pos[l->head_seq % l->dedupe_window];
        h.rec_seg = r->seg, h.rec_off = r->off;
        h.win_seq = l->head_seq > l->dedupe_window ? l->head_seq - l->dedupe_window + 1 : 1;
        const rau__pos_t *w = &l->pos[h.win_seq % l->dedupe_window];
        h.win_seg = w->seg, h.win_off = w->off;
    }
    h.end_seg = l->seg_first;
    h.end_off = l->seg_bytes;
    h.dedupe_window = l->dedupe_window;
    memcpy(h.writer_id, l->writer_id, sizeof h.writer_id);
    memcpy(h.stream, l->stream, sizeof h.stream);
    h.mr = l->mr;
    rau__head_encode(&h, l->head_slot);
    uint64_t at = (h.gen % 2) * RAU__HEAD_SLOT;
    int rc = 0;
    if (l->head_fd < 0) {
        /* An existing head file of the right size is written in place (its other slot
         * stays: a torn write of this one leaves it); otherwise it is made whole. */
        char p[4200];
        head_path(l, p, sizeof p);
        int fd = l->io->open(l->io->ud, p, RA__IO_WRITE);
        uint64_t size = 0;
        if (fd >= 0 && l->io->fsize(l->io->ud, fd, &size) == 0 && size == RAU__HEAD_FILE)
            l->head_fd = fd;
        else if (fd >= 0)
            l->io->close(l->io->ud, fd);
    }
    if (l->head_fd < 0) {
        char p[4200];
        head_path(l, p, sizeof p);
        uint8_t *file = calloc(1, RAU__HEAD_FILE);
        if (!file) return RAU_ENOMEM;
        memcpy(file + at, l->head_slot, RAU__HEAD_SLOT);
        rc = rau__io_replace(l->io, l->dir, p, file, RAU__HEAD_FILE);
        free(file);
        if (!rc && (l->head_fd = l->io->open(l->io->ud, p, RA__IO_WRITE)) < 0) rc = RAU_EIO;
    } else {
        for (size_t done = 0; !rc && done < RAU__HEAD_SLOT;) {
            ssize_t w = l->io->pwrite(l->io->ud, l->head_fd, l->head_slot + done,
                                      RAU__HEAD_SLOT - done, at + done);
            if (w <= 0)
                rc = RAU_EIO;
            else
                done += (size_t)w;
        }
        if (!rc && l->io->fsync(l->io->ud, l->head_fd)) rc = RAU_EIO;
    }
    if (!rc) l->head_gen = h.gen;
    return rc;
}

static int find_seg(const names_t *ns, uint64_t first, size_t *idx) {
    for (size_t i = 0; i < ns->n; i++) {
        uint64_t f;
        if (rau__seg_name(ns->v[i], &f) && f == first) {
            *idx = i;
            return 1;
        }
    }
    return 0;
}

/* The fast path of open: the dedupe window rebuilt from the records the head covers, from
 * win_seq to last_seq (frame checks, seq, prev links, ids, BLAKE3 self_hash and dedupe key;
 * no canonical re-decoding), which must end at rec_off with last_hash: the head is never
 * trusted blindly. 0: the chain state is the head's (*next: the segment and offset where
 * the full checks resume); 1: the head does not match the files (stale, another log's,
 * damaged), fall back to the full scan. */
static int rebuild_window(rau_log_t *l, const names_t *ns, const rau__head_t *h, rwin_t *w,
                          size_t *next_idx, uint64_t *next_off) {
    size_t i;
    if (!find_seg(ns, h->win_seg, &i)) return 1;
    uint64_t seq = h->win_seq;
    uint8_t prev[32];
    int ok = 0, bad = 0;
    for (; i < ns->n && !ok && !bad; i++) {
        uint64_t first;
        if (!rau__seg_name(ns->v[i], &first)) continue;
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", l->dir, ns->v[i]);
        w->fd = l->io->open(l->io->ud, path, RA__IO_READ);
        w->eof = 0, w->have = 0, w->base = 0;
        size_t off = 0;
        if (w->fd < 0 || rwin_refill(w, &off) || w->have < RAU__SEG_HDR ||
            memcmp(w->b, RAU__SEG_MAGIC, 8) != 0 || rau__rd64(w->b + 8) != first || !hdr_ok(w->b) ||
            (first != h->win_seg && first != seq)) {
            bad = 1;
        } else if (first == h->win_seg) {
            w->base = h->win_off, w->have = 0, w->eof = 0;
            if (rwin_refill(w, &off)) bad = 1;
        } else {
            off = RAU__SEG_HDR;
        }
        while (!bad && !ok) {
            if (!w->eof && w->have - off < RAU_RECORD_MAX + RAU__FRAME_OVERHEAD &&
                rwin_refill(w, &off)) {
                bad = 1;
                break;
            }
            if (off >= w->have) break; /* the next segment */
            const uint8_t *pl;
            size_t plen, flen;
            uint64_t at = w->base + off;
            if (rau__frame_parse(w->b + off, w->have - off, &pl, &plen, &flen) != 1 ||
                !packed_ok(l, pl, plen) || rau__rd64(pl + RAU__OFF_SEQ) != seq ||
                (seq > h->win_seq && memcmp(pl + RAU__OFF_PREV, prev, 32) != 0)) {
                bad = 1;
                break;
            }
            uint8_t dkey[32];
            rau__b3(pl, plen, prev);
            rau__b3_dedupe(pl, plen, dkey);
            rau__dedupe_add(&l->dd, dkey, seq, prev);
            pos_set(l, seq, first, at);
            l->info.hashed++;
            if (seq == h->last_seq) {
                if (first != h->rec_seg || at != h->rec_off || memcmp(prev, h->last_hash, 32)) {
                    bad = 1;
                } else {
                    ok = 1;
                    *next_idx = i;
                    *next_off = at + flen;
                }
            }
            seq++;
            off += flen;
        }
        l->io->close(l->io->ud, w->fd);
        w->fd = -1;
    }
    if (!ok) return 1;
    l->head_seq = h->last_seq;
    memcpy(l->head_hash, h->last_hash, 32);
    l->mr = h->mr;
    return 0;
}

static int recover(rau_log_t *l, char *err, size_t errlen) {
    names_t ns;
    int rc = list_dir(l, &ns);
    if (rc) {
        rau__errf(err, errlen, "%s: cannot list", l->dir);
        free(ns.v);
        return rc;
    }
    uint64_t nseg = 0;
    for (size_t i = 0; i < ns.n; i++) {
        uint64_t f;
        if (rau__seg_name(ns.v[i], &f)) nseg++;
    }
    rwin_t w = {l->io, -1, 0, malloc(RAU__WIN), 0, 0, 0};
    if (!w.b) rc = RAU_ENOMEM;
    /* AUD-I-37: a head file whose last record is where it says lets the open skip decoding
     * what it covers; one that does not match the files is not used for that (the full
     * scan, as without one). Its durable mark (end_seg, end_off: what an fdatasync
     * acknowledged) still tells damage from an unsynced tail when its slot is whole and of
     * this chain: bytes it says were acknowledged and are now bad or missing are damage. */
    rau__head_t h;
    int trust = !rc && head_read(l, &h) == 0;
    size_t start = 0;
    uint64_t start_off = RAU__SEG_HDR;
    if (trust && h.last_seq > 0 && h.dedupe_window != l->dedupe_window) {
        snprintf(l->info.why, sizeof l->info.why, "head file of another dedupe window");
    } else if (trust && h.last_seq > 0) {
        if (rebuild_window(l, &ns, &h, &w, &start, &start_off) == 0) {
            l->info.head_used = 1;
        } else {
            /* back to nothing: the full scan rebuilds the state from the first record */
            start = 0, start_off = RAU__SEG_HDR;
            snprintf(l->info.why, sizeof l->info.why, "head file does not match the log");
            l->head_seq = 0;
            memset(l->head_hash, 0, 32);
            memset(&l->mr, 0, sizeof l->mr);
            rau__dedupe_free(&l->dd);
            rc = rau__dedupe_init(&l->dd, l->dedupe_window);
        }
    }
    if (trust && !find_seg(&ns, h.end_seg, &(size_t){0})) {
        rau__errf(err, errlen, "%s: segment %llu is missing (the head file saw it synced)", l->dir,
                  (unsigned long long)h.end_seg);
        rc = RAU_ECORRUPT;
    }
    uint64_t seen = 0;
    for (size_t i = 0; i < ns.n && !rc; i++) {
        uint64_t first;
        if (!rau__seg_name(ns.v[i], &first)) continue;
        int last = ++seen == nseg;
        if (i < start) continue;
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", l->dir, ns.v[i]);
        uint64_t durable_end = !trust               ? 0
                               : first == h.end_seg ? h.end_off
                               : first > h.end_seg  ? RAU__SEG_HDR
                                                    : 0;
        rc = recover_seg(l, &w, path, first, last, i == start ? start_off : RAU__SEG_HDR,
                         durable_end, err, errlen);
    }
    if (!rc) l->st.segments = l->fd >= 0 || nseg == 0 ? nseg : nseg - 1;
    if (!rc) l->st.durable_seq = l->head_seq;
    /* The last checkpoint's size, from the file names. */
    for (size_t i = 0; i < ns.n && !rc; i++) {
        unsigned long long n;
        char tail[8];
        if (sscanf(ns.v[i], "cp-%20llu.%7s", &n, tail) == 2 && !strcmp(tail, "note") &&
            n > l->last_cp && n <= l->head_seq)
            l->last_cp = n;
    }
    free(ns.v);
    free(w.b);
    if (rc) return rc;
    if (l->last_cp) load_latest(l);
    return 0;
}

int rau__log_open_io(const rau_log_config_t *cfg, const ra__io_t *io, rau_log_t **out, char *err,
                     size_t errlen) {
    if (!cfg || !out || !io) return RAU_EINVAL;
    *out = NULL;
    if (err && errlen) err[0] = 0;
    if (!cfg->writer_id || !cfg->stream) {
        rau__errf(err, errlen, "writer_id and stream are required");
        return RAU_EINVAL;
    }
    /* AUD-I-13: amnesia refuses a durable path at open, not at the first write. */
    if (cfg->amnesia && cfg->dir) {
        rau__errf(err, errlen, "amnesia mode forbids a log directory (dir is set)");
        return RAU_EAMNESIA;
    }
    if (!cfg->amnesia && !cfg->dir) {
        rau__errf(err, errlen, "dir is required unless amnesia = 1");
        return RAU_EINVAL;
    }
    /* Validate the ids with the encoder's own rules. */
    rau_event_t probe = {"x", 1, 0, NULL, 0};
    size_t plen;
    int rc = rau_record_encode(cfg->writer_id, cfg->stream, 1, NULL, &probe, NULL, 0, &plen);
    if (rc != RAU_EBUFSIZE) {
        rau__errf(err, errlen, "writer_id or stream: %s", rau_strerror(rc));
        return rc ? rc : RAU_EINVAL;
    }
    rau_log_t *l = calloc(1, sizeof *l);
    if (!l) return RAU_ENOMEM;
    if (pthread_mutex_init(&l->mu, NULL) != 0) {
        free(l);
        return RAU_ENOMEM;
    }
    l->fd = -1;
    l->head_fd = -1;
    rau__iotrack_init(&l->trk, io);
    l->io = &l->trk.io;
    snprintf(l->writer_id, sizeof l->writer_id, "%s", cfg->writer_id);
    snprintf(l->stream, sizeof l->stream, "%s", cfg->stream);
    l->amnesia = cfg->amnesia != 0;
    l->rotate_bytes = cfg->rotate_bytes ? cfg->rotate_bytes : 64ull << 20;
    l->dedupe_window = cfg->dedupe_window ? cfg->dedupe_window : 65536;
    l->checkpoint_every = cfg->checkpoint_every;
    l->checkpoint_interval_ms = cfg->checkpoint_interval_ms;
    l->batch_cap = cfg->batch_bytes ? cfg->batch_bytes : 1u << 20;
    if (l->batch_cap < RAU_RECORD_MAX + RAU__FRAME_OVERHEAD)
        l->batch_cap = RAU_RECORD_MAX + RAU__FRAME_OVERHEAD;
    if ((rc = rau__dedupe_init(&l->dd, l->dedupe_window))) goto fail;
    if (!l->amnesia && !(l->pos = calloc(l->dedupe_window, sizeof *l->pos))) {
        rc = RAU_ENOMEM;
        goto fail;
    }
    l->batch = malloc(l->batch_cap);
    if (!l->batch) {
        rc = RAU_ENOMEM;
        goto fail;
    }
    if (cfg->key_path) {
        rc = rau_signer_load(cfg->key_path, &l->signer);
        if (!rc && rau_signer_is_cosigner(l->signer)) rc = RAU_EKEY;
        if (rc) {
            /* AUD-I-11: the path and the reason, never the contents. */
            rau__errf(err, errlen, "%s: signer key: %s%s", cfg->key_path, rau_strerror(rc),
                      l->signer ? " (a witness's cosignature key signs no checkpoint)" : "");
            goto fail;
        }
    }
    if (!l->amnesia) {
        if (strlen(cfg->dir) >= sizeof l->dir - 64) {
            rc = RAU_EINVAL;
            goto fail;
        }
        snprintf(l->dir, sizeof l->dir, "%s", cfg->dir);
        int mrc = l->io->mkdir(l->io->ud, l->dir, 0);
        if (mrc != 0 && mrc != -EEXIST) {
            rau__errf(err, errlen, "%s: cannot create", l->dir);
            rc = RAU_EIO;
            goto fail;
        }
        if ((rc = recover(l, err, errlen))) goto fail;
        if (l->fd < 0 && (rc = seg_create(l, l->head_seq + 1))) {
            rau__errf(err, errlen, "%s: cannot create a segment", l->dir);
            goto fail;
        }
        /* What recovery read is durable now (rewritten and synced): the head says so, and
         * the next open starts from here. */
        if ((rc = head_write(l))) {
            rau__errf(err, errlen, "%s: cannot write the head file", l->dir);
            goto fail;
        }
    }
    /* AUD-I-39: records an open finds that no checkpoint covers (a crash left them unpinned)
     * are signed at the first sync; otherwise the interval counts from the open. */
    l->last_cp_ms = l->head_seq > l->last_cp ? 0 : mono_ms();
    /* (what failed during recovery and was expected, a missing head file, is no failure) */
    l->trk.err = 0;
    l->trk.failures++;
    publish(l);
    *out = l;
    return 0;
fail:
    /* The path and the system's reason of the call that failed (a read-only directory:
     * "create .../seg-...rau: Read-only file system (EROFS)"), after what the step says. */
    if (rc == RAU_EIO && l->trk.err && err && errlen) {
        size_t n = strlen(err);
        char why[600];
        rau__iotrack_text(&l->trk, why, sizeof why);
        snprintf(err + n, errlen - n, "%s%s", n ? ": " : "", why);
    }
    rau_log_close(l);
    return rc;
}

int rau_log_open(const rau_log_config_t *cfg, rau_log_t **out, char *err, size_t errlen) {
    return rau__log_open_io(cfg, ra__io_posix(), out, err, errlen);
}

static int flush(rau_log_t *l) {
    if (l->failed) return RAU_ECLOSED;
    if (l->amnesia || l->batch_len == 0) return 0;
    /* AUD-I-14: any failure here fails the log for good. A failed fdatasync in particular
     * must never be retried: the kernel may have dropped the dirty pages and a second call
     * would report success for data that is not on disk (fsyncgate). The bytes are
     * acknowledged by no one; a reopen rewrites what it finds of them (rewrite_tail). */
    if (write_all(l, l->fd, l->batch, l->batch_len) || l->io->fsync(l->io->ud, l->fd) != 0) {
        l->failed = 1;
        return RAU_EIO;
    }
    l->seg_bytes += l->batch_len;
    l->batch_len = 0;
    /* AUD-I-37: the head file marks what is durable before the sync is acknowledged, so a
     * later open can tell damage in acknowledged bytes (refused) from an unsynced tail (cut)
     * and skips decoding what it covers. */
    if (head_write(l)) {
        l->failed = 1;
        return RAU_EIO;
    }
    l->st.syncs++;
    l->st.durable_seq = l->head_seq;
    return 0;
}

static int write_checkpoint(rau_log_t *l) {
    uint8_t root[32];
    rau__mrange_root(&l->mr, root);
    char note[RAU_NOTE_MAX];
    size_t n = 0;
    int rc = rau_checkpoint_sign(l->signer, l->mr.n, root, note, sizeof note, &n);
    if (rc) return rc;
    char dst[4200];
    snprintf(dst, sizeof dst, "%s/cp-%020llu.note", l->dir, (unsigned long long)l->mr.n);
    if ((rc = rau__io_replace(l->io, l->dir, dst, note, n))) return rc;
    l->last_cp = l->mr.n;
    l->last_cp_ms = mono_ms();
    memcpy(l->cp_root, root, 32);
    memcpy(l->cp_note, note, n);
    l->cp_note_len = n;
    l->st.checkpoints++;
    return 0;
}

int rau_log_latest_checkpoint(const rau_log_t *l, uint64_t *size_out, uint8_t *root_out, char *note,
                              size_t cap, size_t *len_out) {
    if (!l) return RAU_EINVAL;
    rau_log_t *w = (rau_log_t *)l; /* the mutex only: the published copy is read */
    int rc = 0;
    pthread_mutex_lock(&w->mu);
    if (l->pub_cp_note_len == 0) {
        rc = RAU_ENOTFOUND;
    } else {
        if (size_out) *size_out = l->pub_cp_size;
        if (root_out) memcpy(root_out, l->pub_cp_root, 32);
        if (len_out) *len_out = l->pub_cp_note_len;
        if (note) {
            if (cap < l->pub_cp_note_len)
                rc = RAU_EBUFSIZE;
            else
                memcpy(note, l->pub_cp_note, l->pub_cp_note_len);
        }
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}

/* A checkpoint is due (AUD-I-39) every checkpoint_every records, and for records no
 * checkpoint covers once checkpoint_interval_ms passed since the last one this handle wrote,
 * or since the open (right away when the open found some: they were not pinned). */
static int checkpoint_due(const rau_log_t *l) {
    if (!l->signer || l->amnesia || l->head_seq <= l->last_cp) return 0;
    if (l->checkpoint_every && l->head_seq - l->last_cp >= l->checkpoint_every) return 1;
    return l->checkpoint_interval_ms &&
           (!l->last_cp_ms || mono_ms() - l->last_cp_ms >= l->checkpoint_interval_ms);
}

int rau_log_sync(rau_log_t *l) {
    if (!l) return RAU_EINVAL;
    int rc = flush(l);
    if (!rc && checkpoint_due(l)) rc = write_checkpoint(l);
    publish(l);
    return rc;
}

int rau_log_checkpoint(rau_log_t *l) {
    if (!l) return RAU_EINVAL;
    if (!l->signer || l->amnesia) return RAU_EKEY;
    int rc = flush(l);
    /* (the head is already the last checkpoint's: nothing new to sign) */
    if (!rc && (l->head_seq != l->last_cp || !l->cp_note_len)) rc = write_checkpoint(l);
    publish(l);
    return rc;
}

/* Takes canonical bytes at dst (seq and prev set: the chain head's next) into the chain:
 * dedupe, frame (dst is l->batch + l->batch_len + 4, or a scratch buffer with amnesia),
 * self_hash, Merkle leaf. The tail of rau_log_append and of rau_log_append_packed. */
static int take(rau_log_t *l, uint8_t *dst, size_t len, rau_appended_t *out) {
    int rc;
    uint8_t dkey[32], self[32];
    rau__b3_dedupe(dst, len, dkey);
    const rau__dent_t *e = rau__dedupe_find(&l->dd, dkey);
    if (e) {
        out->seq = e->seq;
        memcpy(out->self_hash, e->hash, 32);
        out->duplicate = 1;
        l->st.duplicates++;
        return 0;
    }
    if (!l->amnesia) {
        size_t flen = len + RAU__FRAME_OVERHEAD;
        /* Rotation by bytes: the batch so far goes to the old segment. */
        if (l->seg_bytes > RAU__SEG_HDR && l->seg_bytes + l->batch_len + flen > l->rotate_bytes) {
            uint8_t keep[RAU_RECORD_MAX];
            memcpy(keep, dst, len);
            if ((rc = flush(l))) return rc;
            if ((rc = seg_create(l, l->head_seq + 1))) {
                l->failed = 1;
                return rc;
            }
            dst = l->batch + 4;
            memcpy(dst, keep, len);
        }
        rau__frame_write(dst - 4, dst, len);
        pos_set(l, l->head_seq + 1, l->seg_first, l->seg_bytes + l->batch_len);
        l->batch_len += flen;
    }
    rau__b3(dst, len, self);
    chain_take(l, dst, len, self, dkey);
    out->seq = l->head_seq;
    memcpy(out->self_hash, self, 32);
    out->duplicate = 0;
    if (l->amnesia) l->st.durable_seq = 0;
    return 0;
}

/* Room for the largest record, so the encoder never meets a short buffer. */
static int room(rau_log_t *l) {
    if (!l->amnesia && l->batch_cap - l->batch_len < RAU_RECORD_MAX + RAU__FRAME_OVERHEAD)
        return flush(l);
    return 0;
}

int rau_log_append(rau_log_t *l, const rau_event_t *ev, rau_appended_t *out) {
    if (!l || !ev || !out) return RAU_EINVAL;
    if (l->failed) return RAU_ECLOSED;
    int rc;
    if ((rc = room(l))) return rc;
    uint8_t scratch[RAU_RECORD_MAX];
    uint8_t *dst = l->amnesia ? scratch : l->batch + l->batch_len + 4;
    size_t len = 0;
    rc = rau_record_encode(l->writer_id, l->stream, l->head_seq + 1, l->head_hash, ev, dst,
                           RAU_RECORD_MAX, &len);
    if (!rc) rc = take(l, dst, len, out);
    publish(l);
    return rc;
}

int rau_log_append_packed(rau_log_t *l, const uint8_t *buf, size_t len, rau_batch_result_t *out) {
    if (!l || (!buf && len) || !out) return RAU_EINVAL;
    memset(out, 0, sizeof *out);
    if (l->failed) return RAU_ECLOSED;
    int rc = 0;
    size_t off = 0;
    while (off < len) {
        if (len - off < 4) {
            rc = RAU_ENONCANON;
            break;
        }
        size_t n = rau__rd32(buf + off);
        if (n > len - off - 4 || !packed_ok(l, buf + off + 4, n)) {
            rc = RAU_ENONCANON;
            break;
        }
        if ((rc = room(l))) break;
        /* (amnesia: batch_len stays 0, the group-commit buffer is the scratch space) */
        uint8_t *dst = l->batch + l->batch_len + 4;
        memcpy(dst, buf + off + 4, n);
        rau__be64(dst + RAU__OFF_SEQ, l->head_seq + 1);
        memcpy(dst + RAU__OFF_PREV, l->head_hash, 32);
        rau_appended_t a;
        if ((rc = take(l, dst, n, &a))) break;
        if (a.duplicate)
            out->duplicates++;
        else
            out->appended++;
        off += 4 + n;
    }
    out->done = off;
    publish(l);
    return rc;
}

void rau_log_stats(const rau_log_t *l, rau_log_stats_t *out) {
    rau_log_t *w = (rau_log_t *)l; /* the mutex only: the published copy is read */
    pthread_mutex_lock(&w->mu);
    *out = l->pub;
    pthread_mutex_unlock(&w->mu);
}

int rau_log_close(rau_log_t *l) {
    if (!l) return 0;
    int rc = 0;
    if (l->fd >= 0 || l->amnesia) rc = flush(l);
    if (rc == RAU_ECLOSED) rc = 0;
    if (l->fd >= 0) l->io->close(l->io->ud, l->fd);
    if (l->head_fd >= 0) l->io->close(l->io->ud, l->head_fd);
    free(l->pos);
    rau_signer_free(l->signer);
    rau__dedupe_free(&l->dd);
    free(l->batch);
    pthread_mutex_destroy(&l->mu);
    free(l);
    return rc;
}

void rau__log_open_info(const rau_log_t *l, rau__open_info_t *out) {
    *out = l->info;
}

void rau_log_open_info(const rau_log_t *l, rau_log_open_info_t *out) {
    rau__log_open_info(l, out);
}
