/* Restarts of a meter with a WAL: ACKed slices in partly ACKed segments, a new sealer of a
 * full WAL, transient read errors at open, leftover .tmp files, and a crash in the middle
 * of compaction (tests/wal_fixture.h). */
#include "wal_fixture.h"

/* ---- restarts ----------------------------------------------------------------------------- */

/* ACK is remembered in memory only and compaction removes whole segments, so a restart
 * replays the ACKed slices of every segment that still holds an un-ACKed one. The WAL's
 * entry cap counts un-ACKed slices only: a WAL within its caps must still reopen. */
RA_TEST(restart_with_acked_slices_in_partly_acked_segments) {
    walfix_t f;
    walfix_start(&f, 0x2e01);
    f.cfg.pending_slices_cap = 16; /* wal_max_entries defaults to it */
    REQUIRE(walfix_meter(&f));
    for (int w = 0; w < 6; w++) {
        ra_slice_t *out[8];
        size_t n = 0;
        CHECK_RC(walfix_seal_grid(&f, w, 2, 2, 3, out, 8, &n), 0);
        CHECK_EQ_U64(n, 4);
        for (size_t i = 0; i + 1 < n; i++)
            CHECK_RC(ra_meter_ack(f.m, out[i]), 0); /* 3 of 4 */
        unref_all(out, n);
        CHECK_RC(ra_meter_compact(f.m), 0);
    }
    printf("# restart: %.0f un-ACKed slices (cap %u) in %.0f segments holding %d frames\n",
           metric(f.m, "accounting_wal_entries"), f.cfg.pending_slices_cap,
           metric(f.m, "accounting_wal_segments"), 6 * 4);
    CHECK(metric(f.m, "accounting_wal_entries") == 6);
    int rc = 0;
    if (!walfix_reopen(&f, &rc)) RA_FAILF("the reopen fails: %s", ra_err_name(rc));
    if (f.m) CHECK(ra_meter_pending_count(f.m) >= 6);
    walfix_end(&f);
}

/* A sealer that set the shared plane degraded because the WAL was full is replaced (restart,
 * kill -9); the new sealer makes room: the plane must not stay degraded. */
RA_TEST(restart_of_a_sealer_while_wal_full_clears_degraded) {
    char shm[700];
    snprintf(shm, sizeof shm, "%s/plane-full-restart", ra_t_tmpdir());
    unlink(shm);
    walfix_t f;
    REQUIRE(walfix_open_capped(&f, 0x2e02, 4, shm));
    size_t n;
    CHECK_RC(cap_round(&f, 0, 3, 2, &n), 0);
    CHECK_RC(cap_round(&f, 1, 3, 2, &n), RA_EPERSISTFULL);
    CHECK_EQ_U64(n, 1); /* the one stream that fit the last free entry; two wait */
    CHECK_EQ_I64(ra_meter_degraded(f.m), 1);
    REQUIRE(walfix_reopen(&f, NULL)); /* the next sealer */
    ack_all(f.m);
    CHECK_RC(ra_meter_compact(f.m), 0);
    ra_slice_t *out[16];
    CHECK_RC(ra_meter_rollover(f.m, RA_T_EPOCH_MS + 2 * WIN_MS, out, 16, &n), 0);
    unref_all(out, n < 16 ? n : 16);
    CHECK_EQ_U64(n, 2); /* the two streams that waited in the plane */
    CHECK_EQ_I64(ra_meter_degraded(f.m), 0);
    CHECK_RC(ra_meter_record_at(f.m, RA_T_EPOCH_MS + 2 * WIN_MS + 1, &g_tenants[0], &g_subjects[0],
                                0, 1),
             0);
    walfix_end(&f);
    unlink(shm);
}

/* A segment that cannot be read at open (a transient EIO) is not a corrupt one: its slices
 * must not be silently left out, and its file must never be overwritten by a new segment
 * that reuses its id. */
