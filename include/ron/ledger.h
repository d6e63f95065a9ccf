/*
 * ron-ledger — public C API of libronledger, the ledger's pure core (docs/LEDGER.md).
 *
 * What lives here: the domain types (asset, amount, account, posting, transfer), their
 * canonical encoding (docs/LEDGER-FORMAT.md), the content-addressed transfer id, posting
 * selection and the validation that turns a transfer into a plan. What does not: any I/O,
 * any store, any clock. Nothing here allocates (LED-11): every array and buffer belongs to
 * the caller, and every loop is bounded by the limits below (LED-13).
 *
 * FFI-clean like include/ron/accounting.h: the region between the RL_CDEF markers is what
 * lua/ron/ledger/cdef.lua is generated from (tools/gen-cdef.sh ledger; a test fails when
 * the two disagree).
 *
 * Conventions (libuv style, the same as libronacct):
 *   - every fallible call returns 0 or a negative RL_E* code; rl_strerror(code) explains it
 *     and rl_err_name(code) gives its name ("InsufficientFunds", ...);
 *   - value types are plain structs the caller owns; the core keeps no state between calls,
 *     so there is no handle to open or close;
 *   - a decoded transfer points into the caller's arrays and into the decoded bytes: it
 *     lives as long as both do.
 */
#ifndef RON_LEDGER_H
#define RON_LEDGER_H

#ifndef RL_CDEF
#include <stddef.h>
#include <stdint.h>
#endif

#define RL_VERSION_MAJOR 0
#define RL_VERSION_MINOR 1
#define RL_VERSION_PATCH 0
#define RL_VERSION_STRING "0.1.0"

#if defined(__GNUC__) && !defined(RL_CDEF)
#define RL_EXTERN __attribute__((visibility("default")))
#else
#define RL_EXTERN
#endif

/*
 * Error codes, one X-macro map: XX(suffix, value, name, message). Values are stable ABI;
 * never renumber. rl_validate_and_plan reports the first failing check in the order of
 * docs/LEDGER.md "Validation order" (LED-12), so a retried intent gets the same code.
 */
#define RL_ERRNO_MAP(XX)                                                                           \
    XX(INVAL, -1, "InvalidArgument", "invalid argument")                                           \
    XX(BUFSIZE, -2, "BufferTooSmall", "caller's buffer too small")                                 \
    XX(TRUNCATED, -3, "Truncated", "encoding ends early")                                          \
    XX(TRAILING, -4, "TrailingBytes", "bytes after the end of the encoding")                       \
    XX(VERSION, -5, "UnknownVersion", "unknown canonical version")                                 \
    XX(NONCANONICAL, -6, "NonCanonical", "not the canonical encoding of a value")                  \
    XX(LIMIT, -7, "LimitExceeded", "count or length over its limit")                               \
    XX(OVERFLOW, -8, "AmountOverflow", "amount arithmetic overflows")                              \
    XX(ASSET, -9, "AssetConflict", "one asset code with two scales")                               \
    XX(CONSERVATION, -10, "ConservationViolated", "consumed and created sums differ")              \
    XX(UNKNOWNACCOUNT, -11, "UnknownAccount", "account not supplied")                              \
    XX(UNKNOWNPOSTING, -12, "UnknownPosting", "consumed posting not supplied")                     \
    XX(SPENT, -13, "PostingSpent", "consumed posting is inactive")                                 \
    XX(UNPINNED, -14, "Unpinned", "involved account without a pin, or pin of an uninvolved one")   \
    XX(VERSIONMISMATCH, -15, "AccountVersionMismatch", "account changed since it was pinned")      \
    XX(FROZEN, -16, "AccountFrozen", "account is frozen")                                          \
    XX(CLOSED, -17, "AccountClosed", "account is closed")                                          \
    XX(NEGATIVE, -18, "NegativePosting", "negative posting on a no-overdraft account")             \
    XX(INSUFFICIENT, -19, "InsufficientFunds", "balance would go below the account's floor")       \
    XX(NOBALANCE, -20, "BalanceMissing", "balance of an involved account and asset not supplied")  \
    XX(INFLIGHT, -21, "ValueInFlight",                                                             \
       "a short pair has value in flight: a race, not a rejection")                                \
    XX(UNDECIDED, -22, "Undecided", "the caller's view does not hold what the decision needs")

