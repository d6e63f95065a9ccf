/* G-7 WAL crash-safety: a real child process is killed with SIGKILL at a random moment
 * while it records, rolls windows over (group commit: .tmp, fsync, rename, directory
 * fsync), ACKs and compacts; the parent then recovers the WAL and checks that nothing the
 * child was told is durable got lost, and nothing comes back twice.
 *
 * One WAL directory for the whole run, so every iteration also recovers the stream heads
 * of the previous ones (chains continue across restarts, through the heads checkpoint).
 * Per iteration:
 *
 *   child   opens a meter on the WAL (private counter plane, injected times), then loops:
 *           records random keys of 6 tenants x 3 dimensions (seeded) into window w, rolls
 *           it over at the end of w, and after each successful rollover writes one line per
 *           slice it was reported sealed ("S stream seq b3 prev_b3 window") to a pipe;
 *           ACKs each pending slice with probability 1/2 (an "A stream seq" line goes to
 *           the pipe BEFORE ra_meter_ack, so an ACK the parent does not know about cannot
 *           exist) and compacts one rollover in three. Lines are single write()s under
 *           PIPE_BUF, so a kill never leaves half a line.
 *   parent  reads the pipe, sends SIGKILL after a seeded random delay (0..50 ms after
 *           the child's meter opened; a quarter of the time 0..3 ms after the fork),
 *           drains the pipe, reaps the child, then:
 *    1. opens a meter on the WAL: recovery succeeds with no corrupt frame, no torn byte
 *       and no .broken file (a killed process loses no written byte: anything else is a
 *       bug), and every leftover .tmp is gone;
 *    2. every slice the child reported sealed and did not (start to) ACK is pending, with
 *       the same b3; a pending slice the child never reported (killed between the
 *       durable rename and its report) must be newer than every reported one of its
 *       stream;
 *    3. replay happened once: no (stream, seq) twice in pending, and a second open gives
 *       exactly the same pending list;
 *    4. chains are continuous: per stream, from the head left by the previous iteration,
 *       every seq is known (reported or pending) and links to the one before by prev_b3;
 *       a rollover by the parent then continues each stream at seq + 1 with prev_b3 =
 *       the last b3;
 *    5. after ACKing everything and compacting, the directory holds no segment and a
 *       reopen has nothing pending.
 *
 * Iterations: argv[1], else RA_KILL9_ITERATIONS, else 20 (`make test`); `make soak-wal`
 * runs 1000. Seed: RA_KILL9_SEED (printed). */
#include "ra_test.h"

#include "internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <time.h>

#define NT 6
#define ND 3
#define NS (NT * ND)
#define WINDOW_S 60
#define RECORDS_PER_WINDOW 120
#define MAX_SEQ_PER_ITER 4096 /* per stream: far above what 50 ms of rollovers produce */

static ra_tenant_t g_tenant[NT];
static char g_dir[600];

static uint64_t mono_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static int stream_of(const ra_slice_t *s) {
    ra_tenant_t t;
    ra_slice_get_tenant(s, &t);
    const char *dim = ra_slice_dimension(s);
    int d = !strcmp(dim, "bytes")       ? 0
            : !strcmp(dim, "requests")  ? 1
            : !strcmp(dim, "cpu_units") ? 2
                                        : -1;
    for (int i = 0; i < NT && d >= 0; i++)
        if (memcmp(t.b, g_tenant[i].b, 16) == 0) return i * ND + d;
    return -1;
}

static void meter_config(ra_config_t *cfg) {
    ra_config_init(cfg);
    cfg->window_len_s = WINDOW_S;
    cfg->shards = 4;
    cfg->capacity_rows = 4096;
    cfg->pending_slices_cap = 4096;
    cfg->amnesia = 0;
    cfg->wal_dir = g_dir;
    cfg->wal_max_age_s = 0;
    cfg->host = "kill9";
}

/* ---- the child ------------------------------------------------------------------------ */

