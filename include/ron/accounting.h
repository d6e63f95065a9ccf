/*
 * ron-accounting — public C API of libronacct.
 *
 * This is the only public header. It is FFI-clean: between the RA_CDEF markers it holds
 * nothing LuaJIT's ffi.cdef cannot parse once the C preprocessor has run over it, and
 * lua/ron/accounting/cdef.lua is generated from exactly that region (`make cdef`; a test
 * fails when the two disagree).
 *
 * Conventions (libuv style):
 *   - every fallible call returns 0 or a negative RA_E* code; ra_strerror(code) explains it
 *     and ra_err_name(code) gives the taxonomy name ("CapacityExceeded", ...);
 *   - handles are opaque; buffers are owned by the caller unless a comment says otherwise;
 *   - nothing here allocates on the record path.
 */
#ifndef RON_ACCOUNTING_H
#define RON_ACCOUNTING_H

#ifndef RA_CDEF
#include <stddef.h>
#include <stdint.h>
#endif

#define RA_VERSION_MAJOR 0
#define RA_VERSION_MINOR 1
#define RA_VERSION_PATCH 0
#define RA_VERSION_STRING "0.1.0"

#if defined(_WIN32)
#define RA_EXTERN __declspec(dllexport)
#elif defined(__GNUC__) && !defined(RA_CDEF)
#define RA_EXTERN __attribute__((visibility("default")))
#else
#define RA_EXTERN
#endif

/*
 * The error taxonomy (seed 000 P-8, seed 001 §8, PRODUCT.md §5), one X-macro map:
 * XX(suffix, value, name, message). Values are stable ABI; never renumber.
 */
#define RA_ERRNO_MAP(XX)                                                                           \
    XX(CAPACITY, -1, "CapacityExceeded", "capacity exceeded")                                      \
    XX(BUSY, -2, "Busy", "resource busy, try again")                                               \
    XX(DEGRADED, -3, "DegradedExporter", "exporter degraded")                                      \
    XX(OVERSIZE, -4, "OversizeFrame", "frame larger than the limit")                               \
    XX(SCHEMA, -5, "SchemaViolation", "input violates the schema")                                 \
    XX(PERSISTFULL, -6, "PersistenceFull", "persistence full")                                     \
    XX(DUPLICATE, -7, "DuplicateExport", "duplicate export")                                       \
    XX(ORDEROVERFLOW, -8, "OrderOverflow", "ordered buffer overflow")                              \
    XX(WALCORRUPT, -9, "WalCorrupt", "write-ahead log corrupt")                                    \
    XX(TIMEOUT, -10, "Timeout", "operation timed out")                                             \
    XX(CANCELED, -11, "Canceled", "operation canceled")                                            \
    XX(INVAL, -12, "InvalidArgument", "invalid argument")                                          \
    XX(NOMEM, -13, "NoMemory", "out of memory")                                                    \
    XX(IO, -14, "IoError", "input/output error")                                                   \
    XX(NOTFOUND, -15, "NotFound", "no such item")                                                  \
    XX(INCOMPAT, -16, "Incompatible", "incompatible file or configuration")                        \
    XX(BUFSIZE, -17, "BufferTooSmall", "caller's buffer too small")

/* RA_CDEF_BEGIN */

typedef enum ra_errno_e {
    RA_OK = 0,
/* (clang-format cannot see the commas the macro expands to) */
/* clang-format off */
#define RA__ERR_ENUM(suffix, value, name, msg) RA_E##suffix = value,
    RA_ERRNO_MAP(RA__ERR_ENUM)
#undef RA__ERR_ENUM
    RA_ERRNO_MIN = -17
    /* clang-format on */
} ra_errno_t;

/* Built-in dimensions (P-7): fixed ids, always registered. Operator dimensions from
 * ra_config_t.dimensions get the ids after these, in the order given. */
enum {
    RA_DIM_BYTES = 0,
    RA_DIM_REQUESTS = 1,
    RA_DIM_CPU_UNITS = 2,
    RA_DIM_BUILTIN_COUNT = 3,
    RA_DIM_MAX = 32,      /* dimensions per meter, built-ins included */
    RA_DIM_NAME_MAX = 32, /* bytes in a dimension name: [a-z0-9_], starts with a letter */
    RA_HOST_MAX = 64,     /* bytes of the host name carried in slice meta */
    RA_B3_LEN = 32,
    RA_UUID_STR_LEN = 36,
    RA_WINDOW_MIN_S = 60,
    RA_WINDOW_MAX_S = 3600,
    RA_WINDOW_DEFAULT_S = 300
};

