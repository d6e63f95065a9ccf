/* sim-fs: the one power-cut simulator and fault injector behind the I/O seam core/io.h, for
 * the meter's WAL and the audit log (see sim-fs.h).
 *
 * Compiled into each test that uses it with #include "sim-fs.c": tests/CMakeLists.txt builds
 * every tests/test-*.c into its own executable from that one file. */
#include "sim-fs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SF_NAME_MAX 128
#define SF_PATH_MAX 600
#define SF_FAULTS_MAX 16
#define SF_SECTOR 512 /* what a drive writes whole (REORDER modes) */

typedef struct sf_inode {
    uint8_t *data;  /* live content: what reads see (the page cache) */
    uint8_t *dirty; /* per live byte: written since it was last made durable (same cap) */
    size_t len, cap;
    uint8_t *ddata; /* what the disk holds */
    size_t dlen, dcap;
    bool alive;
} sf_inode_t;

typedef struct sf_entry {
    char name[SF_NAME_MAX];
    size_t ino;
} sf_entry_t;

typedef struct sf_dir {
    char path[SF_PATH_MAX];
    sf_entry_t *live, *dur;
    size_t nlive, ndur, live_cap, dur_cap;
} sf_dir_t;

typedef struct sf_fd {
    size_t ino;
    bool open, writable, append;
    uint64_t off;
} sf_fd_t;

typedef struct sf_lock {
    char path[SF_PATH_MAX];
    int handle;
} sf_lock_t;

typedef struct sf_fault {
    simfs_op_t op;
    uint64_t nth, times, seen;
    int err; /* negative errno, or 0 for a short write */
    size_t short_k;
    bool after; /* the call takes effect, then fails */
    bool active;
} sf_fault_t;

struct simfs {
    ra__io_t io;
    bool posix;
    uint64_t rng;
    sf_inode_t *inodes;
    size_t ninodes, inodes_cap;
    sf_dir_t *dirs;
    size_t ndirs, dirs_cap;
    sf_fd_t *fds;
    size_t nfds, fds_cap;
    sf_lock_t *locks;
    size_t nlocks, locks_cap;
    int next_lock;
    uint64_t counts[SIMFS_NOPS], calls;
    sf_fault_t faults[SF_FAULTS_MAX];
    uint64_t crash_call; /* 0: none; else the absolute call number */
    int after_err;       /* a fault that lets the call take effect, then reports this */
    bool crashed;
    simfs_hook_fn hook;
    void *hook_ud;
    uint64_t capacity; /* bytes the live files may hold; 0: unlimited */
    uint64_t injected; /* faults that fired */
    bool lucky_names;  /* names not yet dir-fsynced may survive a cut */
};

#define SF_FD_BASE 1000 /* distinct from real descriptors, never reused */

static const char *const sf_op_names[SIMFS_NOPS] = {
    "create",   "open_read", "open_write", "write",     "pread",  "pwrite",
    "fsync",    "close",     "fsize",      "fsync_dir", "rename", "unlink",
    "truncate", "size",      "mkdir",      "list",      "lock",   "unlock"};

const char *simfs_op_name(simfs_op_t op) {
    return op < SIMFS_NOPS ? sf_op_names[op] : "?";
}

static const char *const sf_mode_names[SIMFS_CRASH_NMODES] = {"drop", "garbage", "torn", "reorder",
                                                              "reorder-garbage"};

const char *simfs_crash_mode_name(simfs_crash_mode_t mode) {
    return mode < SIMFS_CRASH_NMODES ? sf_mode_names[mode] : "?";
}