/* RL_CDEF_BEGIN */

typedef enum rl_errno_e {
    RL_OK = 0,
/* (clang-format cannot see the commas the macro expands to) */
/* clang-format off */
#define RL__ERR_ENUM(suffix, value, name, msg) RL_E##suffix = value,
    RL_ERRNO_MAP(RL__ERR_ENUM)
#undef RL__ERR_ENUM
    RL_ERRNO_MIN = -22
    /* clang-format on */
} rl_errno_t;

/* Limits (LED-13): every count and length in an encoding and every loop is bounded by one. */
enum {
    RL_CANONICAL_VERSION = 1, /* first byte of every top-level encoding (LED-1) */
    RL_ID_LEN = 16,           /* account id */
    RL_HASH_LEN = 32,         /* transfer id: SHA-256(SHA-256(bytes)) (LED-2) */
    RL_ASSET_CODE_MAX = 15,   /* code bytes; the 16th byte of rl_asset_t.code is NUL */
    RL_ASSET_SCALE_MAX = 18,  /* decimal places: 10^18 still fits an int64 */
    RL_MAX_INPUTS = 256,
    RL_MAX_OUTPUTS = 256,
    RL_MAX_PINS = 512, /* at most one per involved account: inputs' owners + outputs' */
    RL_METADATA_MAX = 4096,
    RL_INTENT_MAX = 255,
    RL_SELECT_MAX = 1048576, /* postings rl_select_postings scans in one call */
    /* bytes of the encodings (docs/LEDGER-FORMAT.md); the transfer's bound is what the
     * limits above allow, for a caller that sizes one buffer for every transfer */
    RL_ASSET_BODY_MAX = 1 + 15 + 1, /* len u8, code, scale u8 */
    RL_ACCOUNT_ENC_LEN = 2 + 16 + 8 + 8 + 1 + 1,
    RL_POSTING_ENC_MAX = 2 + 32 + 4 + 16 + RL_ASSET_BODY_MAX + 8 + 1,
    RL_TRANSFER_ENC_MAX = 2 + 2 + RL_MAX_INPUTS * (32 + 4) + 2 +
                          RL_MAX_OUTPUTS * (16 + RL_ASSET_BODY_MAX + 8) + 2 +
                          RL_MAX_PINS * (16 + 8) + 2 + RL_METADATA_MAX + 1 + RL_INTENT_MAX
};

/* Type tags: the second byte of every top-level encoding, so that the bytes of one type
 * can never be read as another's. */
enum { RL_TAG_ASSET = 0x41, RL_TAG_ACCOUNT = 0x43, RL_TAG_POSTING = 0x50, RL_TAG_TRANSFER = 0x54 };

typedef enum rl_policy_e {
    RL_POLICY_NO_OVERDRAFT = 0, /* floor 0, no negative postings (LED-7) */
    RL_POLICY_CAPPED = 1,       /* balance may go down to floor (<= 0) */
    RL_POLICY_UNCAPPED = 2      /* no floor: system, external, issuance accounts */
} rl_policy_t;

typedef enum rl_status_e {
    RL_ACCOUNT_OPEN = 0,
    RL_ACCOUNT_FROZEN = 1, /* takes part in no transfer until unfrozen (LED-8) */
    RL_ACCOUNT_CLOSED = 2  /* takes part in no transfer, ever */
} rl_account_status_t;

typedef enum rl_posting_status_e {
    RL_POSTING_ACTIVE = 0,           /* spendable, counts in the balance */
    RL_POSTING_PENDING_INACTIVE = 1, /* reserved by a commit in flight, counts in the balance */
    RL_POSTING_INACTIVE = 2          /* consumed; kept for the audit trail, not in the balance */
} rl_posting_status_t;

/* An asset: a code of 1..15 bytes from [A-Za-z0-9_.:-], NUL-padded to 16 bytes (so two
 * assets are equal when their 16 bytes and scale are), and the number of decimal places
 * its amounts carry. Amounts are integers in units of 10^-scale. */
