/* Slices: immutable, reference counted, one allocation each (header fields + the canonical
 * bytes). A slice only exists after its bytes passed the strict decoder, so even the sealer
 * cannot emit one that violates encoding v1. */
#include "internal.h"

#include <stdlib.h>

struct ra_slice_s {
    _Atomic uint32_t refs;
    int amnesia;
    ra_tenant_t tenant;
    ra_slice_id_t id;
    uint32_t row_count;
    const uint8_t *rows;
    const uint8_t *prev_b3;
    uint8_t b3[RA_B3_LEN];
    char dimension[RA_DIM_NAME_MAX + 1];
    char host[RA_HOST_MAX + 1];
    char version[RA_ENC_VERSION_STR_MAX + 1];
    uint64_t wal_seq; /* its WAL frame's seq; 0: not in a WAL */
    /* Where it sits in its meter's pending ring (an absolute ring index): lets an ACK find
     * it in O(1) (pending.c). Only read and written under the meter's seal mutex; the one
     * mutable field of an otherwise immutable slice, never part of its bytes. */
    size_t pending_pos;
    uint64_t ring_seq; /* the meter's count of pushes when it entered the ring (pending.c) */
    size_t len;
    uint8_t bytes[];
};

ra_slice_t *ra__slice_alloc(size_t len) {
    ra_slice_t *s = malloc(sizeof *s + len);
    if (!s) return NULL;
    memset(s, 0, sizeof *s);
    atomic_init(&s->refs, 1);
    s->len = len;
    return s;
}

void ra__slice_set_wal_seq(ra_slice_t *s, uint64_t seq) {
    s->wal_seq = seq;
}

uint64_t ra__slice_wal_seq(const ra_slice_t *s) {
    return s->wal_seq;
}

void ra__slice_set_pending_pos(ra_slice_t *s, size_t pos) {
    s->pending_pos = pos;
}

size_t ra__slice_pending_pos(const ra_slice_t *s) {
    return s->pending_pos;
}

void ra__slice_set_ring_seq(ra_slice_t *s, uint64_t seq) {
    s->ring_seq = seq;
}

uint64_t ra__slice_ring_seq(const ra_slice_t *s) {
    return s->ring_seq;
}

/* Shrinks an unfinished slice to the bytes actually encoded (never grows it). */
void ra__slice_set_len(ra_slice_t *s, size_t len) {
    RA_ASSERT(len <= s->len);
    s->len = len;
}

uint8_t *ra__slice_buffer(ra_slice_t *s) {
    return s->bytes;
}

void ra__slice_free_unfinished(ra_slice_t *s) {
    free(s);
}

static int slice_parse(ra_slice_t *s) {
    ra__decoded_t d;
    int rc = ra__decode(s->bytes, s->len, &d);
    if (rc != 0) return rc;
    s->amnesia = d.amnesia;
    memcpy(s->tenant.b, d.tenant, 16);
    s->id.window_start_s = d.window_start_s;
    s->id.window_len_s = d.window_len_s;
    s->id.seq = d.seq;
    s->row_count = d.row_count;
    s->rows = d.rows;
    s->prev_b3 = d.prev_b3;
    memcpy(s->dimension, d.dimension, d.dimension_len);
    s->dimension[d.dimension_len] = '\0';
    memcpy(s->host, d.host, d.host_len);
    s->host[d.host_len] = '\0';
    memcpy(s->version, d.version, d.version_len);
    s->version[d.version_len] = '\0';
    return 0;
}

/* A slice holding a copy of buf[0..len), checked by `check`; its code when that fails. The
 * size is checked before any allocation. */
static int slice_copy(const uint8_t *buf, size_t len, int (*check)(ra_slice_t *),
                      ra_slice_t **out) {
    if (len > RA_FRAME_MAX) return RA_EOVERSIZE;
    if (len < RA_ENC_FIXED) return RA_ESCHEMA;
    ra_slice_t *s = ra__slice_alloc(len);
    if (!s) return RA_ENOMEM;
    memcpy(s->bytes, buf, len);
    int rc = check(s);
    if (rc != 0) {
        free(s);
        return rc;
    }
    *out = s;
    return 0;
}

int ra__slice_finish(ra_slice_t *s) {
    int rc = slice_parse(s);
    if (rc == 0) ra_b3(s->bytes, s->len, s->b3);
    return rc;
}

/* The WAL's reader has already checked BLAKE3(buf) against the frame's trailer: decode
 * without hashing the payload a second time (recovery is hash-bound). */
int ra__slice_decode_trusted(const uint8_t *buf, size_t len, const uint8_t b3[32],
                             ra_slice_t **out) {
    *out = NULL;
    int rc = slice_copy(buf, len, slice_parse, out);
    if (rc == 0) memcpy((*out)->b3, b3, RA_B3_LEN);
    return rc;
}

int ra_slice_decode(const uint8_t *buf, size_t len, ra_slice_t **out) {
    if (!out) return RA_EINVAL;
    *out = NULL;
    if (!buf && len) return RA_EINVAL;
    return slice_copy(buf, len, ra__slice_finish, out);
}

void ra_slice_ref(const ra_slice_t *s) {
    atomic_fetch_add_explicit(&((ra_slice_t *)s)->refs, 1, memory_order_relaxed);
}

void ra_slice_unref(const ra_slice_t *s) {
    if (!s) return;
    ra_slice_t *w = (ra_slice_t *)s;
    if (atomic_fetch_sub_explicit(&w->refs, 1, memory_order_acq_rel) == 1) free(w);
}

void ra_slice_get_id(const ra_slice_t *s, ra_slice_id_t *out) {
    *out = s->id;
}

void ra_slice_get_tenant(const ra_slice_t *s, ra_tenant_t *out) {
    *out = s->tenant;
}

const char *ra_slice_dimension(const ra_slice_t *s) {
    return s->dimension;
}

const char *ra_slice_host(const ra_slice_t *s) {
    return s->host;
}

const char *ra__slice_version(const ra_slice_t *s) {
    return s->version;
}

int ra_slice_amnesia(const ra_slice_t *s) {
    return s->amnesia;
}

size_t ra_slice_row_count(const ra_slice_t *s) {
    return s->row_count;
}

int ra_slice_row(const ra_slice_t *s, size_t idx, ra_subject_t *subject, uint64_t *inc) {
    if (idx >= s->row_count) return RA_ENOTFOUND;
    const uint8_t *r = s->rows + idx * RA_ENC_ROW;
    if (subject) memcpy(subject->b, r, 16);
    if (inc) *inc = ra__get_u64(r + 16);
    return 0;
}

const uint8_t *ra_slice_b3(const ra_slice_t *s) {
    return s->b3;
}

const uint8_t *ra_slice_prev_b3(const ra_slice_t *s) {
    return s->prev_b3;
}

const uint8_t *ra_slice_bytes(const ra_slice_t *s, size_t *len_out) {
    if (len_out) *len_out = s->len;
    return s->bytes;
}

/* Identity of a slice: (slice id, b3) (I-4). The stream is part of it. */
bool ra__slice_same(const ra_slice_t *a, const ra_slice_t *b) {
    return a == b || (a->id.seq == b->id.seq && a->id.window_start_s == b->id.window_start_s &&
                      memcmp(a->b3, b->b3, RA_B3_LEN) == 0);
}
