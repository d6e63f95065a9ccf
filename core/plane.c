/* The counter plane's memory: sizing, creation, attachment and the sealer lock.
 *
 * A process-shared plane is a regular file (cfg.shm_path) that every process maps. It is
 * created complete or not at all: the creator initialises a private temporary file and
 * link()s it into place, so an attacher never sees a half-written header, and two racing
 * creators end up on one plane. An attacher refuses a foreign file, another layout
 * version and a different configuration with a clear message instead of crashing. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static uint64_t next_pow2(uint64_t v) {
    uint64_t p = 1;
    while (p < v)
        p <<= 1;
    return p;
}

static uint64_t align_up(uint64_t v, uint64_t a) {
    return (v + a - 1) & ~(a - 1);
}

typedef struct layout {
    uint32_t slots_per_shard, entries_cap, heads_cap;
    uint64_t slots_off, bitmap_off, heads_off, refusals_off, total;
} layout_t;

/* Entries allowed = 2 x capacity_rows: every live key may briefly hold an entry in the
 * window that just ended (until it is sealed) and one in the current window. Slots are
 * twice that again (load factor <= 1/2 keeps probe chains short). */
static void compute_layout(uint32_t shards, uint32_t capacity_rows, layout_t *l) {
    uint64_t entries = (uint64_t)capacity_rows * 2;
    uint64_t slots = next_pow2(entries * 2);
    uint64_t per = slots / shards;
    if (per < 64) per = 64;
    l->slots_per_shard = (uint32_t)per;
    l->entries_cap = (uint32_t)entries;
    l->heads_cap =
        (uint32_t)next_pow2((uint64_t)capacity_rows * 2 < 64 ? 64 : (uint64_t)capacity_rows * 2);
    uint64_t nslots = per * shards;
    l->slots_off = align_up(sizeof(ra__plane_hdr_t), 4096);
    l->bitmap_off = align_up(l->slots_off + nslots * sizeof(ra__slot_t), RA_CACHELINE);
    l->heads_off = align_up(l->bitmap_off + (nslots / 64 + 1) * 8, RA_CACHELINE);
    l->refusals_off =
        align_up(l->heads_off + (uint64_t)l->heads_cap * sizeof(ra__head_t), RA_CACHELINE);
    l->total = align_up(l->refusals_off + (uint64_t)RA_REFUSALS * sizeof(ra__refusal_t), 4096);
}

static void bind_views(ra_meter_t *m) {
    uint8_t *base = (uint8_t *)m->hdr;
    m->slots = (ra__slot_t *)(base + m->hdr->slots_off);
    m->bitmap = (_Atomic uint64_t *)(base + m->hdr->bitmap_off);
    m->heads = (ra__head_t *)(base + m->hdr->heads_off);
    m->refusals = (ra__refusal_t *)(base + m->hdr->refusals_off);
    m->window_len_s = m->hdr->window_len_s;
    m->n_dims = m->hdr->n_dims;
    m->slot_mask = m->hdr->slots_per_shard - 1;
    m->slots_all_mask = m->hdr->shards * m->hdr->slots_per_shard - 1;
    uint32_t bits = 0;
    while ((1u << bits) < m->hdr->shards)
        bits++;
    m->shard_bits = bits;
    for (uint32_t i = 0; i < m->n_dims; i++)
        memcpy(m->dim_names[i], m->hdr->dims[i], RA_DIM_NAME_MAX + 1);
}

static void init_header(ra__plane_hdr_t *h, const ra_config_t *cfg, const char *const *dims,
                        uint32_t n_dims, const layout_t *l, int64_t now_ms) {
    memcpy(h->magic, RA_PLANE_MAGIC, 8);
    h->layout = RA_PLANE_LAYOUT;
    h->hdr_size = (uint32_t)sizeof(ra__plane_hdr_t);
    h->total_size = l->total;
    h->window_len_s = cfg->window_len_s;
    h->shards = cfg->shards;
    h->slots_per_shard = l->slots_per_shard;
    h->capacity_rows = cfg->capacity_rows;
    h->entries_cap = l->entries_cap;
    h->heads_cap = l->heads_cap;
    h->n_dims = n_dims;
    h->amnesia = cfg->amnesia ? 1 : 0;
    for (uint32_t i = 0; i < n_dims; i++) {
        memset(h->dims[i], 0, sizeof h->dims[i]);
        memcpy(h->dims[i], dims[i], strlen(dims[i]));
    }
    if (cfg->subject_key)
        memcpy(h->subject_key, cfg->subject_key, 32);
    else
        ra__b3_default_subject_key(h->subject_key);
    h->slots_off = l->slots_off;
    h->bitmap_off = l->bitmap_off;
    h->heads_off = l->heads_off;
    h->refusals_off = l->refusals_off;
    h->created_ms = (uint64_t)now_ms;
    /* No window sealed yet: the first rollover seals every ended window that holds
     * counts, whatever clock the writers used. */
    atomic_store(&h->sealed_through, RA_SEALED_NONE);
}

/* Compares an existing plane with the caller's configuration. Every mismatch is refused:
 * silently adopting another window length would break G-21, other dimensions would make
 * ids mean different names in different processes. */
