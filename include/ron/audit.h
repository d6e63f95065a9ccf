/*
 * ron-audit — public C API of libronaudit (seed 002, issue 16): tamper-evident audit records.
 *
 * Each record belongs to one chain, named by (writer_id, stream), and carries its position
 * seq (1, 2, ...) and prev, the self_hash of the record before it (32 zero bytes for seq 1).
 * self_hash = BLAKE3 over the record's canonical bytes (docs/AUDIT-FORMAT.md). Every N
 * records an RFC 6962 Merkle tree head over the chain is signed as a C2SP checkpoint.
 *
 * Conventions (the same as include/ron/accounting.h):
 *   - every fallible call returns 0 or a negative RAU_E* code; rau_strerror(code) explains
 *     it and rau_err_name(code) gives the taxonomy name ("SizeExceeded", ...);
 *   - handles are opaque; buffers are owned by the caller unless a comment says otherwise;
 *   - between the RAU_CDEF markers the header is FFI-clean (lua/ron/audit/cdef.lua).
 * Requirement ids AUD-I-n: docs/AUDIT.md.
 */
#ifndef RON_AUDIT_H
#define RON_AUDIT_H

#ifndef RAU_CDEF
#include <stddef.h>
#include <stdint.h>
#endif

#define RAU_VERSION_STRING "0.1.0"

#if defined(__GNUC__) && !defined(RAU_CDEF)
#define RAU_EXTERN __attribute__((visibility("default")))
#else
#define RAU_EXTERN
#endif

/* XX(suffix, value, name, message). Values are stable ABI; never renumber. */
#define RAU_ERRNO_MAP(XX)                                                                          \
    XX(INVAL, -1, "InvalidArgument", "invalid argument")                                           \
    XX(SIZE, -2, "SizeExceeded", "record or attribute over its size limit")                        \
    XX(SCHEMA, -3, "SchemaViolation", "input violates the record schema")                          \
    XX(NONCANON, -4, "NonCanonical", "bytes are not the canonical encoding")                       \
    XX(VERSION, -5, "UnsupportedVersion", "unknown format version")                                \
    XX(TAMPER, -6, "Tamper", "hash chain or Merkle root does not match")                           \
    XX(BUSY, -7, "Busy", "queue full, record shed")                                                \
    XX(NOMEM, -8, "NoMemory", "out of memory")                                                     \
    XX(IO, -9, "IoError", "input/output error")                                                    \
    XX(CORRUPT, -10, "Corrupt", "audit log corrupt")                                               \
    XX(BUFSIZE, -11, "BufferTooSmall", "caller's buffer too small")                                \
    XX(BADSIG, -12, "BadSignature", "signature missing or invalid")                                \
    XX(KEY, -13, "BadKey", "key malformed")                                                        \
    XX(PROOF, -14, "ProofInvalid", "Merkle proof does not verify")                                 \
    XX(AMNESIA, -15, "AmnesiaConflict", "amnesia mode forbids a durable log path")                 \
    XX(NOTFOUND, -16, "NotFound", "no such item")                                                  \
    XX(CLOSED, -17, "Closed", "log closed or failed")

/* RAU_CDEF_BEGIN */

typedef enum rau_errno_e {
    RAU_OK = 0,
/* clang-format off */
#define RAU__ERR_ENUM(suffix, value, name, msg) RAU_E##suffix = value,
    RAU_ERRNO_MAP(RAU__ERR_ENUM)
#undef RAU__ERR_ENUM
    RAU_ERRNO_MIN = -17
    /* clang-format on */
} rau_errno_t;

/* Limits (AUD-I-4). Over a limit: RAU_ESIZE. */
enum {
    RAU_HASH_LEN = 32,
    RAU_ID_MAX = 64,            /* writer_id, stream: [A-Za-z0-9._-], 1..64 bytes */
    RAU_KIND_MAX = 32,          /* kind: [a-z0-9_.], 1..32 bytes */
    RAU_ATTR_COUNT_MAX = 32,    /* attributes per record */
    RAU_ATTR_KEY_MAX = 64,      /* bytes of a key after NFC */
    RAU_ATTRS_BYTES_MAX = 1024, /* encoded attribute section */
    RAU_RECORD_MAX = 4096,      /* whole canonical record */
    RAU_NOTE_MAX = 1024,        /* a checkpoint this library signs (one signature) */
    RAU_NOTE_READ_MAX = 262144, /* a note it reads and verifies: 16 signatures of ~5 kB fit
                                   (c2sp.org/signed-note), at most 100 signature lines */
    RAU_KEY_TEXT_MAX = 256      /* a signer or verifier key in text form */
};

