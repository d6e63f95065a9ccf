/* `ron-accounting verify [--quiet] [--totals] [--schema NAME] postgres://...` (also
 * postgresql://..., or a key=value conninfo with dbname=): re-verifies a PostgreSQL ledger
 * (docs/EXPORT.md, "PostgreSQL ledger") the way ledgercmd.c verifies a file ledger.
 *
 * A CLI command, not on the loop: blocking libpq. One REPEATABLE READ, READ ONLY
 * transaction (one snapshot: a writer running meanwhile never makes the heads and the
 * slices disagree). The heads are loaded first (one row per stream); the slices are then
 * read in one pass, in (tenant, dimension, seq) order, in libpq's single-row mode with
 * binary results, so memory stays bounded by the number of streams, never by the slices.
 *
 * Every slice row: BLAKE3 of the stored bytes = the b3 column; the strict decoder
 * (ra_slice_decode) accepts the bytes; the decoded tenant, dimension, seq, window and
 * prev_b3 equal the row's columns. Every stream: seq 1, 2, 3, ... with prev_b3 = the
 * previous slice's b3 (the first all zero), and its head row = its last slice (seq, b3).
 * A head row without slices must say seq 0. Problems: one line each (CORRUPT, CHAIN BREAK,
 * HEAD), then a summary, then "OK" (exit 0) or "FAILED: ..." (exit 1). Exit 2: cannot
 * connect, or the schema holds no ledger. */
#include "chain.h"
#include "host.h"

#include "ron/accounting.h"

#include <libpq-fe.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_SCHEMA "ron_accounting"
#define MAX_IDENT 63

bool ra_host_is_pg_target(const char *t) {
    return strncmp(t, "postgres://", 11) == 0 || strncmp(t, "postgresql://", 13) == 0 ||
           strstr(t, "dbname=") != NULL;
}

/* [a-z_][a-z0-9_]*, at most 63 bytes: interpolated into SQL as a quoted identifier. */
static bool valid_ident(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > MAX_IDENT) return false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        bool ok = (ch >= 'a' && ch <= 'z') || ch == '_' || (i > 0 && ch >= '0' && ch <= '9');
        if (!ok) return false;
    }
    return true;
}

typedef struct {
    uint8_t tenant[16];
    char dim[RA_DIM_NAME_MAX + 1];
    uint64_t seq;
    uint8_t b3[32];
    bool seen; /* slices of this stream were read */
} head_t;

typedef struct {
    uint64_t streams, slices, bytes, links, lost;
    ra_host_verdict_t vd;
    bool totals;
    head_t *heads;
    size_t nheads;
} pv_t;

static uint64_t be64(const char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | (uint8_t)p[i];
    return v;
}

static uint32_t be32(const char *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v = v << 8 | (uint8_t)p[i];
    return v;
}

static int cmp_stream(const uint8_t *ta, const char *da, const uint8_t *tb, const char *db) {
    int c = memcmp(ta, tb, 16);
    return c ? c : strcmp(da, db);
}

static int cmp_head(const void *a, const void *b) {
    const head_t *x = a, *y = b;
    return cmp_stream(x->tenant, x->dim, y->tenant, y->dim);
}

