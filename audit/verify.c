/* The verifier (AUD-I-15): reads a log directory without trusting any of it and reports
 * every problem with its position: frames and checksums, canonical bytes, self hashes, chain
 * links and seq continuity, dedupe keys, and for every checkpoint the Merkle root over the
 * records it claims and its signature and origin. It never repairs and never stops at the
 * first problem: after a bad frame it resynchronizes on the next valid one.
 *
 * Memory does not grow with the log: segments are read through one fixed window (1 MiB,
 * refilled when less than the largest frame is left), the Merkle tree is a compact range
 * (O(log n) hashes) whose root is compared with each checkpoint as the records reach its
 * size (the checkpoints are read first and sorted), and the dedupe index is bounded by the
 * writer's window. What grows is the list of checkpoint files (one per checkpoint_every
 * records).
 *
 * The head file (head.rau, AUD-I-37) is not evidence, but an open takes the chain's Merkle
 * frontier from it: its newest whole slot must name this chain and describe the log (its
 * last record's seq, position and self_hash, and the root of that many records), or it is
 * reported.
 *
 * What pins the head (AUD-I-39): everything above is checked against the files themselves,
 * so a log cut at a frame boundary with its head file deleted, rolled back whole, or
 * rewritten consistently, verifies on its own. A signature pins a prefix: with a verifier
 * key, a log with records and no checkpoint of that key whose root matches is a problem, and
 * the result says how many records the newest such checkpoint covers; a checkpoint kept
 * elsewhere (--checkpoint, a ledger's carried note, a witness's cosigned one) pins what was
 * seen before the tampering. */
#include "head.h"
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct vctx_s {
    rau_report_fn report;
    void *ud;
    int problems;
} vctx_t;