static uint64_t sf_rand(simfs_t *fs) {
    uint64_t z = (fs->rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void *sf_grow(void *p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return p;
    size_t c = *cap ? *cap * 2 : 16;
    while (c < need)
        c *= 2;
    void *q = realloc(p, c * elem);
    if (!q) abort(); /* a test backend: running out of memory is fatal */
    *cap = c;
    return q;
}

/* ---- call accounting, faults, hooks -------------------------------------------------- */

/* Returns 0 to run the call, a negative errno to fail it, or 1 with *short_k set for a
 * short write. */
static int sf_enter(simfs_t *fs, simfs_op_t op, size_t *short_k) {
    fs->counts[op]++;
    uint64_t n = ++fs->calls;
    if (fs->hook) fs->hook(fs->hook_ud, op, n, 0, 0);
    if (op == SIMFS_UNLOCK) return 0; /* cannot fail */
    if (fs->crash_call && n >= fs->crash_call) {
        fs->crashed = true;
        return -EIO;
    }
    /* Every armed fault counts the call first (so two faults on one operation count the
     * same calls), then the first due one fires. */
    bool due[SF_FAULTS_MAX] = {false};
    for (int i = 0; i < SF_FAULTS_MAX; i++) {
        sf_fault_t *f = &fs->faults[i];
        bool short_pwrite = f->err == 0 && f->op == SIMFS_WRITE && op == SIMFS_PWRITE;
        if (f->active && (f->op == op || short_pwrite)) due[i] = ++f->seen >= f->nth;
    }
    for (int i = 0; i < SF_FAULTS_MAX; i++) {
        sf_fault_t *f = &fs->faults[i];
        if (!due[i]) continue;
        if (f->times && f->seen >= f->nth + f->times) {
            f->active = false;
            continue;
        }
        fs->injected++;
        if (f->err == 0) {
            *short_k = f->short_k;
            f->active = false;
            return 1;
        }
        if (f->after) {
            fs->after_err = f->err;
            return 0;
        }
        return f->err;
    }
    return 0;
}

static long sf_leave(simfs_t *fs, simfs_op_t op, long rc) {
    if (fs->after_err) {
        if (rc >= 0) rc = fs->after_err;
        fs->after_err = 0;
    }
    if (fs->hook) fs->hook(fs->hook_ud, op, fs->calls, 1, rc);
    return rc;
}

/* ---- the in-memory model ------------------------------------------------------------ */

static void sf_split(const char *path, char *dir, char *name) {
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(dir, SF_PATH_MAX, ".");
        snprintf(name, SF_NAME_MAX, "%s", path);
        return;
    }
    size_t dl = (size_t)(slash - path);
    if (dl == 0) dl = 1; /* "/x": the root */
    if (dl >= SF_PATH_MAX) dl = SF_PATH_MAX - 1;
    memcpy(dir, path, dl);
    dir[dl] = '\0';
    snprintf(name, SF_NAME_MAX, "%s", slash + 1);
}

static sf_dir_t *sf_dir(simfs_t *fs, const char *path) {
    for (size_t i = 0; i < fs->ndirs; i++)
        if (strcmp(fs->dirs[i].path, path) == 0) return &fs->dirs[i];
    return NULL;
}

static sf_dir_t *sf_dir_add(simfs_t *fs, const char *path) {
    fs->dirs = sf_grow(fs->dirs, &fs->dirs_cap, fs->ndirs + 1, sizeof *fs->dirs);
    sf_dir_t *d = &fs->dirs[fs->ndirs++];
    memset(d, 0, sizeof *d);
    snprintf(d->path, sizeof d->path, "%s", path);
    return d;
}

static sf_entry_t *sf_find(sf_entry_t *e, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(e[i].name, name) == 0) return &e[i];
    return NULL;
}

/* Points name at ino in one of a directory's listings (*v: live or durable), adding it. */
static void sf_entry_set(sf_entry_t **v, size_t *n, size_t *cap, const char *name, size_t ino) {
    sf_entry_t *e = sf_find(*v, *n, name);
    if (!e) {
        *v = sf_grow(*v, cap, *n + 1, sizeof **v);
        e = &(*v)[(*n)++];
        snprintf(e->name, sizeof e->name, "%s", name);
    }
    e->ino = ino;
}

static void sf_live_set(sf_dir_t *d, const char *name, size_t ino) {
    sf_entry_set(&d->live, &d->nlive, &d->live_cap, name, ino);
}

static bool sf_live_del(sf_dir_t *d, const char *name) {
    sf_entry_t *e = sf_find(d->live, d->nlive, name);
    if (!e) return false;
    *e = d->live[--d->nlive];
    return true;
}

static void sf_make_durable(sf_dir_t *d) {
    d->dur = sf_grow(d->dur, &d->dur_cap, d->nlive, sizeof *d->dur);
    if (d->nlive) memcpy(d->dur, d->live, d->nlive * sizeof *d->live);
    d->ndur = d->nlive;
}

static size_t sf_inode_new(simfs_t *fs) {
    fs->inodes = sf_grow(fs->inodes, &fs->inodes_cap, fs->ninodes + 1, sizeof *fs->inodes);
    sf_inode_t *in = &fs->inodes[fs->ninodes];
    memset(in, 0, sizeof *in);
    in->alive = true;
    return fs->ninodes++;
}

static uint8_t *sf_bytes(uint8_t *p, size_t *cap, size_t need) {
    if (need <= *cap) return p;
    size_t c = *cap ? *cap : 256;
    while (c < need)
        c *= 2;
    uint8_t *q = realloc(p, c);
    if (!q) abort();
    *cap = c;
    return q;
}

/* Live length; bytes it adds are zeros, written (dirty) like any other. */
static void sf_inode_resize(sf_inode_t *in, size_t len) {
    if (len > in->cap) {
        size_t cap = in->cap;
        in->data = sf_bytes(in->data, &cap, len);
        cap = in->cap;
        in->dirty = sf_bytes(in->dirty, &cap, len);
        in->cap = cap;
    }
    if (len > in->len) {
        memset(in->data + in->len, 0, len - in->len);
        memset(in->dirty + in->len, 1, len - in->len);
    }
    in->len = len;
}

/* A successful fsync: the dirty bytes reach the disk, the disk's length is the live one;
 * bytes past the old durable length that are not dirty (an fsync failed over them) are
 * zeros on the disk. */
static void sf_inode_sync(sf_inode_t *in) {
    in->ddata = sf_bytes(in->ddata, &in->dcap, in->len ? in->len : 1);
    if (in->len > in->dlen) memset(in->ddata + in->dlen, 0, in->len - in->dlen);
    for (size_t i = 0; i < in->len; i++)
        if (in->dirty[i]) in->ddata[i] = in->data[i];
    in->dlen = in->len;
    if (in->len) memset(in->dirty, 0, in->len);
}