static int g_pipe = -1;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n <= 0 || (size_t)n >= sizeof line) _exit(4);
    /* One write() under PIPE_BUF is atomic: a kill never leaves half a line. */
    if (write(g_pipe, line, (size_t)n) != n) _exit(5);
}

static _Noreturn void child_fail(const char *what, int rc) {
    say("E %s: %d %s\n", what, rc, ra_err_name(rc));
    _exit(3);
}

static _Noreturn void child(uint64_t seed, int64_t start_window) {
    ra_config_t cfg;
    meter_config(&cfg);
    ra_meter_t *m = NULL;
    char err[512];
    int rc = ra_meter_open(&cfg, &m, err, sizeof err);
    if (rc != 0) {
        say("E open: %s\n", err);
        _exit(3);
    }
    say("O\n");
    ra_slice_t **out = malloc(sizeof *out * 4096);
    ra_slice_t **pend = malloc(sizeof *pend * 4096);
    if (!out || !pend) child_fail("malloc", RA_ENOMEM);
    for (int64_t w = start_window;; w++) {
        for (int r = 0; r < RECORDS_PER_WINDOW; r++) {
            uint64_t x = ra_t_rand(&seed);
            ra_subject_t s = ra_t_subject((unsigned)(x >> 40) % 50);
            rc = ra_meter_record_at(m, w * WINDOW_S * 1000 + 1000 + r, &g_tenant[x % NT], &s,
                                    (int)((x >> 8) % ND), 1 + (x >> 16) % 1000);
            if (rc != 0) child_fail("record", rc);
        }
        size_t n = 0;
        rc = ra_meter_rollover(m, (w + 1) * WINDOW_S * 1000, out, 4096, &n);
        if (rc != 0) child_fail("rollover", rc);
        /* Durable now: report, with everything the parent needs to check the chain. */
        for (size_t i = 0; i < n; i++) {
            ra_slice_id_t id;
            ra_slice_get_id(out[i], &id);
            char b3[65], prev[65];
            ra_hex(ra_slice_b3(out[i]), 32, b3);
            ra_hex(ra_slice_prev_b3(out[i]), 32, prev);
            say("S %d %" PRIu64 " %s %s %" PRId64 "\n", stream_of(out[i]), id.seq, b3, prev,
                id.window_start_s);
            ra_slice_unref(out[i]);
        }
        size_t np = 0;
        rc = ra_meter_pending_list(m, 0, pend, 4096, &np);
        if (rc != 0) child_fail("pending_list", rc);
        for (size_t i = 0; i < np; i++) {
            if (ra_t_rand(&seed) & 1) {
                ra_slice_id_t id;
                ra_slice_get_id(pend[i], &id);
                say("A %d %" PRIu64 "\n", stream_of(pend[i]), id.seq);
                if ((rc = ra_meter_ack(m, pend[i])) != 0) child_fail("ack", rc);
            }
            ra_slice_unref(pend[i]);
        }
        if (ra_t_rand(&seed) % 3 == 0 && (rc = ra_meter_compact(m)) != 0) child_fail("compact", rc);
    }
}

/* ---- the parent's model ---------------------------------------------------------------- */

typedef struct entry {
    bool known, reported, ack_intent, pending;
    uint8_t b3[32], prev[32];
} entry_t;

typedef struct stream {
    uint64_t head_seq; /* where the previous iteration left the chain (all ACKed) */
    uint8_t head_b3[32];
    uint64_t max_reported, max_known;
    entry_t *e; /* index seq - head_seq - 1 */
} stream_t;

static stream_t g_s[NS];

static entry_t *entry_at(int st, uint64_t seq) {
    stream_t *s = &g_s[st];
    if (seq <= s->head_seq || seq - s->head_seq > MAX_SEQ_PER_ITER) return NULL;
    return &s->e[seq - s->head_seq - 1];
}

static int unhex(const char *h, uint8_t *out) {
    for (int i = 0; i < 32; i++) {
        unsigned v;
        if (sscanf(h + 2 * i, "%2x", &v) != 1) return -1;
        out[i] = (uint8_t)v;
    }
    return 0;
}

