/* The WAL under I/O errors (EIO on fsync, ENOSPC, short writes, EIO on rename and on the
 * directory fsync) and at its caps (PersistenceFull, degraded, recovery after ACK and
 * compaction), on sim-fs's fault injection (tests/wal_fixture.h). */
#include "wal_fixture.h"

/* The fixture (300 records in window 0) on a disk where op fails with neg_errno `times`
 * times (0: always) from its next call; sealing window 0 is then refused with want, and
 * g_log holds what the refusal logged. */
static bool open_refused(walfix_t *f, uint64_t seed, simfs_op_t op, int neg_errno, uint64_t times,
                         int want) {
    if (!walfix_open(f, seed, NULL, 300)) return false;
    simfs_fail(f->fs, op, 1, neg_errno, times);
    log_reset();
    walfix_refused(f, 1, want);
    return true;
}

RA_TEST(io_fsync_eio_once_rewrites_to_a_new_segment) {
    walfix_t f;
    REQUIRE(walfix_open(&f, 0x10e1, NULL, 300));
    uint64_t creates0 = simfs_count(f.fs, SIMFS_CREATE); /* (the space reserve, at open) */
    simfs_fail(f.fs, SIMFS_FSYNC, 1, -EIO, 1);
    size_t n = walfix_seal(&f, 1);
    CHECK(n > 0);
    CHECK_EQ_U64(simfs_count(f.fs, SIMFS_CREATE) - creates0, 2); /* never the same file again */
    CHECK(metric(f.m, "accounting_wal_write_errors_total") == 1);
    CHECK_EQ_U64(seg_files(f.fs), 1);
    CHECK_EQ_U64(tmp_files(f.fs), 0);
    /* What was reported sealed survives a power cut right now. */
    ra_meter_close(f.m);
    CHECK_RC(simfs_crash(f.fs, SIMFS_CRASH_GARBAGE), 0);
    REQUIRE(walfix_meter(&f));
    CHECK_EQ_U64(ra_meter_pending_count(f.m), n);
    totals_t again = {{0}};
    sum_pending(f.m, &again);
    CHECK_EQ_U64(totals_diff(&f.rec, &again), 0);
    walfix_end(&f);
}

RA_TEST(io_fsync_eio_twice_nothing_sealed_nothing_lost) {
    walfix_t f;
    REQUIRE(open_refused(&f, 0x10e2, SIMFS_FSYNC, -EIO, 2, RA_EIO));
    walfix_nothing_written(&f);
    CHECK_EQ_U64(atomic_load(&f.m->hdr->seal_intent), 0);
    CHECK(metric(f.m, "accounting_wal_write_errors_total") == 2);
    CHECK(metric(f.m, "accounting_wal_failed") == 0);
    /* Writers carry on, in the next window and late into the unsealed one. */
    CHECK_RC(record_window(f.m, 1, 100, &f.seed, &f.rec), 0);
    CHECK_RC(record_window(f.m, 0, 50, &f.seed, &f.rec), 0);
    walfix_finish(&f, 2);
}

RA_TEST(io_enospc_on_write) {
    walfix_t f;
    /* once: the second attempt succeeds */
    REQUIRE(walfix_open(&f, 0x10e3, NULL, 300));
    simfs_fail(f.fs, SIMFS_WRITE, 1, -ENOSPC, 1);
    walfix_seal(&f, 1);
    CHECK_EQ_U64(totals_diff(&f.rec, &f.sealed), 0);
    walfix_end(&f);
    /* always: PersistenceFull, degraded, nothing sealed; room again → everything sealed */
    REQUIRE(open_refused(&f, 0x10e4, SIMFS_WRITE, -ENOSPC, 0, RA_EPERSISTFULL));
    CHECK(metric(f.m, "accounting_rejected_total{reason=\"wal_full\"}") == 1);
    CHECK_EQ_I64(ra_meter_degraded(f.m), 1);
    CHECK_RC(
        ra_meter_record_at(f.m, RA_T_EPOCH_MS + WIN_MS + 5, &g_tenants[0], &g_subjects[0], 0, 1),
        RA_EDEGRADED);
    walfix_nothing_written(&f);
    simfs_clear_faults(f.fs);
    CHECK_RC(ra_meter_compact(f.m), 0);
    CHECK_EQ_I64(ra_meter_degraded(f.m), 0);
    walfix_finish(&f, 1);
}