static void problem(vctx_t *v, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void problem(vctx_t *v, const char *where, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    v->problems++;
    if (v->report) v->report(v->ud, where, msg);
}

/* Segments are read through rau__win_t (audit/sink.c). */
enum { WIN = RAU__WIN };
typedef rau__win_t win_t;
#define win_refill rau__win_refill

typedef struct cp_s {
    uint64_t size, wtime;
    uint8_t root[32];
    int ok, witnessed; /* ok: parsed (and signed by vkey); witnessed: cosigned */
    char *path;
} cp_t;

static int cmp_cp(const void *a, const void *b) {
    const cp_t *x = a, *y = b;
    return x->size < y->size ? -1 : x->size > y->size;
}

int rau_verify_dir(const char *dir, const char *vkey, rau_report_fn report, void *ud,
                   uint64_t *records_out) {
    return rau_verify_dir_checkpoints(dir, vkey, NULL, 0, report, ud, records_out);
}

int rau_verify_dir_checkpoints(const char *dir, const char *vkey, const char *const *extra,
                               size_t n_extra, rau_report_fn report, void *ud,
                               uint64_t *records_out) {
    return rau_verify_dir_list(dir, vkey, extra, n_extra, report, NULL, ud, records_out);
}

int rau_verify_dir_list(const char *dir, const char *vkey, const char *const *extra, size_t n_extra,
                        rau_report_fn report, rau_record_fn each, void *ud, uint64_t *records_out) {
    rau_verify_opts_t o = {vkey, NULL, extra, n_extra, report, each, ud};
    rau_verify_result_t r;
    int rc = rau_verify(dir, &o, &r);
    if (records_out) *records_out = r.records;
    return rc;
}

/* A checkpoint file: read, parsed, checked with the keys given (signature; cosignature). */
static void read_cp(vctx_t *v, const rau_verify_opts_t *o, cp_t *c) {
    uint8_t *b;
    size_t len;
    c->ok = c->witnessed = 0;
    if (rau__read_file(c->path, &b, &len, RAU_NOTE_READ_MAX)) {
        problem(v, c->path, "cannot read checkpoint");
        return;
    }
    const char *note = (const char *)b;
    int crc = o->vkey
                  ? rau_checkpoint_verify(note, len, o->vkey, strlen(o->vkey), &c->size, c->root)
                  : rau__checkpoint_parse(note, len, &c->size, c->root);
    uint64_t ws = 0;
    uint8_t wr[32];
    if (!crc && o->witness_vkey &&
        rau_cosignature_verify(note, len, o->witness_vkey, strlen(o->witness_vkey), &ws, wr,
                               &c->wtime) == 0)
        c->witnessed = 1;
    free(b);
    if (crc) {
        problem(v, c->path, "checkpoint: %s (%s)", rau_err_name(crc), rau_strerror(crc));
        return;
    }
    c->ok = 1;
}

/* The directory's checkpoints (cp-<size>.note), then the caller's extra ones, each read and
 * verified (read_cp); *cps grows as needed and is the caller's to free with its paths. */
static int collect_cps(vctx_t *vp, const rau_verify_opts_t *o, const char *dir, cp_t **cpsp,
                       size_t *ncpp) {
    const char *const *extra = o->extra;
    size_t n_extra = o->n_extra;
    cp_t *cps = NULL;
    size_t ncp = 0, capcp = 0;
    int rc = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    for (size_t x = 0; rc == 0;) {
        char path[4200];
        uint64_t named = UINT64_MAX;
        if (d && (e = readdir(d))) {
            unsigned long long nn;
            char tail[8];
            if (sscanf(e->d_name, "cp-%20llu.%7s", &nn, tail) != 2 || strcmp(tail, "note"))
                continue;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            named = nn;
        } else if (x < n_extra) {
            snprintf(path, sizeof path, "%s", extra[x++]);
        } else {
            break;
        }
        if (ncp == capcp) {
            capcp = capcp ? 2 * capcp : 16;
            cp_t *nc = realloc(cps, capcp * sizeof *cps);
            if (!nc) {
                rc = RAU_ENOMEM;
                break;
            }
            cps = nc;
        }
        cp_t *c = &cps[ncp];
        c->path = strdup(path);
        if (!c->path) {
            rc = RAU_ENOMEM;
            break;
        }
        ncp++;
        read_cp(vp, o, c);
        if (c->ok && named != UINT64_MAX && c->size != named)
            problem(vp, path, "note says size %llu", (unsigned long long)c->size);
    }
    if (d) closedir(d);
    *cpsp = cps;
    *ncpp = ncp;
    return rc;
}

int rau_verify(const char *dir, const rau_verify_opts_t *o, rau_verify_result_t *out) {
    if (out) memset(out, 0, sizeof *out);
    if (!dir || !o || !out || (o->n_extra && !o->extra)) return RAU_EINVAL;
    rau_record_fn each = o->each;
    void *ud = o->ud;
    vctx_t v = {o->report, ud, 0};
    rau__seglist_t sl;
    int rc = rau__seglist(dir, &sl);
    if (rc) return rc;
    rau__dedupe_t dd = {0};
    uint64_t head_seq = 0, records = 0;
    uint8_t head_hash[32] = {0};
    char writer[RAU_ID_MAX + 1] = "", stream[RAU_ID_MAX + 1] = "";
    char where[4400];
    /* The checkpoints first (the directory's, then the caller's: a witness's or an
     * auditor's old copy, where a log restored from an old backup and grown again is a
     * fork: the root of its first `size` records no longer matches what was signed before),
     * sorted by size: each root is compared when the records reach its size. */
    cp_t *cps = NULL;
    size_t ncp = 0;
    rc = collect_cps(&v, o, dir, &cps, &ncp);
    if (ncp) qsort(cps, ncp, sizeof *cps, cmp_cp);
    size_t ci = 0;
    int tree_broken = 0; /* a seq gap too large to stand in for: later roots unchecked */
    rau__mrange_t *mr = calloc(1, sizeof *mr);
    win_t w = {-1, 0, malloc(WIN), 0, 0};
    if (!mr || !w.b) rc = RAU_ENOMEM;
#define CHECK_ROOTS()                                                                              \
    for (; ci < ncp && cps[ci].size <= mr->n; ci++) {                                              \
        if (!cps[ci].ok || cps[ci].size != mr->n) continue;                                        \
        uint8_t got_[32];                                                                          \
        rau__mrange_root(mr, got_);                                                                \
        if (memcmp(got_, cps[ci].root, 32) != 0) {                                                 \
            problem(&v, cps[ci].path,                                                              \
                    "Merkle root of the first %llu records does not match (rewritten or forked)",  \
                    (unsigned long long)cps[ci].size);                                             \
        } else {                                                                                   \
            out->checkpoints++;                                                                    \
            if (cps[ci].size > out->covered) out->covered = cps[ci].size;                          \
            if (cps[ci].witnessed && cps[ci].size >= out->witnessed)                               \
                out->witnessed = cps[ci].size, out->witness_time = cps[ci].wtime;                  \
        }                                                                                          \
    }
    if (rc == 0) CHECK_ROOTS() /* size 0 */
    char head_p[4200];
    rau__head_t hd;
    int have_head = 0, head_seen = 0;
    snprintf(head_p, sizeof head_p, "%s/" RAU__HEAD_NAME, dir);
    struct stat hsb;
    if (rc == 0 && stat(head_p, &hsb) == 0) {
        uint8_t *hb = NULL;
        size_t hn = 0;
        if (rau__read_file(head_p, &hb, &hn, RAU__HEAD_FILE) != 0) {
            problem(&v, head_p, "head file: cannot read or too large");
        } else {
            for (size_t i = 0; i < 2 && (i + 1) * RAU__HEAD_SLOT <= hn; i++) {
                rau__head_t t;
                if (rau__head_decode(hb + i * RAU__HEAD_SLOT, &t) == 0 &&
                    (!have_head || t.gen > hd.gen))
                    hd = t, have_head = 1;
            }
            if (!have_head) problem(&v, head_p, "head file: no whole slot");
        }
        free(hb);
    }
    if (sl.n == 0) problem(&v, dir, "no segment files");
    /* No more records than frames fit in the files: the dedupe index is sized by that
     * rather than by the writer's window when the log is small. */
    uint64_t total = 0;
    for (size_t si = 0; si < sl.n; si++) {
        char path[4200];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, sl.names[si]);
        if (stat(path, &sb) == 0) total += (uint64_t)sb.st_size;
    }
    uint64_t max_records = total / (RAU__OFF_BODY + RAU__FRAME_OVERHEAD) + 1;
    for (size_t si = 0; si < sl.n && rc == 0; si++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, sl.names[si]);
        struct stat sb;
        w.fd = open(path, O_RDONLY | O_CLOEXEC);
        if (w.fd < 0 || fstat(w.fd, &sb) != 0) {
            problem(&v, path, "cannot read (%s)", rau_strerror(RAU_EIO));
            if (w.fd >= 0) close(w.fd);
            continue;
        }
        uint64_t flen = (uint64_t)sb.st_size;
        w.eof = 0, w.have = 0, w.base = 0;
        size_t off = 0;
        if (win_refill(&w, &off)) {
            problem(&v, path, "cannot read (%s)", rau_strerror(RAU_EIO));
            close(w.fd);
            continue;
        }
        const uint8_t *b = w.b;
        off = RAU__SEG_HDR;
        uint8_t hc[4] = {0};
        if (w.have >= RAU__SEG_HDR) rau__seg_check(b, hc);
        if (w.have < RAU__SEG_HDR || memcmp(b, RAU__SEG_MAGIC, 8) != 0 || memcmp(hc, b + 20, 4)) {
            snprintf(where, sizeof where, "%s+0", path);
            problem(&v, where, "bad segment header");
            off = 0;
        } else {
            uint64_t first = rau__rd64(b + 8);
            snprintf(where, sizeof where, "%s+0", path);
            if (first != sl.first_seq[si])
                problem(&v, where, "header first seq %llu, name says %llu",
                        (unsigned long long)first, (unsigned long long)sl.first_seq[si]);
            if (first != head_seq + 1)
                problem(&v, where, "segment starts at seq %llu, expected %llu",
                        (unsigned long long)first, (unsigned long long)(head_seq + 1));
            if (!dd.cap) {
                uint32_t wd = rau__rd32(b + 16);
                if (wd > max_records) wd = (uint32_t)max_records;
                if (rau__dedupe_init(&dd, wd ? wd : 1)) {
                    problem(&v, where, "bad dedupe window %u", wd);
                    rau__dedupe_init(&dd, 65536);
                }
            }
        }
        int resync = 0;
        for (;;) {
            /* Less than the largest frame left in the window: slide it and read on. */
            if (!w.eof && w.have - off < RAU_RECORD_MAX + RAU__FRAME_OVERHEAD &&
                win_refill(&w, &off)) {
                problem(&v, path, "cannot read (%s)", rau_strerror(RAU_EIO));
                break;
            }
            if (off >= w.have) break;
            const uint8_t *pl;
            size_t plen, fsz;
            int fr = rau__frame_parse(b + off, w.have - off, &pl, &plen, &fsz);
            snprintf(where, sizeof where, "%s+%llu", path, (unsigned long long)(w.base + off));
            if (fr != 1) {
                if (!resync) {
                    if (fr == 0)
                        problem(&v, where, "torn tail: %llu bytes after record %llu",
                                (unsigned long long)(flen - (w.base + off)),
                                (unsigned long long)head_seq);
                    else
                        problem(&v, where, "bad frame (length or checksum) after record %llu",
                                (unsigned long long)head_seq);
                }
                /* While resynchronizing, a length running past the end is just more damage:
                 * keep looking for the next valid frame so every later problem is listed. */
                if (fr == 0 && !resync) break;
                resync = 1;
                off++;
                continue;
            }
            resync = 0;
            rau_record_t *rec = NULL;
            int drc = rau_record_decode(pl, plen, &rec);
            if (drc) {
                problem(&v, where, "record: %s", rau_err_name(drc));
                off += fsz;
                continue;
            }
            records++;
            if (each) each(ud, rec);
            uint64_t seq = rau_record_seq(rec);
            if (!writer[0]) {
                snprintf(writer, sizeof writer, "%s", rau_record_writer_id(rec));
                snprintf(stream, sizeof stream, "%s", rau_record_stream(rec));
            } else if (strcmp(writer, rau_record_writer_id(rec)) ||
                       strcmp(stream, rau_record_stream(rec))) {
                problem(&v, where, "seq %llu belongs to another chain (%s/%s)",
                        (unsigned long long)seq, rau_record_writer_id(rec), rau_record_stream(rec));
            }
            if (seq != head_seq + 1)
                problem(&v, where, "seq %llu, expected %llu", (unsigned long long)seq,
                        (unsigned long long)(head_seq + 1));
            else if (memcmp(rau_record_prev(rec), head_hash, 32) != 0)
                problem(&v, where, "seq %llu: prev does not match the self_hash of seq %llu",
                        (unsigned long long)seq, (unsigned long long)head_seq);
            if (!dd.cap) rau__dedupe_init(&dd, max_records < 65536 ? (uint32_t)max_records : 65536);
            const rau__dent_t *dup = rau__dedupe_find(&dd, rau_record_dedupe(rec));
            if (dup)
                problem(&v, where, "seq %llu repeats the event of seq %llu (dedupe key)",
                        (unsigned long long)seq, (unsigned long long)dup->seq);
            else
                rau__dedupe_add(&dd, rau_record_dedupe(rec), seq, rau_record_self_hash(rec));
            if (seq > head_seq && seq < ((uint64_t)1 << 40)) {
                /* The leaf at index seq - 1; missing seqs before it stand as zero leaves
                 * (the roots then differ: the problem is reported above anyway). */
                static const uint8_t zero[32];
                if (!tree_broken && seq - 1 - mr->n > ((uint64_t)1 << 20)) tree_broken = 1;
                while (!tree_broken && mr->n < seq - 1) {
                    rau__mrange_push(mr, zero);
                    CHECK_ROOTS()
                }
                if (!tree_broken && mr->n == seq - 1) {
                    uint8_t leaf[32];
                    rau_merkle_leaf_hash(pl, plen, leaf);
                    rau__mrange_push(mr, leaf);
                    CHECK_ROOTS()
                }
                if (have_head && seq == hd.last_seq) {
                    uint8_t got_root[32], head_root[32];
                    rau__mrange_root(mr, got_root);
                    rau__mrange_root(&hd.mr, head_root);
                    head_seen = 1;
                    if (memcmp(rau_record_self_hash(rec), hd.last_hash, 32) != 0 ||
                        sl.first_seq[si] != hd.rec_seg || w.base + off != hd.rec_off)
                        problem(&v, head_p, "head file: record %llu is not the one it names (%s)",
                                (unsigned long long)seq, where);
                    else if (tree_broken || mr->n != seq || memcmp(got_root, head_root, 32) != 0)
                        problem(&v, head_p,
                                "head file: its Merkle frontier is not the tree of the first "
                                "%llu records",
                                (unsigned long long)seq);
                }
                head_seq = seq;
                memcpy(head_hash, rau_record_self_hash(rec), 32);
            }
            rau_record_free(rec);
            off += fsz;
        }
        close(w.fd);
        w.fd = -1;
    }
