/* The meter's facade: configuration, lifecycle, keys, and every public entry point of the
 * sealer's side (rollover, the pending ring, ACKs, compaction, seeded heads). Each one
 * checks its arguments, takes the seal lock -- this file is the only place that takes it
 * -- and calls down into the leaves, none of which calls back up:
 *
 *   meter.c -> seal.c (the rollover's steps) -> heads.c, pending.c, journal.c, seal_sort.c
 *           -> journal.c (the seal-to-WAL journal: the rollover's group commit) -> wal.c,
 *              heads.c, pending.c
 *           -> pending.c (a pure ring), heads.c (stream heads), plane.c (the mapping)
 *
 * The record path is the exception, by design: ra_meter_record* and key handles live in
 * counters.c, lock-free and allocation-free, because a call through here would cost the
 * hot path (P-1). The model is libuv's uv_tcp_bind (uv-common.c validates, uv__tcp_bind
 * acts). */
#include "internal.h"

#include "io.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* The seal lock (I-async-2: one sealer at a time in this process). Reached through a
 * pointer, so that the read-only entry points, which take a const meter, lock it too. */
static void lock(const ra_meter_t *m) {
    pthread_mutex_lock(m->seal_mu);
}
static void unlock(const ra_meter_t *m) {
    pthread_mutex_unlock(m->seal_mu);
}

static const char *const builtin_dims[RA_DIM_BUILTIN_COUNT] = {"bytes", "requests", "cpu_units"};

const char *ra_version(void) {
    return RA_VERSION_STRING;
}

void ra_config_init(ra_config_t *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->window_len_s = RA_WINDOW_DEFAULT_S;
    cfg->shards = 64;
    cfg->capacity_rows = 200000;
    cfg->pending_slices_cap = 8192;
    cfg->amnesia = 1; /* RAM only unless the caller asks for, and configures, a WAL */
    cfg->wal_max_bytes = 512ull << 20;
    cfg->wal_max_entries = 0; /* = 200000 (seed 000): the backlog, beyond pending */
    cfg->wal_max_age_s = 86400;
}

static bool is_pow2(uint32_t v) {
    return v && !(v & (v - 1));
}

/* The sizes: window length, shards, capacity, the pending ring. */
static int validate_sizes(const ra_config_t *cfg, char *err, size_t errlen) {
    if (cfg->window_len_s < RA_WINDOW_MIN_S || cfg->window_len_s > RA_WINDOW_MAX_S) {
        ra__errbuf(err, errlen, "window_len_s %u is outside %u..%u", cfg->window_len_s,
                   RA_WINDOW_MIN_S, RA_WINDOW_MAX_S);
        return RA_EINVAL;
    }
    if (!is_pow2(cfg->shards) || cfg->shards > RA_SHARDS_MAX) {
        ra__errbuf(err, errlen, "shards %u is not a power of two in 1..%u", cfg->shards,
                   RA_SHARDS_MAX);
        return RA_EINVAL;
    }
    if (cfg->capacity_rows < 1 || cfg->capacity_rows > RA_CAPACITY_MAX) {
        ra__errbuf(err, errlen, "capacity_rows %u is outside 1..%u", cfg->capacity_rows,
                   RA_CAPACITY_MAX);
        return RA_EINVAL;
    }
    if (cfg->pending_slices_cap < 1 || cfg->pending_slices_cap > RA_PENDING_MAX) {
        ra__errbuf(err, errlen, "pending_slices_cap %u is outside 1..%u", cfg->pending_slices_cap,
                   RA_PENDING_MAX);
        return RA_EINVAL;
    }
    return 0;
}

/* The built-in dimensions, then the configured ones into dims[0..*n_dims). */
static int validate_dims(const ra_config_t *cfg, const char **dims, uint32_t *n_dims, char *err,
                         size_t errlen) {
    if (cfg->n_dimensions && !cfg->dimensions) {
        ra__errbuf(err, errlen, "n_dimensions is %u but dimensions is NULL", cfg->n_dimensions);
        return RA_EINVAL;
    }
    uint32_t n = 0;
    for (; n < RA_DIM_BUILTIN_COUNT; n++)
        dims[n] = builtin_dims[n];
    for (uint32_t i = 0; i < cfg->n_dimensions; i++) {
        const char *d = cfg->dimensions[i];
        if (!d || !ra__dimension_name_valid(d, strlen(d))) {
            ra__errbuf(err, errlen,
                       "dimension name '%s' is invalid (1..%d of [a-z0-9_], starting with a "
                       "letter)",
                       d ? d : "(null)", RA_DIM_NAME_MAX);
            return RA_EINVAL;
        }
        bool seen = false, builtin = false;
        for (uint32_t k = 0; k < n; k++) {
            seen = seen || strcmp(dims[k], d) == 0;
            builtin = builtin || (k < RA_DIM_BUILTIN_COUNT && strcmp(dims[k], d) == 0);
        }
        if (builtin) continue; /* naming a built-in again is harmless */
        if (seen) {
            ra__errbuf(err, errlen, "dimension '%s' is listed twice", d);
            return RA_EINVAL;
        }
        if (n == RA_DIM_MAX) {
            ra__errbuf(err, errlen, "more than %d dimensions", RA_DIM_MAX);
            return RA_EINVAL;
        }
        dims[n++] = d;
    }
    *n_dims = n;
    return 0;
}