/* Issue 14 item 13: the log says what happened. Before: a full disk was "the WAL is full"
 * (its caps, which were far away), a read-only file system "input/output error", and a
 * missing compaction reserve nothing at all. */
RA_TEST(io_messages_say_what_happened) {
    walfix_t f;
    REQUIRE(open_refused(&f, 0x10f1, SIMFS_WRITE, -ENOSPC, 0, RA_EPERSISTFULL));
    CHECK(strstr(g_log, "the file system holding the WAL") != NULL);
    CHECK(strstr(g_log, "No space left on device") != NULL);
    CHECK(strstr(g_log, "within its caps") != NULL);
    simfs_clear_faults(f.fs);
    walfix_end(&f);

    REQUIRE(open_refused(&f, 0x10f2, SIMFS_WRITE, -EROFS, 0, RA_EIO));
    CHECK(strstr(g_log, "Read-only file system") != NULL);
    CHECK(strstr(g_log, "input/output error") == NULL);
    simfs_clear_faults(f.fs);
    walfix_end(&f);

    /* the reserve cannot be made at open: said once; said again when it is back */
    walfix_start(&f, 0x10f3);
    simfs_fail(f.fs, SIMFS_CREATE, 1, -EROFS, 1);
    log_reset();
    REQUIRE(walfix_meter(&f));
    CHECK(strstr(g_log, "cannot make the compaction reserve (Read-only file system)") != NULL);
    /* a window sealed and ACKed: compaction removes its segment and makes the reserve */
    CHECK_RC(record_window(f.m, 0, 50, &f.seed, &f.rec), 0);
    ra_slice_t *out[256];
    size_t n = 0;
    CHECK_RC(ra_meter_rollover(f.m, RA_T_EPOCH_MS + WIN_MS, out, 256, &n), 0);
    REQUIRE(n > 0);
    for (size_t i = 0; i < n; i++) {
        CHECK_RC(ra_meter_ack(f.m, out[i]), 0);
        ra_slice_unref(out[i]);
    }
    CHECK_RC(ra_meter_compact(f.m), 0);
    CHECK(strstr(g_log, "the compaction reserve is back") != NULL);
    walfix_end(&f);
}

RA_TEST(io_short_writes_are_completed) {
    const size_t ks[] = {0, 1, 7, 100};
    for (size_t i = 0; i < 4; i++) {
        walfix_t f;
        REQUIRE(walfix_open(&f, 0x10e5 + i, NULL, 300));
        simfs_short_write(f.fs, 1, ks[i]);
        size_t n = walfix_seal(&f, 1);
        CHECK(n > 0);
        CHECK_EQ_U64(totals_diff(&f.rec, &f.sealed), 0);
        /* k = 0 is "no progress": an error, rewritten to a new segment */
        CHECK(metric(f.m, "accounting_wal_write_errors_total") == (ks[i] == 0 ? 1 : 0));
        ra_meter_close(f.m);
        CHECK_RC(simfs_crash(f.fs, SIMFS_CRASH_DROP), 0);
        REQUIRE(walfix_meter(&f));
        totals_t again = {{0}};
        CHECK_EQ_U64(sum_pending(f.m, &again), n);
        CHECK_EQ_U64(totals_diff(&f.rec, &again), 0);
        CHECK(metric(f.m, "accounting_wal_corrupt_total") == 0);
        walfix_end(&f);
    }
}

RA_TEST(io_rename_eio) {
    walfix_t f;
    REQUIRE(open_refused(&f, 0x10e9, SIMFS_RENAME, -EIO, 1, RA_EIO));
    walfix_nothing_written(&f);
    CHECK(metric(f.m, "accounting_wal_failed") == 0);
    walfix_finish(&f, 1);
}

/* A rename that took effect although it reported an error (NFS when a reply is lost; any
 * file system that fails after its journal commit). The segment is in the directory but was
 * not reported: its counts go back to the plane and are sealed again. Nothing may then be
 * counted twice, and no seq may appear twice after a restart. */
