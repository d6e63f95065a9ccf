/* The metrics registry (C-7, I-13): one static table, registered once at compile time; the
 * values live in the counter plane, so in a process-shared plane every process's rejects
 * and overflows show in the sealer's exposition. Rendered in Prometheus text format. */
#include "internal.h"
#include "wal.h"

#include <stdarg.h>
#include <stdio.h>

typedef struct ra__metric_desc {
    const char *name, *type, *help;
} ra__metric_desc_t;

enum {
    M_LATENCY,
    M_REJECTED,
    M_PENDING,
    M_OVERFLOW,
    M_DEGRADED,
    M_AMNESIA,
    M_LATE,
    M_SLICES,
    M_ROWS,
    M_WINDOWS,
    M_ENTRIES,
    M_ENTRIES_MAX,
    M_RECLAIMED,
    M_STALE,
    M_HEADS,
    M_SEALED_THROUGH,
    M_COUNT
};

static const ra__metric_desc_t registry[M_COUNT] = {
    [M_LATENCY] = {"accounting_record_latency_seconds", "histogram",
                   "Latency of record() calls, sampled (one call in 1024 per thread)."},
    [M_REJECTED] = {"accounting_rejected_total", "counter",
                    "Records or windows refused, by reason."},
    [M_PENDING] = {"accounting_pending_slices", "gauge",
                   "Sealed slices not yet ACKed downstream (this process's pending ring)."},
    [M_OVERFLOW] = {"accounting_overflow_total", "counter",
                    "Saturating adds that hit UINT64_MAX, by dimension."},
    [M_DEGRADED] = {"accounting_degraded", "gauge", "1 while the meter is degraded."},
    [M_AMNESIA] = {"accounting_amnesia", "gauge", "1 when slices are kept in RAM only."},
    [M_LATE] = {"accounting_late_rows_total", "counter",
                "Rows sealed into a later window than the one they were recorded in."},
    [M_SLICES] = {"accounting_sealed_slices_total", "counter", "Slices sealed."},
    [M_ROWS] = {"accounting_sealed_rows_total", "counter", "Rows sealed into slices."},
    [M_WINDOWS] = {"accounting_sealed_windows_total", "counter", "Window boundaries sealed."},
    [M_ENTRIES] = {"accounting_plane_entries", "gauge", "Counter-plane entries in use."},
    [M_ENTRIES_MAX] = {"accounting_plane_entries_max", "gauge",
                       "Counter-plane entries allowed (2 x capacity_rows)."},
    [M_RECLAIMED] = {"accounting_plane_reclaimed_total", "counter",
                     "Idle or abandoned counter-plane entries given back."},
    [M_STALE] = {"accounting_plane_stale_claims", "gauge",
                 "Entries claimed by a writer that never published them (killed mid-claim); "
                 "lost to the plane until it is recreated."},
    [M_HEADS] = {"accounting_stream_heads", "gauge", "Streams with a hash-chain head."},
    [M_SEALED_THROUGH] = {"accounting_sealed_through_window", "gauge",
                          "Index of the last sealed window (monotone boundary counter)."},
};

typedef struct sink {
    char *buf;
    size_t cap, len;
} sink_t;

