/* What pins a log's head and what a failure says (AUD-I-39, AUD-I-40, AUD-I-41, AUD-I-14):
 * with a verifier key, a log that no signed checkpoint covers does not verify (every
 * checkpoint deleted; a log rewritten without the key), and the verifier says how many
 * records the newest verified checkpoint covers and how many follow it; a checkpoint is
 * signed for the records none covers after checkpoint_interval_ms; --witness-vkey requires a
 * witness's cosignature; a refused open names the path and the system's reason; proofs read
 * straight from a directory equal the library's proofs over the leaves, for every record
 * and size of logs of 1 to 40 records. */
#include "rau_test.h"

#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char g_base[512];

static const char *dir_of(const char *name) {
    static char d[800];
    if (!g_base[0]) {
        const char *shm = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : NULL;
        ra_fix_mkdtemp(g_base, sizeof g_base, shm, "rau-pin-test-");
        rau_t_keygen("pin", g_base);
    }
    snprintf(d, sizeof d, "%s/%s", g_base, name);
    return d;
}

static rau_log_t *open_log(const char *dir, uint32_t every, uint32_t interval_ms) {
    rau_log_config_t cfg;
    rau_t_log_config(&cfg, "pin", dir, rau_t_key()->path);
    cfg.checkpoint_every = every;
    cfg.checkpoint_interval_ms = interval_ms;
    rau_log_t *l = NULL;
    char err[512];
    int rc = rau_log_open(&cfg, &l, err, sizeof err);
    if (rc) fprintf(stderr, "# open %s: %s: %s\n", dir, rau_err_name(rc), err);
    return l;
}

static int append(rau_log_t *l, int from, int n) {
    for (int i = from; i < from + n; i++) {
        rau_attr_t a = {"n", 1, RAU_ATTR_INT, NULL, 0, i};
        rau_event_t ev = {"reject", 6, 1700000000000LL + i, &a, 1};
        rau_appended_t out;
        int rc = rau_log_append(l, &ev, &out);
        if (rc) return rc;
    }
    return 0;
}

static int verify(const char *dir, const char *vkey, const char *wvkey, const char *extra,
                  rau_verify_result_t *res, rau_t_rep_t *rep) {
    memset(rep, 0, sizeof *rep);
    const char *ex[1] = {extra};
    rau_verify_opts_t o = {vkey, wvkey, ex, extra ? 1 : 0, rau_t_collect, NULL, rep};
    return rau_verify(dir, &o, res);
}