/* The live content becomes what the disk holds (at a cut, or a durable restore). */
static void sf_inode_settle(sf_inode_t *in) {
    sf_inode_resize(in, in->dlen);
    if (in->dlen) memcpy(in->data, in->ddata, in->dlen);
    if (in->dlen) memset(in->dirty, 0, in->dlen);
}

static bool sf_lookup(simfs_t *fs, const char *path, size_t *ino) {
    char dir[SF_PATH_MAX], name[SF_NAME_MAX];
    sf_split(path, dir, name);
    sf_dir_t *d = sf_dir(fs, dir);
    if (!d) return false;
    sf_entry_t *e = sf_find(d->live, d->nlive, name);
    if (!e) return false;
    *ino = e->ino;
    return true;
}

static sf_fd_t *sf_fd(simfs_t *fs, int fd) {
    if (fd < SF_FD_BASE || (size_t)(fd - SF_FD_BASE) >= fs->nfds) return NULL;
    sf_fd_t *f = &fs->fds[fd - SF_FD_BASE];
    return f->open ? f : NULL;
}

static int sf_fd_new(simfs_t *fs, size_t ino, bool writable, bool append) {
    fs->fds = sf_grow(fs->fds, &fs->fds_cap, fs->nfds + 1, sizeof *fs->fds);
    fs->fds[fs->nfds] = (sf_fd_t){ino, true, writable, append, 0};
    return SF_FD_BASE + (int)fs->nfds++;
}

/* ---- the ra__io_t callbacks --------------------------------------------------------- */

#define SF_BEGIN(op)                                                                               \
    simfs_t *fs = ud;                                                                              \
    size_t short_k_ = 0;                                                                           \
    int inj_ = sf_enter(fs, op, &short_k_);                                                        \
    (void)short_k_;                                                                                \
    if (inj_ < 0) return (int)sf_leave(fs, op, inj_);

static simfs_op_t sf_open_op(int flags) {
    int mode = flags & RA__IO_MODE;
    return mode == RA__IO_CREATE ? SIMFS_CREATE
           : mode == RA__IO_READ ? SIMFS_OPEN_READ
                                 : SIMFS_OPEN_WRITE;
}

static int sf_open(void *ud, const char *path, int flags) {
    simfs_op_t op = sf_open_op(flags);
    SF_BEGIN(op)
    if (fs->posix) return (int)sf_leave(fs, op, ra__io_posix()->open(NULL, path, flags));
    char dir[SF_PATH_MAX], name[SF_NAME_MAX];
    sf_split(path, dir, name);
    sf_dir_t *d = sf_dir(fs, dir);
    if (!d) return (int)sf_leave(fs, op, -ENOENT);
    sf_entry_t *e = sf_find(d->live, d->nlive, name);
    if (!e && op != SIMFS_CREATE) return (int)sf_leave(fs, op, -ENOENT);
    size_t ino;
    if (e) { /* O_TRUNC on the same inode */
        ino = e->ino;
        if (op == SIMFS_CREATE) sf_inode_resize(&fs->inodes[ino], 0);
    } else {
        ino = sf_inode_new(fs);
        sf_live_set(d, name, ino);
    }
    int mode = flags & RA__IO_MODE;
    int fd = sf_fd_new(fs, ino, mode != RA__IO_READ, mode == RA__IO_APPEND || op == SIMFS_CREATE);
    return (int)sf_leave(fs, op, fd);
}

/* Bytes held by the files linked in live directories (the space a real disk would use). */
static uint64_t sf_usage(const simfs_t *fs) {
    uint64_t used = 0;
    for (size_t d = 0; d < fs->ndirs; d++)
        for (size_t e = 0; e < fs->dirs[d].nlive; e++)
            used += fs->inodes[fs->dirs[d].live[e].ino].len;
    return used;
}

void simfs_set_capacity(simfs_t *fs, uint64_t bytes) {
    fs->capacity = bytes;
}

uint64_t simfs_usage(const simfs_t *fs) {
    return sf_usage(fs);
}

/* Writes n bytes at off of a writable descriptor's file. A full disk takes what fits (a
 * short count) and refuses a write of which nothing fits (ENOSPC); unlink frees space. */
static long sf_write_at(simfs_t *fs, int fd, const void *buf, size_t n, const uint64_t *at) {
    sf_fd_t *f = sf_fd(fs, fd);
    if (!f || !f->writable) return -EBADF;
    sf_inode_t *in = &fs->inodes[f->ino];
    size_t off = at ? (size_t)*at : f->append ? in->len : (size_t)f->off;
    if (fs->capacity && off + n > in->len) {
        uint64_t used = sf_usage(fs), grow = off + n - (in->len > off ? in->len : off);
        uint64_t room = fs->capacity > used ? fs->capacity - used : 0;
        if (grow > room) n -= (size_t)(grow - room);
        if (n == 0) return -ENOSPC;
    }
    if (off + n > in->len) sf_inode_resize(in, off + n);
    if (n) memcpy(in->data + off, buf, n);
    if (n) memset(in->dirty + off, 1, n);
    if (!at) f->off = off + n;
    return (long)n;
}