static head_t *find_head(pv_t *v, const uint8_t *t, const char *dim) {
    size_t lo = 0, hi = v->nheads;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = cmp_stream(v->heads[mid].tenant, v->heads[mid].dim, t, dim);
        if (c == 0) return &v->heads[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static const char *stream_name(const uint8_t *t, const char *dim, char *out, size_t n) {
    ra_tenant_t tt;
    memcpy(tt.b, t, 16);
    char ts[37];
    ra_tenant_format(&tt, ts);
    snprintf(out, n, "%s/%s", ts, dim);
    return out;
}

static PGresult *exec_ok(PGconn *pg, const char *sql, ExecStatusType want, char *err, size_t n) {
    PGresult *r = PQexecParams(pg, sql, 0, NULL, NULL, NULL, NULL, 1);
    if (PQresultStatus(r) != want) {
        snprintf(err, n, "%s", PQresultErrorMessage(r));
        size_t l = strlen(err);
        while (l > 0 && err[l - 1] == '\n')
            err[--l] = '\0';
        PQclear(r);
        return NULL;
    }
    return r;
}

/* The stream that just ended (last seq, last b3) against its head row. */
/* One link of a stream's chain: counted, and reported when it breaks. */
static void check_link(pv_t *v, const char *name, uint64_t last_seq, const uint8_t last_b3[32],
                       uint64_t seq, const uint8_t prev[32]) {
    v->links++;
    ra_host_link_t link = ra_host_chain_link(last_seq, last_b3, seq, prev);
    if (link != RA_LINK_OK) {
        char why[160];
        ra_host_chain_describe(link, last_seq, last_b3, seq, prev, why, sizeof why);
        ra_host_report(&v->vd, true, "CHAIN BREAK %s: %s", name, why);
    }
}

static void end_stream(pv_t *v, const uint8_t *t, const char *dim, uint64_t last_seq,
                       const uint8_t *last_b3, uint64_t sum, bool sum_overflow, uint64_t nslices) {
    char name[96];
    stream_name(t, dim, name, sizeof name);
    head_t *h = find_head(v, t, dim);
    if (!h) {
        ra_host_report(&v->vd, false, "HEAD %s: no head row (the last slice is seq %" PRIu64 ")",
                       name, last_seq);
    } else {
        h->seen = true;
        if (h->seq != last_seq || memcmp(h->b3, last_b3, 32) != 0) {
            char a[65], b[65];
            ra_hex(h->b3, 32, a);
            ra_hex(last_b3, 32, b);
            ra_host_report(&v->vd, false,
                           "HEAD %s: head row seq %" PRIu64 " b3 %.16s... is not the last slice "
                           "(seq %" PRIu64 " b3 %.16s...)",
                           name, h->seq, a, last_seq, b);
        }
    }
    if (v->totals)
        printf("  total %s %" PRIu64 "%s (%" PRIu64 " slices)\n", name, sum,
               sum_overflow ? " (overflowed 2^64)" : "", nslices);
}

static int load_heads(pv_t *v, PGconn *pg, const char *schema, char *err, size_t n) {
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT tenant, dimension, seq, b3 FROM \"%s\".heads ORDER BY tenant, dimension",
             schema);
    PGresult *r = exec_ok(pg, sql, PGRES_TUPLES_OK, err, n);
    if (!r) return -1;
    int nt = PQntuples(r);
    v->heads = calloc((size_t)nt + 1, sizeof *v->heads);
    if (!v->heads) {
        PQclear(r);
        snprintf(err, n, "out of memory");
        return -1;
    }
    for (int i = 0; i < nt; i++) {
        head_t *h = &v->heads[v->nheads];
        char name[96];
        if (PQgetlength(r, i, 0) != 16 || PQgetlength(r, i, 2) != 8 ||
            PQgetlength(r, i, 1) > RA_DIM_NAME_MAX) {
            ra_host_report(&v->vd, false, "HEAD row %d: malformed (tenant, dimension or seq)",
                           i + 1);
            continue;
        }
        memcpy(h->tenant, PQgetvalue(r, i, 0), 16);
        memcpy(h->dim, PQgetvalue(r, i, 1), (size_t)PQgetlength(r, i, 1));
        h->dim[PQgetlength(r, i, 1)] = '\0';
        h->seq = be64(PQgetvalue(r, i, 2));
        if (PQgetlength(r, i, 3) != 32) {
            ra_host_report(&v->vd, false, "HEAD %s: b3 is not 32 bytes",
                           stream_name(h->tenant, h->dim, name, sizeof name));
            continue;
        }
        memcpy(h->b3, PQgetvalue(r, i, 3), 32);
        v->nheads++;
    }
    PQclear(r);
    /* ORDER BY uuid sorts by bytes and text under the C collation only: sort here. */
    qsort(v->heads, v->nheads, sizeof *v->heads, cmp_head);
    return 0;
}

/* One slice row's columns, as stored (the pointers into the result). */
typedef struct {
    const uint8_t *tenant, *b3, *prev, *body;
    char dim[RA_DIM_NAME_MAX + 1];
    uint64_t seq;
    int64_t wstart;
    uint32_t wlen;
    size_t blen;
    char name[96]; /* tenant/dimension, for the report */
} slice_row_t;

/* The stream the pass is in: its chain so far and --totals. */
typedef struct {
    uint8_t t[16], last_b3[32];
    char d[RA_DIM_NAME_MAX + 1];
    bool have, sum_overflow;
    uint64_t last_seq, sum, nslices;
} pg_stream_t;

static bool parse_row(PGresult *r, slice_row_t *row) {
    int dl = PQgetlength(r, 0, 1);
    if (PQgetlength(r, 0, 0) != 16 || dl > RA_DIM_NAME_MAX || PQgetlength(r, 0, 2) != 8 ||
        PQgetlength(r, 0, 3) != 8 || PQgetlength(r, 0, 4) != 4 || PQgetlength(r, 0, 5) != 32 ||
        PQgetlength(r, 0, 6) != 32)
        return false;
    row->tenant = (const uint8_t *)PQgetvalue(r, 0, 0);
    memcpy(row->dim, PQgetvalue(r, 0, 1), (size_t)dl);
    row->dim[dl] = '\0';
    row->seq = be64(PQgetvalue(r, 0, 2));
    row->wstart = (int64_t)be64(PQgetvalue(r, 0, 3));
    row->wlen = be32(PQgetvalue(r, 0, 4));
    row->b3 = (const uint8_t *)PQgetvalue(r, 0, 5);
    row->prev = (const uint8_t *)PQgetvalue(r, 0, 6);
    row->body = (const uint8_t *)PQgetvalue(r, 0, 7);
    row->blen = (size_t)PQgetlength(r, 0, 7);
    stream_name(row->tenant, row->dim, row->name, sizeof row->name);
    return true;
}

/* An accepted loss (docs/EXPORT.md §2): its form, its place, listed. */
static void check_loss_row(pv_t *v, const slice_row_t *row) {
    ra_host_loss_t loss;
    if (!ra_host_loss_decode(row->body, (uint32_t)row->blen, &loss) || loss.seq != row->seq ||
        memcmp(loss.link_b3, row->b3, 32) != 0 || memcmp(loss.prev_b3, row->prev, 32) != 0 ||
        memcmp(loss.tenant, row->tenant, 16) != 0 || strcmp(loss.dim, row->dim) != 0) {
        ra_host_report(&v->vd, false,
                       "CORRUPT %s: seq %" PRIu64 ": an accepted-loss row that does not "
                       "decode or disagrees with its columns",
                       row->name, row->seq);
        return;
    }
    v->slices++;
    v->lost++;
    if (loss.seq == loss.first)
        printf("LOSS ACCEPTED %s: seqs %" PRIu64 "..%" PRIu64
               " given up by the operator at %" PRIu64 " UTC s: %s\n",
               row->name, loss.first, loss.last, loss.accepted_at_s,
               loss.reason[0] ? loss.reason : "(no reason)");
}

/* A decoded slice against its row's columns; its rows into the stream's --totals. */
static bool check_decoded(pv_t *v, const slice_row_t *row, const ra_slice_t *s, pg_stream_t *cs) {
    bool ok = true;
    ra_slice_id_t id;
    ra_slice_get_id(s, &id);
    ra_tenant_t st2;
    ra_slice_get_tenant(s, &st2);
    if (memcmp(st2.b, row->tenant, 16) != 0 || strcmp(ra_slice_dimension(s), row->dim) != 0 ||
        id.seq != row->seq || id.window_start_s != row->wstart || id.window_len_s != row->wlen ||
        memcmp(ra_slice_prev_b3(s), row->prev, 32) != 0) {
        ra_host_report(&v->vd, false,
                       "CORRUPT %s: seq %" PRIu64 ": the stored bytes (seq %" PRIu64
                       ", window %" PRId64 "+%" PRIu32 ") disagree with the row's columns",
                       row->name, row->seq, id.seq, id.window_start_s, id.window_len_s);
        ok = false;
    }
    if (v->totals) ra_host_add_rows(s, &cs->sum, &cs->sum_overflow);
    return ok;
}

/* A slice row: its digest, its decoding, its columns. */
static void check_slice_row(pv_t *v, const slice_row_t *row, pg_stream_t *cs) {
    bool ok = true;
    uint8_t d[32];
    ra_b3(row->body, row->blen, d);
    if (memcmp(d, row->b3, 32) != 0) {
        ra_host_report(&v->vd, false,
                       "CORRUPT %s: seq %" PRIu64 ": BLAKE3 of the stored bytes is not "
                       "the b3 column",
                       row->name, row->seq);
        ok = false;
    }
    ra_slice_t *s = NULL;
    int drc = ra_slice_decode(row->body, row->blen, &s);
    if (drc != 0) {
        ra_host_report(&v->vd, false,
                       "CORRUPT %s: seq %" PRIu64 ": the slice does not decode: %s: %s", row->name,
                       row->seq, ra_err_name(drc), ra_strerror(drc));
        ok = false;
    } else {
        ok = check_decoded(v, row, s, cs) && ok;
        ra_slice_unref(s);
    }
    cs->nslices++;
    if (ok) v->slices++;
}

static void next_row(pv_t *v, const slice_row_t *row, pg_stream_t *cs) {
    if (!cs->have || cmp_stream(cs->t, cs->d, row->tenant, row->dim) != 0) {
        if (cs->have)
            end_stream(v, cs->t, cs->d, cs->last_seq, cs->last_b3, cs->sum, cs->sum_overflow,
                       cs->nslices);
        memset(cs, 0, sizeof *cs);
        memcpy(cs->t, row->tenant, 16);
        snprintf(cs->d, sizeof cs->d, "%s", row->dim);
        cs->have = true;
        v->streams++;
    }
    v->bytes += row->blen;
    if (row->blen >= 4 && memcmp(row->body, RA_HOST_LOSS_MAGIC, 4) == 0)
        check_loss_row(v, row); /* (not in nslices: --totals counts slices, like the file ledger) */
    else
        check_slice_row(v, row, cs);
    check_link(v, row->name, cs->last_seq, cs->last_b3, row->seq, row->prev);
    cs->last_seq = row->seq;
    memcpy(cs->last_b3, row->b3, 32);
}

/* One pass over the slices (single-row mode). 0, or -1 with err set. */
static int scan_slices(pv_t *v, PGconn *pg, const char *schema, char *err, size_t n) {
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT tenant, dimension, seq, window_start_s, window_len_s, b3, prev_b3, body "
             "FROM \"%s\".slices ORDER BY tenant, dimension COLLATE \"C\", seq",
             schema);
    if (!PQsendQueryParams(pg, sql, 0, NULL, NULL, NULL, NULL, 1) || !PQsetSingleRowMode(pg)) {
        snprintf(err, n, "%s", PQerrorMessage(pg));
        return -1;
    }
    pg_stream_t cs;
    memset(&cs, 0, sizeof cs);
    int rc = 0;
    for (PGresult *r; (r = PQgetResult(pg));) {
        ExecStatusType st = PQresultStatus(r);
        if (st == PGRES_FATAL_ERROR) {
            snprintf(err, n, "%s", PQresultErrorMessage(r));
            rc = -1;
        }
        slice_row_t row;
        if (st == PGRES_SINGLE_TUPLE && !parse_row(r, &row))
            ra_host_report(&v->vd, false, "CORRUPT slice row: malformed columns");
        else if (st == PGRES_SINGLE_TUPLE)
            next_row(v, &row, &cs);
        PQclear(r);
    }
    if (cs.have)
        end_stream(v, cs.t, cs.d, cs.last_seq, cs.last_b3, cs.sum, cs.sum_overflow, cs.nslices);
    return rc;
}