typedef struct rl_asset_s {
    char code[16];
    uint8_t scale;
} rl_asset_t;

/* An account snapshot. Accounts are append-only: every change (freeze, close, policy)
 * is a new version, starting at 1; transfers never bump it. floor is 0 unless policy is
 * RL_POLICY_CAPPED, where it is the lowest balance allowed (<= 0), for every asset. */
typedef struct rl_account_s {
    uint8_t id[16];
    uint64_t version;
    int64_t floor;
    uint8_t policy; /* rl_policy_t */
    uint8_t status; /* rl_account_status_t */
} rl_account_t;

/* A posting is named by the transfer that created it and its output index (LED-3). */
typedef struct rl_posting_ref_s {
    uint8_t transfer_id[32];
    uint32_t index;
} rl_posting_ref_t;

typedef struct rl_posting_s {
    rl_posting_ref_t id;
    uint8_t account[16];
    rl_asset_t asset;
    int64_t amount; /* != 0; negative = an offset position (overdraft, issuance) */
    uint8_t status; /* rl_posting_status_t */
} rl_posting_t;

/* A posting a transfer creates: its id is (transfer id, position in outputs). */
typedef struct rl_output_s {
    uint8_t account[16];
    rl_asset_t asset;
    int64_t amount;
} rl_output_t;

/* The account version a transfer was resolved against (LED-9). */
typedef struct rl_pin_s {
    uint8_t account[16];
    uint64_t version;
} rl_pin_t;

/* A transfer: spends inputs (strictly ascending by transfer id, then index), creates
 * outputs, pins the versions of the accounts it touches (strictly ascending by id), and
 * carries opaque metadata and the intent key (1..255 bytes, LED-14). Every pointer is the
 * caller's; a decoded transfer's pointers lead into the caller's arrays and the decoded
 * bytes. */
typedef struct rl_transfer_s {
    const rl_posting_ref_t *inputs;
    const rl_output_t *outputs;
    const rl_pin_t *pins;
    const uint8_t *metadata;
    const uint8_t *intent;
    uint32_t n_inputs;
    uint32_t n_outputs;
    uint32_t n_pins;
    uint32_t metadata_len;
    uint32_t intent_len;
} rl_transfer_t;

/* The current balance (sum of Active and PendingInactive postings) of an (account, asset)
 * pair, as the store reads it before validation. */
typedef struct rl_balance_s {
    uint8_t account[16];
    rl_asset_t asset;
    int64_t amount;
} rl_balance_t;

/* One line of a plan: what the transfer does to an (account, asset) pair. */
typedef struct rl_delta_s {
    uint8_t account[16];
    rl_asset_t asset;
    int64_t before;
    int64_t debit;  /* sum of the pair's consumed postings */
    int64_t credit; /* sum of the pair's created postings */
    int64_t after;  /* before - debit + credit */
} rl_delta_t;

/* The plan rl_validate_and_plan fills: the transfer id and one delta per (account, asset)
 * pair the transfer touches, in order of first appearance (inputs, then outputs). deltas
 * is the caller's array of deltas_cap entries (RL_MAX_INPUTS + RL_MAX_OUTPUTS always
 * suffice). */
typedef struct rl_plan_s {
    uint8_t transfer_id[32];
    rl_delta_t *deltas;
    uint32_t deltas_cap;
    uint32_t n_deltas;
} rl_plan_t;

RL_EXTERN const char *rl_version(void);
RL_EXTERN const char *rl_strerror(int code); /* never NULL */
RL_EXTERN const char *rl_err_name(int code); /* never NULL: "Unknown" for foreign codes */

/* Amounts (LED-4): exact int64 in minor units; INT64_MIN is never a valid amount, so that
 * every amount can be negated. Both return RL_EOVERFLOW instead of wrapping. */
RL_EXTERN int rl_amount_add(int64_t a, int64_t b, int64_t *out);
RL_EXTERN int rl_amount_sub(int64_t a, int64_t b, int64_t *out);

/* Builds an asset from a code of len bytes; RL_EINVAL when code or scale is not legal. */
RL_EXTERN int rl_asset_init(rl_asset_t *out, const char *code, size_t len, uint8_t scale);
RL_EXTERN int rl_asset_check(const rl_asset_t *a); /* 0 or RL_EINVAL */
RL_EXTERN int rl_asset_equal(const rl_asset_t *a, const rl_asset_t *b);

