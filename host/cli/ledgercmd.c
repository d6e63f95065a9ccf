/* `verify PATH` of a file ledger (docs/EXPORT.md, "The file ledger"): the directory the
 * exporter ron.accounting.export.exporters.file writes, recognised by its LEDGER marker, or one
 * of its <dimension>.ledger stream files.
 *
 * Layout:  <dir>/LEDGER, <dir>/<tenant uuid>/<dimension>.ledger (+ *.broken: torn tails
 * the exporter cut and kept aside). Record: u32 LE n | n bytes of a slice (encoding v1) |
 * 32 bytes BLAKE3 of those bytes.
 *
 * Every record is read (never modified): its length, its BLAKE3 against the stored digest,
 * the strict decoder (ra_slice_decode), its tenant and dimension against the file's path,
 * and the stream's chain: seq 1, 2, 3, ... and prev_b3 = the previous record's b3, the
 * first prev_b3 all zero. Problems and breaks name the file, the record index (1-based)
 * and its offset. Exit 1 on any, 0 with "OK".
 *
 * A record may be an accepted loss (bytes starting RONL, docs/EXPORT.md §2, "Accepted losses"):
 * seqs the operator gave up. It is checked like a slice for its place in the chain (seq, prev_b3 =
 * the previous trailer) and for its own form (its trailer is its link_b3, tenant and
 * dimension are the file's); each accepted range is listed ("LOSS ACCEPTED ..."), which
 * is not a problem: the loss is recorded, not silent. */
#include "chain.h"
#include "host.h"

#include "ron/accounting.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LEDGER_MARKER "LEDGER"
#define LEDGER_MARKER_TEXT "ron-accounting file ledger v1\n"
#define LEDGER_SUFFIX ".ledger"
#define MAX_SLICE (1u << 20)

typedef struct lv {
    uint64_t files, records, bytes, links, torn, broken, other, lost;
    ra_host_verdict_t vd;
    bool totals; /* --totals: one line per stream with the sum of its rows */
} lv_t;

static bool str_ends(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static bool read_at(int fd, void *buf, size_t n, uint64_t off) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        got += (size_t)r;
    }
    return true;
}

/* One accepted-loss record at (idx, off): its form, then its link. Returns its seq. */
static uint64_t verify_loss(lv_t *v, const char *path, const ra_tenant_t *tenant, const char *dim,
                            const uint8_t *buf, uint32_t n, uint64_t idx, uint64_t off,
                            uint64_t last_seq, const uint8_t last_b3[32]) {
    ra_host_loss_t l;
    if (!ra_host_loss_decode(buf, n, &l)) {
        ra_host_report(&v->vd, false,
                       "CORRUPT %s: record %" PRIu64 " at offset %" PRIu64
                       ": an accepted-loss record that does not decode",
                       path, idx, off);
        return last_seq + 1;
    }
    bool ok = true;
    if (memcmp(l.link_b3, buf + n, 32) != 0) {
        ra_host_report(&v->vd, false,
                       "CORRUPT %s: record %" PRIu64 " at offset %" PRIu64
                       ": an accepted loss whose trailer is not its link_b3",
                       path, idx, off);
        ok = false;
    }
    if ((tenant && memcmp(l.tenant, tenant->b, 16) != 0) || (dim && strcmp(dim, l.dim) != 0)) {
        ra_host_report(&v->vd, false,
                       "CORRUPT %s: record %" PRIu64 " at offset %" PRIu64
                       ": an accepted loss of another stream",
                       path, idx, off);
        ok = false;
    }
    v->links++;
    ra_host_link_t link = ra_host_chain_link(last_seq, last_b3, l.seq, l.prev_b3);
    if (link != RA_LINK_OK) {
        char why[160];
        ra_host_chain_describe(link, last_seq, last_b3, l.seq, l.prev_b3, why, sizeof why);
        ra_host_report(&v->vd, true, "CHAIN BREAK %s: record %" PRIu64 " at offset %" PRIu64 ": %s",
                       path, idx, off, why);
    }
    if (ok) {
        v->records++;
        v->lost++;
    }
    if (l.seq == l.first)
        printf("LOSS ACCEPTED %s: seqs %" PRIu64 "..%" PRIu64
               " given up by the operator at %" PRIu64 " UTC s: %s\n",
               path, l.first, l.last, l.accepted_at_s, l.reason[0] ? l.reason : "(no reason)");
    return l.seq;
}

/* One stream file being verified: where the walk is, the chain so far, and --totals. */
typedef struct {
    const char *path;
    const ra_tenant_t *tenant; /* the expected tenant (the directory's) or NULL */
    const char *dim;           /* the expected dimension (the file's) or NULL */
    uint64_t idx, off, last_seq;
    uint8_t last_b3[32];
    /* --totals: what an operator reconciles against (the daemon's "see slices land") */
    uint64_t sum, nslices, w_first, w_last;
    bool sum_overflow;
} stream_walk_t;