#undef CHECK_ROOTS
    rau__seglist_free(&sl);
    if (rc == 0 && have_head && writer[0] &&
        (strcmp(hd.writer_id, writer) || strcmp(hd.stream, stream)))
        problem(&v, head_p, "head file of another chain (%s/%s)", hd.writer_id, hd.stream);
    else if (rc == 0 && have_head && hd.last_seq > 0 && !head_seen)
        problem(&v, head_p, "head file covers %llu records, the log has %llu",
                (unsigned long long)hd.last_seq, (unsigned long long)head_seq);
    for (; ci < ncp && rc == 0; ci++) {
        const cp_t *c = &cps[ci];
        if (!c->ok) continue;
        if (tree_broken)
            problem(&v, c->path, "checkpoint of %llu records not checked: the chain has a gap",
                    (unsigned long long)c->size);
        else
            problem(&v, c->path, "checkpoint covers %llu records, the log has %llu (truncated?)",
                    (unsigned long long)c->size, (unsigned long long)mr->n);
    }
    /* AUD-I-39: with the key, what no signed checkpoint covers pins nothing: a log whose
     * every checkpoint was deleted, or one rewritten without the key, would verify as is. */
    if (rc == 0 && o->vkey && records > 0 && out->covered == 0)
        problem(&v, dir,
                "no checkpoint signed with the verifier key covers any of its %llu records "
                "(checkpoints deleted, or a log rewritten without the key)",
                (unsigned long long)records);
    if (rc == 0 && o->witness_vkey && out->witnessed == 0)
        problem(&v, dir, "no checkpoint cosigned by the witness key matches the log");
    for (size_t i = 0; i < ncp; i++)
        free(cps[i].path);
    free(w.b);
    free(mr);
    free(cps);
    rau__dedupe_free(&dd);
    out->records = records;
    return rc ? rc : v.problems;
}