static ssize_t sf_write(void *ud, int fd, const void *buf, size_t n) {
    SF_BEGIN(SIMFS_WRITE)
    if (inj_ == 1 && short_k_ < n) n = short_k_;
    if (fs->posix) return sf_leave(fs, SIMFS_WRITE, ra__io_posix()->write(NULL, fd, buf, n));
    return sf_leave(fs, SIMFS_WRITE, sf_write_at(fs, fd, buf, n, NULL));
}

static ssize_t sf_pwrite(void *ud, int fd, const void *buf, size_t n, uint64_t off) {
    SF_BEGIN(SIMFS_PWRITE)
    if (inj_ == 1 && short_k_ < n) n = short_k_;
    if (fs->posix) return sf_leave(fs, SIMFS_PWRITE, ra__io_posix()->pwrite(NULL, fd, buf, n, off));
    return sf_leave(fs, SIMFS_PWRITE, sf_write_at(fs, fd, buf, n, &off));
}

static ssize_t sf_pread(void *ud, int fd, void *buf, size_t n, uint64_t off) {
    SF_BEGIN(SIMFS_PREAD)
    if (fs->posix) return sf_leave(fs, SIMFS_PREAD, ra__io_posix()->pread(NULL, fd, buf, n, off));
    sf_fd_t *f = sf_fd(fs, fd);
    if (!f) return sf_leave(fs, SIMFS_PREAD, -EBADF);
    sf_inode_t *in = &fs->inodes[f->ino];
    if (off >= in->len) return sf_leave(fs, SIMFS_PREAD, 0);
    size_t k = in->len - (size_t)off < n ? in->len - (size_t)off : n;
    memcpy(buf, in->data + off, k);
    return sf_leave(fs, SIMFS_PREAD, (long)k);
}

static int sf_fsync(void *ud, int fd) {
    simfs_t *fs = ud;
    size_t short_k = 0;
    int inj = sf_enter(fs, SIMFS_FSYNC, &short_k);
    if (fs->posix)
        return (int)sf_leave(fs, SIMFS_FSYNC, inj < 0 ? inj : ra__io_posix()->fsync(NULL, fd));
    sf_fd_t *f = sf_fd(fs, fd);
    if (inj < 0) {
        /* fsyncgate: a failed fsync marks the dirty pages clean WITHOUT writing them (Linux
         * keeps them in the cache): reads still see them, a later fsync succeeds without
         * writing them, a cut loses them. Only writing them again makes them durable. */
        sf_inode_t *in = f && !fs->crashed ? &fs->inodes[f->ino] : NULL;
        if (in && in->len) memset(in->dirty, 0, in->len);
        return (int)sf_leave(fs, SIMFS_FSYNC, inj);
    }
    if (!f) return (int)sf_leave(fs, SIMFS_FSYNC, -EBADF);
    sf_inode_sync(&fs->inodes[f->ino]);
    return (int)sf_leave(fs, SIMFS_FSYNC, 0);
}

static int sf_fsize(void *ud, int fd, uint64_t *out) {
    SF_BEGIN(SIMFS_FSIZE)
    if (fs->posix) return (int)sf_leave(fs, SIMFS_FSIZE, ra__io_posix()->fsize(NULL, fd, out));
    sf_fd_t *f = sf_fd(fs, fd);
    if (!f) return (int)sf_leave(fs, SIMFS_FSIZE, -EBADF);
    *out = fs->inodes[f->ino].len;
    return (int)sf_leave(fs, SIMFS_FSIZE, 0);
}

static int sf_close(void *ud, int fd) {
    simfs_t *fs = ud;
    size_t short_k = 0;
    int inj = sf_enter(fs, SIMFS_CLOSE, &short_k);
    if (fs->posix) { /* the descriptor is released whatever close answers */
        int rc = ra__io_posix()->close(NULL, fd);
        return (int)sf_leave(fs, SIMFS_CLOSE, inj < 0 ? inj : rc);
    }
    sf_fd_t *f = sf_fd(fs, fd);
    if (f) f->open = false;
    if (inj < 0) return (int)sf_leave(fs, SIMFS_CLOSE, inj);
    return (int)sf_leave(fs, SIMFS_CLOSE, f ? 0 : -EBADF);
}

static int sf_fsync_dir(void *ud, const char *dir) {
    SF_BEGIN(SIMFS_FSYNC_DIR)
    if (fs->posix) return (int)sf_leave(fs, SIMFS_FSYNC_DIR, ra__io_posix()->fsync_dir(NULL, dir));
    /* The root is the parent of every modelled directory; directories themselves are durable
     * once created in this model, so fsyncing the root has nothing to make durable. */
    if (strcmp(dir, "/") == 0 || strcmp(dir, ".") == 0)
        return (int)sf_leave(fs, SIMFS_FSYNC_DIR, 0);
    sf_dir_t *d = sf_dir(fs, dir);
    if (!d) return (int)sf_leave(fs, SIMFS_FSYNC_DIR, -ENOENT);
    sf_make_durable(d);
    return (int)sf_leave(fs, SIMFS_FSYNC_DIR, 0);
}