typedef struct stats {
    uint64_t iterations, reported, acked, pending_checked, unreported_recovered;
    uint64_t kills_before_open, kills_with_tmp, kills_with_unreported, child_rollovers_max;
    uint64_t max_window_seen;
} stats_t;

static stats_t g_st;
static int64_t g_max_window_s;

/* One line from the child. Returns false on a protocol violation (already reported). */
static bool take_line(char *line, bool *opened, char *child_err, size_t errlen) {
    if (line[0] == 'O') {
        *opened = true;
        return true;
    }
    if (line[0] == 'E') {
        snprintf(child_err, errlen, "%s", line + 2);
        return true;
    }
    int st;
    uint64_t seq;
    if (line[0] == 'A') {
        if (sscanf(line, "A %d %" SCNu64, &st, &seq) != 2 || st < 0 || st >= NS) {
            RA_FAILF("bad line from the child: %s", line);
            return false;
        }
        entry_t *e = entry_at(st, seq);
        if (!e || !e->reported) {
            RA_FAILF("the child ACKs stream %d seq %" PRIu64 ", which it never reported", st, seq);
            return false;
        }
        e->ack_intent = true;
        g_st.acked++;
        return true;
    }
    char b3[80], prev[80];
    int64_t ws;
    if (line[0] != 'S' ||
        sscanf(line, "S %d %" SCNu64 " %79s %79s %" SCNd64, &st, &seq, b3, prev, &ws) != 5 ||
        st < 0 || st >= NS) {
        RA_FAILF("bad line from the child: %s", line);
        return false;
    }
    entry_t *e = entry_at(st, seq);
    if (!e) {
        RA_FAILF("stream %d: reported seq %" PRIu64 " outside (%" PRIu64 ", +%d]", st, seq,
                 g_s[st].head_seq, MAX_SEQ_PER_ITER);
        return false;
    }
    if (e->known) {
        RA_FAILF("stream %d: seq %" PRIu64 " reported sealed twice", st, seq);
        return false;
    }
    e->known = e->reported = true;
    if (unhex(b3, e->b3) || unhex(prev, e->prev)) {
        RA_FAILF("bad hex from the child: %s", line);
        return false;
    }
    stream_t *s = &g_s[st];
    if (seq > s->max_reported) s->max_reported = seq;
    if (seq > s->max_known) s->max_known = seq;
    if (ws > g_max_window_s) g_max_window_s = ws;
    g_st.reported++;
    return true;
}

/* ---- the checks ------------------------------------------------------------------------ */

static void count_files(size_t *seg, size_t *tmp, size_t *broken) {
    *seg = *tmp = *broken = 0;
    DIR *d = opendir(g_dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n > 4 && !strcmp(e->d_name + n - 4, ".seg")) (*seg)++;
        if (n > 4 && !strcmp(e->d_name + n - 4, ".tmp")) (*tmp)++;
        if (strstr(e->d_name, ".broken")) (*broken)++;
    }
    closedir(d);
}

static ra_meter_t *open_wal(void) {
    ra_config_t cfg;
    meter_config(&cfg);
    return ra_t_open(&cfg);
}

typedef struct pitem {
    int st;
    uint64_t seq;
    uint8_t b3[32];
} pitem_t;

/* The pending list as (stream, seq, b3), in ring order. */
static size_t pending_items(ra_meter_t *m, pitem_t *out, size_t cap) {
    size_t n = ra_meter_pending_count(m);
    if (n > cap) n = cap;
    ra_slice_t **sl = malloc(sizeof *sl * (n ? n : 1));
    size_t got = 0;
    if (!sl || ra_meter_pending_list(m, 0, sl, n, &got) != 0) {
        free(sl);
        return 0;
    }
    for (size_t i = 0; i < got; i++) {
        ra_slice_id_t id;
        ra_slice_get_id(sl[i], &id);
        out[i].st = stream_of(sl[i]);
        out[i].seq = id.seq;
        memcpy(out[i].b3, ra_slice_b3(sl[i]), 32);
        ra_slice_unref(sl[i]);
    }
    free(sl);
    return got;
}