/* verify's arguments for a PostgreSQL target: 0, or the usage exit status after one line. */
static int pg_args(pv_t *v, const char **target, const char **schema, int argc, char **argv) {
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "-q") == 0 || strcmp(argv[i], "--quiet") == 0) {
            /* no progress output to silence: accepted like the other verify targets */
        } else if (strcmp(argv[i], "--totals") == 0) {
            v->totals = true;
        } else if (strcmp(argv[i], "--schema") == 0 && i + 1 < argc) {
            *schema = argv[++i];
        } else if (strncmp(argv[i], "--schema=", 9) == 0) {
            *schema = argv[i] + 9;
        } else {
            int rc = ra_host_verify_operand(argv[i], target, "target",
                                            "[--quiet] [--totals] [--schema NAME] postgres://...");
            if (rc != 0) return rc;
        }
    }
    if (!*target) {
        fprintf(stderr, RA_HOST_NAME " verify: needs a target\n");
        return RA_HOST_EXIT_USAGE;
    }
    if (!valid_ident(*schema)) {
        fprintf(stderr,
                RA_HOST_NAME " verify: --schema '%s': expected [a-z_][a-z0-9_]*, "
                             "at most 63 bytes\n",
                *schema);
        return RA_HOST_EXIT_USAGE;
    }
    return 0;
}