RA_TEST(restart_with_a_transient_read_error_loses_nothing) {
    walfix_t f;
    REQUIRE(walfix_open(&f, 0x2e03, NULL, 0));
    static ra_slice_t *sealed[64];
    size_t ns = 0;
    for (int w = 0; w < 3; w++) {
        size_t n = 0;
        CHECK_RC(walfix_seal_grid(&f, w, 2, 2, 3, sealed + ns, 64 - ns, &n), 0);
        ns += n;
    }
    /* open: size(heads) is the 1st size call, the three segments the 2nd..4th */
    simfs_fail(f.fs, SIMFS_SIZE, 4, -EIO, 1);
    int rc = 0;
    walfix_reopen(&f, &rc);
    size_t np = f.m ? ra_meter_pending_count(f.m) : 0;
    printf("# transient EIO reading the newest segment at open: open %s, %zu of %zu slices "
           "pending\n",
           ra_err_name(rc), np, ns);
    if (f.m) { /* seal more, then reopen without the fault */
        size_t n = 0;
        ra_slice_t *out[8];
        CHECK_RC(walfix_seal_grid(&f, 5, 2, 2, 3, out, 8, &n), 0);
        for (size_t i = 0; i < n && ns < 64; i++)
            sealed[ns++] = out[i];
    }
    REQUIRE(walfix_reopen(&f, NULL));
    static ra_slice_t *p[64];
    np = pending_all(f.m, p, 64);
    size_t missing = 0;
    for (size_t i = 0; i < ns; i++) {
        bool found = false;
        for (size_t j = 0; j < np && !found; j++)
            found = same_bytes(p[j], sealed[i]);
        missing += !found;
    }
    printf("# after a clean reopen: %zu of %zu reported slices pending, %zu lost\n", np, ns,
           missing);
    CHECK_EQ_U64(missing, 0);
    CHECK_EQ_I64(chain_breaks(p, np), 0);
    unref_all(p, np);
    unref_all(sealed, ns);
    walfix_end(&f);
}

/* The same for the heads checkpoint: once every segment is compacted it is the only record
 * of the chains. A transient EIO reading it must not restart the chains at seq 1 (a fork
 * the downstream answers "conflict"), let alone get the forked heads checkpointed. */
RA_TEST(restart_with_a_transient_heads_read_error_keeps_chains) {
    walfix_t f;
    REQUIRE(walfix_open(&f, 0x2e04, NULL, 0));
    size_t n = 0;
    for (int w = 0; w < 2; w++)
        CHECK_RC(walfix_seal_grid(&f, w, 1, 1, 3, NULL, 0, &n), 0);
    ack_all(f.m);
    CHECK_RC(ra_meter_compact(f.m), 0);
    CHECK_EQ_U64(seg_files(f.fs), 0);
    simfs_fail(f.fs, SIMFS_SIZE, 1, -EIO, 1); /* the first size call at open is the heads' */
    int rc = 0;
    uint64_t seq = 0;
    if (walfix_reopen(&f, &rc)) {
        ra_slice_t *out = NULL;
        CHECK_RC(walfix_seal_grid(&f, 3, 1, 1, 3, &out, 1, &n), 0);
        if (n) seq = seq_of(out);
        ra_slice_unref(out);
        ack_all(f.m);
        CHECK_RC(ra_meter_compact(f.m), 0);
    }
    printf("# transient EIO reading the heads checkpoint at open: open %s, next slice seq %llu "
           "(want 3)\n",
           ra_err_name(rc), (unsigned long long)seq);
    CHECK(f.m == NULL || seq == 3);
    walfix_end(&f);
}

/* Leftover .tmp files (a segment or a heads checkpoint never renamed into place) are removed
 * at open and never replayed; foreign names are left alone. */
RA_TEST(recovery_removes_leftover_tmp_files) {
    walfix_t f;
    REQUIRE(walfix_open(&f, 0x2e05, NULL, 0));
    size_t n = 0;
    CHECK_RC(walfix_seal_grid(&f, 0, 2, 1, 3, NULL, 0, &n), 0);
    wal_fix_t fix = {.fs = f.fs};
    fix_scan(&fix);
    REQUIRE(fix.nseg == 1);
    size_t len;
    uint8_t *b = copy_of(f.fs, fix.seg[0].path, &len, 0);
    set_bytes(f.fs, WAL_DIR "/0000000000000100.seg.tmp", b, len); /* a valid segment, as .tmp */
    set_bytes(f.fs, WAL_DIR "/heads.tmp", b, 10);
    set_bytes(f.fs, WAL_DIR "/README", b, 3);
    set_bytes(f.fs, WAL_DIR "/00000000000001.seg", b, len); /* not 16 hex digits */
    free(b);
    REQUIRE(walfix_reopen(&f, NULL));
    CHECK_EQ_U64(ra_meter_pending_count(f.m), n);
    CHECK_EQ_U64(tmp_files(f.fs), 0);
    CHECK(simfs_data(f.fs, WAL_DIR "/README", &len) != NULL);
    CHECK(metric(f.m, "accounting_wal_corrupt_total") == 0);
    walfix_end(&f);
}

/* ---- a crash in the middle of compaction ---------------------------------------------------- */

