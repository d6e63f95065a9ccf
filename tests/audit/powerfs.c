/* powerfs: an in-memory backend of the audit log's I/O interface (audit/io.h) that
 * simulates power loss and injects faults, seeded and deterministic (SQLite's crash-test
 * VFS, LevelDB's fault-injection Env; tests/sim-fs.c does the same for the core's WAL).
 * A test includes it: #include "powerfs.c".
 *
 * The model. Per file (inode): its live bytes (what reads see: the page cache), its durable
 * bytes (what the disk holds) and a dirty mark per byte (written since it was last made
 * durable). Per name: the live entry and the durable one (made durable by fsync_dir).
 *   - fdatasync that succeeds: the dirty bytes reach the disk; the durable length becomes
 *     the live one. Bytes past the old durable length that are not dirty read as zeros
 *     on the disk (see the next point).
 *   - fdatasync that fails (injected EIO): the dirty marks are cleared WITHOUT writing, as
 *     Linux did in the fsyncgate reports (the pages are marked clean and kept in the cache):
 *     reads still see the bytes, a later fdatasync succeeds without writing them, and a power
 *     cut loses them. Only writing them again makes them durable.
 *   - pfs_crash (power loss): each name gets its durable entry back (a name created since
 *     the last fsync_dir may survive, as another metadata commit can carry it); each file its
 * durable bytes plus, for the unsynced dirty bytes, by mode: DROP (all lost), TORN (a prefix cut at
 * any byte reached the disk), REORDER (each 512-byte sector of the unsynced tail reached the disk
 * or not, independently: later sectors without earlier ones; holes read as zeros, or random bytes
 * in REORDER_GARBAGE; the file as long as its last sector that arrived). Faults: fail the nth call
 * of an operation with an errno (once or from then on), a short write, a full disk (capacity:
 * ENOSPC, after writing what fits), and "power off at call n": that call and every later one fail
 * with EIO without effect, as if the machine had stopped, so the test then calls pfs_crash and
 * reopens on what the disk held. */
#include "io.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { PFS_INODES = 4096, PFS_NAMES = 4096, PFS_FDS = 64, PFS_SECTOR = 512 };

typedef enum pfs_op {
    PFS_OPEN,
    PFS_WRITE,
    PFS_PREAD,
    PFS_PWRITE,
    PFS_FSYNC,
    PFS_CLOSE,
    PFS_FSIZE,
    PFS_TRUNCATE,
    PFS_RENAME,
    PFS_UNLINK,
    PFS_FSYNC_DIR,
    PFS_MKDIR,
    PFS_LIST,
    PFS_NOPS
} pfs_op_t;

typedef enum pfs_mode {
    PFS_DROP,
    PFS_TORN,
    PFS_REORDER,         /* holes read as zeros */
    PFS_REORDER_GARBAGE, /* holes read as random bytes (a sector the drive never wrote) */
    PFS_NMODES
} pfs_mode_t;

static const char *pfs_mode_name(int m) {
    return m == PFS_DROP      ? "drop"
           : m == PFS_TORN    ? "torn"
           : m == PFS_REORDER ? "reorder"
                              : "reorder-garbage";
}

typedef struct pfs_ino {
    int used;
    uint8_t *live, *dur, *dirty;
    size_t len, dlen, cap, dcap;
} pfs_ino_t;

typedef struct pfs_name {
    char *name;
    int live, dur; /* inode index + 1; 0: none */
} pfs_name_t;

typedef struct pfs {
    rau__io_t io;
    uint64_t rng;
    pfs_ino_t ino[PFS_INODES];
    pfs_name_t names[PFS_NAMES];
    size_t nnames;
    int fds[PFS_FDS]; /* inode + 1 */
    /* faults */
    uint64_t calls, power_off_at; /* 0: none */
    int off;                      /* powered off */
    uint64_t count[PFS_NOPS];
    pfs_op_t fail_op;
    int fail_errno, fail_sticky;
    uint64_t fail_nth; /* in count[fail_op] numbering; 0: none */
    uint64_t short_nth;
    size_t short_k;
    uint64_t capacity; /* 0: unlimited */
    uint64_t injected; /* faults that fired */
} pfs_t;

