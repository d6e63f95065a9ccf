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
#include "internal.h"
#include "io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct rau_log_s {
    char writer_id[RAU_ID_MAX + 1];
    char stream[RAU_ID_MAX + 1];
    char dir[4096];
    int amnesia, failed;
    uint64_t rotate_bytes;
    uint32_t dedupe_window, checkpoint_every;
    rau_signer_t *signer;
    const rau__io_t *io; /* every file operation of the writer and of recovery (rule 7) */

    uint64_t head_seq;
    uint8_t head_hash[32];
    rau__mrange_t mr;
    rau__dedupe_t dd;

    int fd;             /* current segment, O_APPEND */
    uint64_t seg_bytes; /* its size, batch excluded */
    uint8_t *batch;
    size_t batch_len, batch_cap;
    uint64_t batch_first; /* first seq in the batch */
    uint64_t last_cp;     /* size of the last checkpoint */
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
    pthread_mutex_unlock(&l->mu);
}

void rau_log_config_init(rau_log_config_t *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->rotate_bytes = 64ull << 20;
    cfg->batch_bytes = 1u << 20;
    cfg->dedupe_window = 65536;
}

static int write_all(rau_log_t *l, int fd, const uint8_t *p, size_t n) {
    return rau__io_write_all(l->io, fd, p, n) ? RAU_EIO : 0;
}