typedef enum rau_attr_type_e {
    RAU_ATTR_STR = 1,
    RAU_ATTR_INT = 2,
    RAU_ATTR_BOOL = 3
} rau_attr_type_t;

/* One attribute. Strings are UTF-8 (not NUL-terminated: pointer and length); they are
 * normalized to NFC when encoded (AUD-I-3). There are no floats (AUD-I-5). */
typedef struct rau_attr_s {
    const char *key;
    size_t key_len;
    int32_t type; /* rau_attr_type_t */
    const char *str;
    size_t str_len;
    int64_t num; /* RAU_ATTR_INT: the value; RAU_ATTR_BOOL: 0 or 1 */
} rau_attr_t;

/* What happened. ts_ms is supplied by the writer (never the clock at append time) so a
 * retry of the same event is byte-identical and deduplicates (AUD-I-6). */
typedef struct rau_event_s {
    const char *kind;
    size_t kind_len;
    int64_t ts_ms; /* >= 0 */
    const rau_attr_t *attrs;
    size_t attr_count; /* any order: the encoder sorts by key */
} rau_event_t;

RAU_EXTERN const char *rau_version(void);
RAU_EXTERN const char *rau_strerror(int code); /* never NULL */
RAU_EXTERN const char *rau_err_name(int code); /* never NULL: "Unknown" for foreign codes */

/* ---- records (audit/record.c) ---------------------------------------------------------- */

/* Encodes the canonical bytes of one record into buf (AUD-I-2). prev: 32 bytes, or NULL for
 * 32 zero bytes. writer_id and stream are NUL-terminated. *len_out is set on success and
 * on RAU_EBUFSIZE (the size needed). Errors: RAU_EINVAL, RAU_ESIZE, RAU_ESCHEMA. */
RAU_EXTERN int rau_record_encode(const char *writer_id, const char *stream, uint64_t seq,
                                 const uint8_t *prev, const rau_event_t *ev, uint8_t *buf,
                                 size_t cap, size_t *len_out);
/* self_hash: BLAKE3-256 of the canonical bytes (b3sum of them). */
RAU_EXTERN void rau_record_hash(const uint8_t *canon, size_t len, uint8_t *out32);
/* The dedupe key (AUD-I-6): keyed over the canonical bytes without seq and prev. canon must
 * be a canonical record (RAU_EINVAL when too short to be one). */
RAU_EXTERN int rau_record_dedupe_key(const uint8_t *canon, size_t len, uint8_t *out32);

/* A decoded record: a private copy of the bytes; free with rau_record_free. */
typedef struct rau_record_s rau_record_t;

/* Decodes canonical bytes. Anything but the exact bytes rau_record_encode would produce for
 * the same fields is refused (AUD-I-7): RAU_EVERSION, RAU_ENONCANON, RAU_ESIZE, RAU_ESCHEMA,
 * RAU_ENOMEM. *out is NULL on error. */
RAU_EXTERN int rau_record_decode(const uint8_t *buf, size_t len, rau_record_t **out);
RAU_EXTERN void rau_record_free(rau_record_t *r);
RAU_EXTERN uint64_t rau_record_seq(const rau_record_t *r);
RAU_EXTERN const uint8_t *rau_record_prev(const rau_record_t *r);      /* 32 bytes */
RAU_EXTERN const uint8_t *rau_record_self_hash(const rau_record_t *r); /* 32 bytes */
RAU_EXTERN const uint8_t *rau_record_dedupe(const rau_record_t *r);    /* 32 bytes */
RAU_EXTERN const char *rau_record_writer_id(const rau_record_t *r);    /* NUL-terminated */
RAU_EXTERN const char *rau_record_stream(const rau_record_t *r);       /* NUL-terminated */
RAU_EXTERN const char *rau_record_kind(const rau_record_t *r);         /* NUL-terminated */
RAU_EXTERN int64_t rau_record_ts_ms(const rau_record_t *r);
RAU_EXTERN size_t rau_record_attr_count(const rau_record_t *r);
/* Attribute i in key order; its pointers live as long as r. RAU_ENOTFOUND past the end. */
RAU_EXTERN int rau_record_attr(const rau_record_t *r, size_t i, rau_attr_t *out);
/* The canonical bytes (owned by r). */
RAU_EXTERN const uint8_t *rau_record_bytes(const rau_record_t *r, size_t *len_out);