static void put(sink_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Formats straight into the caller's buffer and always counts the whole length, so a
 * buffer that is too small is reported (RA_EBUFSIZE with the size needed), never a line
 * cut short (a 256-byte staging buffer used to truncate long HELP texts silently). */
static void put(sink_t *s, const char *fmt, ...) {
    size_t room = s->len < s->cap ? s->cap - s->len : 0;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(room ? s->buf + s->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0) s->len += (size_t)n;
}

static void head(sink_t *s, int id) {
    put(s, "# HELP %s %s\n# TYPE %s %s\n", registry[id].name, registry[id].help, registry[id].name,
        registry[id].type);
}

static uint64_t ld(const _Atomic uint64_t *v) {
    return atomic_load_explicit(v, memory_order_relaxed);
}

/* The record path's families: the latency histogram and the refusals. */
static void put_records(sink_t *s, const ra__plane_metrics_t *mt) {
    head(s, M_LATENCY);
    const uint64_t *bounds = ra__latency_bounds_ns();
    uint64_t cum = 0;
    for (int b = 0; b < RA_LAT_BUCKETS - 1; b++) {
        cum += ld(&mt->lat_bucket[b]);
        put(s, "%s_bucket{le=\"%g\"} %llu\n", registry[M_LATENCY].name, (double)bounds[b] / 1e9,
            (unsigned long long)cum);
    }
    cum += ld(&mt->lat_bucket[RA_LAT_BUCKETS - 1]);
    put(s, "%s_bucket{le=\"+Inf\"} %llu\n", registry[M_LATENCY].name, (unsigned long long)cum);
    put(s, "%s_sum %.9f\n", registry[M_LATENCY].name, (double)ld(&mt->lat_sum_ns) / 1e9);
    put(s, "%s_count %llu\n", registry[M_LATENCY].name, (unsigned long long)cum);

    head(s, M_REJECTED);
    for (int r = 0; r < RA_REJ_COUNT; r++)
        put(s, "%s{reason=\"%s\"} %llu\n", registry[M_REJECTED].name, ra__reject_reason(r),
            (unsigned long long)ld(&mt->rejected[r]));
}

/* The pending ring, overflows, degraded and amnesia. */
static void put_state(sink_t *s, const ra_meter_t *m, const ra__plane_metrics_t *mt) {
    const ra__plane_hdr_t *h = m->hdr;
    head(s, M_PENDING);
    put(s, "%s %zu\n", registry[M_PENDING].name, ra__pending_count(&m->pending));

    head(s, M_OVERFLOW);
    for (uint32_t d = 0; d < m->n_dims; d++)
        put(s, "%s{dimension=\"%s\"} %llu\n", registry[M_OVERFLOW].name, m->dim_names[d],
            (unsigned long long)ld(&mt->overflow[d]));

    head(s, M_DEGRADED);
    put(s, "%s %u\n", registry[M_DEGRADED].name,
        atomic_load_explicit(&m->hdr->degraded, memory_order_relaxed) ? 1u : 0u);
    head(s, M_AMNESIA);
    put(s, "%s %u\n", registry[M_AMNESIA].name, h->amnesia ? 1u : 0u);
}

/* Sealing and the plane's entries, heads and boundary counter. */
static void put_plane(sink_t *s, const ra_meter_t *m, const ra__plane_metrics_t *mt) {
    const ra__plane_hdr_t *h = m->hdr;
    static const int plain[] = {M_LATE, M_SLICES, M_ROWS, M_WINDOWS};
    const _Atomic uint64_t *vals[] = {&mt->late_rows, &mt->sealed_slices, &mt->sealed_rows,
                                      &mt->sealed_windows};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
        head(s, plain[i]);
        put(s, "%s %llu\n", registry[plain[i]].name, (unsigned long long)ld(vals[i]));
    }
    head(s, M_ENTRIES);
    put(s, "%s %lld\n", registry[M_ENTRIES].name,
        (long long)atomic_load_explicit(&h->live_entries, memory_order_relaxed));
    head(s, M_ENTRIES_MAX);
    put(s, "%s %u\n", registry[M_ENTRIES_MAX].name, h->entries_cap);
    head(s, M_RECLAIMED);
    put(s, "%s %llu\n", registry[M_RECLAIMED].name, (unsigned long long)ld(&mt->reclaimed));
    head(s, M_STALE);
    put(s, "%s %llu\n", registry[M_STALE].name, (unsigned long long)ld(&mt->stale_claims));
    head(s, M_HEADS);
    put(s, "%s %u\n", registry[M_HEADS].name,
        atomic_load_explicit(&h->heads_used, memory_order_relaxed));
    head(s, M_SEALED_THROUGH);
    put(s, "%s %lld\n", registry[M_SEALED_THROUGH].name,
        (long long)atomic_load_explicit(&h->sealed_through, memory_order_relaxed));
    put(s,
        "# HELP accounting_sealed_through_rewinds_total Times the sealed-through mark was "
        "ahead of the clock and set back (a clock stepped forward, or a damaged header).\n"
        "# TYPE accounting_sealed_through_rewinds_total counter\n"
        "accounting_sealed_through_rewinds_total %llu\n",
        (unsigned long long)m->sealed_rewinds);
}