/* A connection in a read-only snapshot to a schema holding a ledger; NULL after one line
 * (the usage exit status: the target is not a ledger). */
static PGconn *pg_open(const char *target, const char *schema) {
    PGconn *pg = PQconnectdb(target);
    if (!pg || PQstatus(pg) != CONNECTION_OK) {
        const char *m = pg ? PQerrorMessage(pg) : "out of memory";
        printf("FAILED: cannot connect: %s", m);
        if (!*m || m[strlen(m) - 1] != '\n') putchar('\n');
        fflush(stdout);
        fprintf(stderr, RA_HOST_NAME " verify: cannot connect to the PostgreSQL ledger\n");
        PQfinish(pg);
        return NULL;
    }
    char err[1024] = "";
    PGresult *r = exec_ok(pg, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", PGRES_COMMAND_OK,
                          err, sizeof err);
    PQclear(r);
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT to_regclass('\"%s\".slices') IS NOT NULL AND "
             "to_regclass('\"%s\".heads') IS NOT NULL",
             schema, schema);
    r = err[0] ? NULL : exec_ok(pg, sql, PGRES_TUPLES_OK, err, sizeof err);
    bool exists = r && PQntuples(r) == 1 && PQgetlength(r, 0, 0) == 1 && PQgetvalue(r, 0, 0)[0];
    PQclear(r);
    if (err[0] || !exists) {
        printf("FAILED: %s\n", err[0] ? err : "no PostgreSQL ledger in this schema");
        fprintf(stderr, RA_HOST_NAME " verify: schema \"%s\": %s\n", schema,
                err[0] ? err : "no slices/heads tables");
        PQfinish(pg);
        return NULL;
    }
    return pg;
}