/* ---- RFC 6962 Merkle trees (audit/merkle.c) --------------------------------------------- */
/* SHA-256 (OpenSSL's libcrypto): leaf = H(0x00 || data), node = H(0x01 || l || r). The
 * leaves of an audit chain are the records' canonical bytes (AUD-I-8). Proofs are arrays of
 * 32-byte hashes, caller-owned; RAU_MERKLE_PROOF_MAX hashes always suffice. */
enum { RAU_MERKLE_PROOF_MAX = 128 };

RAU_EXTERN void rau_merkle_leaf_hash(const uint8_t *data, size_t len, uint8_t *out32);
/* Root of the tree over n leaf hashes (n = 0: SHA-256 of the empty string). */
RAU_EXTERN void rau_merkle_root(const uint8_t *leaf_hashes, uint64_t n, uint8_t *out32);
/* Inclusion proof of leaf index (0-based) in the tree of the first size leaves. */
RAU_EXTERN int rau_merkle_inclusion_proof(const uint8_t *leaf_hashes, uint64_t index, uint64_t size,
                                          uint8_t *proof, size_t cap, size_t *count_out);
/* 0 when proof shows leaf_hash at index in the tree of size with that root; RAU_EPROOF. */
RAU_EXTERN int rau_merkle_verify_inclusion(uint64_t index, uint64_t size, const uint8_t *leaf_hash,
                                           const uint8_t *proof, size_t count, const uint8_t *root);
/* Consistency proof between the trees of size1 <= size2 leaves. */
RAU_EXTERN int rau_merkle_consistency_proof(const uint8_t *leaf_hashes, uint64_t size1,
                                            uint64_t size2, uint8_t *proof, size_t cap,
                                            size_t *count_out);
RAU_EXTERN int rau_merkle_verify_consistency(uint64_t size1, uint64_t size2, const uint8_t *root1,
                                             const uint8_t *root2, const uint8_t *proof,
                                             size_t count);

/* Proofs straight from a log directory (audit/proof.c, AUD-I-41): the first `size` records
 * are read once, in order, and not kept (memory O(log n)), while a writer may append behind
 * them. A frame or seq that does not read back before the tree's last record is RAU_ECORRUPT
 * (the position in err), fewer records than asked RAU_ENOTFOUND; only `audit verify` checks
 * the whole log. Inclusion: the record seq (leaf index seq - 1) in the tree of size records,
 * with the record's canonical bytes and leaf hash; consistency: size1 -> size2, both roots. */
typedef struct rau_dir_proof_s {
    uint64_t seq;          /* inclusion: the record */
    uint64_t size1, size2; /* consistency: the trees; inclusion: size2, the tree */
    uint8_t root1[32];     /* root of the first size1 records */
    uint8_t root2[32];     /* root of the first size2 records */
    uint8_t leaf[32];      /* inclusion: SHA-256(0x00 || record) */
    uint32_t count;        /* hashes in proof, RFC 9162 order */
    uint32_t record_len;
    uint8_t proof[RAU_MERKLE_PROOF_MAX * 32];
    uint8_t record[RAU_RECORD_MAX];
} rau_dir_proof_t;
RAU_EXTERN int rau_dir_inclusion(const char *dir, uint64_t seq, uint64_t size, rau_dir_proof_t *out,
                                 char *err, size_t errlen);
RAU_EXTERN int rau_dir_consistency(const char *dir, uint64_t size1, uint64_t size2,
                                   rau_dir_proof_t *out, char *err, size_t errlen);

/* ---- signed checkpoints, C2SP signed-note (audit/note.c) -------------------------------- */
/* Keys in the text forms of golang.org/x/mod/sumdb/note (Ed25519, libsodium):
 *   signer   PRIVATE+KEY+<name>+<hash8hex>+<base64(0x01 || seed32)>
 *   verifier <name>+<hash8hex>+<base64(0x01 || pub32)>
 * The checkpoint body is "<origin>\n<size>\n<base64 root>\n" and origin = the key's name
 * (AUD-I-10). A signer key is never logged nor put in an error message (AUD-I-11). */