static int sf_rename(void *ud, const char *from, const char *to) {
    SF_BEGIN(SIMFS_RENAME)
    if (fs->posix) return (int)sf_leave(fs, SIMFS_RENAME, ra__io_posix()->rename(NULL, from, to));
    char fdir[SF_PATH_MAX], fname[SF_NAME_MAX], tdir[SF_PATH_MAX], tname[SF_NAME_MAX];
    sf_split(from, fdir, fname);
    sf_split(to, tdir, tname);
    sf_dir_t *fd = sf_dir(fs, fdir), *td = sf_dir(fs, tdir);
    if (!fd || !td) return (int)sf_leave(fs, SIMFS_RENAME, -ENOENT);
    sf_entry_t *e = sf_find(fd->live, fd->nlive, fname);
    if (!e) return (int)sf_leave(fs, SIMFS_RENAME, -ENOENT);
    size_t ino = e->ino;
    sf_live_del(fd, fname);
    sf_live_set(td, tname, ino);
    return (int)sf_leave(fs, SIMFS_RENAME, 0);
}

static int sf_unlink(void *ud, const char *path) {
    SF_BEGIN(SIMFS_UNLINK)
    if (fs->posix) return (int)sf_leave(fs, SIMFS_UNLINK, ra__io_posix()->unlink(NULL, path));
    char dir[SF_PATH_MAX], name[SF_NAME_MAX];
    sf_split(path, dir, name);
    sf_dir_t *d = sf_dir(fs, dir);
    if (!d || !sf_live_del(d, name)) return (int)sf_leave(fs, SIMFS_UNLINK, -ENOENT);
    return (int)sf_leave(fs, SIMFS_UNLINK, 0);
}

static int sf_truncate(void *ud, const char *path, uint64_t len) {
    SF_BEGIN(SIMFS_TRUNCATE)
    if (fs->posix)
        return (int)sf_leave(fs, SIMFS_TRUNCATE, ra__io_posix()->truncate(NULL, path, len));
    size_t ino;
    if (!sf_lookup(fs, path, &ino)) return (int)sf_leave(fs, SIMFS_TRUNCATE, -ENOENT);
    sf_inode_resize(&fs->inodes[ino], (size_t)len);
    return (int)sf_leave(fs, SIMFS_TRUNCATE, 0);
}

static int sf_size(void *ud, const char *path, uint64_t *out) {
    SF_BEGIN(SIMFS_SIZE)
    if (fs->posix) return (int)sf_leave(fs, SIMFS_SIZE, ra__io_posix()->size(NULL, path, out));
    size_t ino;
    if (!sf_lookup(fs, path, &ino)) return (int)sf_leave(fs, SIMFS_SIZE, -ENOENT);
    *out = fs->inodes[ino].len;
    return (int)sf_leave(fs, SIMFS_SIZE, 0);
}

static int sf_mkdir(void *ud, const char *path, int flags) {
    SF_BEGIN(SIMFS_MKDIR)
    if (fs->posix) return (int)sf_leave(fs, SIMFS_MKDIR, ra__io_posix()->mkdir(NULL, path, flags));
    if (sf_dir(fs, path)) return (int)sf_leave(fs, SIMFS_MKDIR, -EEXIST);
    sf_dir_add(fs, path);
    return (int)sf_leave(fs, SIMFS_MKDIR, 0);
}

static int sf_cmp_names(const void *a, const void *b) {
    return strcmp((const char *)a, (const char *)b);
}

/* A sorted copy of the live names: the callback may unlink while we iterate. */
static size_t sf_snapshot_names(simfs_t *fs, const char *dir, char (**out)[SF_NAME_MAX]) {
    sf_dir_t *d = sf_dir(fs, dir);
    *out = NULL;
    if (!d) return 0;
    char(*names)[SF_NAME_MAX] = malloc((d->nlive ? d->nlive : 1) * sizeof *names);
    if (!names) abort();
    for (size_t i = 0; i < d->nlive; i++)
        memcpy(names[i], d->live[i].name, SF_NAME_MAX);
    qsort(names, d->nlive, sizeof *names, sf_cmp_names);
    *out = names;
    return d->nlive;
}

static int sf_list(void *ud, const char *dir, int (*cb)(void *, const char *), void *cbud) {
    SF_BEGIN(SIMFS_LIST)
    if (fs->posix) return (int)sf_leave(fs, SIMFS_LIST, ra__io_posix()->list(NULL, dir, cb, cbud));
    if (!sf_dir(fs, dir)) return (int)sf_leave(fs, SIMFS_LIST, -ENOENT);
    char(*names)[SF_NAME_MAX];
    size_t n = sf_snapshot_names(fs, dir, &names);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = cb(cbud, names[i]);
    free(names);
    return (int)sf_leave(fs, SIMFS_LIST, rc);
}