/* Head rows of streams without slices, then the summary and the verdict: the exit status. */
static int pg_report(pv_t *v) {
    uint64_t empty_heads = 0;
    for (size_t i = 0; i < v->nheads; i++) {
        if (v->heads[i].seen) continue;
        char name[96];
        if (v->heads[i].seq != 0)
            ra_host_report(&v->vd, false,
                           "HEAD %s: head row says seq %" PRIu64 " but the stream has no "
                           "slices",
                           stream_name(v->heads[i].tenant, v->heads[i].dim, name, sizeof name),
                           v->heads[i].seq);
        else
            empty_heads++;
    }
    ra_host_report_overflow(&v->vd);
    printf("  streams         %" PRIu64 " with slices, %zu head rows (%" PRIu64
           " at seq 0: refused first puts)\n",
           v->streams, v->nheads, empty_heads);
    printf("  slices          %" PRIu64 " valid of %" PRIu64 " (%" PRIu64 " bytes; digest = "
           "BLAKE3 of the stored bytes, strict decode, columns = decoded fields)\n",
           v->slices, v->links, v->bytes);
    printf("  chain links     %" PRIu64 " checked, %" PRIu64 " breaks\n", v->links, v->vd.breaks);
    if (v->lost)
        printf("  accepted losses %" PRIu64 " seqs given up by the operator (listed above; their "
               "usage is unknown)\n",
               v->lost);
    return ra_host_verdict_end(&v->vd) != RA_HOST_EXIT_OK ? RA_HOST_EXIT_FAILED : RA_HOST_EXIT_OK;
}

int ra_host_pg_verify(int argc, char **argv) {
    const char *target = NULL, *schema = DEFAULT_SCHEMA;
    pv_t v;
    memset(&v, 0, sizeof v);
    int ec = pg_args(&v, &target, &schema, argc, argv);
    if (ec) return ec;
    PGconn *pg = pg_open(target, schema);
    if (!pg) return RA_HOST_EXIT_USAGE;
    const char *host = PQhost(pg);
    printf("verify %s@%s:%s/%s (PostgreSQL ledger, schema %s)\n", PQuser(pg),
           host && host[0] == '/' ? "[socket]" : host, PQport(pg), PQdb(pg), schema);
    char err[1024] = "";
    if (load_heads(&v, pg, schema, err, sizeof err) != 0 ||
        scan_slices(&v, pg, schema, err, sizeof err) != 0) {
        printf("FAILED: reading the ledger: %s\n", err);
        fflush(stdout);
        ec = RA_HOST_EXIT_FAILED;
    } else {
        ec = pg_report(&v);
    }
    free(v.heads);
    PQfinish(pg);
    return ec;
}