/* now_ms for ra_meter_rollover: read the meter's clock. Any other negative time is an
 * error, so a caller's bug never silently switches clocks. */
enum { RA_NOW = -1 };

/* Log levels for ra_config_t.log. */
enum { RA_LOG_ERROR = 0, RA_LOG_WARN = 1, RA_LOG_INFO = 2, RA_LOG_DEBUG = 3 };

/* 16-byte tenant id (a UUID, RFC 4122 byte order). */
typedef struct ra_tenant_s {
    uint8_t b[16];
} ra_tenant_t;

/* 128-bit opaque subject id. Strings become subjects only through ra_meter_subject()
 * (keyed BLAKE3), so raw user identifiers never reach a slice. */
typedef struct ra_subject_s {
    uint8_t b[16];
} ra_subject_t;

typedef struct ra_slice_id_s {
    int64_t window_start_s; /* UTC seconds, a multiple of window_len_s */
    uint32_t window_len_s;
    uint64_t seq; /* 1, 2, ... per (tenant, dimension) stream, node-wide */
} ra_slice_id_t;

typedef void (*ra_log_fn)(void *ud, int level, const char *msg);
typedef int64_t (*ra_clock_fn)(void *ud); /* UTC milliseconds */

typedef struct ra_config_s {
    uint32_t window_len_s;         /* 60..3600, default 300 (I-3) */
    uint32_t shards;               /* power of two, default 64 */
    uint32_t capacity_rows;        /* live (key, window) rows across shards, default 200000 */
    uint32_t pending_slices_cap;   /* sealed, un-ACKed slices held, default 8192 */
    const char *const *dimensions; /* operator dimension names, may be NULL */
    uint32_t n_dimensions;
    int amnesia;                /* 1 (default): RAM only, no file is ever created (I-9);
                                   slice meta and metrics say so. 0: sealed slices are
                                   durable in the WAL (wal_dir) until ACKed (I-10); a
                                   process that only records into a shared plane sets
                                   0 without wal_dir */
    const char *shm_path;       /* NULL: private plane; else a process-shared plane file */
    const char *host;           /* slice meta host; NULL: gethostname() */
    const uint8_t *subject_key; /* 32-byte key for subject hashing; NULL: built-in key */
    ra_clock_fn clock;          /* NULL: the system UTC clock */
    void *clock_ud;
    ra_log_fn log; /* NULL: WARN and above to stderr */
    void *log_ud;
    const char *wal_dir;      /* the sealer's write-ahead log (created 0700, locked) */
    uint64_t wal_max_bytes;   /* default 512 MiB */
    uint32_t wal_max_entries; /* slices retained; 0 (default): 200000 (beyond the ring */
                              /* they wait on disk: the backlog) */
    uint32_t wal_max_age_s;   /* oldest un-ACKed segment; default 86400; 0: no limit */
} ra_config_t;

typedef struct ra_meter_s ra_meter_t; /* opaque; one per process attachment */
typedef struct ra_slice_s ra_slice_t; /* opaque, immutable, reference counted */

/* ---- library ---------------------------------------------------------------------- */
RA_EXTERN const char *ra_version(void);
RA_EXTERN const char *ra_strerror(int code); /* never NULL */
RA_EXTERN const char *ra_err_name(int code); /* never NULL: "Unknown" for foreign codes */

/* ---- meter lifecycle -------------------------------------------------------------- */
/* Fills *cfg with the documented defaults. */
RA_EXTERN void ra_config_init(ra_config_t *cfg);

/* Opens a meter. On failure returns a code, leaves *out NULL and, when errbuf is not NULL,
 * writes a one-line explanation (NUL-terminated, truncated to errbuf_len). */
/* Checks cfg exactly as ra_meter_open does (the same function), without opening anything:
 * 0, or RA_EINVAL with the reason in errbuf. A daemon's `--check` runs it, so a
 * configuration that passes the check does not fail at start (issue 14 item 11). */
RA_EXTERN int ra_config_check(const ra_config_t *cfg, char *errbuf, size_t errlen);
RA_EXTERN int ra_meter_open(const ra_config_t *cfg, ra_meter_t **out, char *errbuf,
                            size_t errbuf_len);
/* Releases the meter (and the sealer lock, if held). Unacked slices are dropped from this
 * process; slices the caller still references stay valid until their last unref. */
RA_EXTERN void ra_meter_close(ra_meter_t *m);

/* Rejected and logged at WARN: the window length of a live meter never changes (G-21).
 * Returns 0 only when window_len_s equals the current one. */
RA_EXTERN int ra_meter_set_window_len(ra_meter_t *m, uint32_t window_len_s);
RA_EXTERN uint32_t ra_meter_window_len(const ra_meter_t *m);