static uint64_t pfs_rand(pfs_t *fs) {
    /* splitmix64 */
    uint64_t z = (fs->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static pfs_name_t *pfs_find(pfs_t *fs, const char *name) {
    for (size_t i = 0; i < fs->nnames; i++)
        if (strcmp(fs->names[i].name, name) == 0) return &fs->names[i];
    return NULL;
}

static pfs_name_t *pfs_name_get(pfs_t *fs, const char *name) {
    pfs_name_t *n = pfs_find(fs, name);
    if (n || fs->nnames == PFS_NAMES) return n;
    n = &fs->names[fs->nnames++];
    n->name = strdup(name);
    n->live = n->dur = 0;
    return n;
}

static int pfs_in_use(pfs_t *fs, int i) {
    for (size_t k = 0; k < fs->nnames; k++)
        if (fs->names[k].live == i + 1 || fs->names[k].dur == i + 1) return 1;
    for (int k = 0; k < PFS_FDS; k++)
        if (fs->fds[k] == i + 1) return 1;
    return 0;
}

static void pfs_ino_free(pfs_ino_t *f) {
    free(f->live);
    free(f->dur);
    free(f->dirty);
    memset(f, 0, sizeof *f);
}

static void pfs_gc(pfs_t *fs) {
    for (int i = 0; i < PFS_INODES; i++)
        if (fs->ino[i].used && !pfs_in_use(fs, i)) pfs_ino_free(&fs->ino[i]);
}

static int pfs_ino_new(pfs_t *fs) {
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < PFS_INODES; i++)
            if (!fs->ino[i].used) {
                fs->ino[i].used = 1;
                return i;
            }
        pfs_gc(fs);
    }
    return -1;
}

static int pfs_grow(uint8_t **p, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 4096;
    while (c < need)
        c *= 2;
    uint8_t *n = realloc(*p, c);
    if (!n) return -ENOMEM;
    memset(n + *cap, 0, c - *cap);
    *p = n;
    *cap = c;
    return 0;
}

/* live and dirty share cap */
static int pfs_set_len(pfs_ino_t *f, size_t len) {
    size_t cap = f->cap, cap2 = f->cap;
    if (pfs_grow(&f->live, &cap, len) || pfs_grow(&f->dirty, &cap2, len)) return -ENOMEM;
    f->cap = cap;
    if (len > f->len) {
        memset(f->live + f->len, 0, len - f->len);
        memset(f->dirty + f->len, 1, len - f->len);
    }
    f->len = len;
    return 0;
}

static uint64_t pfs_usage(pfs_t *fs) {
    uint64_t u = 0;
    for (int i = 0; i < PFS_INODES; i++)
        if (fs->ino[i].used)
            u += fs->ino[i].len > fs->ino[i].dlen ? fs->ino[i].len : fs->ino[i].dlen;
    return u;
}

/* Every call first: counts, and says whether it fails (a negative errno) or runs (0). */
static int pfs_enter(pfs_t *fs, pfs_op_t op) {
    fs->calls++;
    fs->count[op]++;
    if (fs->power_off_at && fs->calls >= fs->power_off_at) fs->off = 1;
    if (fs->off) return -EIO;
    if (fs->fail_nth && op == fs->fail_op && fs->count[op] >= fs->fail_nth) {
        if (fs->count[op] == fs->fail_nth || fs->fail_sticky) {
            fs->injected++;
            return fs->fail_errno;
        }
    }
    return 0;
}

static pfs_ino_t *pfs_fd(pfs_t *fs, int fd) {
    if (fd < 3 || fd >= PFS_FDS || !fs->fds[fd]) return NULL;
    return &fs->ino[fs->fds[fd] - 1];
}

static int pfs_open(void *ud, const char *path, int mode) {
    pfs_t *fs = ud;
    int rc = pfs_enter(fs, PFS_OPEN);
    if (rc) return rc;
    int fd = 3;
    while (fd < PFS_FDS && fs->fds[fd])
        fd++;
    if (fd == PFS_FDS) return -EMFILE;
    pfs_name_t *n = pfs_find(fs, path);
    if (mode != RAU__IO_CREATE && (!n || !n->live)) return -ENOENT;
    if (mode == RAU__IO_CREATE) {
        if (!n && !(n = pfs_name_get(fs, path))) return -ENOSPC;
        if (n->live) {
            pfs_set_len(&fs->ino[n->live - 1], 0);
        } else {
            int i = pfs_ino_new(fs);
            if (i < 0) return -ENOSPC;
            n->live = i + 1;
        }
    }
    fs->fds[fd] = n->live;
    return fd;
}