static int check_header(const ra__plane_hdr_t *h, uint64_t file_size, const ra_config_t *cfg,
                        const char *const *dims, uint32_t n_dims, const char *path, char *err,
                        size_t errlen) {
    if (memcmp(h->magic, RA_PLANE_MAGIC, 8) != 0) {
        ra__errbuf(err, errlen, "%s is not a ron-accounting counter plane (bad magic)", path);
        return RA_EINCOMPAT;
    }
    if (h->layout != RA_PLANE_LAYOUT || h->hdr_size != sizeof(ra__plane_hdr_t)) {
        ra__errbuf(err, errlen,
                   "%s has plane layout %u (header %u bytes); this build reads layout %u "
                   "(header %zu bytes): stop every process using it and remove the file",
                   path, h->layout, h->hdr_size, RA_PLANE_LAYOUT, sizeof(ra__plane_hdr_t));
        return RA_EINCOMPAT;
    }
#define RA__FIELD(field, want)                                                                     \
    if ((uint64_t)h->field != (uint64_t)(want)) {                                                  \
        ra__errbuf(err, errlen,                                                                    \
                   "%s was created with " #field "=%llu, this process asks for %llu "              \
                   "(the plane's configuration cannot change while it lives: restart "             \
                   "every process with one configuration)",                                        \
                   path, (unsigned long long)h->field, (unsigned long long)(want));                \
        return RA_EINCOMPAT;                                                                       \
    }
    RA__FIELD(window_len_s, cfg->window_len_s)
    RA__FIELD(shards, cfg->shards)
    RA__FIELD(capacity_rows, cfg->capacity_rows)
    RA__FIELD(amnesia, cfg->amnesia ? 1 : 0)
    RA__FIELD(n_dims, n_dims)
#undef RA__FIELD
    for (uint32_t i = 0; i < n_dims; i++) {
        if (strncmp(h->dims[i], dims[i], RA_DIM_NAME_MAX + 1) != 0) {
            ra__errbuf(err, errlen, "%s registers dimension %u as '%.*s', this process as '%s'",
                       path, i, RA_DIM_NAME_MAX, h->dims[i], dims[i]);
            return RA_EINCOMPAT;
        }
    }
    if (cfg->subject_key && memcmp(h->subject_key, cfg->subject_key, 32) != 0) {
        ra__errbuf(err, errlen, "%s uses another subject_key than this process", path);
        return RA_EINCOMPAT;
    }
    layout_t l;
    compute_layout(h->shards, h->capacity_rows, &l);
    if (h->total_size != file_size || l.total != h->total_size || l.slots_off != h->slots_off ||
        l.bitmap_off != h->bitmap_off || l.heads_off != h->heads_off ||
        l.refusals_off != h->refusals_off || l.slots_per_shard != h->slots_per_shard ||
        l.heads_cap != h->heads_cap) {
        ra__errbuf(err, errlen, "%s is damaged: its size or offsets do not match its header", path);
        return RA_EINCOMPAT;
    }
    return 0;
}