typedef struct rau_signer_s rau_signer_t;

/* New random key pair named name; both texts NUL-terminated into caller buffers of at least
 * RAU_KEY_TEXT_MAX bytes. */
RAU_EXTERN int rau_note_keygen(const char *name, char *skey, size_t skey_cap, char *vkey,
                               size_t vkey_cap);
/* Reads a signer key file (one line). RAU_EKEY if malformed, RAU_EIO if unreadable. */
RAU_EXTERN int rau_signer_load(const char *path, rau_signer_t **out);
RAU_EXTERN int rau_signer_parse(const char *text, size_t len, rau_signer_t **out);
RAU_EXTERN const char *rau_signer_name(const rau_signer_t *s);
RAU_EXTERN void rau_signer_free(rau_signer_t *s); /* wipes the key */

/* Writes the signed checkpoint note for (size, root) with origin = signer name. */
RAU_EXTERN int rau_checkpoint_sign(const rau_signer_t *s, uint64_t size, const uint8_t *root,
                                   char *buf, size_t cap, size_t *len_out);
/* Verifies a checkpoint note against a verifier key text: the origin line must equal the
 * key's name, and a signature line by that name and key hash must verify. Fills size and
 * root. Signatures of other keys are ignored whatever their length (a witness's cosignature,
 * an ECDSA or a post-quantum key's), up to 100 signature lines and RAU_NOTE_READ_MAX bytes;
 * the note's text ends at its last blank line (c2sp.org/signed-note). RAU_EKEY (bad vkey),
 * RAU_ENONCANON (malformed note), RAU_EBADSIG. */
RAU_EXTERN int rau_checkpoint_verify(const char *note, size_t len, const char *vkey,
                                     size_t vkey_len, uint64_t *size_out, uint8_t *root_out);

/* Witness cosignatures (c2sp.org/tlog-cosignature, cosignature/v1, AUD-I-40). A witness key
 * is an Ed25519 key of signature type 0x04: signer PRIVATE+KEY+<name>+<hash>+<base64(0x04 ||
 * seed)>, verifier <name>+<hash>+<base64(0x04 || pub)>, hash = SHA-256(name || "\n" || 0x04
 * || pub)[:4]. A cosignature line is "— <name> base64(hash || time u64 BE || sig)", sig over
 * "cosignature/v1\ntime <time>\n" || the checkpoint's text. rau_signer_load/parse read both
 * key types; a cosigner key cannot sign checkpoints (RAU_EKEY) nor a log key cosign. */
RAU_EXTERN int rau_cosigner_keygen(const char *name, char *skey, size_t skey_cap, char *vkey,
                                   size_t vkey_cap);
RAU_EXTERN int rau_signer_is_cosigner(const rau_signer_t *s); /* 1: a witness's key */
/* Adds w's cosignature at time (POSIX seconds) to a checkpoint note (an earlier cosignature
 * of w is replaced); the caller has verified the note and its consistency first. */
RAU_EXTERN int rau_cosign(const rau_signer_t *w, const char *note, size_t len, uint64_t time,
                          char *out, size_t cap, size_t *len_out);
/* 0 when the note carries a valid cosignature by the witness key wvkey (size, root and the
 * cosignature's time filled); RAU_EKEY, RAU_ENONCANON, RAU_EBADSIG as above. */
RAU_EXTERN int rau_cosignature_verify(const char *note, size_t len, const char *wvkey,
                                      size_t wvkey_len, uint64_t *size_out, uint8_t *root_out,
                                      uint64_t *time_out);

/* ---- the log: a chain with its durable sink (audit/log.c, audit/sink.c) ------------------ */
typedef struct rau_log_s rau_log_t;

typedef struct rau_log_config_s {
    const char *writer_id;     /* required */
    const char *stream;        /* required */
    const char *dir;           /* the durable sink's directory; NULL only with amnesia */
    int32_t amnesia;           /* 1: RAM only; refused if dir is set (AUD-I-13) */
    uint64_t rotate_bytes;     /* segment size before rotation; 0 = 64 MiB */
    uint32_t batch_bytes;      /* group-commit buffer; 0 = 1 MiB */
    uint32_t dedupe_window;    /* events remembered for dedupe; 0 = 65536 */
    uint32_t checkpoint_every; /* records between signed checkpoints; 0 = explicit only */
    const char *key_path;      /* signer key file; NULL = no checkpoints */
    /* a sync signs a checkpoint of the records none covers once this long passed since the
     * last one (and at the first sync after an open that found some); 0 = off (AUD-I-39) */
    uint32_t checkpoint_interval_ms;
} rau_log_config_t;