/* The host name, amnesia and the files: WAL and shared plane. */
static int validate_storage(const ra_config_t *cfg, char *err, size_t errlen) {
    if (cfg->host &&
        (strlen(cfg->host) > RA_HOST_MAX || !ra__token_valid(cfg->host, strlen(cfg->host)))) {
        ra__errbuf(err, errlen, "host '%s' must be 0..%d printable characters without spaces",
                   cfg->host, RA_HOST_MAX);
        return RA_EINVAL;
    }
    if (cfg->amnesia && cfg->wal_dir) {
        ra__errbuf(err, errlen,
                   "amnesia = true never writes a file (I-9): drop wal_dir, or "
                   "set amnesia = false");
        return RA_EINVAL;
    }
    if (!cfg->amnesia && !cfg->wal_dir && !cfg->shm_path) {
        ra__errbuf(err, errlen,
                   "amnesia = false needs a write-ahead log: set wal_dir (slices would "
                   "otherwise claim a durability they do not have)");
        return RA_EINVAL;
    }
    if (cfg->wal_dir && !cfg->wal_dir[0]) {
        ra__errbuf(err, errlen, "wal_dir is empty");
        return RA_EINVAL;
    }
    if (cfg->wal_dir && cfg->wal_max_bytes < (2u << 20)) {
        ra__errbuf(err, errlen, "wal_max_bytes (%llu) must hold at least one full frame (2 MiB)",
                   (unsigned long long)cfg->wal_max_bytes);
        return RA_EINVAL;
    }
    if (cfg->shm_path && !cfg->shm_path[0]) {
        ra__errbuf(err, errlen, "shm_path is empty");
        return RA_EINVAL;
    }
    return 0;
}

static int validate(const ra_config_t *cfg, const char **dims, uint32_t *n_dims, char *err,
                    size_t errlen) {
    int rc = validate_sizes(cfg, err, errlen);
    if (rc == 0) rc = validate_dims(cfg, dims, n_dims, err, errlen);
    if (rc == 0) rc = validate_storage(cfg, err, errlen);
    return rc;
}

int ra_config_check(const ra_config_t *cfg, char *err, size_t errlen) {
    if (err && errlen) err[0] = '\0';
    if (!cfg) {
        ra__errbuf(err, errlen, "no configuration");
        return RA_EINVAL;
    }
    const char *dims[RA_DIM_MAX];
    uint32_t n_dims = 0;
    return validate(cfg, dims, &n_dims, err, errlen);
}

static void set_host(ra_meter_t *m, const char *host) {
    if (host) {
        snprintf(m->host, sizeof m->host, "%s", host);
        return;
    }
    char name[256] = {0};
    if (gethostname(name, sizeof name - 1) != 0) name[0] = '\0';
    size_t w = 0;
    for (size_t i = 0; name[i] && w < RA_HOST_MAX; i++)
        if (name[i] >= 0x21 && name[i] <= 0x7E) m->host[w++] = name[i];
    m->host[w] = '\0';
}