RA_TEST(io_rename_fails_after_taking_effect) {
    walfix_t f;
    REQUIRE(walfix_open(&f, 0x10ec, NULL, 300));
    simfs_fail_after(f.fs, SIMFS_RENAME, 1, -EIO);
    walfix_refused(&f, 1, RA_EIO);
    printf("# rename failed after taking effect: %zu .seg files in the directory\n",
           seg_files(f.fs));
    /* late records for the same keys, so the next seal of window 0 differs */
    CHECK_RC(record_window(f.m, 0, 50, &f.seed, &f.rec), 0);
    size_t n = walfix_seal(&f, 1);
    CHECK_EQ_U64(totals_diff(&f.rec, &f.sealed), 0);
    ra_meter_close(f.m);
    REQUIRE(walfix_meter(&f));
    static ra_slice_t *p[512];
    size_t np = pending_all(f.m, p, 512);
    totals_t again = {{0}};
    for (size_t i = 0; i < np; i++)
        add_slice(&again, p[i]);
    int twice = 0;
    for (size_t i = 0; i < np; i++)
        for (size_t j = i + 1; j < np; j++)
            twice += same_stream(p[i], p[j]) && seq_of(p[i]) == seq_of(p[j]);
    printf("# after a restart: %zu pending (%zu reported), %d seq twice, %llu counted vs %llu "
           "recorded\n",
           np, n, twice, (unsigned long long)totals_sum(&again),
           (unsigned long long)totals_sum(&f.rec));
    CHECK_EQ_I64(twice, 0);
    CHECK_EQ_U64(np, n);
    CHECK_EQ_U64(totals_sum(&again), totals_sum(&f.rec));
    unref_all(p, np);
    walfix_end(&f);
}

RA_TEST(io_fsync_dir_eio_rename_taken_back) {
    walfix_t f;
    REQUIRE(open_refused(&f, 0x10ea, SIMFS_FSYNC_DIR, -EIO, 1, RA_EIO));
    CHECK_EQ_U64(seg_files(f.fs), 0);
    CHECK(metric(f.m, "accounting_wal_failed") == 0);
    CHECK_EQ_U64(frozen_pairs(f.m), 0);
    /* A power cut now finds nothing: the segment never was, and was never reported. */
    simfs_t *cut = simfs_clone(f.fs, 1);
    simfs_crash(cut, SIMFS_CRASH_DROP);
    ra_meter_close(f.m);
    f.m = NULL;
    ra_meter_t *m2 = open_io(&f.cfg, cut, NULL);
    REQUIRE(m2);
    CHECK_EQ_U64(ra_meter_pending_count(m2), 0);
    ra_meter_close(m2);
    simfs_free(cut);
    simfs_free(f.fs);

    /* and without the cut the meter carries on: everything sealed by the next rollover */
    REQUIRE(open_refused(&f, 0x10eb, SIMFS_FSYNC_DIR, -EIO, 1, RA_EIO));
    walfix_finish(&f, 1);
}

/* The directory fsync fails and so does taking the rename back: the segment is in doubt. The
 * WAL is failed (metric, typed refusals, nothing reported), the counts stay frozen in the
 * process-shared plane, and the next sealer decides from the disk. variant 0: the unlink
 * worked (segment gone); 1: the unlink failed (segment present); 2: as 1, then a power cut
 * (the rename was never durable). */