typedef struct rau_appended_s {
    uint64_t seq;
    uint8_t self_hash[32];
    int32_t duplicate; /* 1: the event was already in the chain at seq (AUD-I-6) */
} rau_appended_t;

typedef struct rau_log_stats_s {
    uint64_t head_seq;    /* last appended */
    uint64_t durable_seq; /* last known on disk (fdatasync'ed) */
    uint64_t syncs;       /* fdatasync batches */
    uint64_t duplicates;  /* appends answered from the dedupe index */
    uint64_t checkpoints; /* checkpoints written */
    uint64_t torn_bytes;  /* bytes cut from a torn tail at open */
    uint64_t segments;    /* segment files */
    uint8_t head_hash[32];
} rau_log_stats_t;

RAU_EXTERN void rau_log_config_init(rau_log_config_t *cfg);
/* Opens (recovering an existing dir: torn tail cut, corruption refused with RAU_ECORRUPT
 * and its position in errbuf). */
RAU_EXTERN int rau_log_open(const rau_log_config_t *cfg, rau_log_t **out, char *errbuf,
                            size_t errbuf_len);
/* Appends one event at the chain head (buffered; durable after rau_log_sync). */
RAU_EXTERN int rau_log_append(rau_log_t *l, const rau_event_t *ev, rau_appended_t *out);
/* A batch in one call (the host's sink worker runs it on the libuv threadpool, then
 * rau_log_sync: docs/AUDIT.md, "How batching works"). buf holds packed events, each
 *   len u32 big-endian | the canonical bytes rau_record_encode made for this log's
 *                        writer_id and stream, with any seq and prev (1 and NULL will do)
 * so the caller encodes an event once, when it arrives (which refuses a bad event to its
 * emitter), and keeps only bytes. Each is appended in order exactly as rau_log_append would
 * append that event (seq and prev set to the head's, dedupe, self_hash, frame, Merkle leaf):
 * the chain and the files are the same. Buffered like rau_log_append (I/O only when the
 * group-commit buffer fills). The bytes are trusted to be canonical (audit verify re-checks
 * them); a record of another writer_id or stream, a bad prefix or a length past buf stops
 * the batch with RAU_ENONCANON. out->done: the bytes of buf taken (all of them on
 * success; on an error, the records before the failing one are in the chain). */
typedef struct rau_batch_result_s {
    uint64_t appended;   /* records added to the chain */
    uint64_t duplicates; /* events answered from the dedupe index (AUD-I-6) */
    uint64_t done;       /* bytes of buf taken */
} rau_batch_result_t;
RAU_EXTERN int rau_log_append_packed(rau_log_t *l, const uint8_t *buf, size_t len,
                                     rau_batch_result_t *out);
/* Group commit: writes the buffered batch and fdatasyncs once (AUD-I-12). */
RAU_EXTERN int rau_log_sync(rau_log_t *l);
/* Signs a checkpoint of the current head now (needs key_path); syncs first. */
RAU_EXTERN int rau_log_checkpoint(rau_log_t *l);
/* How the open went (AUD-I-37): head_used 1 when the head file let it skip decoding what
 * the file covers; 0 when it decoded the whole log, why says why (no head file yet, a stale
 * or damaged one, another chain's). decoded: records decoded with every check; hashed:
 * records only hashed to rebuild the dedupe window. An operator's open time follows these. */
typedef struct rau_log_open_info_s {
    int32_t head_used;
    uint64_t decoded;
    uint64_t hashed;
    char why[96];
} rau_log_open_info_t;
RAU_EXTERN void rau_log_open_info(const rau_log_t *l, rau_log_open_info_t *out);
/* rau_log_stats and rau_log_latest_checkpoint may be called from another thread than the
 * writer's, at any time: they read a copy the writer's calls publish when they return. */
