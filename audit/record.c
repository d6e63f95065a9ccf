/* Canonical encoding of audit records (docs/AUDIT-FORMAT.md §1-§2): one byte string per
 * record, the same on every machine, so BLAKE3 of it (self_hash) is a stable identity.
 *
 *   "rau" 0x01 | seq u64 | prev 32 | ts_ms u64 | writer_id | stream | kind | n | attrs...
 *
 * Integers big-endian. The decoder accepts exactly what the encoder produces (AUD-I-7):
 * it decodes the fields, encodes them again and compares the bytes. */
#include "internal.h"

#include <string.h>
#include <utf8proc.h>

struct rau_record_s {
    uint64_t seq;
    int64_t ts_ms;
    uint8_t prev[32];
    uint8_t self_hash[32];
    uint8_t dedupe[32];
    char writer_id[RAU_ID_MAX + 1];
    char stream[RAU_ID_MAX + 1];
    char kind[RAU_KIND_MAX + 1];
    size_t attr_count;
    rau_attr_t attrs[RAU_ATTR_COUNT_MAX];
    size_t len;
    uint8_t bytes[]; /* the canonical bytes; attrs point into them */
};

/* ---- field rules ------------------------------------------------------------------------ */

static int id_ok(const char *s, size_t n, size_t max) {
    if (n == 0) return RAU_ESCHEMA;
    if (n > max) return RAU_ESIZE;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        /* AUD-I-9: ids become the checkpoint origin, a single text line without spaces. */
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return RAU_ESCHEMA;
    }
    return 0;
}

static int kind_ok(const char *s, size_t n) {
    if (n == 0) return RAU_ESCHEMA;
    if (n > RAU_KIND_MAX) return RAU_ESIZE;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_'))
            return RAU_ESCHEMA;
    }
    return 0;
}

/* A normalized string: either the caller's bytes (ASCII is already NFC) or utf8proc's
 * malloc'd NFC form. */
typedef struct nstr_s {
    const uint8_t *p;
    size_t n;
    uint8_t *owned;
} nstr_t;

/* AUD-I-3: NFC via libutf8proc. Invalid UTF-8 and unassigned code points are refused
 * (UTF8PROC_REJECTNA: an unassigned code point could normalize differently under a later
 * Unicode version, and the hash must never change). NUL is refused too. */
static int nfc(const char *s, size_t n, nstr_t *out) {
    out->p = (const uint8_t *)s;
    out->n = n;
    out->owned = NULL;
    /* The common case, ASCII without NUL, 8 bytes at a time (this scan was a quarter of an
     * emit's encode): a word has a byte >= 0x80 when its high bits are set, a zero byte
     * when (w - 0x01..) & ~w has one (the classic haszero). */
    const uint64_t lo = 0x0101010101010101ull, hi = 0x8080808080808080ull;
    uint64_t any_hi = 0, any_zero = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        any_hi |= w & hi;
        any_zero |= (w - lo) & ~w & hi;
    }
    int ascii = 1;
    for (; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == 0) return RAU_ESCHEMA;
        if (c >= 0x80) ascii = 0;
    }
    if (any_hi || any_zero) { /* the slow path decides: a NUL, or non-ASCII */
        for (i = 0; i < n; i++) {
            unsigned char c = (unsigned char)s[i];
            if (c == 0) return RAU_ESCHEMA;
            if (c >= 0x80) ascii = 0;
        }
    }
    if (ascii) return 0;
    if (n > (size_t)1 << 20) return RAU_ESIZE; /* utf8proc takes ssize_t; stay far below */
    utf8proc_uint8_t *dst = NULL;
    utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &dst,
                                      UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_REJECTNA);
    if (r < 0) {
        free(dst);
        return r == UTF8PROC_ERROR_NOMEM ? RAU_ENOMEM : RAU_ESCHEMA;
    }
    out->p = dst;
    out->n = (size_t)r;
    out->owned = dst;
    return 0;
}

static int key_ok(const nstr_t *k) {
    if (k->n == 0) return RAU_ESCHEMA;
    if (k->n > RAU_ATTR_KEY_MAX) return RAU_ESIZE;
    for (size_t i = 0; i < k->n; i++)
        if (k->p[i] < 0x20 || k->p[i] == 0x7f) return RAU_ESCHEMA;
    return 0;
}