static void rm_checkpoints(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[1200];
    while (d && (e = readdir(d)))
        if (!strncmp(e->d_name, "cp-", 3)) {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    if (d) closedir(d);
}

/* Before: `audit verify --vkey` answered OK for a log whose every checkpoint was deleted. */
RA_TEST(a_log_no_checkpoint_covers_fails_with_the_key) {
    const char *dir = dir_of("cover");
    rau_log_t *l = open_log(dir, 10, 0);
    REQUIRE(l);
    for (int i = 0; i < 25; i += 10) { /* checkpoints at 10 and 20 (at the syncs) */
        CHECK_RC(append(l, i, i + 10 <= 25 ? 10 : 25 - i), 0);
        CHECK_RC(rau_log_sync(l), 0);
    }
    CHECK_RC(rau_log_close(l), 0);
    rau_verify_result_t r;
    rau_t_rep_t rep;
    CHECK_RC(verify(dir, rau_t_key()->vkey, NULL, NULL, &r, &rep), 0);
    CHECK_EQ_U64(r.records, 25);
    CHECK_EQ_U64(r.covered, 20); /* the newest that verifies: 5 records not yet covered */
    CHECK_EQ_U64(r.checkpoints, 2);
    rm_checkpoints(dir);
    CHECK_RC(verify(dir, NULL, NULL, NULL, &r, &rep), 0); /* without the key: nothing pins */
    CHECK_EQ_U64(r.covered, 0);
    CHECK(verify(dir, rau_t_key()->vkey, NULL, NULL, &r, &rep) == 1 &&
          strstr(rep.all, "no checkpoint signed with the verifier key covers any of its 25"));
    /* an empty log needs none */
    const char *empty = dir_of("empty");
    l = open_log(empty, 0, 0);
    REQUIRE(l);
    CHECK_RC(rau_log_close(l), 0);
    CHECK_RC(verify(empty, rau_t_key()->vkey, NULL, NULL, &r, &rep), 0);
}

/* The writer signs what no checkpoint covers once the interval passed since its last one
 * (or its open), and at the first sync after an open that found such records (a crash left
 * them unpinned). No wall-clock assertion: "not due" uses an interval of a minute, "due" a
 * sleep past an interval of 5 ms. */
RA_TEST(a_checkpoint_every_interval) {
    const char *dir = dir_of("interval");
    rau_log_t *l = open_log(dir, 1000, 60000);
    REQUIRE(l);
    rau_log_stats_t st;
    uint64_t size = 0;
    CHECK_RC(append(l, 0, 3), 0);
    CHECK_RC(rau_log_sync(l), 0); /* a new log: the interval counts from the open */
    rau_log_stats(l, &st);
    CHECK_EQ_U64(st.checkpoints, 0);
    CHECK_RC(rau_log_close(l), 0); /* 3 records, none covered (no stop checkpoint in C) */
    l = open_log(dir, 1000, 60000);
    REQUIRE(l);
    CHECK_RC(rau_log_sync(l), 0); /* the open found 3 uncovered: signed at the first sync */
    CHECK_RC(rau_log_latest_checkpoint(l, &size, NULL, NULL, 0, NULL), 0);
    CHECK_EQ_U64(size, 3);
    CHECK_RC(append(l, 3, 2), 0);
    CHECK_RC(rau_log_sync(l), 0); /* a minute has not passed */
    rau_log_stats(l, &st);
    CHECK_EQ_U64(st.checkpoints, 1);
    CHECK_RC(rau_log_close(l), 0);
    l = open_log(dir, 1000, 5);
    REQUIRE(l);
    CHECK_RC(rau_log_sync(l), 0); /* records 4 and 5, found uncovered */
    CHECK_RC(rau_log_latest_checkpoint(l, &size, NULL, NULL, 0, NULL), 0);
    CHECK_EQ_U64(size, 5);
    CHECK_RC(append(l, 5, 1), 0);
    struct timespec ts = {0, 20 * 1000000};
    nanosleep(&ts, NULL);
    CHECK_RC(rau_log_sync(l), 0); /* past the interval: record 6 signed */
    CHECK_RC(rau_log_latest_checkpoint(l, &size, NULL, NULL, 0, NULL), 0);
    CHECK_EQ_U64(size, 6);
    nanosleep(&ts, NULL);
    CHECK_RC(rau_log_sync(l), 0);       /* nothing uncovered: nothing signed */
    CHECK_RC(rau_log_checkpoint(l), 0); /* at the head already: a no-op */
    rau_log_stats(l, &st);
    CHECK_EQ_U64(st.checkpoints, 2);
    CHECK_RC(rau_log_close(l), 0);
}

/* --witness-vkey: a checkpoint must carry the witness's cosignature and match the log. */
RA_TEST(a_witness_cosignature_is_required) {
    const char *dir = dir_of("witnessed");
    rau_log_t *l = open_log(dir, 0, 0);
    REQUIRE(l);
    CHECK_RC(append(l, 0, 8), 0);
    CHECK_RC(rau_log_checkpoint(l), 0);
    char note[RAU_NOTE_MAX], cos[RAU_NOTE_MAX], wsk[RAU_KEY_TEXT_MAX], wvk[RAU_KEY_TEXT_MAX];
    size_t n = 0, cn = 0;
    CHECK_RC(rau_log_latest_checkpoint(l, NULL, NULL, note, sizeof note, &n), 0);
    CHECK_RC(append(l, 8, 4), 0);
    CHECK_RC(rau_log_close(l), 0);
    REQUIRE(rau_cosigner_keygen("w.example/1", wsk, sizeof wsk, wvk, sizeof wvk) == 0);
    rau_signer_t *w = NULL;
    REQUIRE(rau_signer_parse(wsk, strlen(wsk), &w) == 0);
    CHECK_RC(rau_cosign(w, note, n, 1700000000, cos, sizeof cos, &cn), 0);
    rau_signer_free(w);
    char path[900];
    snprintf(path, sizeof path, "%s/kept.note", g_base);
    FILE *f = fopen(path, "w");
    fwrite(cos, 1, cn, f);
    fclose(f);
    rau_verify_result_t r;
    rau_t_rep_t rep;
    CHECK(verify(dir, rau_t_key()->vkey, wvk, NULL, &r, &rep) == 1 &&
          strstr(rep.all, "no checkpoint cosigned by the witness"));
    CHECK_RC(verify(dir, rau_t_key()->vkey, wvk, path, &r, &rep), 0);
    CHECK_EQ_U64(r.witnessed, 8);
    CHECK_EQ_U64(r.witness_time, 1700000000);
    CHECK_EQ_U64(r.covered, 8);
    CHECK_EQ_U64(r.records, 12);
}

/* A refused open names the path and the system's reason (before: "IoError: " and nothing
 * when the last segment could not be opened for appending). */
RA_TEST(a_refused_open_says_why) {
    char file[900];
    snprintf(file, sizeof file, "%s/plain-file", dir_of("x"));
    mkdir(dir_of("x"), 0755);
    FILE *f = fopen(file, "w");
    fclose(f);
    char sub[1000];
    snprintf(sub, sizeof sub, "%s/audit", file);
    rau_log_config_t cfg;
    rau_t_log_config(&cfg, "pin", sub, NULL);
    rau_log_t *l = NULL;
    char err[1024] = "stale";
    CHECK_RC(rau_log_open(&cfg, &l, err, sizeof err), RAU_EIO);
    CHECK(strstr(err, sub) && strstr(err, "Not a directory (ENOTDIR)"));
    printf("# %s\n", err);
}

/* AUD-I-41: the proofs read from a directory are the library's: a log of 40 records in
 * segments of a few records, every record in every tree of 1..40 records, every pair of
 * sizes. */
RA_TEST(proofs_from_a_directory) {
    const char *dir = dir_of("proofs");
    rau_log_config_t cfg;
    rau_t_log_config(&cfg, "pin", dir, NULL);
    cfg.rotate_bytes = 600; /* segments of a few records: the scan crosses them */
    rau_log_t *l = NULL;
    char err[512];
    REQUIRE(rau_log_open(&cfg, &l, err, sizeof err) == 0);
    enum { N = 40 };
    for (int n = 1; n <= N; n++) { /* one sync each: a segment holds a few */
        CHECK_RC(append(l, n, 1), 0);
        CHECK_RC(rau_log_sync(l), 0);
    }
    uint8_t leaves[N * 32];
    static rau_dir_proof_t dp;
    uint8_t proof[RAU_MERKLE_PROOF_MAX * 32], root[32], root1[32];
    size_t count = 0, bad = 0, checked = 0;
    /* the leaves from the records' bytes, read back through inclusion proofs */
    for (int seq = 1; seq <= N; seq++) {
        CHECK_RC(rau_dir_inclusion(dir, (uint64_t)seq, N, &dp, err, sizeof err), 0);
        rau_merkle_leaf_hash(dp.record, dp.record_len, leaves + 32 * (seq - 1));
        if (memcmp(leaves + 32 * (seq - 1), dp.leaf, 32)) bad++;
    }
    for (int size = 1; size <= N; size++) {
        rau_merkle_root(leaves, (uint64_t)size, root);
        for (int seq = 1; seq <= size; seq++) {
            if (rau_dir_inclusion(dir, (uint64_t)seq, (uint64_t)size, &dp, err, sizeof err) ||
                rau_merkle_inclusion_proof(leaves, (uint64_t)seq - 1, (uint64_t)size, proof,
                                           RAU_MERKLE_PROOF_MAX, &count) ||
                count != dp.count || memcmp(proof, dp.proof, 32 * count) ||
                memcmp(root, dp.root2, 32) || memcmp(dp.leaf, leaves + 32 * (seq - 1), 32))
                bad++;
            checked++;
        }
        for (int s1 = 0; s1 <= size; s1++) {
            rau_merkle_root(leaves, (uint64_t)s1, root1);
            if (rau_dir_consistency(dir, (uint64_t)s1, (uint64_t)size, &dp, err, sizeof err) ||
                rau_merkle_consistency_proof(leaves, (uint64_t)s1, (uint64_t)size, proof,
                                             RAU_MERKLE_PROOF_MAX, &count) ||
                count != dp.count || memcmp(proof, dp.proof, 32 * count) ||
                memcmp(root1, dp.root1, 32) || memcmp(root, dp.root2, 32) ||
                rau_merkle_verify_consistency((uint64_t)s1, (uint64_t)size, root1, root, dp.proof,
                                              dp.count))
                bad++;
            checked++;
        }
    }
    printf("# %zu proofs from the directory checked, %zu differ\n", checked, bad);
    CHECK(bad == 0);
    /* past the log, and a damaged record before the tree's end */
    CHECK_RC(rau_dir_inclusion(dir, 1, 41, &dp, err, sizeof err), RAU_ENOTFOUND);
    CHECK(strstr(err, "the log has 40 records"));
    CHECK_RC(rau_dir_inclusion(dir, 5, 4, &dp, err, sizeof err), RAU_EINVAL);
    CHECK_RC(rau_log_close(l), 0);
    char seg[900];
    snprintf(seg, sizeof seg, "%s/seg-00000000000000000001.rau", dir);
    FILE *f = fopen(seg, "r+b");
    REQUIRE(f);
    fseek(f, 60, SEEK_SET);
    fputc('Z', f);
    fclose(f);
    CHECK_RC(rau_dir_consistency(dir, 1, 40, &dp, err, sizeof err), RAU_ECORRUPT);
    CHECK(strstr(err, "seg-00000000000000000001.rau+24: record 1 does not read back"));
}

int main(void) {
    RA_RUN(a_log_no_checkpoint_covers_fails_with_the_key,
           "AUD-I-39 with the key, a log no checkpoint covers fails; coverage reported");
    RA_RUN(a_checkpoint_every_interval, "AUD-I-39 checkpoint_interval_ms pins what is uncovered");
    RA_RUN(a_witness_cosignature_is_required, "AUD-I-40 --witness-vkey needs a cosignature");
    RA_RUN(a_refused_open_says_why, "AUD-I-14 a refused open names the path and errno");
    RA_RUN(proofs_from_a_directory, "AUD-I-41 proofs from a directory equal the library's");
    ra_fix_rm_rf(g_base);
    RA_DONE();
}