RA_TEST(io_fsync_dir_eio_twice_wal_failed_restart_decides) {
    for (int variant = 0; variant < 3; variant++) {
        char shm[700];
        snprintf(shm, sizeof shm, "%s/plane-doubt-%d", ra_t_tmpdir(), variant);
        unlink(shm);
        walfix_t f;
        REQUIRE(walfix_open(&f, 0x10f0 + (uint64_t)variant, shm, 300));
        simfs_fail(f.fs, SIMFS_FSYNC_DIR, 1, -EIO, 2);
        if (variant) simfs_fail(f.fs, SIMFS_UNLINK, 1, -EIO, 1);
        walfix_refused(&f, 1, RA_EIO);
        CHECK(metric(f.m, "accounting_wal_failed") == 1);
        uint64_t intent = atomic_load(&f.m->hdr->seal_intent);
        CHECK(intent != 0 && intent != RA_INTENT_FREEZING);
        CHECK(frozen_pairs(f.m) > 0);
        CHECK_EQ_U64(seg_files(f.fs), variant ? 1 : 0);
        simfs_clear_faults(f.fs);
        /* Writers are never refused; late records into the frozen window go elsewhere. */
        CHECK_RC(record_window(f.m, 1, 100, &f.seed, &f.rec), 0);
        CHECK_RC(record_window(f.m, 0, 50, &f.seed, &f.rec), 0);
        /* Sealing is refused until a restart, and the refusal keeps the record of the
         * segment in doubt. */
        walfix_refused(&f, 2, RA_EIO);
        CHECK_EQ_U64(atomic_load(&f.m->hdr->seal_intent), intent);
        CHECK_RC(ra_meter_compact(f.m), 0);
        ra_meter_close(f.m);
        if (variant == 2) CHECK_RC(simfs_crash(f.fs, SIMFS_CRASH_DROP), 0);
        REQUIRE(walfix_meter(&f));
        CHECK_EQ_U64(atomic_load(&f.m->hdr->seal_intent), 0);
        CHECK_EQ_U64(frozen_pairs(f.m), 0);
        CHECK(metric(f.m, "accounting_wal_failed") == 0);
        size_t replayed = sum_pending(f.m, &f.sealed);
        printf("# in doubt, variant %d: %zu slices replayed from the segment, the rest sealed "
               "again\n",
               variant, replayed);
        CHECK(variant == 1 ? replayed > 0 : replayed == 0);
        walfix_finish(&f, 2);
        unlink(shm);
    }
}

/* ---- caps ------------------------------------------------------------------------------- */

static void cap_full_then_recover(walfix_t *f, int64_t w_full, unsigned streams, unsigned subj,
                                  const char *what) {
    size_t n = 0;
    double full0 = metric(f->m, "accounting_rejected_total{reason=\"wal_full\"}");
    CHECK_RC(cap_round(f, w_full, streams, subj, &n), RA_EPERSISTFULL);
    CHECK(n < streams); /* what fits under the cap is sealed, the rest waits in the plane */
    CHECK(metric(f->m, "accounting_rejected_total{reason=\"wal_full\"}") == full0 + 1);
    CHECK_EQ_I64(ra_meter_degraded(f->m), 1);
    CHECK(metric(f->m, "accounting_degraded") == 1);
    double deg0 = metric(f->m, "accounting_rejected_total{reason=\"degraded\"}");
    CHECK_RC(ra_meter_record_at(f->m, RA_T_EPOCH_MS + (w_full + 1) * WIN_MS + 9, &g_tenants[0],
                                &g_subjects[0], 0, 1),
             RA_EDEGRADED);
    CHECK(metric(f->m, "accounting_rejected_total{reason=\"degraded\"}") == deg0 + 1);
    CHECK_EQ_U64(frozen_pairs(f->m), 0);
    CHECK(f->sealed.v[0] < f->rec.v[0]); /* the refused window waits in the plane */
    /* ACK + compaction make room: degraded clears and the next rollover seals it all. */
    ack_all(f->m);
    CHECK_RC(ra_meter_compact(f->m), 0);
    CHECK_EQ_I64(ra_meter_degraded(f->m), 0);
    CHECK_RC(cap_seal(f, w_full, &n), 0); /* at the start of window w_full + 1 */
    CHECK(n > 0);
    CHECK_EQ_U64(f->sealed.v[0], f->rec.v[0]);
    printf("# caps (%s): refused with PersistenceFull, degraded, recovered after ACK + "
           "compaction, totals equal (%llu)\n",
           what, (unsigned long long)f->rec.v[0]);
}

/* A cap round in window w that fits: every one of the streams sealed. */
static void cap_round_fits(walfix_t *f, int64_t w, unsigned streams, unsigned subj) {
    size_t n = 0;
    CHECK_RC(cap_round(f, w, streams, subj, &n), 0);
    CHECK_EQ_U64(n, streams);
}

RA_TEST(caps_max_entries) {
    walfix_t f;
    REQUIRE(walfix_open_capped(&f, 0xca1, 4, NULL));
    cap_round_fits(&f, 0, 3, 4);
    cap_full_then_recover(&f, 1, 3, 4, "wal_max_entries = 4");
    walfix_end(&f);
}

