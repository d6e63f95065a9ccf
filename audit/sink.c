/* The durable sink's on-disk pieces (docs/AUDIT-FORMAT.md §4), shared by the log
 * (audit/log.c) and the verifier (audit/verify.c): length-delimited, checksummed frames in
 * segment files named by their first seq (AUD-I-12).
 *
 *   frame   = len u32 | payload (a canonical record) | check 8
 *   check   = BLAKE3(len u32 || payload)[0..8]
 *   segment = "RAUSEG01" | first_seq u64 | dedupe_window u32 | check4 | frames...
 *   check4  = BLAKE3(the 20 bytes before it)[0..4] */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blake3.h"

static void check8(const uint8_t *len4, const uint8_t *payload, size_t plen, uint8_t *out) {
    blake3_hasher h;
    blake3_hasher_init(&h);
    blake3_hasher_update(&h, len4, 4);
    blake3_hasher_update(&h, payload, plen);
    blake3_hasher_finalize(&h, out, 8);
}

void rau__seg_check(const uint8_t *hdr, uint8_t *out4) {
    blake3_hasher h;
    blake3_hasher_init(&h);
    blake3_hasher_update(&h, hdr, 20);
    blake3_hasher_finalize(&h, out4, 4);
}

size_t rau__frame_write(uint8_t *dst, const uint8_t *payload, size_t plen) {
    rau__be32(dst, (uint32_t)plen);
    if (dst + 4 != payload) memmove(dst + 4, payload, plen);
    check8(dst, dst + 4, plen, dst + 4 + plen);
    return plen + RAU__FRAME_OVERHEAD;
}

int rau__frame_parse(const uint8_t *p, size_t avail, const uint8_t **payload, size_t *plen,
                     size_t *flen) {
    if (avail < 4) return 0;
    uint32_t n = rau__rd32(p);
    if (n < RAU__OFF_BODY || n > RAU_RECORD_MAX) return -1;
    if (avail < (size_t)n + RAU__FRAME_OVERHEAD) return 0;
    uint8_t c[8];
    check8(p, p + 4, n, c);
    if (memcmp(c, p + 4 + n, 8) != 0) return -1;
    *payload = p + 4;
    *plen = n;
    *flen = (size_t)n + RAU__FRAME_OVERHEAD;
    return 1;
}

int rau__seg_name(const char *s, uint64_t *first) {
    /* seg-<20 digits>.rau */
    if (strlen(s) != 28 || memcmp(s, "seg-", 4) != 0 || strcmp(s + 24, ".rau") != 0) return 0;
    uint64_t v = 0;
    for (int i = 4; i < 24; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *first = v;
    return 1;
}

static int cmp_names(const void *a, const void *b) {
    return strcmp((const char *)a, (const char *)b);
}

int rau__seglist(const char *dir, rau__seglist_t *out) {
    memset(out, 0, sizeof *out);
    DIR *d = opendir(dir);
    if (!d) return errno == ENOENT ? RAU_ENOTFOUND : RAU_EIO;
    size_t cap = 0;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d))) {
        uint64_t first;
        if (!rau__seg_name(e->d_name, &first)) continue;
        if (out->n == cap) {
            cap = cap ? cap * 2 : 16;
            void *nn = realloc(out->names, cap * sizeof *out->names);
            if (!nn) {
                rc = RAU_ENOMEM;
                break;
            }
            out->names = nn;
        }
        memcpy(out->names[out->n++], e->d_name, 29); /* seg_name: 28 bytes */
    }
    closedir(d);
    if (rc) {
        rau__seglist_free(out);
        return rc;
    }
    /* Zero-padded decimal: name order is seq order. */
    if (out->n) qsort(out->names, out->n, sizeof *out->names, cmp_names);
    out->first_seq = calloc(out->n ? out->n : 1, sizeof *out->first_seq);
    if (!out->first_seq) {
        rau__seglist_free(out);
        return RAU_ENOMEM;
    }
    for (size_t i = 0; i < out->n; i++)
        rau__seg_name(out->names[i], &out->first_seq[i]);
    return 0;
}

void rau__seglist_free(rau__seglist_t *l) {
    free(l->names);
    free(l->first_seq);
    memset(l, 0, sizeof *l);
}

int rau__win_refill(rau__win_t *w, size_t *off) {
    memmove(w->b, w->b + *off, w->have - *off);
    w->base += *off;
    w->have -= *off;
    *off = 0;
    while (!w->eof && w->have < RAU__WIN) {
        ssize_t r = read(w->fd, w->b + w->have, RAU__WIN - w->have);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return RAU_EIO;
        if (r == 0) w->eof = 1;
        w->have += (size_t)r;
    }
    return 0;
}

int rau__read_file(const char *path, uint8_t **buf, size_t *len, size_t max) {
    *buf = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return RAU_EIO;
    struct stat st;
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_size > max) {
        close(fd);
        return st.st_size > 0 && (uint64_t)st.st_size > max ? RAU_ESIZE : RAU_EIO;
    }
    size_t n = (size_t)st.st_size;
    uint8_t *b = malloc(n ? n : 1);
    if (!b) {
        close(fd);
        return RAU_ENOMEM;
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, b + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    *buf = b;
    *len = got;
    return 0;
}
