/* The verifier (AUD-I-15): reads a log directory without trusting any of it and reports
 * every problem with its position: frames and checksums, canonical bytes, self hashes, chain
 * links and seq continuity, dedupe keys, and for every checkpoint the Merkle root over the
 * records it claims and its signature and origin. It never repairs and never stops at the
 * first problem: after a bad frame it resynchronizes on the next valid one. */
#include "internal.h"

#include <dirent.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>

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

typedef struct leaves_s {
    uint8_t *h; /* 32 bytes per record, in seq order; index = seq - 1 */
    uint64_t n, cap;
} leaves_t;

static int leaves_set(leaves_t *lv, uint64_t seq, const uint8_t *h) {
    if (seq > lv->cap) {
        uint64_t c = lv->cap ? lv->cap : 1024;
        while (c < seq)
            c *= 2;
        uint8_t *nh = realloc(lv->h, c * 32);
        if (!nh) return RAU_ENOMEM;
        memset(nh + lv->cap * 32, 0, (c - lv->cap) * 32);
        lv->h = nh;
        lv->cap = c;
    }
    memcpy(lv->h + (seq - 1) * 32, h, 32);
    if (seq > lv->n) lv->n = seq;
    return 0;
}

typedef struct cp_s {
    uint64_t size;
    uint8_t root[32];
    int ok;
    char *path;
} cp_t;

static int cmp_cp(const void *a, const void *b) {
    const cp_t *x = a, *y = b;
    return x->size < y->size ? -1 : x->size > y->size;
}

/* Parses a checkpoint's body without a key (size and root only). */
static int parse_body(const char *note, size_t len, uint64_t *size, uint8_t *root);

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
    if (!dir || (n_extra && !extra)) return RAU_EINVAL;
    vctx_t v = {report, ud, 0};
    rau__seglist_t sl;
    int rc = rau__seglist(dir, &sl);
    if (rc) return rc;
    leaves_t lv = {0};
    rau__dedupe_t dd = {0};
    uint64_t head_seq = 0, records = 0;
    uint8_t head_hash[32] = {0};
    char writer[RAU_ID_MAX + 1] = "", stream[RAU_ID_MAX + 1] = "";
    char where[4400];
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
        uint8_t *b;
        size_t len;
        if ((rc = rau__read_file(path, &b, &len, (uint64_t)1 << 40))) {
            problem(&v, path, "cannot read (%s)", rau_strerror(rc));
            rc = 0;
            continue;
        }
        size_t off = RAU__SEG_HDR;
        uint8_t hc[4] = {0};
        if (len >= RAU__SEG_HDR) rau__seg_check(b, hc);
        if (len < RAU__SEG_HDR || memcmp(b, RAU__SEG_MAGIC, 8) != 0 || memcmp(hc, b + 20, 4)) {
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
                uint32_t w = rau__rd32(b + 16);
                if (w > max_records) w = (uint32_t)max_records;
                if (rau__dedupe_init(&dd, w ? w : 1)) {
                    problem(&v, where, "bad dedupe window %u", w);
                    rau__dedupe_init(&dd, 65536);
                }
            }
        }
        int resync = 0;
        while (off < len) {
            const uint8_t *pl;
            size_t plen, flen;
            int fr = rau__frame_parse(b + off, len - off, &pl, &plen, &flen);
            snprintf(where, sizeof where, "%s+%zu", path, off);
            if (fr != 1) {
                if (!resync) {
                    if (fr == 0)
                        problem(&v, where, "torn tail: %zu bytes after record %llu", len - off,
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
                off += flen;
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
                uint8_t leaf[32];
                rau_merkle_leaf_hash(pl, plen, leaf);
                if (leaves_set(&lv, seq, leaf)) rc = RAU_ENOMEM;
                head_seq = seq;
                memcpy(head_hash, rau_record_self_hash(rec), 32);
            }
            rau_record_free(rec);
            off += flen;
        }
        free(b);
    }
    rau__seglist_free(&sl);

    /* Checkpoints: the directory's, then the caller's (a witness's or an auditor's old
     * copy: a log restored from an old backup and grown again is a fork, and the root of
     * its first `size` records no longer matches what was signed before). */
    cp_t *cps = NULL;
    size_t ncp = 0, capcp = 0;
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
        uint8_t *b;
        size_t len;
        c->ok = 0;
        if (rau__read_file(path, &b, &len, RAU_NOTE_MAX)) {
            problem(&v, path, "cannot read checkpoint");
            continue;
        }
        int crc = vkey ? rau_checkpoint_verify((const char *)b, len, vkey, strlen(vkey), &c->size,
                                               c->root)
                       : parse_body((const char *)b, len, &c->size, c->root);
        free(b);
        if (crc) {
            problem(&v, path, "checkpoint: %s (%s)", rau_err_name(crc), rau_strerror(crc));
            continue;
        }
        if (named != UINT64_MAX && c->size != named)
            problem(&v, path, "note says size %llu", (unsigned long long)c->size);
        c->ok = 1;
    }
    if (d) closedir(d);
    if (ncp) qsort(cps, ncp, sizeof *cps, cmp_cp);
    rau__mrange_t *mr = calloc(1, sizeof *mr);
    if (!mr) rc = RAU_ENOMEM;
    for (size_t i = 0; i < ncp && rc == 0; i++) {
        const cp_t *c = &cps[i];
        if (!c->ok) continue;
        if (c->size > lv.n) {
            problem(&v, c->path, "checkpoint covers %llu records, the log has %llu (truncated?)",
                    (unsigned long long)c->size, (unsigned long long)lv.n);
            continue;
        }
        while (mr->n < c->size)
            rau__mrange_push(mr, lv.h + mr->n * 32);
        uint8_t got[32];
        rau__mrange_root(mr, got);
        if (memcmp(got, c->root, 32) != 0)
            problem(&v, c->path,
                    "Merkle root of the first %llu records does not match (rewritten or forked)",
                    (unsigned long long)c->size);
    }
    for (size_t i = 0; i < ncp; i++)
        free(cps[i].path);
    free(mr);
    free(cps);
    free(lv.h);
    rau__dedupe_free(&dd);
    if (records_out) *records_out = records;
    return rc ? rc : v.problems;
}

static int parse_body(const char *note, size_t len, uint64_t *size, uint8_t *root) {
    /* Reuses the verifier with no signature check: the body's shape is the same. */
    const char *l1 = memchr(note, '\n', len);
    if (!l1) return RAU_ENONCANON;
    const char *l2 = memchr(l1 + 1, '\n', (size_t)(note + len - l1 - 1));
    if (!l2) return RAU_ENONCANON;
    char num[24];
    size_t dl = (size_t)(l2 - l1 - 1);
    if (dl == 0 || dl >= sizeof num) return RAU_ENONCANON;
    memcpy(num, l1 + 1, dl);
    num[dl] = 0;
    char *end;
    *size = strtoull(num, &end, 10);
    if (*end) return RAU_ENONCANON;
    const char *l3 = memchr(l2 + 1, '\n', (size_t)(note + len - l2 - 1));
    if (!l3) return RAU_ENONCANON;
    return rau__b64_32(l2 + 1, (size_t)(l3 - l2 - 1), root);
}