static int create_shm(const char *path, const ra_config_t *cfg, const char *const *dims,
                      uint32_t n_dims, const layout_t *l, int64_t now_ms, char *err,
                      size_t errlen) {
    char tmp[4096];
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int n = snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%ld", path, (long)getpid(), (long)ts.tv_nsec);
    if (n < 0 || (size_t)n >= sizeof tmp) {
        ra__errbuf(err, errlen, "shm path too long: %s", path);
        return RA_EINVAL;
    }
    int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        ra__errbuf(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
        return RA_EIO;
    }
    int rc = 0;
    if (ftruncate(fd, (off_t)l->total) != 0) {
        ra__errbuf(err, errlen, "cannot size %s to %llu bytes: %s", tmp,
                   (unsigned long long)l->total, strerror(errno));
        rc = RA_EIO;
    } else {
        void *p = mmap(NULL, sizeof(ra__plane_hdr_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            ra__errbuf(err, errlen, "cannot map %s: %s", tmp, strerror(errno));
            rc = RA_EIO;
        } else {
            init_header((ra__plane_hdr_t *)p, cfg, dims, n_dims, l, now_ms);
            munmap(p, sizeof(ra__plane_hdr_t));
            /* link() fails with EEXIST when another process won the race: use its plane. */
            if (link(tmp, path) != 0 && errno != EEXIST) {
                ra__errbuf(err, errlen, "cannot create %s: %s", path, strerror(errno));
                rc = RA_EIO;
            }
        }
    }
    close(fd);
    unlink(tmp);
    return rc;
}

/* The plane's file before it is mapped: a regular file, written by its owner only, of at
 * least a header's size. 0, or a typed error with err set (the caller closes fd). */
static int check_file(int fd, const char *path, struct stat *st_out, char *err, size_t errlen) {
    struct stat st;
    if (fstat(fd, &st) != 0) {
        ra__errbuf(err, errlen, "cannot stat %s: %s", path, strerror(errno));
        return RA_EIO;
    }
    if (!S_ISREG(st.st_mode)) {
        ra__errbuf(err, errlen, "%s is not a regular file", path);
        return RA_EINCOMPAT;
    }
    /* Any process that may write the file can forge counts: refuse a plane that others
     * than its owner can write, or that belongs to another (non-root) user. */
    if ((st.st_mode & 0022) != 0) {
        ra__errbuf(err, errlen, "%s is writable by group or others (mode %04o): refusing it", path,
                   (unsigned)(st.st_mode & 07777));
        return RA_EINCOMPAT;
    }
    if (st.st_uid != geteuid() && st.st_uid != 0) {
        ra__errbuf(err, errlen, "%s belongs to uid %u, not to this process (uid %u)", path,
                   (unsigned)st.st_uid, (unsigned)geteuid());
        return RA_EINCOMPAT;
    }
    if ((uint64_t)st.st_size < sizeof(ra__plane_hdr_t)) {
        ra__errbuf(err, errlen, "%s is not a ron-accounting counter plane (%lld bytes)", path,
                   (long long)st.st_size);
        return RA_EINCOMPAT;
    }
    *st_out = st;
    return 0;
}

static int attach_shm(ra_meter_t *m, const ra_config_t *cfg, const char *const *dims,
                      uint32_t n_dims, char *err, size_t errlen) {
    const char *path = cfg->shm_path;
    layout_t l;
    compute_layout(cfg->shards, cfg->capacity_rows, &l);
    int fd = -1;
    for (int attempt = 0; attempt < 3 && fd < 0; attempt++) {
        fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (fd >= 0) break;
        if (errno != ENOENT) {
            ra__errbuf(err, errlen, "cannot open %s: %s", path, strerror(errno));
            return RA_EIO;
        }
        int rc = create_shm(path, cfg, dims, n_dims, &l, ra__meter_now_ms(m), err, errlen);
        if (rc != 0) return rc;
        m->is_creator = 1;
    }
    if (fd < 0) {
        ra__errbuf(err, errlen, "cannot open %s", path);
        return RA_EIO;
    }
    struct stat st;
    int rc = check_file(fd, path, &st, err, errlen);
    if (rc != 0) {
        close(fd);
        return rc;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        ra__errbuf(err, errlen, "cannot map %s: %s", path, strerror(errno));
        close(fd);
        return RA_EIO;
    }
    rc = check_header((const ra__plane_hdr_t *)p, (uint64_t)st.st_size, cfg, dims, n_dims, path,
                      err, errlen);
    if (rc != 0) {
        munmap(p, (size_t)st.st_size);
        close(fd);
        return rc;
    }
    /* Honoured when the file lives on a tmpfs mounted with huge=within_size/advise. */
    (void)madvise(p, (size_t)st.st_size, MADV_HUGEPAGE);
    m->hdr = (ra__plane_hdr_t *)p;
    m->map_size = (size_t)st.st_size;
    m->shm_fd = fd;
    return 0;
}

int ra__plane_open(ra_meter_t *m, const ra_config_t *cfg, const char *const *dims, uint32_t n_dims,
                   char *err, size_t errlen) {
    m->shm_fd = -1;
    if (cfg->shm_path) {
        int rc = attach_shm(m, cfg, dims, n_dims, err, errlen);
        if (rc != 0) return rc;
    } else {
        layout_t l;
        compute_layout(cfg->shards, cfg->capacity_rows, &l);
        /* Anonymous memory is zero-filled (EMPTY slots) and only touched pages become
         * resident. */
        void *p = mmap(NULL, l.total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            ra__errbuf(err, errlen, "cannot map a %llu-byte counter plane: %s",
                       (unsigned long long)l.total, strerror(errno));
            return RA_ENOMEM;
        }
        /* Huge pages where the kernel allows them (THP "madvise" or "always"): a plane of
         * 100k keys spans 32 MiB, and 4 KiB pages would cost the record path TLB misses. */
        (void)madvise(p, l.total, MADV_HUGEPAGE);
        init_header((ra__plane_hdr_t *)p, cfg, dims, n_dims, &l, ra__meter_now_ms(m));
        m->hdr = (ra__plane_hdr_t *)p;
        m->map_size = l.total;
        m->is_creator = 1;
        m->is_sealer = 1; /* a private plane has exactly one process */
    }
    bind_views(m);
    return 0;
}

void ra__plane_close(ra_meter_t *m) {
    if (m->hdr) munmap(m->hdr, m->map_size);
    m->hdr = NULL;
    if (m->shm_fd >= 0) close(m->shm_fd); /* releases the sealer lock, if held */
    m->shm_fd = -1;
}

/* One sealer per plane (PRODUCT.md §5): an exclusive flock on the plane file. The kernel
 * drops it when the holder exits, even by kill -9, so a restarted sidecar takes over. */
int ra__plane_sealer_lock(ra_meter_t *m) {
    if (m->is_sealer) return 0;
    if (m->shm_fd < 0) return RA_EINVAL;
    if (flock(m->shm_fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK || errno == EINTR) return RA_EBUSY;
        return RA_EIO;
    }
    m->is_sealer = 1;
    return 0;
}