/* Never follow a link and never block on a FIFO: a ledger's stream files are regular files
 * the exporter made; anything else is reported, not read (issue 14 item 12). Returns the
 * descriptor (its size in *size), or -1. */
static int open_stream(lv_t *v, const char *path, uint64_t *size) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        ra_host_report(&v->vd, false, "CORRUPT %s: cannot read: %s", path,
                       errno == ELOOP ? "a symbolic link (refused)" : strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        ra_host_report(&v->vd, false,
                       "CORRUPT %s: not a regular file (a FIFO, a device or a socket): refused",
                       path);
        close(fd);
        return -1;
    }
    *size = (uint64_t)st.st_size;
    return fd;
}

/* The record at w->off into buf (its n slice bytes, then the 32-byte digest); false when
 * the walk must stop (a torn tail, a bad length, a read error: reported). */
static bool read_record(lv_t *v, stream_walk_t *w, int fd, uint64_t size, uint8_t *buf,
                        uint32_t *n_out) {
    uint64_t rem = size - w->off;
    uint8_t hdr[4];
    const char *path = w->path;
    if (rem < 4 || !read_at(fd, hdr, 4, w->off)) {
        ra_host_report(&v->vd, false,
                       "CORRUPT %s: record %" PRIu64 " at offset %" PRIu64 ": torn tail of %" PRIu64
                       " bytes (a partial length)",
                       path, w->idx, w->off, rem);
        v->torn += rem;
        return false;
    }
    uint32_t n =
        (uint32_t)hdr[0] | (uint32_t)hdr[1] << 8 | (uint32_t)hdr[2] << 16 | (uint32_t)hdr[3] << 24;
    if (n < 1 || n > MAX_SLICE) {
        ra_host_report(&v->vd, false,
                       "CORRUPT %s: record %" PRIu64 " at offset %" PRIu64
                       ": bad record length %" PRIu32 " (the rest of the file, %" PRIu64
                       " bytes, is unreadable)",
                       path, w->idx, w->off, n, rem);
        v->torn += rem;
        return false;
    }
    if (4 + (uint64_t)n + 32 > rem) {
        ra_host_report(&v->vd, false,
                       "CORRUPT %s: record %" PRIu64 " at offset %" PRIu64
                       ": torn tail: the record needs %" PRIu64 " bytes, %" PRIu64 " remain",
                       path, w->idx, w->off, 4 + (uint64_t)n + 32, rem);
        v->torn += rem;
        return false;
    }
    if (!read_at(fd, buf, (size_t)n + 32, w->off + 4)) {
        ra_host_report(&v->vd, false,
                       "CORRUPT %s: record %" PRIu64 " at offset %" PRIu64 ": read error", path,
                       w->idx, w->off);
        return false;
    }
    *n_out = n;
    return true;
}

/* A decoded slice's stream, --totals and chain link; false when it is another stream's. */
static bool check_decoded(lv_t *v, stream_walk_t *w, const ra_slice_t *s, uint64_t seq) {
    bool ok = true;
    ra_slice_id_t id;
    ra_slice_get_id(s, &id);
    ra_tenant_t t;
    ra_slice_get_tenant(s, &t);
    if (w->tenant && memcmp(t.b, w->tenant->b, 16) != 0) {
        char ts[37];
        ra_tenant_format(&t, ts);
        ra_host_report(&v->vd, false,
                       "CORRUPT %s: record %" PRIu64 " at offset %" PRIu64
                       ": tenant %s is not the directory's",
                       w->path, w->idx, w->off, ts);
        ok = false;
    }
    if (w->dim && strcmp(w->dim, ra_slice_dimension(s)) != 0) {
        ra_host_report(&v->vd, false,
                       "CORRUPT %s: record %" PRIu64 " at offset %" PRIu64
                       ": dimension %s is not the file's",
                       w->path, w->idx, w->off, ra_slice_dimension(s));
        ok = false;
    }
    if (v->totals) {
        ra_host_add_rows(s, &w->sum, &w->sum_overflow);
        if (w->nslices++ == 0) w->w_first = id.window_start_s;
        w->w_last = id.window_start_s + id.window_len_s;
    }
    v->links++;
    ra_host_link_t link = ra_host_chain_link(w->last_seq, w->last_b3, seq, ra_slice_prev_b3(s));
    if (link != RA_LINK_OK) {
        char why[160];
        ra_host_chain_describe(link, w->last_seq, w->last_b3, seq, ra_slice_prev_b3(s), why,
                               sizeof why);
        ra_host_report(&v->vd, true, "CHAIN BREAK %s: record %" PRIu64 " at offset %" PRIu64 ": %s",
                       w->path, w->idx, w->off, why);
    }
    return ok;
}

