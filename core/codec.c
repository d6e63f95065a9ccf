/* Canonical binary encoding v1 of a slice (docs/FORMAT.md is the normative description;
 * tests check its golden vectors). Fixed little-endian integers, length-prefixed names,
 * rows in ascending subject order without duplicates: the same slice always encodes to
 * the same bytes on every platform (P-5, G-8), so its BLAKE3 identifies it. */
#include "internal.h"

size_t ra__encode_size(const ra__slice_hdr_in_t *h) {
    return RA_ENC_FIXED + strlen(h->dimension) + strlen(h->host) + strlen(h->version) +
           (size_t)h->row_count * RA_ENC_ROW;
}

size_t ra__encode_header(const ra__slice_hdr_in_t *h, uint8_t *out) {
    uint8_t *p = out;
    memcpy(p, RA_ENC_MAGIC, 4);
    p[4] = RA_ENC_VERSION;
    p[5] = h->amnesia ? RA_ENC_FLAG_AMNESIA : 0;
    p[6] = p[7] = 0;
    memcpy(p + 8, h->tenant, 16);
    ra__put_u64(p + 24, (uint64_t)h->window_start_s);
    ra__put_u32(p + 32, h->window_len_s);
    ra__put_u64(p + 36, h->seq);
    memcpy(p + 44, h->prev_b3, 32);
    p += 76;
    const char *strs[3] = {h->dimension, h->host, h->version};
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(strs[i]);
        *p++ = (uint8_t)n;
        memcpy(p, strs[i], n);
        p += n;
    }
    ra__put_u32(p, h->row_count);
    p += 4;
    return (size_t)(p - out);
}

void ra__encode_row(uint8_t *out, const uint8_t subject[16], uint64_t inc) {
    memcpy(out, subject, 16);
    ra__put_u64(out + 16, inc);
}

static bool dim_name_ok(const uint8_t *s, size_t n) {
    if (n < 1 || n > RA_DIM_NAME_MAX || !(s[0] >= 'a' && s[0] <= 'z')) return false;
    for (size_t i = 1; i < n; i++) {
        uint8_t c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
    }
    return true;
}

static bool printable(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] < 0x21 || s[i] > 0x7E) return false;
    return true;
}

bool ra__dimension_name_valid(const char *s, size_t n) {
    return dim_name_ok((const uint8_t *)s, n);
}

bool ra__token_valid(const char *s, size_t n) {
    return printable((const uint8_t *)s, n);
}

/* Parses and validates buf. Every field is checked against v1 before it is used, and
 * every length against the bytes left, so no input can make it read out of bounds. */
int ra__decode(const uint8_t *buf, size_t len, ra__decoded_t *d) {
    if (len > RA_FRAME_MAX) return RA_EOVERSIZE;
    if (len < RA_ENC_FIXED) return RA_ESCHEMA;
    if (memcmp(buf, RA_ENC_MAGIC, 4) != 0 || buf[4] != RA_ENC_VERSION) return RA_ESCHEMA;
    if ((buf[5] & ~RA_ENC_FLAG_AMNESIA) != 0 || buf[6] != 0 || buf[7] != 0) return RA_ESCHEMA;
    d->amnesia = buf[5] & RA_ENC_FLAG_AMNESIA;
    d->tenant = buf + 8;
    uint64_t ws = ra__get_u64(buf + 24);
    d->window_len_s = ra__get_u32(buf + 32);
    d->seq = ra__get_u64(buf + 36);
    d->prev_b3 = buf + 44;
    if (d->window_len_s < RA_WINDOW_MIN_S || d->window_len_s > RA_WINDOW_MAX_S) return RA_ESCHEMA;
    if (ws > (uint64_t)INT64_MAX || ws % d->window_len_s != 0) return RA_ESCHEMA;
    d->window_start_s = (int64_t)ws;
    if (d->seq == 0) return RA_ESCHEMA;
    size_t off = 76;
    const uint8_t **strs[3] = {&d->dimension, &d->host, &d->version};
    size_t *lens[3] = {&d->dimension_len, &d->host_len, &d->version_len};
    for (int i = 0; i < 3; i++) {
        if (off + 1 > len) return RA_ESCHEMA;
        size_t n = buf[off++];
        if (n > len - off) return RA_ESCHEMA;
        *strs[i] = buf + off;
        *lens[i] = n;
        off += n;
    }
    if (!dim_name_ok(d->dimension, d->dimension_len)) return RA_ESCHEMA;
    if (d->host_len > RA_HOST_MAX || !printable(d->host, d->host_len)) return RA_ESCHEMA;
    if (d->version_len < 1 || d->version_len > RA_ENC_VERSION_STR_MAX ||
        !printable(d->version, d->version_len))
        return RA_ESCHEMA;
    if (off + 4 > len) return RA_ESCHEMA;
    uint32_t n = ra__get_u32(buf + off);
    off += 4;
    if (n == 0 || (len - off) / RA_ENC_ROW != n || (len - off) % RA_ENC_ROW != 0) return RA_ESCHEMA;
    d->row_count = n;
    d->rows = buf + off;
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *r = d->rows + (size_t)i * RA_ENC_ROW;
        if (ra__get_u64(r + 16) == 0) return RA_ESCHEMA; /* only active keys are rows */
        if (i > 0 && memcmp(r - RA_ENC_ROW, r, 16) >= 0) return RA_ESCHEMA; /* canonical */
    }
    return 0;
}
