/* sim-fs: the one power-cut simulator and fault injector of the I/O seam (core/io.h), for
 * the meter's WAL (tests/) and the audit log (tests/audit/): seeded and deterministic (the
 * idea of SQLite's crash-test VFS and LevelDB's fault-injection Env).
 *
 * The in-memory model. Per file (inode): its live bytes (what reads see: the page cache),
 * its durable bytes (what the disk holds) and a dirty mark per byte (written since it was
 * last made durable); per directory the live entries and the entries as of its last
 * fsync_dir. open(CREATE), rename and unlink change only the live entries.
 *   - fsync that succeeds: the dirty bytes reach the disk; the durable length becomes the
 *     live one (bytes past the old durable length that are not dirty are zeros on disk).
 *   - fsync that fails (injected): the dirty marks are cleared WITHOUT writing, as Linux did
 *     in the fsyncgate reports: reads still see the bytes, a later fsync succeeds without
 *     writing them, and a power cut loses them. Only writing them again makes them durable.
 *   - simfs_crash() is a power cut: every directory gets its durable entry set back (a file
 *     created or renamed but not dir-fsynced disappears or gets its old name back, an
 *     unlinked one comes back; with simfs_set_lucky_names, a new name may survive by a coin
 *     flip, as another metadata commit can carry it on ext4 and XFS) and every file its
 *     durable bytes plus, of the unsynced tail, by mode: none (DROP), seeded garbage of the
 *     same length (GARBAGE), a prefix cut at any byte (TORN), or each 512-byte sector
 *     independently, later ones without earlier ones (REORDER: holes read as zeros;
 *     REORDER_GARBAGE: as random bytes).
 * Directories themselves are durable once created (their parents are outside the model).
 *
 * Fault injection works in both backends: fail the Nth call of an operation (counted from
 * when the fault is armed) with an errno, a short write, and "crash at operation N": call N
 * and every later call fail with -EIO without effect, as if the machine had stopped, so the
 * test can then call simfs_crash() and reopen on the durable state. A hook sees every call
 * before and after it runs (tests/test-wal-crashpoints.c uses it to _exit at a chosen call).
 *
 * The POSIX backend (simfs_new_posix) passes every call to the real file system: counting,
 * faults and hooks work, simfs_crash does not (-ENOTSUP).
 *
 * Every test executable links only its own .c file (tests/CMakeLists.txt), so a test that
 * uses sim-fs compiles it in with #include "sim-fs.c". */
#ifndef RA_SIM_FS_H
#define RA_SIM_FS_H

#include "io.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The calls, by what they do: open counts as CREATE, OPEN_READ or OPEN_WRITE (APPEND and
 * WRITE) by its access mode. */
typedef enum simfs_op {
    SIMFS_CREATE,
    SIMFS_OPEN_READ,
    SIMFS_OPEN_WRITE,
    SIMFS_WRITE,
    SIMFS_PREAD,
    SIMFS_PWRITE,
    SIMFS_FSYNC,
    SIMFS_CLOSE,
    SIMFS_FSIZE,
    SIMFS_FSYNC_DIR,
    SIMFS_RENAME,
    SIMFS_UNLINK,
    SIMFS_TRUNCATE,
    SIMFS_SIZE,
    SIMFS_MKDIR,
    SIMFS_LIST,
    SIMFS_LOCK,
    SIMFS_UNLOCK,
    SIMFS_NOPS
} simfs_op_t;

typedef enum simfs_crash_mode {
    SIMFS_CRASH_DROP,            /* unsynced bytes are gone */
    SIMFS_CRASH_GARBAGE,         /* the unsynced suffix is replaced by random bytes, same length */
    SIMFS_CRASH_TORN,            /* a random prefix of the unsynced suffix reached the disk */
    SIMFS_CRASH_REORDER,         /* sectors of it, in any order; holes read as zeros */
    SIMFS_CRASH_REORDER_GARBAGE, /* the same, holes read as random bytes */
    SIMFS_CRASH_NMODES
} simfs_crash_mode_t;

typedef struct simfs simfs_t;