/* Canonical encodings (LED-1, docs/LEDGER-FORMAT.md). Encoders write *len_out bytes into
 * buf (cap bytes); when cap is too small they write nothing, set *len_out to the size
 * needed and return RL_EBUFSIZE. They refuse values that have no canonical encoding
 * (RL_EINVAL, RL_ELIMIT, RL_ENONCANONICAL). Decoders accept exactly the bytes an encoder
 * writes and nothing else. */
RL_EXTERN int rl_asset_encode(const rl_asset_t *a, uint8_t *buf, size_t cap, size_t *len_out);
RL_EXTERN int rl_asset_decode(const uint8_t *buf, size_t len, rl_asset_t *out);
RL_EXTERN int rl_account_encode(const rl_account_t *a, uint8_t *buf, size_t cap, size_t *len_out);
RL_EXTERN int rl_account_decode(const uint8_t *buf, size_t len, rl_account_t *out);
RL_EXTERN int rl_posting_encode(const rl_posting_t *p, uint8_t *buf, size_t cap, size_t *len_out);
RL_EXTERN int rl_posting_decode(const uint8_t *buf, size_t len, rl_posting_t *out);
RL_EXTERN int rl_transfer_encode(const rl_transfer_t *t, uint8_t *buf, size_t cap, size_t *len_out);
/* Fills *out with pointers into inputs/outputs/pins (the caller's arrays, of the given
 * capacities: RL_ELIMIT when the encoding holds more) and into buf (metadata, intent). */
RL_EXTERN int rl_transfer_decode(const uint8_t *buf, size_t len, rl_transfer_t *out,
                                 rl_posting_ref_t *inputs, uint32_t inputs_cap,
                                 rl_output_t *outputs, uint32_t outputs_cap, rl_pin_t *pins,
                                 uint32_t pins_cap);

/* The content id (LED-2): SHA-256(SHA-256(canonical bytes)), computed without a buffer. */
RL_EXTERN int rl_transfer_id(const rl_transfer_t *t, uint8_t id_out[32]);
/* The posting that output i of a transfer with id transfer_id creates (LED-3). */
RL_EXTERN int rl_transfer_output_posting(const rl_transfer_t *t, const uint8_t transfer_id[32],
                                         uint32_t i, rl_posting_t *out);
/* Compares posting ids in canonical order (transfer id bytes, then index): <0, 0, >0. */
RL_EXTERN int rl_posting_ref_cmp(const rl_posting_ref_t *a, const rl_posting_ref_t *b);

/* Greedy largest-first selection (LED-10): among postings[0..n) that are Active, positive,
 * of the account and asset, picks the largest first (ties: smaller posting id first)
 * until the sum reaches target (> 0). Writes the picked positions into idx_out (in pick
 * order), their count, their sum and the change (sum - target, what the resolver returns
 * to the account as a change posting). RL_EINSUFFICIENT when all eligible postings sum to
 * less than target (*sum_out then holds that sum, *n_out 0); RL_ELIMIT when more than
 * idx_cap postings would be needed; RL_EOVERFLOW when the picks sum beyond INT64_MAX.
 * One pass over postings; idx_out is also its working space. */
RL_EXTERN int rl_select_postings(const rl_posting_t *postings, size_t n, const uint8_t account[16],
                                 const rl_asset_t *asset, int64_t target, uint32_t *idx_out,
                                 uint32_t idx_cap, uint32_t *n_out, int64_t *sum_out,
                                 int64_t *change_out);

/* Validates a transfer against the state the store read and plans its effect (LED-5..9,
 * LED-12): accounts holds every involved account's current snapshot, consumed the records
 * of the transfer's inputs (any order), balances the current balance of every involved
 * (account, asset) pair. Fills plan (see rl_plan_t) and returns 0, or returns the first
 * failing check's code; plan->n_deltas is then meaningless. */
