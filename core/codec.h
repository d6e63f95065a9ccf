/* The canonical slice encoding v1 (codec.c; docs/FORMAT.md) and the slice object's
 * internals (slice.c). */
#ifndef RA_CODEC_H
#define RA_CODEC_H

#define RA_ENC_MAGIC "RONS"
#define RA_ENC_VERSION 1
#define RA_ENC_FLAG_AMNESIA 0x01
#define RA_ENC_FIXED 83 /* 76 fixed bytes + 3 string lengths + the u32 row count */
#define RA_ENC_ROW 24   /* subject (16) + inc (u64 LE) */
#define RA_ENC_VERSION_STR_MAX 32
typedef struct ra__slice_hdr_in {
    const uint8_t *tenant;
    const char *dimension;
    int64_t window_start_s;
    uint32_t window_len_s;
    uint64_t seq;
    const uint8_t *prev_b3;
    int amnesia;
    const char *host;
    const char *version;
    uint32_t row_count;
} ra__slice_hdr_in_t;
typedef struct ra__decoded {
    int amnesia;
    const uint8_t *tenant;
    int64_t window_start_s;
    uint32_t window_len_s;
    uint64_t seq;
    const uint8_t *prev_b3;
    const uint8_t *dimension, *host, *version;
    size_t dimension_len, host_len, version_len;
    uint32_t row_count;
    const uint8_t *rows;
} ra__decoded_t;
RA_INTERNAL size_t ra__encode_size(const ra__slice_hdr_in_t *h);
RA_INTERNAL size_t ra__encode_header(const ra__slice_hdr_in_t *h, uint8_t *out);
RA_INTERNAL void ra__encode_row(uint8_t *out, const uint8_t subject[16], uint64_t inc);
RA_INTERNAL int ra__decode(const uint8_t *buf, size_t len, ra__decoded_t *d);
RA_INTERNAL bool ra__dimension_name_valid(const char *s, size_t n);
RA_INTERNAL bool ra__token_valid(const char *s, size_t n);

/* slice.c */
RA_INTERNAL ra_slice_t *ra__slice_alloc(size_t len);
RA_INTERNAL uint8_t *ra__slice_buffer(ra_slice_t *s);
RA_INTERNAL int ra__slice_finish(ra_slice_t *s);
RA_INTERNAL int ra__slice_decode_trusted(const uint8_t *buf, size_t len, const uint8_t b3[32],
                                         ra_slice_t **out);
RA_INTERNAL void ra__slice_set_len(ra_slice_t *s, size_t len);
RA_INTERNAL void ra__slice_set_wal_seq(ra_slice_t *s, uint64_t seq);
RA_INTERNAL uint64_t ra__slice_wal_seq(const ra_slice_t *s);
RA_INTERNAL void ra__slice_set_pending_pos(ra_slice_t *s, size_t pos);
RA_INTERNAL size_t ra__slice_pending_pos(const ra_slice_t *s);
RA_INTERNAL void ra__slice_set_ring_seq(ra_slice_t *s, uint64_t seq);
RA_INTERNAL uint64_t ra__slice_ring_seq(const ra_slice_t *s);
RA_INTERNAL void ra__slice_free_unfinished(ra_slice_t *s);
RA_INTERNAL const char *ra__slice_version(const ra_slice_t *s);
RA_INTERNAL bool ra__slice_same(const ra_slice_t *a, const ra_slice_t *b);

#endif /* RA_CODEC_H */