/* The sealer's WAL and backlog (the sealer's own counters). */
static void put_wal(sink_t *s, const ra_meter_t *m) {
    const ra__wal_t *w = m->wal;
    const struct {
        const char *name, *type, *help;
        uint64_t v;
    } wm[] = {
        {"accounting_wal_size_bytes", "gauge", "Bytes of WAL segments on disk.", w->bytes},
        {"accounting_wal_entries", "gauge",
         "Slices retained in WAL segments (un-ACKed, or ACKed in a segment not yet "
         "compacted): what a restart replays, bounded by wal max_entries.",
         w->entries},
        {"accounting_wal_max_size_bytes", "gauge",
         "The WAL's byte cap (wal max_bytes): at it the meter degrades.", w->max_bytes},
        {"accounting_wal_max_entries", "gauge",
         "The WAL's slice cap (wal max_entries): at it the meter degrades.", w->max_entries},
        {"accounting_wal_unacked", "gauge", "Slices in the WAL not ACKed yet.", w->unacked},
        {"accounting_wal_segments", "gauge", "WAL segment files.", w->nsegs},
        {"accounting_wal_corrupt_total", "counter",
         "Corrupt WAL frames skipped by recovery (and other unreadable WAL data).",
         w->stats.corrupt_frames},
        {"accounting_wal_torn_bytes_total", "counter",
         "Bytes of torn tails cut from the newest segment at recovery.", w->stats.torn_bytes},
        {"accounting_wal_replayed_slices_total", "counter",
         "Slices replayed from the WAL into pending at open.", w->stats.replayed},
        {"accounting_wal_fsyncs_total", "counter", "fsync calls (files and directory).",
         w->stats.fsyncs},
        {"accounting_wal_segments_written_total", "counter", "Segments committed.",
         w->stats.segments_written},
        {"accounting_wal_segments_removed_total", "counter", "Segments removed by compaction.",
         w->stats.segments_removed},
        {"accounting_wal_segments_rewritten_total", "counter",
         "Mostly-ACKed segments rewritten by compaction to keep only un-ACKed slices.",
         w->stats.segments_rewritten},
        {"accounting_wal_write_errors_total", "counter",
         "Failed WAL writes, fsyncs or renames (none reported a slice sealed).",
         w->stats.write_errors},
        {"accounting_wal_failed", "gauge",
         "1 when a segment is in doubt: sealing stopped until a restart.", w->failed},
        {"accounting_wal_chain_breaks_total", "counter",
         "Streams whose chain, replayed from the WAL, misses seqs (a segment gone or "
         "damaged): the downstream answers gap until the loss is accepted.",
         w->stats.chain_breaks},
        {"accounting_backlog_slices", "gauge",
         "Sealed slices waiting in the WAL for room in the pending ring (the backlog).",
         __atomic_load_n(&m->backlog.spilled, __ATOMIC_RELAXED)},
        {"accounting_backlog_refilled_total", "counter",
         "Backlog slices read back from the WAL into the pending ring.",
         __atomic_load_n(&m->backlog.refilled_total, __ATOMIC_RELAXED)},
    };
    for (size_t i = 0; i < sizeof wm / sizeof wm[0]; i++)
        put(s, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", wm[i].name, wm[i].help, wm[i].name,
            wm[i].type, wm[i].name, (unsigned long long)wm[i].v);
    /* In seconds, Prometheus' base unit (promtool lints any other): 6 decimals keep
     * the microsecond resolution it is measured in. */
    put(s,
        "# HELP accounting_wal_fsync_max_seconds The slowest WAL fsync seen.\n"
        "# TYPE accounting_wal_fsync_max_seconds gauge\n"
        "accounting_wal_fsync_max_seconds %llu.%06llu\n",
        (unsigned long long)(w->stats.fsync_max_us / 1000000),
        (unsigned long long)(w->stats.fsync_max_us % 1000000));
    put(s,
        "# HELP accounting_wal_io_timeouts_total WAL operations over their budget "
        "(fsync: 5 s).\n"
        "# TYPE accounting_wal_io_timeouts_total counter\n"
        "accounting_wal_io_timeouts_total{op=\"fsync\"} %llu\n",
        (unsigned long long)w->stats.slow_fsyncs);
}

int ra_meter_metrics(const ra_meter_t *m, char *buf, size_t cap, size_t *len_out) {
    if (!m) return RA_EINVAL;
    sink_t s = {buf, buf ? cap : 0, 0};
    const ra__plane_metrics_t *mt = &m->hdr->metrics;
    put_records(&s, mt);
    put_state(&s, m, mt);
    put_plane(&s, m, mt);
    if (m->wal) put_wal(&s, m);
    if (len_out) *len_out = s.len;
    if (s.len + 1 > s.cap) return RA_EBUFSIZE;
    buf[s.len] = '\0';
    return 0;
}