static int sf_lock(void *ud, const char *path, int *handle) {
    SF_BEGIN(SIMFS_LOCK)
    if (fs->posix) return (int)sf_leave(fs, SIMFS_LOCK, ra__io_posix()->lock(NULL, path, handle));
    for (size_t i = 0; i < fs->nlocks; i++)
        if (strcmp(fs->locks[i].path, path) == 0)
            return (int)sf_leave(fs, SIMFS_LOCK, -EWOULDBLOCK);
    char dir[SF_PATH_MAX], name[SF_NAME_MAX];
    sf_split(path, dir, name);
    sf_dir_t *d = sf_dir(fs, dir);
    if (!d) return (int)sf_leave(fs, SIMFS_LOCK, -ENOENT);
    if (!sf_find(d->live, d->nlive, name)) sf_live_set(d, name, sf_inode_new(fs)); /* O_CREAT */
    fs->locks = sf_grow(fs->locks, &fs->locks_cap, fs->nlocks + 1, sizeof *fs->locks);
    sf_lock_t *l = &fs->locks[fs->nlocks++];
    snprintf(l->path, sizeof l->path, "%s", path);
    l->handle = ++fs->next_lock;
    *handle = l->handle;
    return (int)sf_leave(fs, SIMFS_LOCK, 0);
}

static void sf_unlock(void *ud, int handle) {
    simfs_t *fs = ud;
    size_t short_k = 0;
    (void)sf_enter(fs, SIMFS_UNLOCK, &short_k);
    if (fs->posix) {
        ra__io_posix()->unlock(NULL, handle);
    } else {
        for (size_t i = 0; i < fs->nlocks; i++)
            if (fs->locks[i].handle == handle) {
                fs->locks[i] = fs->locks[--fs->nlocks];
                break;
            }
    }
    sf_leave(fs, SIMFS_UNLOCK, 0);
}

/* ---- public API ---------------------------------------------------------------------- */

static simfs_t *sf_alloc(uint64_t seed, bool posix) {
    simfs_t *fs = calloc(1, sizeof *fs);
    if (!fs) abort();
    fs->posix = posix;
    fs->rng = seed;
    fs->io = (ra__io_t){
        .ud = fs,
        .open = sf_open,
        .write = sf_write,
        .pread = sf_pread,
        .pwrite = sf_pwrite,
        .fsync = sf_fsync,
        .close = sf_close,
        .fsize = sf_fsize,
        .fsync_dir = sf_fsync_dir,
        .rename = sf_rename,
        .unlink = sf_unlink,
        .truncate = sf_truncate,
        .size = sf_size,
        .mkdir = sf_mkdir,
        .list = sf_list,
        .lock = sf_lock,
        .unlock = sf_unlock,
        .reserve_bytes = 8192, /* memory, not disk: a small space reserve */
    };
    return fs;
}

simfs_t *simfs_new(uint64_t seed) {
    return sf_alloc(seed, false);
}

simfs_t *simfs_new_posix(void) {
    return sf_alloc(0, true);
}

void simfs_free(simfs_t *fs) {
    if (!fs) return;
    for (size_t i = 0; i < fs->ninodes; i++) {
        free(fs->inodes[i].data);
        free(fs->inodes[i].dirty);
        free(fs->inodes[i].ddata);
    }
    for (size_t i = 0; i < fs->ndirs; i++) {
        free(fs->dirs[i].live);
        free(fs->dirs[i].dur);
    }
    free(fs->inodes);
    free(fs->dirs);
    free(fs->fds);
    free(fs->locks);
    free(fs);
}

const ra__io_t *simfs_io(simfs_t *fs) {
    return &fs->io;
}

uint64_t simfs_count(const simfs_t *fs, simfs_op_t op) {
    return op < SIMFS_NOPS ? fs->counts[op] : 0;
}

uint64_t simfs_calls(const simfs_t *fs) {
    return fs->calls;
}

void simfs_reset_counts(simfs_t *fs) {
    memset(fs->counts, 0, sizeof fs->counts);
}

static sf_fault_t *sf_fault_slot(simfs_t *fs) {
    for (int i = 0; i < SF_FAULTS_MAX; i++)
        if (!fs->faults[i].active) return &fs->faults[i];
    abort(); /* a test arms more faults than it needs */
}

void simfs_fail(simfs_t *fs, simfs_op_t op, uint64_t nth, int neg_errno, uint64_t times) {
    sf_fault_t *f = sf_fault_slot(fs);
    *f = (sf_fault_t){
        .op = op, .nth = nth ? nth : 1, .times = times, .err = neg_errno, .active = true};
}

void simfs_fail_after(simfs_t *fs, simfs_op_t op, uint64_t nth, int neg_errno) {
    sf_fault_t *f = sf_fault_slot(fs);
    *f = (sf_fault_t){.op = op,
                      .nth = nth ? nth : 1,
                      .times = 1,
                      .err = neg_errno,
                      .after = true,
                      .active = true};
}

void simfs_short_write(simfs_t *fs, uint64_t nth, size_t k) {
    sf_fault_t *f = sf_fault_slot(fs);
    *f = (sf_fault_t){.op = SIMFS_WRITE,
                      .nth = nth ? nth : 1,
                      .times = 1,
                      .err = 0,
                      .short_k = k,
                      .active = true};
}