/* A slice record: its digest, its decoding, then (decoded) its stream and link. */
static void check_slice(lv_t *v, stream_walk_t *w, const uint8_t *buf, uint32_t n) {
    const uint8_t *stored = buf + n;
    uint8_t d[32];
    ra_b3(buf, n, d);
    bool ok = true;
    if (memcmp(d, stored, 32) != 0) {
        ra_host_report(&v->vd, false,
                       "CORRUPT %s: record %" PRIu64 " at offset %" PRIu64
                       ": BLAKE3 of the slice bytes differs from the record's digest",
                       w->path, w->idx, w->off);
        ok = false;
    }
    ra_slice_t *s = NULL;
    int rc = ra_slice_decode(buf, n, &s);
    if (rc != 0) {
        ra_host_report(&v->vd, false,
                       "CORRUPT %s: record %" PRIu64 " at offset %" PRIu64
                       ": the slice does not decode: %s: %s",
                       w->path, w->idx, w->off, ra_err_name(rc), ra_strerror(rc));
        ok = false;
    }
    uint64_t seq = w->last_seq + 1; /* assumed for an undecodable record */
    if (s) {
        ra_slice_id_t id;
        ra_slice_get_id(s, &id);
        seq = id.seq;
        ok = check_decoded(v, w, s, seq) && ok;
        ra_slice_unref(s);
    }
    if (ok) v->records++;
    w->last_seq = seq;
    memcpy(w->last_b3, stored, 32);
}

static void print_total(const stream_walk_t *w) {
    char name[PATH_MAX];
    if (w->tenant && w->dim) {
        char ts[37];
        ra_tenant_format(w->tenant, ts);
        snprintf(name, sizeof name, "%s %s", ts, w->dim);
    } else {
        snprintf(name, sizeof name, "%s", w->path);
    }
    printf("  total %s %" PRIu64 "%s (%" PRIu64 " slices, windows %" PRIu64 "..%" PRIu64
           " UTC s)\n",
           name, w->sum, w->sum_overflow ? " (overflowed 2^64)" : "", w->nslices, w->w_first,
           w->w_last);
}

/* tenant: the expected tenant (from the directory name) or NULL; dim: expected dimension
 * (from the file name) or NULL. */
static void verify_stream(lv_t *v, const char *path, const ra_tenant_t *tenant, const char *dim) {
    uint64_t size = 0;
    int fd = open_stream(v, path, &size);
    if (fd < 0) return;
    v->files++;
    stream_walk_t w = {.path = path, .tenant = tenant, .dim = dim};
    uint8_t *buf = malloc(MAX_SLICE + 32);
    if (!buf) {
        ra_host_report(&v->vd, false, "CORRUPT %s: out of memory", path);
        close(fd);
        return;
    }
    v->bytes += size;
    uint32_t n;
    while (w.off < size) {
        w.idx++;
        if (!read_record(v, &w, fd, size, buf, &n)) break;
        if (n >= 4 && memcmp(buf, RA_HOST_LOSS_MAGIC, 4) == 0) {
            w.last_seq =
                verify_loss(v, path, tenant, dim, buf, n, w.idx, w.off, w.last_seq, w.last_b3);
            memcpy(w.last_b3, buf + n, 32);
        } else {
            check_slice(v, &w, buf, n);
        }
        w.off += 4 + (uint64_t)n + 32;
    }
    free(buf);
    if (v->totals) print_total(&w);
    close(fd);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted entry names of dir (without . and ..); NULL on error. */
static char **list_dir(const char *dir, size_t *n) {
    DIR *d = opendir(dir);
    if (!d) return NULL;
    char **names = NULL;
    size_t cap = 0;
    *n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            char **p = realloc(names, cap * sizeof *names);
            if (!p) break;
            names = p;
        }
        names[*n] = strdup(e->d_name);
        if (names[*n]) (*n)++;
    }
    closedir(d);
    if (!names) names = calloc(1, sizeof *names);
    if (names) qsort(names, *n, sizeof *names, cmp_str);
    return names;
}

static void free_list(char **names, size_t n) {
    for (size_t i = 0; names && i < n; i++)
        free(names[i]);
    free(names);
}

/* dir/name into out; false (and out empty) when it does not fit. */
static bool join(char *out, size_t n, const char *dir, const char *name) {
    int r = snprintf(out, n, "%s/%s", dir, name);
    if (r < 0 || (size_t)r >= n) {
        out[0] = '\0';
        return false;
    }
    return true;
}