/* phase 0: before the call (it may still fail by injection), 1: after it returned rc. n is
 * the call's number among all calls (1-based). */
typedef void (*simfs_hook_fn)(void *ud, simfs_op_t op, uint64_t n, int phase, long rc);

simfs_t *simfs_new(uint64_t seed);
simfs_t *simfs_new_posix(void);
void simfs_free(simfs_t *fs);
const ra__io_t *simfs_io(simfs_t *fs);
const char *simfs_op_name(simfs_op_t op);
const char *simfs_crash_mode_name(simfs_crash_mode_t mode);
/* The simulator's seeded generator, for a test's own choices. */
uint64_t simfs_rand(simfs_t *fs);

/* Calls so far (of one operation / of all). */
uint64_t simfs_count(const simfs_t *fs, simfs_op_t op);
uint64_t simfs_calls(const simfs_t *fs);
void simfs_reset_counts(simfs_t *fs);

/* The nth call of op from now on (1: the next one) and the times - 1 after it (times 0:
 * every later one) fail with neg_errno, without effect. */
void simfs_fail(simfs_t *fs, simfs_op_t op, uint64_t nth, int neg_errno, uint64_t times);
/* The nth call of op from now on takes effect, then reports neg_errno (a rename that
 * happened although it failed, as over NFS when a reply is lost). */
void simfs_fail_after(simfs_t *fs, simfs_op_t op, uint64_t nth, int neg_errno);
/* The nth write or pwrite from now on writes only k bytes (when k < n) and returns k. */
void simfs_short_write(simfs_t *fs, uint64_t nth, size_t k);
/* Call number n from now on (1: the next call) and every later one fail with -EIO. */
void simfs_crash_at(simfs_t *fs, uint64_t n);
/* From a hook (phase 0): this very call and every later one fail with -EIO. */
void simfs_crash_now(simfs_t *fs);
/* Faults that fired so far (failed calls and short writes). */
uint64_t simfs_injected(const simfs_t *fs);
/* Whether a crash point was reached. */
bool simfs_crashed(const simfs_t *fs);
/* Injected faults (and a pending or reached crash point) are forgotten. */
void simfs_clear_faults(simfs_t *fs);
/* A disk of `bytes` (0: unlimited): a write that needs more space than is free writes what
 * fits (a short count), and fails with ENOSPC when nothing fits; unlinking a file frees
 * its bytes. */
void simfs_set_capacity(simfs_t *fs, uint64_t bytes);
uint64_t simfs_usage(const simfs_t *fs);
void simfs_set_hook(simfs_t *fs, simfs_hook_fn hook, void *ud);
/* Names created since their directory's last fsync_dir may survive a cut (a coin flip). */
void simfs_set_lucky_names(simfs_t *fs, bool on);

/* The power cut: back to the durable state (see above). Open descriptors and locks are
 * dropped, faults cleared. 0, or -ENOTSUP for the POSIX backend. */
int simfs_crash(simfs_t *fs, simfs_crash_mode_t mode);

/* ---- inspection and tampering (in-memory backend) ---------------------------------- */
/* The live content of a file, NULL when there is none (valid until the next call). */
const uint8_t *simfs_data(simfs_t *fs, const char *path, size_t *len);
/* Writes a file whose content and directory entry are both durable at once. */
int simfs_set_data(simfs_t *fs, const char *path, const void *buf, size_t len);
/* Flips a bit of a byte already durable, on the disk and in the cache (-EINVAL when the
 * byte is not durable). */
int simfs_flip(simfs_t *fs, const char *path, size_t off, int bit);
/* Removes a file durably. */
int simfs_remove(simfs_t *fs, const char *path);
/* Live entry names of dir, sorted; cb returning non-zero stops. Returns how many were seen. */
size_t simfs_names(simfs_t *fs, const char *dir, int (*cb)(void *ud, const char *name), void *ud);
/* Files of dir whose name ends with suffix ("" for all). */
size_t simfs_count_files(simfs_t *fs, const char *dir, const char *suffix);
/* Copies every file and directory of src (durable and live state) into a new file system. */
simfs_t *simfs_clone(const simfs_t *src, uint64_t seed);

#endif