RAU_EXTERN void rau_log_stats(const rau_log_t *l, rau_log_stats_t *out);
/* The last checkpoint of this chain (written by this handle, or the newest found at open):
 * its size, its RFC 6962 root (32 bytes) and the signed note itself (its first line is the
 * origin). The ledger carries it in its events, so usage, money and audit attest to each
 * other. Any out pointer may be NULL. RAU_ENOTFOUND: no checkpoint yet; RAU_EBUFSIZE: cap
 * is below *len_out. */
RAU_EXTERN int rau_log_latest_checkpoint(const rau_log_t *l, uint64_t *size_out, uint8_t *root_out,
                                         char *note, size_t cap, size_t *len_out);
/* Why the log's last failing system call failed (AUD-I-14): its errno (ENOSPC, EIO, EROFS,
 * ...; 0 when none failed) and, in buf, the call, the file and the reason ("write
 * /var/audit/seg-...rau: No space left on device (ENOSPC)"). From any thread, like
 * rau_log_stats. */
RAU_EXTERN int rau_log_failure(const rau_log_t *l, char *buf, size_t cap);
/* Syncs, then frees. */
RAU_EXTERN int rau_log_close(rau_log_t *l);

/* ---- verify (audit/verify.c) ------------------------------------------------------------ */
/* Walks a log directory: frames, canonical bytes, self hashes, chain links, dedupe keys,
 * Merkle roots of every checkpoint and their signatures (when vkey is given). Each problem
 * is passed to report (position text, message); returns the number of problems (>= 0) or a
 * negative code when the directory cannot be read. records_out: records read. */
typedef void (*rau_report_fn)(void *ud, const char *where, const char *what);
RAU_EXTERN int rau_verify_dir(const char *dir, const char *vkey, rau_report_fn report, void *ud,
                              uint64_t *records_out);
/* The same, also checking n_extra checkpoint files kept elsewhere (a witness's copy): each
 * must be signed (with vkey) and its root must equal the root of the log's first `size`
 * records, so a log restored from an old backup and grown again (a fork) is reported. */
RAU_EXTERN int rau_verify_dir_checkpoints(const char *dir, const char *vkey,
                                          const char *const *extra, size_t n_extra,
                                          rau_report_fn report, void *ud, uint64_t *records_out);
/* The same, also passing every record that decodes to each(ud, record), in file order (the
 * record lives for the call only): `audit verify --list`. */
typedef void (*rau_record_fn)(void *ud, const rau_record_t *r);
RAU_EXTERN int rau_verify_dir_list(const char *dir, const char *vkey, const char *const *extra,
                                   size_t n_extra, rau_report_fn report, rau_record_fn each,
                                   void *ud, uint64_t *records_out);

/* All of the above in one call, and what pins the log's head (AUD-I-39, docs/AUDIT.md "What
 * verify proves, and with what"). With vkey, a log with records of which no checkpoint
 * signed by that key covers any (every checkpoint deleted, or a log rewritten without the
 * key) is a problem; covered says how many records the newest checkpoint that verifies (its
 * signature, and its root the root of the log's first records) covers: the rest are "not
 * yet covered by a checkpoint". With witness_vkey (a cosignature/v1 key), a checkpoint of
 * the directory or kept elsewhere must carry a valid cosignature of that witness, else it is
 * a problem; witnessed: the records the newest such checkpoint covers. Returns the number of
 * problems (>= 0) or a negative code when the directory cannot be read. */
typedef struct rau_verify_opts_s {
    const char *vkey;         /* the log's verifier key text, or NULL */
    const char *witness_vkey; /* a witness's verifier key text (type 0x04), or NULL */
    const char *const *extra; /* checkpoint files kept elsewhere */
    size_t n_extra;
    rau_report_fn report; /* every problem */
    rau_record_fn each;   /* every record, or NULL */
    void *ud;
} rau_verify_opts_t;
typedef struct rau_verify_result_s {
    uint64_t records;      /* records read */
    uint64_t covered;      /* records the newest verified checkpoint covers (0: none) */
    uint64_t witnessed;    /* records the newest witnessed checkpoint covers (0: none) */
    uint64_t witness_time; /* its cosignature's time (POSIX seconds) */
    uint64_t checkpoints;  /* checkpoints whose root matched the log */
} rau_verify_result_t;
RAU_EXTERN int rau_verify(const char *dir, const rau_verify_opts_t *o, rau_verify_result_t *out);

/* RAU_CDEF_END */

#endif /* RON_AUDIT_H */