/* ACKed frames count against the caps until a compaction drops them; a rollover that hits
 * a cap compacts first, so ACKs without an explicit compaction never degrade the meter. */
RA_TEST(caps_acked_frames_reclaimed_before_refusing) {
    walfix_t f;
    REQUIRE(walfix_open_capped(&f, 0xca4, 4, NULL));
    size_t n;
    double full0 = metric(f.m, "accounting_rejected_total{reason=\"wal_full\"}");
    for (int64_t w = 0; w < 5; w++) { /* 3 frames a round, cap 4: full without a compaction */
        cap_round_fits(&f, w, 3, 4);
        CHECK_EQ_I64(ra_meter_degraded(f.m), 0);
        ack_all(f.m); /* no ra_meter_compact */
    }
    CHECK(metric(f.m, "accounting_rejected_total{reason=\"wal_full\"}") == full0);
    CHECK_EQ_U64(f.sealed.v[0], f.rec.v[0]);
    /* un-ACKed frames still count: the cap still refuses when they fill it */
    CHECK_RC(cap_round(&f, 5, 3, 4, &n), 0);
    CHECK_RC(cap_round(&f, 6, 3, 4, &n), RA_EPERSISTFULL);
    CHECK_EQ_I64(ra_meter_degraded(f.m), 1);
    walfix_end(&f);
}

RA_TEST(caps_max_bytes) {
    walfix_t f;
    walfix_start(&f, 0xca2);
    f.cfg.capacity_rows = 50000;
    f.cfg.wal_max_bytes = 2u << 20; /* the smallest allowed: two ~940 KiB slices fit */
    REQUIRE(walfix_meter(&f));
    cap_round_fits(&f, 0, 1, 40000);
    cap_round_fits(&f, 1, 1, 40000);
    /* ACK only the first two: the third still does not fit until they are compacted */
    cap_full_then_recover(&f, 2, 1, 40000, "wal_max_bytes = 2 MiB");
    walfix_end(&f);
}

RA_TEST(caps_max_age) {
    walfix_t f;
    walfix_start(&f, 0xca3);
    f.cfg.wal_max_age_s = 90;
    ra_t_now_ms = RA_T_EPOCH_MS;
    REQUIRE(walfix_meter(&f));
    size_t n;
    ra_t_now_ms = RA_T_EPOCH_MS + WIN_MS;
    CHECK_RC(cap_round(&f, 0, 2, 3, &n), 0); /* segment created at 60 s */
    ra_t_now_ms = RA_T_EPOCH_MS + 2 * WIN_MS;
    CHECK_RC(cap_round(&f, 1, 2, 3, &n), 0); /* oldest is 60 s old: fine */
    ra_t_now_ms = RA_T_EPOCH_MS + 3 * WIN_MS;
    cap_full_then_recover(&f, 2, 2, 3, "wal_max_age_s = 90"); /* 120 s old: refused */
    ra_meter_close(f.m);
    ra_t_now_ms = 0;
    simfs_free(f.fs);
}

/* One boundary with more streams than wal_max_entries: the WAL can never take the batch as
 * one segment. Sealing must still make progress (as it does when the pending ring is the
 * limit) instead of refusing the window forever. */
RA_TEST(caps_boundary_larger_than_max_entries_makes_progress) {
    walfix_t f;
    REQUIRE(walfix_open_capped(&f, 0xca4, 4, NULL));
    size_t n = 0, total = 0;
    int rc = cap_round(&f, 0, 6, 2, &n);
    total += n;
    for (int tries = 0; tries < 5 && f.sealed.v[0] < f.rec.v[0]; tries++) {
        ack_all(f.m);
        ra_meter_compact(f.m);
        ra_slice_t *out[64];
        rc = ra_meter_rollover(f.m, RA_T_EPOCH_MS + WIN_MS, out, 64, &n);
        for (size_t i = 0; i < n; i++) {
            for (size_t r = 0; r < ra_slice_row_count(out[i]); r++) {
                uint64_t inc;
                ra_slice_row(out[i], r, NULL, &inc);
                f.sealed.v[0] += inc;
            }
            ra_slice_unref(out[i]);
        }
        total += n;
    }
    printf("# caps: 6 streams at one boundary, wal_max_entries 4: %zu slices sealed after 5 "
           "ACK + compact + rollover rounds, last rc %s, degraded %d\n",
           total, ra_err_name(rc), ra_meter_degraded(f.m));
    CHECK_EQ_U64(f.sealed.v[0], f.rec.v[0]);
    walfix_end(&f);
}