/* ---- keys ------------------------------------------------------------------------- */
/* "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", either case. */
RA_EXTERN int ra_tenant_parse(const char *s, size_t len, ra_tenant_t *out);
/* Writes 36 lowercase characters and a NUL into out (37 bytes). */
RA_EXTERN void ra_tenant_format(const ra_tenant_t *t, char *out);
/* Keyed BLAKE3 of an opaque identifier, truncated to 128 bits. */
RA_EXTERN int ra_meter_subject(const ra_meter_t *m, const void *id, size_t len, ra_subject_t *out);
/* Dimension id (>= 0) for a registered name, or RA_ENOTFOUND. */
RA_EXTERN int ra_meter_dimension(const ra_meter_t *m, const char *name, size_t len);
/* Name of a dimension id, or NULL. The string lives as long as the meter. */
RA_EXTERN const char *ra_meter_dimension_name(const ra_meter_t *m, int dim);

/* ---- hot path --------------------------------------------------------------------- */
/* Adds inc to (tenant, subject, dim) in the window that contains the meter's clock time.
 * Lock-free, allocation-free, never blocks; safe from any thread and, with shm_path, from
 * any process. Saturates at UINT64_MAX (I-16). Errors: RA_EINVAL (unknown dim),
 * RA_ECAPACITY (no room for a new key; counted), RA_EDEGRADED (meter degraded). */
RA_EXTERN int ra_meter_record(ra_meter_t *m, const ra_tenant_t *t, const ra_subject_t *s, int dim,
                              uint64_t inc);
/* The same with an explicit UTC time in milliseconds (injected clocks, replays). */
RA_EXTERN int ra_meter_record_at(ra_meter_t *m, int64_t now_ms, const ra_tenant_t *t,
                                 const ra_subject_t *s, int dim, uint64_t inc);

/* A key resolved once: (tenant, subject, dimension) and a cache of the plane entry that
 * took its last record. A caller that records the same keys again and again (a gateway's
 * tenants, a loop, an exporter's own usage) fills one with ra_key_init and records through
 * it: while the cached entry is still the key's (same meter and stripe, same entry
 * generation, the record's window), a record is one 16-byte CAS with no key hash, probe
 * or key compare. Otherwise it records exactly like ra_meter_record and caches the entry
 * that took the record. Same results, errors and invariants as ra_meter_record.
 * Caller-owned, any number per meter; the fields after `dim` are private. Records through
 * one handle must not run concurrently (the cache is written without synchronisation): a
 * handle per thread, or the caller's lock. Change the key only through ra_key_init. */
typedef struct ra_key_s {
    ra_tenant_t tenant;
    ra_subject_t subject;
    int32_t dim;
    uint32_t slot_;           /* private: entry index, valid with ident_ */
    const ra_meter_t *meter_; /* private: the meter (and stripe) the cache belongs to */
    uint64_t mix_;
    uint64_t ident_; /* private: the entry's identity (0: nothing cached) */
} ra_key_t;
/* Fills *k (nothing cached yet). RA_EINVAL: a NULL argument or a dimension id this meter
 * does not have (counted like a bad record; *k is left as it was). */
RA_EXTERN int ra_key_init(ra_key_t *k, ra_meter_t *m, const ra_tenant_t *t, const ra_subject_t *s,
                          int dim);
RA_EXTERN int ra_meter_record_key(ra_meter_t *m, ra_key_t *k, uint64_t inc);
RA_EXTERN int ra_meter_record_key_at(ra_meter_t *m, int64_t now_ms, ra_key_t *k, uint64_t inc);

/* Records through this handle go to the key's entry of stripe `stripe` (0, the default,
 * is the one every handle shares). Handles of different processes on one shm plane (nginx
 * workers) that record the same hot keys contend for the same cache lines; with a stripe
 * each, every one adds to its own entry, and sealing adds the entries of a key up (one
 * row per subject, exactly the same totals). The cost: a key recorded through k stripes
 * takes up to k entries of the plane's capacity. Per handle, not stored in the plane; set
 * it before recording. RA_EINVAL when stripe >= RA_STRIPES_MAX. */
#define RA_STRIPES_MAX 1024
RA_EXTERN int ra_meter_set_stripe(ra_meter_t *m, uint32_t stripe);