void simfs_crash_at(simfs_t *fs, uint64_t n) {
    fs->crash_call = fs->calls + (n ? n : 1);
}

void simfs_crash_now(simfs_t *fs) {
    fs->crash_call = fs->calls ? fs->calls : 1;
}

bool simfs_crashed(const simfs_t *fs) {
    return fs->crashed;
}

void simfs_clear_faults(simfs_t *fs) {
    memset(fs->faults, 0, sizeof fs->faults);
    fs->crash_call = 0;
    fs->crashed = false;
    fs->after_err = 0;
}

void simfs_set_hook(simfs_t *fs, simfs_hook_fn hook, void *ud) {
    fs->hook = hook;
    fs->hook_ud = ud;
}

static bool sf_referenced(const simfs_t *fs, size_t ino) {
    for (size_t i = 0; i < fs->ndirs; i++)
        for (size_t k = 0; k < fs->dirs[i].nlive; k++)
            if (fs->dirs[i].live[k].ino == ino) return true;
    return false;
}

/* Each directory gets its durable entries back; with lucky names, a name created since the
 * last fsync_dir may have reached the disk anyway (with another metadata commit, as on ext4
 * and XFS), by a coin flip. What the directory holds after the cut is durable. */
static void sf_crash_dir(simfs_t *fs, sf_dir_t *d) {
    size_t n = d->ndur;
    for (size_t k = 0; k < d->nlive; k++)
        if (fs->lucky_names && !sf_find(d->dur, n, d->live[k].name) && (sf_rand(fs) & 1)) {
            d->dur = sf_grow(d->dur, &d->dur_cap, d->ndur + 1, sizeof *d->dur);
            d->dur[d->ndur++] = d->live[k];
        }
    d->live = sf_grow(d->live, &d->live_cap, d->ndur, sizeof *d->live);
    if (d->ndur) memcpy(d->live, d->dur, d->ndur * sizeof *d->dur);
    d->nlive = d->ndur;
}

/* The disk's length after the cut and, in the REORDER modes, which unsynced bytes arrived
 * (dirty mark 3): each 512-byte sector of the unsynced tail independently. */
static size_t sf_crash_len(simfs_t *fs, sf_inode_t *in, simfs_crash_mode_t mode) {
    if (in->len <= in->dlen || mode == SIMFS_CRASH_DROP) return in->dlen;
    if (mode == SIMFS_CRASH_GARBAGE) return in->len;
    if (mode == SIMFS_CRASH_TORN)
        return in->dlen + (size_t)(sf_rand(fs) % (in->len - in->dlen + 1));
    size_t newlen = in->dlen;
    for (size_t s = in->dlen / SF_SECTOR * SF_SECTOR; s < in->len; s += SF_SECTOR)
        if (sf_rand(fs) & 1) {
            size_t e = s + SF_SECTOR < in->len ? s + SF_SECTOR : in->len;
            if (e > newlen) newlen = e;
            for (size_t b = s > in->dlen ? s : in->dlen; b < e; b++)
                in->dirty[b] |= 2;
        }
    return newlen;
}

/* One file at the cut: its durable bytes plus, of the unsynced ones past them, by mode:
 * none (DROP), seeded garbage of the same length (GARBAGE), a prefix cut at any byte (TORN),
 * sectors in any order (REORDER: holes read as zeros; REORDER_GARBAGE: as random bytes). */
static void sf_crash_inode(simfs_t *fs, sf_inode_t *in, simfs_crash_mode_t mode) {
    size_t newlen = sf_crash_len(fs, in, mode);
    in->ddata = sf_bytes(in->ddata, &in->dcap, newlen ? newlen : 1);
    if (newlen > in->dlen) memset(in->ddata + in->dlen, 0, newlen - in->dlen);
    bool garbage = mode == SIMFS_CRASH_GARBAGE || mode == SIMFS_CRASH_REORDER_GARBAGE;
    for (size_t b = in->dlen; b < newlen; b++) {
        if (garbage) in->ddata[b] = (uint8_t)sf_rand(fs);
        int arrived = mode == SIMFS_CRASH_TORN ? (in->dirty[b] & 1) : (in->dirty[b] & 3) == 3;
        if (arrived && mode != SIMFS_CRASH_GARBAGE) in->ddata[b] = in->data[b];
    }
    in->dlen = newlen;
    sf_inode_settle(in); /* the machine is on again: the cache holds what the disk holds */
}

int simfs_crash(simfs_t *fs, simfs_crash_mode_t mode) {
    if (fs->posix) return -ENOTSUP;
    for (size_t i = 0; i < fs->ndirs; i++)
        sf_crash_dir(fs, &fs->dirs[i]);
    for (size_t ino = 0; ino < fs->ninodes; ino++) {
        sf_inode_t *in = &fs->inodes[ino];
        if (!in->alive) continue;
        if (!sf_referenced(fs, ino)) {
            free(in->data);
            free(in->dirty);
            free(in->ddata);
            memset(in, 0, sizeof *in);
            continue;
        }
        sf_crash_inode(fs, in, mode);
    }
    for (size_t i = 0; i < fs->nfds; i++)
        fs->fds[i].open = false;
    fs->nlocks = 0;
    simfs_clear_faults(fs);
    return 0;
}