static ssize_t pfs_write_at(pfs_t *fs, pfs_ino_t *f, const void *buf, size_t n, size_t off) {
    if (fs->short_nth && fs->count[PFS_WRITE] + fs->count[PFS_PWRITE] == fs->short_nth && n > 1) {
        fs->injected++;
        n = fs->short_k < n ? fs->short_k : n - 1;
    }
    int full = 0;
    if (fs->capacity && off + n > f->len) {
        uint64_t u = pfs_usage(fs), grow = off + n - (f->len > off ? f->len : off);
        if (u + grow > fs->capacity) {
            uint64_t room = fs->capacity > u ? fs->capacity - u : 0;
            n = (size_t)(n - (grow - room));
            full = 1;
        }
    }
    if (full && n == 0) return -ENOSPC;
    if (off + n > f->len && pfs_set_len(f, off + n)) return -ENOMEM;
    memcpy(f->live + off, buf, n);
    memset(f->dirty + off, 1, n);
    return (ssize_t)n;
}

static ssize_t pfs_write(void *ud, int fd, const void *buf, size_t n) {
    pfs_t *fs = ud;
    int rc = pfs_enter(fs, PFS_WRITE);
    if (rc) return rc;
    pfs_ino_t *f = pfs_fd(fs, fd);
    if (!f) return -EBADF;
    return pfs_write_at(fs, f, buf, n, f->len);
}

static ssize_t pfs_pwrite(void *ud, int fd, const void *buf, size_t n, uint64_t off) {
    pfs_t *fs = ud;
    int rc = pfs_enter(fs, PFS_PWRITE);
    if (rc) return rc;
    pfs_ino_t *f = pfs_fd(fs, fd);
    if (!f) return -EBADF;
    return pfs_write_at(fs, f, buf, n, (size_t)off);
}

static ssize_t pfs_pread(void *ud, int fd, void *buf, size_t n, uint64_t off) {
    pfs_t *fs = ud;
    int rc = pfs_enter(fs, PFS_PREAD);
    if (rc) return rc;
    pfs_ino_t *f = pfs_fd(fs, fd);
    if (!f) return -EBADF;
    if (off >= f->len) return 0;
    if (n > f->len - off) n = (size_t)(f->len - off);
    memcpy(buf, f->live + off, n);
    return (ssize_t)n;
}

static int pfs_fdatasync(void *ud, int fd) {
    pfs_t *fs = ud;
    int rc = pfs_enter(fs, PFS_FSYNC);
    pfs_ino_t *f = pfs_fd(fs, fd);
    if (rc == -EIO && !fs->off && f) {
        /* fsyncgate: the dirty pages are marked clean, not written */
        if (f->len) memset(f->dirty, 0, f->len);
        return rc;
    }
    if (rc) return rc;
    if (!f) return -EBADF;
    if (pfs_grow(&f->dur, &f->dcap, f->len)) return -ENOMEM;
    if (f->len > f->dlen) memset(f->dur + f->dlen, 0, f->len - f->dlen);
    for (size_t i = 0; i < f->len; i++)
        if (f->dirty[i]) f->dur[i] = f->live[i];
    f->dlen = f->len;
    if (f->len) memset(f->dirty, 0, f->len);
    return 0;
}

static int pfs_close(void *ud, int fd) {
    pfs_t *fs = ud;
    int rc = pfs_enter(fs, PFS_CLOSE);
    /* a close always releases the descriptor (POSIX: even when it reports an error) */
    if (fd >= 3 && fd < PFS_FDS) fs->fds[fd] = 0;
    return rc;
}

static int pfs_fsize(void *ud, int fd, uint64_t *out) {
    pfs_t *fs = ud;
    int rc = pfs_enter(fs, PFS_FSIZE);
    if (rc) return rc;
    pfs_ino_t *f = pfs_fd(fs, fd);
    if (!f) return -EBADF;
    *out = f->len;
    return 0;
}

static int pfs_truncate(void *ud, const char *path, uint64_t len) {
    pfs_t *fs = ud;
    int rc = pfs_enter(fs, PFS_TRUNCATE);
    if (rc) return rc;
    pfs_name_t *n = pfs_find(fs, path);
    if (!n || !n->live) return -ENOENT;
    return pfs_set_len(&fs->ino[n->live - 1], (size_t)len);
}