/* ---- sealing ---------------------------------------------------------------------- */
/* Seals every window that ended at or before now_ms (RA_NOW: the meter's clock) and has not
 * been sealed yet (monotone boundary counter, I-15). Each (tenant, dimension) with activity
 * in a window becomes one slice (several for a stream over the 1 MiB frame), appended to
 * the pending ring. *n_sealed gets the number of new slices; when out is not NULL, out[i]
 * gets a new reference to the i-th of them (in seal order) for i < min(*n_sealed, out_cap),
 * or NULL for one the ring had no room for: with a WAL it waits there (the backlog) and
 * comes back through ra_meter_pending_since as ACKs make room. The caller unrefs them. With
 * shm_path the first caller becomes the plane's one sealer; another process gets RA_EBUSY.
 * RA_ECAPACITY: the pending ring (or the stream-head table) filled up; the streams sealed before
 * that are reported in *n_sealed and out, the others stay in the plane, counted, and the next
 * rollover seals them: nothing is lost. */
RA_EXTERN int ra_meter_rollover(ra_meter_t *m, int64_t now_ms, ra_slice_t **out, size_t out_cap,
                                size_t *n_sealed);

/* With a WAL: removes every segment whose slices are all ACKed (after checkpointing the
 * stream heads), so the WAL shrinks and a full WAL recovers. Blocking I/O (fsync): call it
 * where blocking is allowed, never on an event loop. Without a WAL: 0, nothing to do. */
RA_EXTERN int ra_meter_compact(ra_meter_t *m);

/* Continues a stream's chain from the downstream's head (PRODUCT.md §5, `head(stream)`):
 * for a node that lost its own heads (amnesia, a new plane), so its next slice of
 * (tenant, dim) is seq + 1 with prev_b3 = b3 instead of a second seq 1 (a fork the ledger
 * would refuse). Only the sealer may seed (the plane's sealer lock, RA_EBUSY otherwise),
 * before the meter sealed anything of that stream: 0 when the stream had no head here or
 * already has exactly this one; RA_EINCOMPAT when it has another (its own chain);
 * RA_ECAPACITY when the head table is full; RA_EINVAL for seq 0, seq >= 2^62, or an
 * unknown dim. window_start_s is the head slice's window (0 if unknown), kept like a
 * sealed head's. */
RA_EXTERN int ra_meter_seed_head(ra_meter_t *m, const ra_tenant_t *tenant, uint32_t dim,
                                 uint64_t seq, const uint8_t b3[32], int64_t window_start_s);

/* Number of sealed, un-ACKed slices. */
RA_EXTERN size_t ra_meter_pending_count(const ra_meter_t *m);
/* New reference to the idx-th pending slice (0 = oldest; per stream in seq order). */
RA_EXTERN int ra_meter_pending_get(const ra_meter_t *m, size_t idx, ra_slice_t **out);
/* New references to up to cap pending slices from the from-th on, in one pass; *n_out gets
 * how many were written. */
RA_EXTERN int ra_meter_pending_list(const ra_meter_t *m, size_t from, ra_slice_t **out, size_t cap,
                                    size_t *n_out);
/* The pending slices that entered the ring after push number `after` (0: all), oldest
 * first, at most cap, as new references; *last_out gets the newest one's push number
 * (`after` when none). Passing it back as `after` yields only what came since: slices
 * sealed since, and, with a WAL, slices read back from the backlog as ACKs made room.
 * O(what is new). */
RA_EXTERN int ra_meter_pending_since(const ra_meter_t *m, uint64_t after, ra_slice_t **out,
                                     size_t cap, size_t *n_out, uint64_t *last_out);
/* The downstream has stored this slice: drop it from the pending ring (memory only; the
 * WAL segment goes at the next ra_meter_compact). RA_ENOTFOUND if no pending slice has
 * that identity (slice id and digest). With a backlog, an ACK that frees an eighth of the
 * ring reads the next waiting slices back from the WAL (a read, under the seal lock). */
RA_EXTERN int ra_meter_ack(ra_meter_t *m, const ra_slice_t *s);

/* The WAL as the backlog: sealed slices the pending ring has no room for wait in the WAL
 * and come back, in order, as ACKs make room, so an outage is bounded by the WAL's caps
 * (wal_max_entries, wal_max_bytes, wal_max_age_s), not by pending_slices_cap. */
typedef struct ra_backlog_s {
    uint64_t spilled;        /* slices waiting in the WAL, not in the ring, now */
    uint64_t spilled_total;  /* that went to the WAL only, since open */
    uint64_t refilled_total; /* read back into the ring, since open */
    uint64_t refill_errors;  /* read-backs that failed (a damaged segment: logged) */
} ra_backlog_t;
/* Lock-free (counters read atomically): the loop thread may call it. */
RA_EXTERN int ra_meter_backlog(const ra_meter_t *m, ra_backlog_t *out);