/* Key order (AUD-I-2): bytewise on the NFC key, a prefix first. */
static int key_cmp(const nstr_t *a, const nstr_t *b) {
    size_t n = a->n < b->n ? a->n : b->n;
    /* keys are short and mostly differ in their first byte: no memcmp call for those */
    if (n && a->p[0] != b->p[0]) return a->p[0] < b->p[0] ? -1 : 1;
    int c = memcmp(a->p, b->p, n);
    if (c) return c;
    return a->n < b->n ? -1 : a->n > b->n;
}

typedef struct nattr_s {
    nstr_t key;
    nstr_t str;
    const rau_attr_t *a;
} nattr_t;

static void nattr_free(nattr_t *v, size_t n) {
    for (size_t i = 0; i < n; i++) { /* (ASCII owns nothing: no call) */
        if (v[i].key.owned) free(v[i].key.owned);
        if (v[i].str.owned) free(v[i].str.owned);
    }
}

static size_t put_bytes(uint8_t *buf, size_t cap, size_t off, const void *p, size_t n) {
    if (off + n <= cap && n) memcpy(buf + off, p, n);
    return off + n;
}

static size_t put_u8(uint8_t *buf, size_t cap, size_t off, uint8_t v) {
    if (off < cap) buf[off] = v;
    return off + 1;
}

int rau_record_encode(const char *writer_id, const char *stream, uint64_t seq, const uint8_t *prev,
                      const rau_event_t *ev, uint8_t *buf, size_t cap, size_t *len_out) {
    if (!writer_id || !stream || !ev || !len_out || (!buf && cap)) return RAU_EINVAL;
    if (seq == 0 || seq >= (uint64_t)1 << 62) return RAU_EINVAL;
    if (ev->ts_ms < 0) return RAU_EINVAL;
    if (ev->attr_count && !ev->attrs) return RAU_EINVAL;
    if (!ev->kind) return RAU_EINVAL;
    size_t wl = strlen(writer_id), sl = strlen(stream);
    int rc;
    if ((rc = id_ok(writer_id, wl, RAU_ID_MAX)) || (rc = id_ok(stream, sl, RAU_ID_MAX)) ||
        (rc = kind_ok(ev->kind, ev->kind_len)))
        return rc;
    if (ev->attr_count > RAU_ATTR_COUNT_MAX) return RAU_ESIZE;

    nattr_t na[RAU_ATTR_COUNT_MAX];
    size_t n = 0;
    rc = 0;
    for (; n < ev->attr_count; n++) {
        const rau_attr_t *a = &ev->attrs[n];
        na[n].a = a;
        na[n].str.owned = NULL;
        na[n].key.owned = NULL;
        if (!a->key && a->key_len) {
            rc = RAU_EINVAL;
            break;
        }
        if ((rc = nfc(a->key ? a->key : "", a->key_len, &na[n].key))) break;
        if ((rc = key_ok(&na[n].key))) {
            n++;
            break;
        }
        if (a->type == RAU_ATTR_STR) {
            if (!a->str && a->str_len) {
                rc = RAU_EINVAL;
                n++;
                break;
            }
            if ((rc = nfc(a->str ? a->str : "", a->str_len, &na[n].str))) {
                n++;
                break;
            }
        } else if (a->type == RAU_ATTR_BOOL) {
            if (a->num != 0 && a->num != 1) rc = RAU_EINVAL;
        } else if (a->type != RAU_ATTR_INT) {
            rc = RAU_EINVAL; /* AUD-I-5: no other types, floats included */
        }
        if (rc) {
            n++;
            break;
        }
    }
    if (rc) {
        nattr_free(na, n);
        return rc;
    }
    /* Insertion sort: at most 32 attributes. */
    for (size_t i = 1; i < n; i++) {
        nattr_t t = na[i];
        size_t j = i;
        while (j > 0 && key_cmp(&na[j - 1].key, &t.key) > 0) {
            na[j] = na[j - 1];
            j--;
        }
        na[j] = t;
    }
    for (size_t i = 1; i < n; i++)
        if (key_cmp(&na[i - 1].key, &na[i].key) == 0) rc = RAU_ESCHEMA; /* duplicate key */

    size_t off = 0;
    uint8_t tmp[8];
    off = put_bytes(buf, cap, off, RAU__MAGIC, RAU__MAGIC_LEN);
    rau__be64(tmp, seq);
    off = put_bytes(buf, cap, off, tmp, 8);
    static const uint8_t zero[32];
    off = put_bytes(buf, cap, off, prev ? prev : zero, 32);
    rau__be64(tmp, (uint64_t)ev->ts_ms);
    off = put_bytes(buf, cap, off, tmp, 8);
    off = put_u8(buf, cap, off, (uint8_t)wl);
    off = put_bytes(buf, cap, off, writer_id, wl);
    off = put_u8(buf, cap, off, (uint8_t)sl);
    off = put_bytes(buf, cap, off, stream, sl);
    off = put_u8(buf, cap, off, (uint8_t)ev->kind_len);
    off = put_bytes(buf, cap, off, ev->kind, ev->kind_len);
    off = put_u8(buf, cap, off, (uint8_t)n);
    size_t attrs_start = off;
    for (size_t i = 0; i < n && !rc; i++) {
        off = put_u8(buf, cap, off, (uint8_t)na[i].key.n);
        off = put_bytes(buf, cap, off, na[i].key.p, na[i].key.n);
        off = put_u8(buf, cap, off, (uint8_t)na[i].a->type);
        switch (na[i].a->type) {
        case RAU_ATTR_STR:
            if (na[i].str.n > RAU_ATTRS_BYTES_MAX) {
                rc = RAU_ESIZE;
                break;
            }
            tmp[0] = (uint8_t)(na[i].str.n >> 8);
            tmp[1] = (uint8_t)na[i].str.n;
            off = put_bytes(buf, cap, off, tmp, 2);
            off = put_bytes(buf, cap, off, na[i].str.p, na[i].str.n);
            break;
        case RAU_ATTR_INT:
            rau__be64(tmp, (uint64_t)na[i].a->num);
            off = put_bytes(buf, cap, off, tmp, 8);
            break;
        default:
            off = put_u8(buf, cap, off, (uint8_t)na[i].a->num);
            break;
        }
    }
    nattr_free(na, n);
    if (rc) return rc;
    /* AUD-I-4: bounded attributes and records. */
    if (off - attrs_start > RAU_ATTRS_BYTES_MAX || off > RAU_RECORD_MAX) return RAU_ESIZE;
    *len_out = off;
    return off > cap ? RAU_EBUFSIZE : 0;
}