RL_EXTERN int rl_validate_and_plan(const rl_transfer_t *t, const rl_account_t *accounts,
                                   size_t n_accounts, const rl_posting_t *consumed,
                                   size_t n_consumed, const rl_balance_t *balances,
                                   size_t n_balances, rl_plan_t *plan);

/* ---- Resolution (LED-10, LED-26, LED-32; docs/LEDGER.md "Resolve", "The batch path") ----
 * A commit request's movements turned into its transfer and plan in one call, over what the
 * caller read of the accounts and pairs involved (its view): the nets per (account, asset)
 * pair in order of first appearance; each pair that nets a debit pays with its largest
 * postings (rl_select_postings over its first page, then over all it was given when the
 * first page is full and falls short), its change back as an output; a short pair that
 * holds no value in flight drains what it has and puts the shortfall on its receivable
 * (the request's overdraft) or, where its policy allows, on itself; the pins, the
 * validation and the canonical bytes. It is the engine's resolution (lua/ron/ledger/engine
 * resolve.lua, its oracle in tests) for a view that is one read (a batch's): the same
 * transfer for the same view. Whatever it does not decide it refuses, and the caller
 * decides that request the long way: RL_EINFLIGHT (a short pair with a reservation on it
 * or a finalizing saga crediting it: a race), RL_EUNDECIDED (a pair's finalizing sagas not
 * known, a pair or a balance not in the view), or the code of a rejection (the long way
 * words it). */

/* One movement of a request: amount (> 0) of asset from one account to another, each an
 * index into rl_resolve_in_t.accounts. */
typedef struct rl_movement_s {
    uint32_t from;
    uint32_t to;
    rl_asset_t asset;
    int64_t amount;
} rl_movement_t;

/* What the view holds of one (account, asset) pair (at most RL_MAX_INPUTS + RL_MAX_OUTPUTS
 * of them; accounts, at most RL_SELECT_MAX). postings: the pair's Active postings
 * of positive amount, in selection order (largest first), as many as were read (the first
 * first_page of them are its first page). */
typedef struct rl_pair_view_s {
    const rl_posting_t *postings;
    uint32_t n_postings;
    uint32_t account; /* index into rl_resolve_in_t.accounts */
    rl_asset_t asset;
    int64_t balance;
    int32_t receivable; /* the account a shortfall goes to (an index), or -1 */
    uint8_t held;       /* 1: another saga holds a reservation on the pair */
    uint8_t finalizing; /* 0: no finalizing saga credits the pair; 1: one does; 2: not known */
} rl_pair_view_t;

typedef struct rl_resolve_in_s {
    const rl_account_t *accounts;
    const rl_movement_t *movements;
    const rl_pair_view_t *pairs;
    const uint8_t *metadata;
    const uint8_t *intent;
    uint32_t n_accounts;
    uint32_t n_movements;
    uint32_t n_pairs;
    uint32_t metadata_len;
    uint32_t intent_len;
    uint32_t first_page; /* postings of a first page (>= 1) */
} rl_resolve_in_t;

/* What rl_resolve_and_plan fills; the caller's, one per call in flight (~60 KB). transfer
 * points into inputs, outputs and pins and into the request's metadata and intent. The
 * consumed postings in pick order are pairs[consumed_pair[i]].postings[consumed_pos[i]],
 * and inputs[i] (ascending) is consumed input_of[i]. involved: the accounts validation
 * takes, consumed postings' owners first, then outputs', each once (indexes); pairs_used:
 * the pairs whose balances it takes, in the same order (indexes into the view). Each
 * output and pin names its account's index, each output and delta its pair's. */