int ra__meter_open_io(const ra_config_t *cfg, const ra__io_t *io, ra_meter_t **out, char *err,
                      size_t errlen) {
    if (err && errlen) err[0] = '\0';
    if (!out) return RA_EINVAL;
    *out = NULL;
    if (!cfg) {
        ra__errbuf(err, errlen, "no configuration");
        return RA_EINVAL;
    }
    const char *dims[RA_DIM_MAX];
    uint32_t n_dims = 0;
    int rc = validate(cfg, dims, &n_dims, err, errlen);
    if (rc != 0) return rc;

    ra_meter_t *m = calloc(1, sizeof *m);
    if (!m) return RA_ENOMEM;
    m->clock = cfg->clock;
    m->clock_ud = cfg->clock_ud;
    m->log = cfg->log;
    m->log_ud = cfg->log_ud;
    set_host(m, cfg->host);
    rc = ra__plane_open(m, cfg, dims, n_dims, err, errlen);
    if (rc != 0) {
        free(m);
        return rc;
    }
    m->seal_mu = &m->seal_mu_;
    pthread_mutex_init(m->seal_mu, NULL);
    rc = ra__pending_init(&m->pending, cfg->pending_slices_cap);
    if (rc != 0) {
        ra__plane_close(m);
        pthread_mutex_destroy(m->seal_mu);
        free(m);
        ra__errbuf(err, errlen, "out of memory for a %u-slice pending ring",
                   cfg->pending_slices_cap);
        return rc;
    }
    m->io = io;
    if (cfg->wal_dir) {
        if ((rc = ra__journal_open(m, cfg, err, errlen)) != 0) {
            ra_meter_close(m);
            return rc;
        }
        /* A seal a crash interrupted: the WAL just recovered decides its frozen pairs. */
        ra__seal_recover(m);
    }
    ra__log(m, RA_LOG_INFO,
            "meter open: window_len_s=%u shards=%u capacity_rows=%u pending_slices_cap=%u "
            "dimensions=%u amnesia=%d plane=%s%s",
            m->window_len_s, m->hdr->shards, m->hdr->capacity_rows, cfg->pending_slices_cap,
            m->n_dims, cfg->amnesia ? 1 : 0, cfg->shm_path ? cfg->shm_path : "private",
            m->is_creator && cfg->shm_path ? " (created)" : "");
    *out = m;
    return 0;
}

int ra_meter_open(const ra_config_t *cfg, ra_meter_t **out, char *err, size_t errlen) {
    return ra__meter_open_io(cfg, ra__io_posix(), out, err, errlen);
}

void ra_meter_close(ra_meter_t *m) {
    if (!m) return;
    ra__journal_close(m);
    ra__pending_free(&m->pending);
    ra__seal_scratch_free(&m->seal);
    ra__plane_close(m);
    pthread_mutex_destroy(m->seal_mu);
    free(m);
}

/* G-21: windows are shared by every key and every process (I-3); changing their length
 * would split one window into two overlapping ones. Only a restart can do it. */
int ra_meter_set_window_len(ra_meter_t *m, uint32_t window_len_s) {
    if (!m) return RA_EINVAL;
    if (window_len_s == m->window_len_s) return 0;
    ra__count_reject(m, RA_REJ_CONFIG);
    ra__log(m, RA_LOG_WARN,
            "refused to change window_len_s from %u to %u on a live meter: the window length "
            "changes only with a restart",
            m->window_len_s, window_len_s);
    return RA_EINVAL;
}

uint32_t ra_meter_window_len(const ra_meter_t *m) {
    return m->window_len_s;
}

int ra_meter_subject(const ra_meter_t *m, const void *id, size_t len, ra_subject_t *out) {
    if (!m || !out || (!id && len)) return RA_EINVAL;
    ra__b3_keyed(m->hdr->subject_key, id, len, out->b, sizeof out->b);
    return 0;
}

int ra_meter_dimension(const ra_meter_t *m, const char *name, size_t len) {
    if (!m || !name) return RA_EINVAL;
    return ra__dimension_of(m, name, len);
}

const char *ra_meter_dimension_name(const ra_meter_t *m, int dim) {
    if (!m || dim < 0 || (uint32_t)dim >= m->n_dims) return NULL;
    return m->dim_names[dim];
}

int ra_meter_rollover(ra_meter_t *m, int64_t now_ms, ra_slice_t **out, size_t out_cap,
                      size_t *n_sealed) {
    size_t dummy;
    if (!n_sealed) n_sealed = &dummy;
    *n_sealed = 0;
    if (!m || (now_ms < 0 && now_ms != RA_NOW) || (out_cap && !out)) return RA_EINVAL;
    lock(m);
    int rc = ra__plane_sealer_lock(m);
    if (rc == 0 && !m->wal && !m->hdr->amnesia) {
        ra__log(m, RA_LOG_WARN,
                "rollover refused: this plane keeps slices durable "
                "(amnesia = false) and this process has no wal_dir");
        rc = RA_EINVAL;
    }
    /* The sealer's scratch grows in the one process that seals, as rows need it: the
     * record path (nginx workers) never pays for it. */
    m->seal.rows_max = m->hdr->entries_cap;
    size_t in_ring = 0;
    ra__seal_batch_t b = {0};
    if (rc == 0) ra__journal_refill(m); /* the backlog first: it is older */
    if (rc == 0) rc = ra__seal_begin(m, now_ms == RA_NOW ? ra__meter_now_ms(m) : now_ms, &b);
    if (rc == 0 && b.taken) rc = ra__journal_commit(m, b.slices, b.n, b.now_ms); /* step 6 */
    if (b.open) rc = ra__seal_end(m, &b, rc, n_sealed, &in_ring);
    /* The slices sealed now that went into the ring are its newest entries; taken under
     * the lock, so no concurrent ACK can shift them (the others wait in the WAL). */
    if (out && in_ring) ra__pending_newest(&m->pending, in_ring, out, out_cap);
    for (size_t i = in_ring; out && i < *n_sealed && i < out_cap; i++)
        out[i] = NULL; /* waits in the WAL (the backlog) */
    unlock(m);
    return rc;
}