/* ---- decoding --------------------------------------------------------------------------- */

typedef struct rd_s {
    const uint8_t *p;
    size_t len, off;
} rd_t;

static int rd_take(rd_t *r, size_t n, const uint8_t **out) {
    if (r->len - r->off < n) return RAU_ENONCANON;
    *out = r->p + r->off;
    r->off += n;
    return 0;
}

static int rd_str8(rd_t *r, const uint8_t **p, size_t *n) {
    const uint8_t *l;
    if (rd_take(r, 1, &l)) return RAU_ENONCANON;
    *n = *l;
    return rd_take(r, *n, p);
}

int rau_record_decode(const uint8_t *buf, size_t len, rau_record_t **out) {
    if (!out) return RAU_EINVAL;
    *out = NULL;
    if (!buf && len) return RAU_EINVAL;
    if (len > RAU_RECORD_MAX) return RAU_ESIZE;
    if (len < RAU__MAGIC_LEN || memcmp(buf, RAU__MAGIC, 3) != 0) return RAU_ENONCANON;
    if (buf[3] != 1) return RAU_EVERSION;
    rau_record_t *rec = malloc(sizeof *rec + len);
    if (!rec) return RAU_ENOMEM;
    memcpy(rec->bytes, buf, len);
    rec->len = len;
    rd_t r = {rec->bytes, len, RAU__MAGIC_LEN};
    const uint8_t *p;
    size_t n;
    int rc = RAU_ENONCANON;
    if (rd_take(&r, 8, &p)) goto fail;
    rec->seq = rau__rd64(p);
    if (rd_take(&r, 32, &p)) goto fail;
    memcpy(rec->prev, p, 32);
    if (rd_take(&r, 8, &p)) goto fail;
    uint64_t ts = rau__rd64(p);
    if (ts > INT64_MAX) goto fail;
    rec->ts_ms = (int64_t)ts;
    if (rd_str8(&r, &p, &n) || n > RAU_ID_MAX) goto fail;
    memcpy(rec->writer_id, p, n);
    rec->writer_id[n] = 0;
    if (rd_str8(&r, &p, &n) || n > RAU_ID_MAX) goto fail;
    memcpy(rec->stream, p, n);
    rec->stream[n] = 0;
    if (rd_str8(&r, &p, &n) || n > RAU_KIND_MAX) goto fail;
    memcpy(rec->kind, p, n);
    rec->kind[n] = 0;
    if (rd_take(&r, 1, &p) || *p > RAU_ATTR_COUNT_MAX) goto fail;
    rec->attr_count = *p;
    for (size_t i = 0; i < rec->attr_count; i++) {
        rau_attr_t *a = &rec->attrs[i];
        memset(a, 0, sizeof *a);
        if (rd_str8(&r, &p, &n)) goto fail;
        a->key = (const char *)p;
        a->key_len = n;
        if (rd_take(&r, 1, &p)) goto fail;
        a->type = *p;
        if (a->type == RAU_ATTR_STR) {
            if (rd_take(&r, 2, &p)) goto fail;
            n = (size_t)p[0] << 8 | p[1];
            if (rd_take(&r, n, &p)) goto fail;
            a->str = (const char *)p;
            a->str_len = n;
        } else if (a->type == RAU_ATTR_INT) {
            if (rd_take(&r, 8, &p)) goto fail;
            a->num = (int64_t)rau__rd64(p);
        } else if (a->type == RAU_ATTR_BOOL) {
            if (rd_take(&r, 1, &p)) goto fail;
            a->num = *p;
        } else {
            goto fail;
        }
    }
    if (r.off != len) goto fail; /* trailing bytes */

    /* AUD-I-7: the bytes must be exactly the encoding of what they say. */
    rau_event_t ev = {rec->kind, strlen(rec->kind), rec->ts_ms, rec->attrs, rec->attr_count};
    uint8_t again[RAU_RECORD_MAX];
    size_t alen = 0;
    rc = rau_record_encode(rec->writer_id, rec->stream, rec->seq, rec->prev, &ev, again,
                           sizeof again, &alen);
    if (rc == RAU_EINVAL || rc == RAU_EBUFSIZE) rc = RAU_ENONCANON;
    if (rc) goto fail;
    if (alen != len || memcmp(again, rec->bytes, len) != 0) {
        rc = RAU_ENONCANON;
        goto fail;
    }
    rau__b3(rec->bytes, len, rec->self_hash);
    rau__b3_dedupe(rec->bytes, len, rec->dedupe);
    *out = rec;
    return 0;
fail:
    free(rec);
    return rc;
}