static int g_unlinks;
static void crash_at_second_unlink(void *ud, simfs_op_t op, uint64_t n, int phase, long rc) {
    (void)n;
    (void)rc;
    if (phase == 0 && op == SIMFS_UNLINK && ++g_unlinks == 2) simfs_crash_now(ud);
}

RA_TEST(compaction_crash_brings_segments_back_harmlessly) {
    /* fail_at: which directory fsync of the compaction fails before the power cut
     * (1: the heads checkpoint's, 2: the one after the unlinks); unlink_crash: the power
     * cut comes after the first unlink instead. */
    for (int variant = 0; variant < 3; variant++) {
        walfix_t f;
        REQUIRE(walfix_open(&f, 0xc0a0 + (uint64_t)variant, NULL, 0));
        simfs_t *fs = f.fs;
        static ra_slice_t *sealed[256];
        size_t ns = 0;
        for (int w = 0; w < 2; w++) {
            CHECK_RC(record_window(f.m, w, 100, &f.seed, NULL), 0);
            size_t n = 0;
            CHECK_RC(
                ra_meter_rollover(f.m, RA_T_EPOCH_MS + (w + 1) * WIN_MS, sealed + ns, 256 - ns, &n),
                0);
            ns += n;
        }
        REQUIRE(seg_files(fs) == 2);
        ack_all(f.m);
        if (variant < 2)
            simfs_fail(fs, SIMFS_FSYNC_DIR, (uint64_t)variant + 1, -EIO, 0);
        else
            simfs_set_hook(fs, crash_at_second_unlink, fs);
        g_unlinks = 0;
        CHECK(ra_meter_compact(f.m) != 0);
        simfs_set_hook(fs, NULL, NULL);
        ra_meter_close(f.m);
        f.m = NULL;
        CHECK_RC(simfs_crash(fs, SIMFS_CRASH_DROP), 0);
        CHECK_EQ_U64(seg_files(fs), 2); /* the unlinks were never durable */
        REQUIRE(walfix_meter(&f));
        ra_meter_t *m = f.m;
        static ra_slice_t *p[256];
        size_t np = pending_all(m, p, 256);
        CHECK_EQ_U64(np, ns); /* replayed: resent, the downstream answers dup */
        for (size_t i = 0; i < np && i < ns; i++)
            if (!same_bytes(p[i], sealed[i]))
                RA_FAILF("variant %d: replayed slice %zu differs", variant, i);
        CHECK_EQ_I64(chain_breaks(p, np), 0);
        CHECK(metric(m, "accounting_wal_corrupt_total") == 0);
        unref_all(p, np);
        /* Heads continue; a second compaction finishes the job. */
        CHECK_RC(record_window(m, 3, 100, &f.seed, NULL), 0);
        ra_slice_t *out[64];
        size_t n = 0;
        CHECK_RC(ra_meter_rollover(m, RA_T_EPOCH_MS + 4 * WIN_MS, out, 64, &n), 0);
        for (size_t i = 0; i < n; i++) {
            const ra_slice_t *last = NULL;
            for (size_t k = 0; k < ns; k++)
                if (same_stream(sealed[k], out[i])) last = sealed[k];
            CHECK_EQ_U64(seq_of(out[i]), last ? seq_of(last) + 1 : 1);
            if (last) CHECK_MEM(ra_slice_prev_b3(out[i]), ra_slice_b3(last), 32);
            ra_slice_unref(out[i]);
        }
        ack_all(m);
        CHECK_RC(ra_meter_compact(m), 0);
        CHECK_EQ_U64(seg_files(fs), 0);
        unref_all(sealed, ns);
        walfix_end(&f);
    }
}

int main(void) {
    printf("# test-wal-restart\n");
    double t0 = now_s();
    RA_RUN(restart_with_acked_slices_in_partly_acked_segments,
           "restart: a WAL within its caps reopens (ACKed slices of partly ACKed segments)");
    RA_RUN(restart_of_a_sealer_while_wal_full_clears_degraded,
           "restart: a new sealer that makes room clears the plane's degraded flag");
    RA_RUN(restart_with_a_transient_read_error_loses_nothing,
           "restart: a transient read error at open loses no segment");
    RA_RUN(restart_with_a_transient_heads_read_error_keeps_chains,
           "restart: a transient read error on the heads checkpoint forks no chain");
    RA_RUN(recovery_removes_leftover_tmp_files, "recovery removes leftover .tmp files");
    RA_RUN(compaction_crash_brings_segments_back_harmlessly,
           "compaction crash: segments come back, replayed harmlessly");
    printf("# test-wal-restart: %.2f s\n", now_s() - t0);
    RA_DONE();
}