/* Checks 1-5 of the header comment after one kill. Returns false when the run must stop. */
static bool check_after_kill(uint64_t iter) {
    size_t nseg, ntmp, nbroken;
    count_files(&nseg, &ntmp, &nbroken);
    if (ntmp) g_st.kills_with_tmp++;

    /* 1. recovery */
    ra_meter_t *m = open_wal();
    if (!m) {
        RA_FAILF("iteration %" PRIu64 ": the WAL does not open after the kill", iter);
        return false;
    }
    CHECK_EQ_U64(ra_t_metric(m, "accounting_wal_corrupt_total"), 0);
    CHECK_EQ_U64(ra_t_metric(m, "accounting_wal_torn_bytes_total"), 0);
    size_t seg2, tmp2, broken2;
    count_files(&seg2, &tmp2, &broken2);
    CHECK_EQ_U64(tmp2, 0);
    CHECK_EQ_U64(broken2, 0);

    /* 2. every reported, un-ACKed slice is pending with its b3 */
    static pitem_t p1[8192], p2[8192];
    size_t n1 = pending_items(m, p1, 8192);
    CHECK_EQ_U64(n1, ra_meter_pending_count(m));
    bool unreported = false;
    for (size_t i = 0; i < n1; i++) {
        if (p1[i].st < 0) {
            RA_FAILF("pending slice of an unknown stream");
            continue;
        }
        entry_t *e = entry_at(p1[i].st, p1[i].seq);
        if (!e) {
            RA_FAILF("iteration %" PRIu64 ": pending stream %d seq %" PRIu64
                     " is at or below the chain's head %" PRIu64 " (replayed after its ACK "
                     "and compaction?)",
                     iter, p1[i].st, p1[i].seq, g_s[p1[i].st].head_seq);
            continue;
        }
        /* 3. exactly once */
        if (e->pending) {
            RA_FAILF("iteration %" PRIu64 ": stream %d seq %" PRIu64 " is pending twice", iter,
                     p1[i].st, p1[i].seq);
            continue;
        }
        e->pending = true;
        g_st.pending_checked++;
        if (e->reported) {
            if (memcmp(e->b3, p1[i].b3, 32) != 0)
                RA_FAILF("iteration %" PRIu64 ": stream %d seq %" PRIu64
                         " is pending with another b3 than the child reported",
                         iter, p1[i].st, p1[i].seq);
        } else {
            /* durable, killed before reporting it: only the newest ones can be */
            if (p1[i].seq <= g_s[p1[i].st].max_reported)
                RA_FAILF("iteration %" PRIu64 ": stream %d seq %" PRIu64
                         " is pending but was never reported, and seq %" PRIu64 " after it was",
                         iter, p1[i].st, p1[i].seq, g_s[p1[i].st].max_reported);
            e->known = true;
            memcpy(e->b3, p1[i].b3, 32);
            if (p1[i].seq > g_s[p1[i].st].max_known) g_s[p1[i].st].max_known = p1[i].seq;
            unreported = true;
            g_st.unreported_recovered++;
        }
    }
    if (unreported) g_st.kills_with_unreported++;
    /* prev_b3 of the unreported ones, for the chain check */
    {
        ra_slice_t **sl = malloc(sizeof *sl * (n1 ? n1 : 1));
        size_t got = 0;
        if (sl && ra_meter_pending_list(m, 0, sl, n1, &got) == 0) {
            for (size_t i = 0; i < got; i++) {
                ra_slice_id_t id;
                ra_slice_get_id(sl[i], &id);
                int st = stream_of(sl[i]);
                entry_t *e = st >= 0 ? entry_at(st, id.seq) : NULL;
                if (e && !e->reported) memcpy(e->prev, ra_slice_prev_b3(sl[i]), 32);
                if (id.window_start_s > g_max_window_s) g_max_window_s = id.window_start_s;
                ra_slice_unref(sl[i]);
            }
        }
        free(sl);
    }
    for (int st = 0; st < NS; st++) {
        stream_t *s = &g_s[st];
        for (uint64_t q = s->head_seq + 1; q <= s->max_reported; q++) {
            entry_t *e = entry_at(st, q);
            if (e && e->reported && !e->ack_intent && !e->pending)
                RA_FAILF("iteration %" PRIu64 ": stream %d seq %" PRIu64
                         " was reported sealed, never ACKed, and is not pending: LOST",
                         iter, st, q);
        }
        /* 4. chain continuity */
        const uint8_t *prev = s->head_b3;
        for (uint64_t q = s->head_seq + 1; q <= s->max_known; q++) {
            entry_t *e = entry_at(st, q);
            if (!e || !e->known) {
                RA_FAILF("iteration %" PRIu64 ": stream %d: seq %" PRIu64
                         " is neither reported nor pending (a hole in the chain)",
                         iter, st, q);
                break;
            }
            if (memcmp(e->prev, prev, 32) != 0) {
                RA_FAILF("iteration %" PRIu64 ": stream %d seq %" PRIu64
                         ": prev_b3 is not the b3 of seq %" PRIu64,
                         iter, st, q, q - 1);
                break;
            }
            prev = e->b3;
        }
    }

    /* 3. a second open replays the same set */
    ra_meter_close(m);
    m = open_wal();
    if (!m) {
        RA_FAILF("iteration %" PRIu64 ": the second open fails", iter);
        return false;
    }
    size_t n2 = pending_items(m, p2, 8192);
    CHECK_EQ_U64(n2, n1);
    for (size_t i = 0; i < n1 && i < n2; i++)
        if (p1[i].st != p2[i].st || p1[i].seq != p2[i].seq || memcmp(p1[i].b3, p2[i].b3, 32)) {
            RA_FAILF("iteration %" PRIu64 ": the second open's pending differs at %zu", iter, i);
            break;
        }

    /* 4. the parent continues every chain */
    int64_t win = g_max_window_s / WINDOW_S + 2;
    for (int st = 0; st < NS; st++) {
        ra_subject_t sub = ra_t_subject(7);
        CHECK_RC(ra_meter_record_at(m, win * WINDOW_S * 1000 + 5000, &g_tenant[st / ND], &sub,
                                    st % ND, 1),
                 0);
    }
    ra_slice_t *out[NS];
    size_t n = 0;
    CHECK_RC(ra_meter_rollover(m, (win + 1) * WINDOW_S * 1000, out, NS, &n), 0);
    CHECK_EQ_U64(n, NS);
    uint64_t new_seq[NS] = {0};
    uint8_t new_b3[NS][32];
    for (size_t i = 0; i < n && i < NS; i++) {
        int st = stream_of(out[i]);
        ra_slice_id_t id;
        ra_slice_get_id(out[i], &id);
        stream_t *s = &g_s[st];
        uint64_t last = s->max_known > s->head_seq ? s->max_known : s->head_seq;
        const uint8_t *last_b3 = last > s->head_seq ? entry_at(st, last)->b3 : s->head_b3;
        if (id.seq != last + 1 || memcmp(ra_slice_prev_b3(out[i]), last_b3, 32) != 0)
            RA_FAILF("iteration %" PRIu64 ": stream %d continues at seq %" PRIu64 " (want %" PRIu64
                     ") or with the wrong prev_b3",
                     iter, st, id.seq, last + 1);
        new_seq[st] = id.seq;
        memcpy(new_b3[st], ra_slice_b3(out[i]), 32);
        ra_slice_unref(out[i]);
    }

    /* 5. ACK everything, compact: no segment left, nothing pending after a reopen */
    size_t np = ra_meter_pending_count(m);
    ra_slice_t **all = malloc(sizeof *all * (np ? np : 1));
    size_t got = 0;
    CHECK_RC(ra_meter_pending_list(m, 0, all, np, &got), 0);
    for (size_t i = 0; i < got; i++) {
        CHECK_RC(ra_meter_ack(m, all[i]), 0);
        ra_slice_unref(all[i]);
    }
    free(all);
    CHECK_RC(ra_meter_compact(m), 0);
    CHECK_EQ_U64(ra_meter_pending_count(m), 0);
    ra_meter_close(m);
    count_files(&nseg, &ntmp, &nbroken);
    CHECK_EQ_U64(nseg, 0);
    CHECK_EQ_U64(ntmp, 0);
    m = open_wal();
    if (!m) {
        RA_FAILF("iteration %" PRIu64 ": the WAL does not open after compaction", iter);
        return false;
    }
    CHECK_EQ_U64(ra_meter_pending_count(m), 0);
    ra_meter_close(m);

    /* The next iteration starts from these heads. */
    for (int st = 0; st < NS; st++) {
        stream_t *s = &g_s[st];
        memset(s->e, 0, sizeof(entry_t) * MAX_SEQ_PER_ITER);
        s->head_seq = new_seq[st];
        memcpy(s->head_b3, new_b3[st], 32);
        s->max_known = s->max_reported = s->head_seq;
    }
    g_max_window_s = (win + 1) * WINDOW_S;
    return ra_t_failed_checks == 0;
}