static int pfs_rename(void *ud, const char *from, const char *to) {
    pfs_t *fs = ud;
    int rc = pfs_enter(fs, PFS_RENAME);
    if (rc) return rc;
    pfs_name_t *a = pfs_find(fs, from);
    if (!a || !a->live) return -ENOENT;
    pfs_name_t *b = pfs_name_get(fs, to);
    if (!b) return -ENOSPC;
    a = pfs_find(fs, from); /* (the array does not move: fixed size) */
    b->live = a->live;
    a->live = 0;
    return 0;
}

static int pfs_unlink(void *ud, const char *path) {
    pfs_t *fs = ud;
    int rc = pfs_enter(fs, PFS_UNLINK);
    if (rc) return rc;
    pfs_name_t *n = pfs_find(fs, path);
    if (!n || !n->live) return -ENOENT;
    n->live = 0;
    return 0;
}

static int pfs_under(const char *dir, const char *name) {
    size_t d = strlen(dir);
    return strncmp(name, dir, d) == 0 && name[d] == '/' && !strchr(name + d + 1, '/');
}

static int pfs_fsync_dir(void *ud, const char *dir) {
    pfs_t *fs = ud;
    int rc = pfs_enter(fs, PFS_FSYNC_DIR);
    if (rc) return rc;
    for (size_t i = 0; i < fs->nnames; i++)
        if (pfs_under(dir, fs->names[i].name)) fs->names[i].dur = fs->names[i].live;
    return 0;
}

static int pfs_mkdir(void *ud, const char *path) {
    pfs_t *fs = ud;
    (void)path;
    int rc = pfs_enter(fs, PFS_MKDIR);
    return rc ? rc : -EEXIST; /* directories exist (outside the model) */
}

static int pfs_list(void *ud, const char *dir, int (*cb)(void *, const char *), void *cbud) {
    pfs_t *fs = ud;
    int rc = pfs_enter(fs, PFS_LIST);
    if (rc) return rc;
    for (size_t i = 0; i < fs->nnames; i++)
        if (fs->names[i].live && pfs_under(dir, fs->names[i].name) &&
            (rc = cb(cbud, fs->names[i].name + strlen(dir) + 1)) != 0)
            return rc;
    return 0;
}

static pfs_t *pfs_new(uint64_t seed) {
    pfs_t *fs = calloc(1, sizeof *fs);
    if (!fs) abort();
    fs->rng = seed;
    fs->io = (rau__io_t){fs,        pfs_open,  pfs_write,    pfs_pread,  pfs_pwrite, pfs_fdatasync,
                         pfs_close, pfs_fsize, pfs_truncate, pfs_rename, pfs_unlink, pfs_fsync_dir,
                         pfs_mkdir, pfs_list};
    return fs;
}

static void pfs_free(pfs_t *fs) {
    for (int i = 0; i < PFS_INODES; i++)
        pfs_ino_free(&fs->ino[i]);
    for (size_t i = 0; i < fs->nnames; i++)
        free(fs->names[i].name);
    free(fs);
}

static void pfs_clear_faults(pfs_t *fs) {
    fs->power_off_at = 0;
    fs->off = 0;
    fs->fail_nth = 0;
    fs->short_nth = 0;
    fs->capacity = 0;
}

/* Arms: the nth call of op from now on fails with neg_errno (and every later one: sticky). */
static void pfs_fail(pfs_t *fs, pfs_op_t op, uint64_t nth, int neg_errno, int sticky) {
    fs->fail_op = op;
    fs->fail_nth = fs->count[op] + nth;
    fs->fail_errno = neg_errno;
    fs->fail_sticky = sticky;
}

/* The nth write or pwrite from now on writes k bytes only (fewer than asked). */
static void pfs_short_write(pfs_t *fs, uint64_t nth, size_t k) {
    fs->short_nth = fs->count[PFS_WRITE] + fs->count[PFS_PWRITE] + nth;
    fs->short_k = k;
}

/* The power goes off at call n from now on (1: the next call). */
static void pfs_power_off_at(pfs_t *fs, uint64_t n) {
    fs->power_off_at = fs->calls + n;
}