static int seg_create(rau_log_t *l, uint64_t first) {
    char p[4200];
    snprintf(p, sizeof p, "%s/seg-%020llu.rau", l->dir, (unsigned long long)first);
    int fd = l->io->open(l->io->ud, p, RAU__IO_CREATE);
    if (fd < 0) return RAU_EIO;
    uint8_t h[RAU__SEG_HDR] = {0};
    memcpy(h, RAU__SEG_MAGIC, 8);
    rau__be64(h + 8, first);
    rau__be32(h + 16, l->dedupe_window);
    rau__seg_check(h, h + 20);
    /* The new name must be durable before a record in it is acknowledged: fsync_dir. */
    if (write_all(l, fd, h, sizeof h) || l->io->fdatasync(l->io->ud, fd) ||
        l->io->fsync_dir(l->io->ud, l->dir)) {
        l->io->close(l->io->ud, fd);
        return RAU_EIO;
    }
    if (l->fd >= 0) l->io->close(l->io->ud, l->fd);
    l->fd = fd;
    l->seg_bytes = RAU__SEG_HDR;
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
static int valid_after_file(const rau__io_t *io, int fd, size_t pos, size_t len) {
    if (len <= pos) return 0;
    size_t n = len - pos;
    uint8_t *b = malloc(n);
    if (!b) return 1;
    int v = rau__io_pread_all(io, fd, b, n, pos) == 0 ? valid_after(b, n, 0) : 1;
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

static int seg_name(const char *s, uint64_t *first) {
    /* seg-<20 digits>.rau */
    if (strlen(s) != 28 || memcmp(s, "seg-", 4) != 0 || strcmp(s + 24, ".rau") != 0) return 0;
    uint64_t v = 0;
    for (int i = 4; i < 24; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *first = v;
    return 1;
}

/* The recovery's window over a segment (as rau__win_t, through the I/O interface). */
typedef struct rwin_s {
    const rau__io_t *io;
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
    int rfd = l->io->open(l->io->ud, path, RAU__IO_READ);
    int wfd = rfd < 0 ? -1 : l->io->open(l->io->ud, path, RAU__IO_WRITE);
    uint8_t *b = wfd < 0 ? NULL : malloc(RAU__WIN);
    int rc = b ? 0 : RAU_EIO;
    for (uint64_t off = from; !rc && off < len;) {
        size_t n = len - off < RAU__WIN ? (size_t)(len - off) : RAU__WIN;
        if (rau__io_pread_all(l->io, rfd, b, n, off)) rc = RAU_EIO;
        for (size_t done = 0; !rc && done < n;) {
            ssize_t w = l->io->pwrite(l->io->ud, wfd, b + done, n - done, off + done);
            if (w <= 0)
                rc = RAU_EIO;
            else
                done += (size_t)w;
        }
        off += n;
    }
    if (!rc && l->io->fdatasync(l->io->ud, wfd)) rc = RAU_EIO;
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

/* Reads one segment from byte `off` on, taking every record into the chain (full checks:
 * frame, canonical decode, seq, prev, ids). For the last segment, a torn tail is cut and
 * the part not known durable (from `durable_off`) is rewritten (rewrite_tail) and the
 * segment is reopened for appending. */
static int recover_seg(rau_log_t *l, rwin_t *w, const char *path, uint64_t first_seq, int last,
                       uint64_t off0, uint64_t durable_off, char *err, size_t errlen) {
    int rc = 0;
    w->fd = l->io->open(l->io->ud, path, RAU__IO_READ);
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
    if (!rc && cut == UINT64_MAX && off0 > RAU__SEG_HDR) {
        /* Start past what the head file covers (it checked the record there). */
        off = (size_t)off0 < w->have ? (size_t)off0 : w->have;
        if (rwin_refill(w, &off)) rc = RAU_EIO;
        if (!rc && w->base != off0) {
            rau__errf(err, errlen, "%s: shorter than the head file says", path);
            rc = RAU_ECORRUPT;
        }
    } else {
        off = RAU__SEG_HDR;
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
            chain_take(l, pl, plen, rau_record_self_hash(rec), rau_record_dedupe(rec));
            rau_record_free(rec);
            off += flen;
        } else if (last && (fr == 0 || !valid_after_file(l->io, w->fd, pos, len))) {
            cut = pos; /* AUD-I-12: a torn tail is cut, once, at open */
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
    if ((rc = rewrite_tail(l, path, durable_off, len))) return rc;
    l->fd = l->io->open(l->io->ud, path, RAU__IO_APPEND);
    if (l->fd < 0 || l->io->fdatasync(l->io->ud, l->fd) != 0) return RAU_EIO;
    l->seg_bytes = len;
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
        if (seg_name(ns.v[i], &f)) nseg++;
    }
    rwin_t w = {l->io, -1, 0, malloc(RAU__WIN), 0, 0, 0};
    if (!w.b) rc = RAU_ENOMEM;
    uint64_t seen = 0;
    for (size_t i = 0; i < ns.n && !rc; i++) {
        uint64_t first;
        if (!seg_name(ns.v[i], &first)) continue;
        int last = ++seen == nseg;
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", l->dir, ns.v[i]);
        rc = recover_seg(l, &w, path, first, last, RAU__SEG_HDR, RAU__SEG_HDR, err, errlen);
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

int rau__log_open_io(const rau_log_config_t *cfg, const rau__io_t *io, rau_log_t **out, char *err,
                     size_t errlen) {
    if (!cfg || !out || !io) return RAU_EINVAL;
    *out = NULL;
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
    l->io = io;
    snprintf(l->writer_id, sizeof l->writer_id, "%s", cfg->writer_id);
    snprintf(l->stream, sizeof l->stream, "%s", cfg->stream);
    l->amnesia = cfg->amnesia != 0;
    l->rotate_bytes = cfg->rotate_bytes ? cfg->rotate_bytes : 64ull << 20;
    l->dedupe_window = cfg->dedupe_window ? cfg->dedupe_window : 65536;
    l->checkpoint_every = cfg->checkpoint_every;
    l->batch_cap = cfg->batch_bytes ? cfg->batch_bytes : 1u << 20;
    if (l->batch_cap < RAU_RECORD_MAX + RAU__FRAME_OVERHEAD)
        l->batch_cap = RAU_RECORD_MAX + RAU__FRAME_OVERHEAD;
    if ((rc = rau__dedupe_init(&l->dd, l->dedupe_window))) goto fail;
    l->batch = malloc(l->batch_cap);
    if (!l->batch) {
        rc = RAU_ENOMEM;
        goto fail;
    }
    if (cfg->key_path) {
        rc = rau_signer_load(cfg->key_path, &l->signer);
        if (rc) {
            /* AUD-I-11: the path and the reason, never the contents. */
            rau__errf(err, errlen, "%s: signer key: %s", cfg->key_path, rau_strerror(rc));
            goto fail;
        }
    }
    if (!l->amnesia) {
        if (strlen(cfg->dir) >= sizeof l->dir - 64) {
            rc = RAU_EINVAL;
            goto fail;
        }
        snprintf(l->dir, sizeof l->dir, "%s", cfg->dir);
        int mrc = io->mkdir(io->ud, l->dir);
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
    }
    publish(l);
    *out = l;
    return 0;
fail:
    rau_log_close(l);
    return rc;
}

int rau_log_open(const rau_log_config_t *cfg, rau_log_t **out, char *err, size_t errlen) {
    return rau__log_open_io(cfg, rau__io_posix(), out, err, errlen);
}

static int flush(rau_log_t *l) {
    if (l->failed) return RAU_ECLOSED;
    if (l->amnesia || l->batch_len == 0) return 0;
    /* AUD-I-14: any failure here fails the log for good. A failed fdatasync in particular
     * must never be retried: the kernel may have dropped the dirty pages and a second call
     * would report success for data that is not on disk (fsyncgate). The bytes are
     * acknowledged by no one; a reopen rewrites what it finds of them (rewrite_tail). */
    if (write_all(l, l->fd, l->batch, l->batch_len) || l->io->fdatasync(l->io->ud, l->fd) != 0) {
        l->failed = 1;
        return RAU_EIO;
    }
    l->seg_bytes += l->batch_len;
    l->batch_len = 0;
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

int rau_log_sync(rau_log_t *l) {
    if (!l) return RAU_EINVAL;
    int rc = flush(l);
    if (!rc && l->signer && !l->amnesia && l->checkpoint_every &&
        l->head_seq - l->last_cp >= l->checkpoint_every)
        rc = write_checkpoint(l);
    publish(l);
    return rc;
}

int rau_log_checkpoint(rau_log_t *l) {
    if (!l) return RAU_EINVAL;
    if (!l->signer || l->amnesia) return RAU_EKEY;
    int rc = flush(l);
    if (!rc) rc = write_checkpoint(l);
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
    rau_signer_free(l->signer);
    rau__dedupe_free(&l->dd);
    free(l->batch);
    pthread_mutex_destroy(&l->mu);
    free(l);
    return rc;
}