/* ---- one iteration ------------------------------------------------------------------- */

static bool iteration(uint64_t iter, uint64_t *seed) {
    int fds[2];
    if (pipe(fds) != 0) {
        RA_FAILF("pipe: %s", strerror(errno));
        return false;
    }
    uint64_t child_seed = ra_t_rand(seed);
    uint64_t r = ra_t_rand(seed);
    uint64_t delay_us = (r & 3) == 0 ? (r >> 8) % 3000 : (r >> 8) % 50000;
    int64_t start_window = g_max_window_s / WINDOW_S + 1;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        RA_FAILF("fork: %s", strerror(errno));
        return false;
    }
    if (pid == 0) {
        close(fds[0]);
        g_pipe = fds[1];
        child(child_seed, start_window);
    }
    close(fds[1]);
    char buf[1 << 16];
    size_t have = 0;
    bool opened = false, ok = true, killed = false;
    char child_err[512] = "";
    /* A quarter of the kills count their delay from the fork (some land before the meter
     * opens), a quarter from the child's first sealed slice, the rest from its "opened"
     * line. A slow start under load (ASan, a busy machine) can seal nothing within 50 ms of
     * the open; the kills armed by a seal still land among the seals, so every run reports
     * slices and checks the pending ones. */
    bool from_fork = (r & 3) == 0, from_seal = (r & 3) == 1, armed = from_fork;
    uint64_t reported_before = g_st.reported;
    uint64_t deadline = mono_us() + delay_us;
    for (;;) {
        int timeout = -1;
        if (!armed && opened && (!from_seal || g_st.reported > reported_before)) {
            deadline = mono_us() + delay_us;
            armed = true;
        }
        if (!killed && armed) {
            uint64_t now = mono_us();
            if (now >= deadline) {
                kill(pid, SIGKILL);
                killed = true;
            } else {
                timeout = (int)((deadline - now + 999) / 1000);
            }
        }
        struct pollfd pfd = {fds[0], POLLIN, 0};
        int pr = poll(&pfd, 1, timeout);
        if (pr < 0 && errno == EINTR) continue;
        if (pr == 0) continue;
        ssize_t k = read(fds[0], buf + have, sizeof buf - have - 1);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break; /* EOF: the child is gone */
        have += (size_t)k;
        buf[have] = '\0';
        char *start = buf, *nl;
        while ((nl = memchr(start, '\n', have - (size_t)(start - buf)))) {
            *nl = '\0';
            if (ok) ok = take_line(start, &opened, child_err, sizeof child_err);
            start = nl + 1;
        }
        have -= (size_t)(start - buf);
        memmove(buf, start, have);
        if (have == sizeof buf - 1) have = 0; /* cannot happen: lines are short */
    }
    close(fds[0]);
    if (!killed) kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (child_err[0]) {
        RA_FAILF("iteration %" PRIu64 ": the child failed on its own: %s", iter, child_err);
        return false;
    }
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
        RA_FAILF("iteration %" PRIu64 ": the child ended with status 0x%x, not by SIGKILL", iter,
                 (unsigned)status);
        return false;
    }
    if (have) RA_FAILF("iteration %" PRIu64 ": half a line from the child", iter);
    if (!opened) g_st.kills_before_open++;
    if (!ok) return false;
    g_st.iterations++;
    return check_after_kill(iter);
}