static bool is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

bool ra_host_is_ledger(const char *path) {
    char p[PATH_MAX];
    struct stat st;
    if (stat(path, &st) != 0) return false;
    if (S_ISREG(st.st_mode)) return str_ends(path, LEDGER_SUFFIX);
    if (!S_ISDIR(st.st_mode)) return false;
    if (!join(p, sizeof p, path, LEDGER_MARKER)) return false;
    return access(p, F_OK) == 0;
}

static void verify_tenant_dir(lv_t *v, const char *tdir, const ra_tenant_t *t) {
    size_t n = 0;
    char **names = list_dir(tdir, &n);
    if (!names) {
        ra_host_report(&v->vd, false, "CORRUPT %s: cannot list: %s", tdir, strerror(errno));
        return;
    }
    for (size_t i = 0; i < n; i++) {
        char p[PATH_MAX];
        if (!join(p, sizeof p, tdir, names[i])) {
            ra_host_report(&v->vd, false, "CORRUPT %s/%s: path too long", tdir, names[i]);
            continue;
        }
        if (str_ends(names[i], ".broken")) {
            v->broken++;
        } else if (str_ends(names[i], LEDGER_SUFFIX) && !is_dir(p)) {
            char dim[RA_DIM_NAME_MAX + 1];
            size_t dl = strlen(names[i]) - strlen(LEDGER_SUFFIX);
            if (dl == 0 || dl > RA_DIM_NAME_MAX) {
                ra_host_report(&v->vd, false, "CORRUPT %s: not a dimension's file name", p);
                continue;
            }
            memcpy(dim, names[i], dl);
            dim[dl] = '\0';
            verify_stream(v, p, t, dim);
        } else {
            v->other++;
        }
    }
    free_list(names, n);
}

int ra_host_ledger_verify(const char *target, bool totals) {
    lv_t v;
    memset(&v, 0, sizeof v);
    v.totals = totals;
    struct stat st;
    if (stat(target, &st) != 0) {
        fprintf(stderr, RA_HOST_NAME " verify: %s: %s\n", target, strerror(errno));
        return RA_HOST_EXIT_USAGE;
    }
    bool one_file = S_ISREG(st.st_mode);
    printf("verify %s (%s)\n", target, one_file ? "one file-ledger stream" : "file ledger");
    if (one_file) {
        verify_stream(&v, target, NULL, NULL);
    } else {
        char mp[PATH_MAX];
        join(mp, sizeof mp, target, LEDGER_MARKER);
        FILE *f = fopen(mp, "rb");
        char text[64] = "";
        size_t got = f ? fread(text, 1, sizeof text - 1, f) : 0;
        if (f) fclose(f);
        text[got] = '\0';
        if (strcmp(text, LEDGER_MARKER_TEXT) != 0)
            ra_host_report(&v.vd, false, "CORRUPT %s: not a v1 file ledger marker", mp);
        size_t n = 0;
        char **names = list_dir(target, &n);
        if (!names) {
            fprintf(stderr, RA_HOST_NAME " verify: %s: %s\n", target, strerror(errno));
            return RA_HOST_EXIT_FAILED;
        }
        for (size_t i = 0; i < n; i++) {
            if (strcmp(names[i], LEDGER_MARKER) == 0) continue;
            char p[PATH_MAX];
            if (!join(p, sizeof p, target, names[i])) {
                ra_host_report(&v.vd, false, "CORRUPT %s/%s: path too long", target, names[i]);
                continue;
            }
            ra_tenant_t t;
            if (is_dir(p) && ra_tenant_parse(names[i], strlen(names[i]), &t) == 0)
                verify_tenant_dir(&v, p, &t);
            else
                v.other++;
        }
        free_list(names, n);
    }
    ra_host_report_overflow(&v.vd);
    printf("  streams         %" PRIu64 " files (%" PRIu64 " bytes)\n", v.files, v.bytes);
    printf("  records         %" PRIu64 " valid (digest = BLAKE3 of the slice bytes, strict "
           "decode)\n",
           v.records);
    printf("  chain links     %" PRIu64 " checked, %" PRIu64 " breaks\n", v.links, v.vd.breaks);
    printf("  torn bytes      %" PRIu64 "\n", v.torn);
    if (v.lost)
        printf("  accepted losses %" PRIu64 " seqs given up by the operator (listed above; their "
               "usage is unknown)\n",
               v.lost);
    if (v.broken || v.other)
        printf("  other files     %" PRIu64 " .broken (torn tails cut by the exporter), %" PRIu64
               " unknown\n",
               v.broken, v.other);
    return ra_host_verdict_end(&v.vd);
}