/* A full disk: writes fail with ENOSPC. Rollovers are refused (PersistenceFull, degraded,
 * nothing lost) and the operator's way out is the downstream ACKing and compaction freeing
 * space — which must not itself need new space. */
RA_TEST(disk_full_compaction_frees_space) {
    walfix_t f;
    REQUIRE(walfix_open(&f, 0xd15c, NULL, 300));
    size_t n = walfix_seal(&f, 1);
    CHECK_RC(record_window(f.m, 1, 200, &f.seed, &f.rec), 0);
    simfs_set_capacity(f.fs, simfs_usage(f.fs)); /* the disk is full from now on */
    size_t n2 = 77;
    CHECK_RC(ra_meter_rollover(f.m, RA_T_EPOCH_MS + 2 * WIN_MS, NULL, 0, &n2), RA_EPERSISTFULL);
    CHECK_EQ_U64(n2, 0);
    CHECK_EQ_U64(ra_meter_pending_count(f.m), n);
    CHECK_EQ_I64(ra_meter_degraded(f.m), 1);
    /* the downstream ACKs what it has; compaction must free the segment */
    static ra_slice_t *p[256];
    size_t np = pending_all(f.m, p, 256);
    for (size_t i = 0; i < np; i++)
        CHECK_RC(ra_meter_ack(f.m, p[i]), 0);
    unref_all(p, np);
    int rc = ra_meter_compact(f.m);
    printf("# disk full: compaction answers %s, %zu segment(s) left, %.0f WAL bytes\n",
           ra_err_name(rc), seg_files(f.fs), metric(f.m, "accounting_wal_size_bytes"));
    CHECK_RC(rc, 0);
    CHECK_EQ_U64(seg_files(f.fs), 0);
    /* space again: everything recorded is sealed, chains intact */
    simfs_set_capacity(f.fs, 0);
    CHECK_RC(ra_meter_compact(f.m), 0);
    walfix_finish(&f, 2);
}

int main(void) {
    printf("# test-wal-io\n");
    double t0 = now_s();
    RA_RUN(io_fsync_eio_once_rewrites_to_a_new_segment, "EIO on fsync: rewritten to a new segment");
    RA_RUN(io_fsync_eio_twice_nothing_sealed_nothing_lost,
           "EIO on both fsyncs: IoError, nothing sealed, nothing lost");
    RA_RUN(io_enospc_on_write, "ENOSPC on write: PersistenceFull, degraded, nothing lost");
    RA_RUN(io_messages_say_what_happened,
           "messages: a full disk, a read-only file system, a missing reserve, as they are");
    RA_RUN(io_short_writes_are_completed, "short writes are completed");
    RA_RUN(io_rename_eio, "EIO on rename: IoError, nothing sealed, nothing lost");
    RA_RUN(io_rename_fails_after_taking_effect,
           "EIO from a rename that took effect: nothing counted twice");
    RA_RUN(io_fsync_dir_eio_rename_taken_back, "EIO on the directory fsync: rename taken back");
    RA_RUN(io_fsync_dir_eio_twice_wal_failed_restart_decides,
           "EIO on the directory fsync twice: WAL failed, restart decides from disk");
    RA_RUN(caps_max_entries, "caps: wal_max_entries → PersistenceFull, degraded, recovers");
    RA_RUN(caps_acked_frames_reclaimed_before_refusing,
           "caps: ACKed frames are compacted away before a rollover is refused");
    RA_RUN(caps_max_bytes, "caps: wal_max_bytes → PersistenceFull, degraded, recovers");
    RA_RUN(caps_max_age, "caps: wal_max_age_s → PersistenceFull, degraded, recovers");
    RA_RUN(caps_boundary_larger_than_max_entries_makes_progress,
           "caps: a boundary larger than wal_max_entries is still sealed");
    RA_RUN(disk_full_compaction_frees_space, "disk full: compaction after ACK frees space");
    printf("# test-wal-io: %.2f s\n", now_s() - t0);
    RA_DONE();
}