static long g_iterations = 20;
static uint64_t g_seed = 0x6b696c6c39ull; /* "kill9" */

RA_TEST(G_7_kill9_mid_flush) {
    for (int i = 0; i < NT; i++)
        g_tenant[i] = ra_t_tenant(0x7000 + (unsigned)i);
    snprintf(g_dir, sizeof g_dir, "%s/wal", ra_t_tmpdir());
    for (int st = 0; st < NS; st++) {
        g_s[st].e = calloc(MAX_SEQ_PER_ITER, sizeof(entry_t));
        REQUIRE(g_s[st].e);
    }
    g_max_window_s = RA_T_EPOCH_MS / 1000;
    uint64_t seed = g_seed;
    uint64_t t0 = mono_us();
    for (long i = 0; i < g_iterations; i++) {
        if (!iteration((uint64_t)i, &seed)) {
            fprintf(stderr,
                    "G-7: stopped at iteration %ld (seed 0x%" PRIx64 "); the WAL is "
                    "kept in %s\n",
                    i, g_seed, g_dir);
            return;
        }
        if (g_iterations >= 100 && (i + 1) % 100 == 0)
            printf("# %ld/%ld iterations, %.1f s\n", i + 1, g_iterations,
                   (double)(mono_us() - t0) / 1e6);
    }
    double secs = (double)(mono_us() - t0) / 1e6;
    printf("# G-7: %" PRIu64 " kills in %.2f s (%.1f ms each); seed 0x%" PRIx64 "\n",
           g_st.iterations, secs, secs * 1000 / (double)(g_st.iterations ? g_st.iterations : 1),
           g_seed);
    printf("#   slices reported sealed %" PRIu64 ", ACKs started %" PRIu64
           ", pending slices checked %" PRIu64 "\n",
           g_st.reported, g_st.acked, g_st.pending_checked);
    printf("#   kills before the meter opened %" PRIu64
           ", kills that left a .tmp (mid-write) %" PRIu64
           ", kills between a durable rename and its report %" PRIu64 " (%" PRIu64 " slices)\n",
           g_st.kills_before_open, g_st.kills_with_tmp, g_st.kills_with_unreported,
           g_st.unreported_recovered);
    CHECK(g_st.reported > 0);
    for (int st = 0; st < NS; st++)
        free(g_s[st].e);
    ra_fix_rm_rf(g_dir);
    rmdir(ra_t_tmpdir());
}

int main(int argc, char **argv) {
    const char *it = argc > 1 ? argv[1] : getenv("RA_KILL9_ITERATIONS");
    if (it && *it) g_iterations = strtol(it, NULL, 10);
    if (g_iterations < 1) g_iterations = 1;
    const char *sd = getenv("RA_KILL9_SEED");
    if (sd && *sd) g_seed = strtoull(sd, NULL, 0);
    printf("# G-7: %ld iterations, seed 0x%" PRIx64 " (RA_KILL9_ITERATIONS, RA_KILL9_SEED)\n",
           g_iterations, g_seed);
    RA_RUN(G_7_kill9_mid_flush, "G-7 WAL crash-safety: kill -9 mid-flush, recovery, replay once, "
                                "chains, compaction");
    RA_DONE();
}