/* Power loss (see the top of the file); the machine is then on again, faults cleared. */
static void pfs_crash(pfs_t *fs, pfs_mode_t mode) {
    for (int k = 0; k < PFS_FDS; k++)
        fs->fds[k] = 0;
    /* A name created since the directory's last fsync may have reached the disk anyway
     * (with another metadata commit, as on ext4 and XFS), with whatever of its file did;
     * names that existed stay as the last fsync_dir left them (rename is atomic). */
    for (size_t k = 0; k < fs->nnames; k++) {
        pfs_name_t *n = &fs->names[k];
        n->live = !n->dur && n->live && (pfs_rand(fs) & 1) ? n->live : n->dur;
        n->dur = n->live;
    }
    for (int i = 0; i < PFS_INODES; i++) {
        pfs_ino_t *f = &fs->ino[i];
        if (!f->used) continue;
        size_t newlen = f->dlen;
        if (mode == PFS_TORN && f->len > f->dlen) {
            newlen = f->dlen + (size_t)(pfs_rand(fs) % (f->len - f->dlen + 1));
        } else if ((mode == PFS_REORDER || mode == PFS_REORDER_GARBAGE) && f->len > f->dlen) {
            for (size_t s = f->dlen / PFS_SECTOR * PFS_SECTOR; s < f->len; s += PFS_SECTOR)
                if (pfs_rand(fs) & 1) {
                    size_t e = s + PFS_SECTOR < f->len ? s + PFS_SECTOR : f->len;
                    if (e > newlen) newlen = e;
                    for (size_t b = s > f->dlen ? s : f->dlen; b < e; b++)
                        f->dirty[b] |= 2; /* arrived */
                }
        }
        if (pfs_grow(&f->dur, &f->dcap, newlen)) abort();
        if (newlen > f->dlen) memset(f->dur + f->dlen, 0, newlen - f->dlen);
        if (mode == PFS_REORDER_GARBAGE)
            for (size_t b = f->dlen; b < newlen; b++)
                f->dur[b] = (uint8_t)pfs_rand(fs);
        for (size_t b = f->dlen; b < newlen && b < f->len; b++) {
            int arrived = mode == PFS_TORN ? (f->dirty[b] & 1) : (f->dirty[b] & 3) == 3;
            if (arrived) f->dur[b] = f->live[b];
        }
        f->dlen = newlen;
        /* the machine is on again: the cache holds what the disk holds */
        pfs_set_len(f, 0);
        if (pfs_set_len(f, newlen)) abort();
        if (newlen) memcpy(f->live, f->dur, newlen);
        if (newlen) memset(f->dirty, 0, newlen);
    }
    pfs_gc(fs);
    pfs_clear_faults(fs);
}

/* The live content of a file (NULL when absent); valid until the next call. */
static uint8_t *pfs_data(pfs_t *fs, const char *path, size_t *len) {
    pfs_name_t *n = pfs_find(fs, path);
    if (!n || !n->live) return NULL;
    *len = fs->ino[n->live - 1].len;
    return fs->ino[n->live - 1].live;
}

/* Flips a bit on the disk and in the cache (corruption of bytes already durable). */
static int pfs_flip(pfs_t *fs, const char *path, size_t off, int bit) {
    pfs_name_t *n = pfs_find(fs, path);
    if (!n || !n->live) return -1;
    pfs_ino_t *f = &fs->ino[n->live - 1];
    if (off >= f->len || off >= f->dlen) return -1;
    f->live[off] ^= (uint8_t)(1u << bit);
    f->dur[off] ^= (uint8_t)(1u << bit);
    return 0;
}

/* Replaces a file's content, durably (name and bytes), as a restore from a backup would. */
static void pfs_set(pfs_t *fs, const char *path, const void *buf, size_t len) {
    pfs_name_t *n = pfs_name_get(fs, path);
    if (!n) abort();
    if (!n->live) {
        int i = pfs_ino_new(fs);
        if (i < 0) abort();
        n->live = i + 1;
    }
    n->dur = n->live;
    pfs_ino_t *f = &fs->ino[n->live - 1];
    if (pfs_set_len(f, 0) || pfs_set_len(f, len) || pfs_grow(&f->dur, &f->dcap, len)) abort();
    if (len) {
        memcpy(f->live, buf, len);
        memcpy(f->dur, buf, len);
        memset(f->dirty, 0, len);
    }
    f->dlen = len;
}

/* Removes a file durably. */
static void pfs_remove(pfs_t *fs, const char *path) {
    pfs_name_t *n = pfs_find(fs, path);
    if (n) n->live = n->dur = 0;
    pfs_gc(fs);
}