void simfs_set_lucky_names(simfs_t *fs, bool on) {
    fs->lucky_names = on;
}

uint64_t simfs_injected(const simfs_t *fs) {
    return fs->injected;
}

uint64_t simfs_rand(simfs_t *fs) {
    return sf_rand(fs);
}

int simfs_flip(simfs_t *fs, const char *path, size_t off, int bit) {
    size_t ino;
    if (fs->posix || !sf_lookup(fs, path, &ino)) return -ENOENT;
    sf_inode_t *in = &fs->inodes[ino];
    if (off >= in->len || off >= in->dlen) return -EINVAL;
    in->data[off] ^= (uint8_t)(1u << bit);
    in->ddata[off] ^= (uint8_t)(1u << bit);
    return 0;
}

const uint8_t *simfs_data(simfs_t *fs, const char *path, size_t *len) {
    size_t ino;
    if (fs->posix || !sf_lookup(fs, path, &ino)) return NULL;
    *len = fs->inodes[ino].len;
    return fs->inodes[ino].data ? fs->inodes[ino].data : (const uint8_t *)"";
}

int simfs_set_data(simfs_t *fs, const char *path, const void *buf, size_t len) {
    if (fs->posix) return -ENOTSUP;
    char dir[SF_PATH_MAX], name[SF_NAME_MAX];
    sf_split(path, dir, name);
    sf_dir_t *d = sf_dir(fs, dir);
    if (!d) d = sf_dir_add(fs, dir);
    size_t ino = sf_inode_new(fs);
    sf_inode_t *in = &fs->inodes[ino];
    sf_inode_resize(in, len);
    if (len) memcpy(in->data, buf, len);
    sf_inode_sync(in);
    sf_live_set(d, name, ino);
    sf_entry_set(&d->dur, &d->ndur, &d->dur_cap, name, ino);
    return 0;
}

int simfs_remove(simfs_t *fs, const char *path) {
    if (fs->posix) return -ENOTSUP;
    char dir[SF_PATH_MAX], name[SF_NAME_MAX];
    sf_split(path, dir, name);
    sf_dir_t *d = sf_dir(fs, dir);
    if (!d || !sf_live_del(d, name)) return -ENOENT;
    sf_entry_t *e = sf_find(d->dur, d->ndur, name);
    if (e) *e = d->dur[--d->ndur];
    return 0;
}

size_t simfs_names(simfs_t *fs, const char *dir, int (*cb)(void *, const char *), void *ud) {
    if (fs->posix) return 0;
    char(*names)[SF_NAME_MAX];
    size_t n = sf_snapshot_names(fs, dir, &names), i = 0;
    for (; i < n; i++)
        if (cb && cb(ud, names[i]) != 0) {
            i++;
            break;
        }
    free(names);
    return i;
}

size_t simfs_count_files(simfs_t *fs, const char *dir, const char *suffix) {
    if (fs->posix) return 0;
    sf_dir_t *d = sf_dir(fs, dir);
    if (!d) return 0;
    size_t n = 0, sl = strlen(suffix);
    for (size_t i = 0; i < d->nlive; i++) {
        size_t l = strlen(d->live[i].name);
        n += l >= sl && strcmp(d->live[i].name + l - sl, suffix) == 0;
    }
    return n;
}

simfs_t *simfs_clone(const simfs_t *src, uint64_t seed) {
    simfs_t *fs = sf_alloc(seed, src->posix);
    fs->lucky_names = src->lucky_names;
    fs->inodes = calloc(src->ninodes ? src->ninodes : 1, sizeof *fs->inodes);
    if (!fs->inodes) abort();
    fs->inodes_cap = src->ninodes ? src->ninodes : 1;
    fs->ninodes = src->ninodes;
    for (size_t i = 0; i < src->ninodes; i++) {
        const sf_inode_t *a = &src->inodes[i];
        sf_inode_t *b = &fs->inodes[i];
        b->alive = a->alive;
        if (!a->alive) continue;
        sf_inode_resize(b, a->len);
        if (a->len) memcpy(b->data, a->data, a->len);
        if (a->len) memcpy(b->dirty, a->dirty, a->len);
        b->ddata = sf_bytes(NULL, &b->dcap, a->dlen ? a->dlen : 1);
        if (a->dlen) memcpy(b->ddata, a->ddata, a->dlen);
        b->dlen = a->dlen;
    }
    for (size_t i = 0; i < src->ndirs; i++) {
        const sf_dir_t *a = &src->dirs[i];
        sf_dir_t *b = sf_dir_add(fs, a->path);
        b->live = sf_grow(NULL, &b->live_cap, a->nlive ? a->nlive : 1, sizeof *b->live);
        b->dur = sf_grow(NULL, &b->dur_cap, a->ndur ? a->ndur : 1, sizeof *b->dur);
        if (a->nlive) memcpy(b->live, a->live, a->nlive * sizeof *a->live);
        if (a->ndur) memcpy(b->dur, a->dur, a->ndur * sizeof *a->dur);
        b->nlive = a->nlive;
        b->ndur = a->ndur;
    }
    return fs;
}