typedef struct rl_resolved_s {
    rl_transfer_t transfer;
    rl_plan_t plan; /* points into deltas */
    rl_posting_ref_t inputs[RL_MAX_INPUTS];
    rl_output_t outputs[RL_MAX_OUTPUTS];
    rl_pin_t pins[RL_MAX_PINS];
    rl_delta_t deltas[RL_MAX_INPUTS + RL_MAX_OUTPUTS];
    uint32_t input_of[RL_MAX_INPUTS];
    uint32_t consumed_pair[RL_MAX_INPUTS];
    uint32_t consumed_pos[RL_MAX_INPUTS];
    uint32_t output_account[RL_MAX_OUTPUTS];
    uint32_t output_pair[RL_MAX_OUTPUTS];
    uint32_t pin_account[RL_MAX_PINS];
    uint32_t involved[RL_MAX_PINS];
    uint32_t pairs_used[RL_MAX_INPUTS + RL_MAX_OUTPUTS];
    uint32_t delta_pair[RL_MAX_INPUTS + RL_MAX_OUTPUTS];
    uint32_t n_consumed;
    uint32_t n_involved;
    uint32_t n_pairs_used;
    /* scratch of the call: the validation's inputs */
    rl_account_t scratch_accounts[RL_MAX_PINS];
    rl_posting_t scratch_consumed[RL_MAX_INPUTS];
    rl_balance_t scratch_balances[RL_MAX_INPUTS + RL_MAX_OUTPUTS];
} rl_resolved_t;

/* Resolves, validates and plans one request over in (see above) into out, and writes the
 * transfer's canonical bytes into buf (cap bytes, *len_out written; RL_TRANSFER_ENC_MAX
 * always suffices). 0, or a code: the request is the caller's to decide (above). */
RL_EXTERN int rl_resolve_and_plan(const rl_resolve_in_t *in, rl_resolved_t *out, uint8_t *buf,
                                  size_t cap, size_t *len_out);

/* ---- A batch's view (issue 25; docs/LEDGER.md "The C batch path", step 3) ----
 * The pairs a batch's members touch, kept in the caller's memory across the members and
 * moved by the core past each transfer it plans, as the engine's Lua moved its tables
 * (lua/ron/ledger/engine/batch_plan.lua, its oracle in tests): each pair's balance to its
 * delta's after, its consumed postings out of its list, the transfer's outputs of positive
 * amount into the list of their pair when that pair has one (a payer's), in selection
 * order. A member's view is then its pairs' current state: no list copied per member (a
 * payer with 1,000 postings copied them all for every transfer it made). Every array is
 * the caller's (LED-11); a list lives in postings[off .. off + n) with room for cap, and a
 * list that outgrows its room moves to postings[used ..). tags: the caller's name of each
 * stored posting, returned for the consumed ones; an output planned in the batch is
 * tagged RL_BATCH_MADE | member << 8 | its index. */
typedef struct rl_batch_pair_s {
    int64_t balance;
    rl_asset_t asset;
    uint32_t account; /* index into the member's rl_resolve_in_t.accounts */
    uint32_t off;
    uint32_t n;
    uint32_t cap;
    uint8_t held;       /* as rl_pair_view_t */
    uint8_t finalizing; /* as rl_pair_view_t */
    uint8_t listed;     /* 1: a payer's list, which outputs join */
} rl_batch_pair_t;

typedef struct rl_batch_s {
    rl_batch_pair_t *pairs;
    rl_posting_t *postings;
    uint32_t *tags;
    uint32_t n_pairs;
    uint32_t cap;   /* entries of postings and tags */
    uint32_t used;  /* entries given to lists */
    uint32_t limit; /* the postings of a list a member's view holds at most (>= 1) */
} rl_batch_t;

enum {
    RL_BATCH_MADE = 0x40000000, /* the tag bit of an output planned in the batch */
    RL_BATCH_MEMBERS = 0x400000 /* members of one batch view, at most */
};

/* Plans one member over the batch's view: views[i] (in->n_pairs of them) is the member's
 * pair idx[i] of b, its account, asset and receivable the caller's, the rest filled from
 * b; in->pairs is set to views. As rl_resolve_and_plan, then the view moves past the
 * transfer and consumed_tags[i] is the tag of consumed posting i (pick order). A code
 * leaves the view as it was: rl_resolve_and_plan's, RL_EINVAL (a view that does not match
 * b), or RL_EBUFSIZE (no room for a list's new postings: grow postings and tags, then call
 * again). */
RL_EXTERN int rl_batch_plan(rl_batch_t *b, rl_resolve_in_t *in, rl_pair_view_t *views,
                            const uint32_t *idx, uint32_t member, rl_resolved_t *out,
                            uint32_t *consumed_tags, uint8_t *buf, size_t cap, size_t *len_out);

/* RL_CDEF_END */

#endif /* RON_LEDGER_H */