void rau_record_free(rau_record_t *r) {
    free(r);
}
uint64_t rau_record_seq(const rau_record_t *r) {
    return r->seq;
}
const uint8_t *rau_record_prev(const rau_record_t *r) {
    return r->prev;
}
const uint8_t *rau_record_self_hash(const rau_record_t *r) {
    return r->self_hash;
}
const uint8_t *rau_record_dedupe(const rau_record_t *r) {
    return r->dedupe;
}
const char *rau_record_writer_id(const rau_record_t *r) {
    return r->writer_id;
}
const char *rau_record_stream(const rau_record_t *r) {
    return r->stream;
}
const char *rau_record_kind(const rau_record_t *r) {
    return r->kind;
}
int64_t rau_record_ts_ms(const rau_record_t *r) {
    return r->ts_ms;
}
size_t rau_record_attr_count(const rau_record_t *r) {
    return r->attr_count;
}
int rau_record_attr(const rau_record_t *r, size_t i, rau_attr_t *out) {
    if (!r || !out) return RAU_EINVAL;
    if (i >= r->attr_count) return RAU_ENOTFOUND;
    *out = r->attrs[i];
    return 0;
}
const uint8_t *rau_record_bytes(const rau_record_t *r, size_t *len_out) {
    if (len_out) *len_out = r->len;
    return r->bytes;
}