void ra_meter_count_invalid(ra_meter_t *m) {
    if (!m) return;
    ra__count_reject(m, RA_REJ_INVALID);
    ra__note_refusal(m, RA_REJ_INVALID, NULL, NULL, -1);
}

void ra_meter_set_degraded(ra_meter_t *m, int degraded) {
    if (degraded)
        atomic_fetch_or_explicit(&m->hdr->degraded, RA_DEGRADED_HOST, memory_order_relaxed);
    else
        atomic_fetch_and_explicit(&m->hdr->degraded, ~RA_DEGRADED_HOST, memory_order_relaxed);
}

int ra_meter_degraded(const ra_meter_t *m) {
    return atomic_load_explicit(&m->hdr->degraded, memory_order_relaxed) ? 1 : 0;
}

/* ---- the pending ring, ACKs, compaction, heads --------------------------------------- */

int ra_meter_pending_list(const ra_meter_t *m, size_t from, ra_slice_t **out, size_t cap,
                          size_t *n_out) {
    if (!m || (cap && !out) || !n_out) return RA_EINVAL;
    lock(m);
    *n_out = ra__pending_list(&m->pending, from, out, cap);
    unlock(m);
    return 0;
}

/* Without the seal lock: a rollover or compaction holds it across fsyncs, and the loop
 * thread asks for the backlog (readiness, metrics) and must never wait for a disk. */
size_t ra_meter_pending_count(const ra_meter_t *m) {
    return ra__pending_count(&m->pending);
}

int ra_meter_pending_since(const ra_meter_t *m, uint64_t after, ra_slice_t **out, size_t cap,
                           size_t *n_out, uint64_t *last_out) {
    if (!m || (cap && !out) || !n_out || !last_out) return RA_EINVAL;
    lock(m);
    *n_out = ra__pending_since(&m->pending, after, out, cap, last_out);
    unlock(m);
    return 0;
}

int ra_meter_backlog(const ra_meter_t *m, ra_backlog_t *out) {
    if (!m || !out) return RA_EINVAL;
    const ra__backlog_t *b = &m->backlog;
    out->spilled = __atomic_load_n(&b->spilled, __ATOMIC_RELAXED);
    out->spilled_total = __atomic_load_n(&b->spilled_total, __ATOMIC_RELAXED);
    out->refilled_total = __atomic_load_n(&b->refilled_total, __ATOMIC_RELAXED);
    out->refill_errors = __atomic_load_n(&b->refill_errors, __ATOMIC_RELAXED);
    return 0;
}

int ra_meter_pending_get(const ra_meter_t *m, size_t idx, ra_slice_t **out) {
    if (!m || !out) return RA_EINVAL;
    lock(m);
    *out = ra__pending_get(&m->pending, idx);
    unlock(m);
    return *out ? 0 : RA_ENOTFOUND;
}

int ra_meter_ack(ra_meter_t *m, const ra_slice_t *s) {
    if (!m || !s) return RA_EINVAL;
    lock(m);
    uint64_t wal_seq = 0;
    int rc = ra__pending_remove(&m->pending, s, &wal_seq);
    if (rc == 0 && wal_seq) ra__journal_acked(m, wal_seq);
    /* The backlog comes back in batches: once an eighth of the ring is free, not per ACK
     * (each refill opens segment files). */
    if (rc == 0 && m->backlog.spill_seq &&
        ra__pending_room(&m->pending) >= (m->pending.cap + 7) / 8)
        ra__journal_refill(m);
    unlock(m);
    return rc;
}

int ra_meter_compact(ra_meter_t *m) {
    if (!m) return RA_EINVAL;
    lock(m);
    int rc = ra__journal_compact(m);
    unlock(m);
    return rc;
}

int ra_meter_seed_head(ra_meter_t *m, const ra_tenant_t *tenant, uint32_t dim, uint64_t seq,
                       const uint8_t b3[32], int64_t window_start_s) {
    if (!m || !tenant || !b3 || seq == 0 || seq >= (1ull << 62) || dim >= m->n_dims)
        return RA_EINVAL;
    lock(m);
    int rc = ra__plane_sealer_lock(m); /* heads belong to the one sealer */
    if (rc == 0) rc = ra__heads_seed(m, tenant->b, dim, seq, b3, window_start_s);
    unlock(m);
    return rc;
}