/* ---- observability ---------------------------------------------------------------- */
/* Prometheus text exposition of the meter's metrics into buf, NUL-terminated; *len_out
 * gets the text length (without the NUL). RA_EBUFSIZE when cap < *len_out + 1. */
RA_EXTERN int ra_meter_metrics(const ra_meter_t *m, char *buf, size_t cap, size_t *len_out);
/* Counts one record refused before it reached the meter (a binding's argument checks) in
 * accounting_rejected_total{reason="invalid"}. */
RA_EXTERN void ra_meter_count_invalid(ra_meter_t *m);

/* ---- refusals as events (I-14: the audit trail's rejects) ------------------------------ */
/* Every record the meter refuses (and every ra_meter_count_invalid) is also appended to a
 * bounded ring in the plane, from whichever process refused it; a reader (the daemon, for
 * its audit trail) drains it. Writers never wait: past 1024 unread entries the oldest is
 * overwritten, and the reader is told exactly how many it missed. */
typedef struct ra_refusal_s {
    uint64_t n;           /* the append's number on this plane (0, 1, ...) */
    int64_t at_ms;        /* wall clock when it was refused, ms */
    ra_tenant_t tenant;   /* all zero when the record had none */
    ra_subject_t subject; /* all zero when the record had none */
    uint32_t pid;         /* the refusing process */
    int dim;              /* dimension id, or -1 */
    const char *reason;   /* the accounting_rejected_total reason: "invalid", "degraded", ... */
} ra_refusal_t;
/* Up to cap refusals not yet read, oldest first, into out; *n_out gets their number,
 * *lost_out how many were overwritten (or torn by a writer that died) before they were
 * read. The read position is the plane's: each refusal is read once per plane, and a
 * reader that restarts goes on where the last one stopped. One reader at a time (the
 * daemon): a read that raced another returns RA_EBUSY and moves nothing. */
RA_EXTERN int ra_meter_refusals(ra_meter_t *m, ra_refusal_t *out, size_t cap, size_t *n_out,
                                uint64_t *lost_out);
/* Degraded mode (I-8): write-like operations fail first with RA_EDEGRADED. */
RA_EXTERN void ra_meter_set_degraded(ra_meter_t *m, int degraded);
RA_EXTERN int ra_meter_degraded(const ra_meter_t *m);

/* ---- slices ----------------------------------------------------------------------- */
RA_EXTERN void ra_slice_ref(const ra_slice_t *s);
RA_EXTERN void ra_slice_unref(const ra_slice_t *s); /* NULL is ignored */
RA_EXTERN void ra_slice_get_id(const ra_slice_t *s, ra_slice_id_t *out);
RA_EXTERN void ra_slice_get_tenant(const ra_slice_t *s, ra_tenant_t *out);
RA_EXTERN const char *ra_slice_dimension(const ra_slice_t *s); /* lives with the slice */
RA_EXTERN const char *ra_slice_host(const ra_slice_t *s);      /* lives with the slice */
RA_EXTERN int ra_slice_amnesia(const ra_slice_t *s);
RA_EXTERN size_t ra_slice_row_count(const ra_slice_t *s);
/* Row idx in canonical order (ascending subject bytes). */
RA_EXTERN int ra_slice_row(const ra_slice_t *s, size_t idx, ra_subject_t *subject, uint64_t *inc);
RA_EXTERN const uint8_t *ra_slice_b3(const ra_slice_t *s);      /* 32 bytes */
RA_EXTERN const uint8_t *ra_slice_prev_b3(const ra_slice_t *s); /* 32 bytes */
/* The canonical encoding v1 (docs/FORMAT.md); the bytes live with the slice. */
RA_EXTERN const uint8_t *ra_slice_bytes(const ra_slice_t *s, size_t *len_out);
/* Strict decoder: any deviation from encoding v1 is RA_ESCHEMA, a buffer over the frame
 * limit RA_EOVERSIZE. On success *out is a new slice (one reference) whose b3 is the
 * BLAKE3 of buf. */
RA_EXTERN int ra_slice_decode(const uint8_t *buf, size_t len, ra_slice_t **out);

/* ---- digest helpers --------------------------------------------------------------- */
/* BLAKE3 of buf into out (32 bytes): the same digest b3sum prints. */
RA_EXTERN void ra_b3(const void *buf, size_t len, uint8_t *out);
/* Lowercase hex of n bytes into out (2n characters and a NUL). */
RA_EXTERN void ra_hex(const uint8_t *bytes, size_t n, char *out);

/* RA_CDEF_END */

#endif /* RON_ACCOUNTING_H */
