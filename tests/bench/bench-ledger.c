/* bench-ledger: the ledger's pure core (docs/LEDGER.md), per call, single thread.
 *
 *   encode+id   rl_transfer_encode then rl_transfer_id of a usage-shaped transfer (2
 *               inputs, 3 outputs, 3 pins, ~200 bytes of metadata, a 110-byte intent);
 *               baseline: the same bytes through OpenSSL's one-shot SHA256 twice (the
 *               least any content id costs) — the ratio is what the canonical encoder adds
 *   validate    rl_validate_and_plan of that transfer (id included);
 *               baseline: encode+id above (validation's own work is the difference)
 *   select      rl_select_postings over N = 1k and 100k postings of one account, a target
 *               that needs 8 picks; baseline: one linear pass summing the same postings
 *
 * No timing is asserted. Each result is one `BENCH {json}` line (and appended to --out).
 * Usage: bench-ledger [--quick] [--out FILE] */
#define OPENSSL_SUPPRESS_DEPRECATED
#include "ron/ledger.h"

#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static FILE *out_file;
static int quick;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void bench_line(const char *what, double ops_s, const char *baseline, double base_ops_s) {
    char line[512];
    snprintf(line, sizeof line,
             "{\"bench\":\"ledger\",\"what\":\"%s\",\"ops_per_s\":%.0f,\"baseline\":\"%s\","
             "\"baseline_ops_per_s\":%.0f,\"ratio\":%.3f}",
             what, ops_s, baseline, base_ops_s, ops_s / base_ops_s);
    printf("%-28s %12.0f ops/s   baseline %-18s %12.0f ops/s   ratio %.3f\n", what, ops_s, baseline,
           base_ops_s, ops_s / base_ops_s);
    printf("BENCH %s\n", line);
    if (out_file) fprintf(out_file, "BENCH %s\n", line);
}

static void die(const char *what, int rc) {
    fprintf(stderr, "bench-ledger: %s: %s (%s)\n", what, rl_strerror(rc), rl_err_name(rc));
    exit(1);
}

static volatile uint64_t sink;

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
        } else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
            out_file = fopen(argv[++i], "a");
            if (out_file == NULL) {
                perror("bench-ledger: --out");
                return 1;
            }
        } else {
            fprintf(stderr, "usage: bench-ledger [--quick] [--out FILE]\n");
            return 2;
        }
    }
    const long iters = quick ? 2000 : 300000;

    /* a tenant pays for a slice: tenant -> revenue, change back, receivable leg */
    rl_account_t accts[3];
    memset(accts, 0, sizeof accts);
    for (int i = 0; i < 3; i++) {
        accts[i].id[15] = (uint8_t)(i + 1);
        accts[i].version = 1;
        accts[i].policy = i == 0 ? RL_POLICY_CAPPED : RL_POLICY_UNCAPPED;
        accts[i].floor = i == 0 ? -100000 : 0;
    }
    rl_asset_t usd;
    if (rl_asset_init(&usd, "USD", 3, 6) != 0) die("asset", -1);
    rl_posting_t consumed[2];
    rl_posting_ref_t in[2];
    memset(consumed, 0, sizeof consumed);
    for (int i = 0; i < 2; i++) {
        memset(consumed[i].id.transfer_id, 0x40 + i, 32);
        memcpy(consumed[i].account, accts[0].id, 16);
        consumed[i].asset = usd;
        consumed[i].amount = 5000000;
        in[i] = consumed[i].id;
    }
    rl_output_t outs[3];
    memset(outs, 0, sizeof outs);
    memcpy(outs[0].account, accts[1].id, 16); /* revenue */
    outs[0].asset = usd;
    outs[0].amount = 7345678;
    memcpy(outs[1].account, accts[0].id, 16); /* change */
    outs[1].asset = usd;
    outs[1].amount = 2654322 + 1000;
    memcpy(outs[2].account, accts[2].id, 16); /* receivable offset */
    outs[2].asset = usd;
    outs[2].amount = -1000;
    rl_pin_t pins[3];
    memset(pins, 0, sizeof pins);
    for (int i = 0; i < 3; i++) {
        memcpy(pins[i].account, accts[i].id, 16);
        pins[i].version = 1;
    }
    char meta[200], intent[110];
    memset(meta, 'm', sizeof meta);
    memset(intent, 'i', sizeof intent);
    rl_transfer_t t = {in, outs, pins, (const uint8_t *)meta, (const uint8_t *)intent,
                       2,  3,    3,    sizeof meta,           sizeof intent};
    rl_balance_t bal[3];
    memset(bal, 0, sizeof bal);
    for (int i = 0; i < 3; i++) {
        memcpy(bal[i].account, accts[i].id, 16);
        bal[i].asset = usd;
        bal[i].amount = i == 0 ? 10000000 : 0;
    }
    rl_delta_t deltas[8];
    rl_plan_t plan = {{0}, deltas, 8, 0};
    uint8_t buf[1024], id[32], first[32];
    size_t len = 0;
    int rc;

    /* encode + id */
    double t0 = now_s();
    for (long i = 0; i < iters; i++) {
        if ((rc = rl_transfer_encode(&t, buf, sizeof buf, &len)) != 0) die("encode", rc);
        if ((rc = rl_transfer_id(&t, id)) != 0) die("id", rc);
        sink += id[0];
    }
    double enc_s = iters / (now_s() - t0);
    t0 = now_s();
    for (long i = 0; i < iters; i++) {
        SHA256(buf, len, first);
        SHA256(first, 32, id);
        sink += id[0];
    }
    double sha_s = iters / (now_s() - t0);
    printf("# transfer of %zu canonical bytes\n", len);
    bench_line("encode+id", enc_s, "sha256d_of_bytes", sha_s);

    /* validate */
    t0 = now_s();
    for (long i = 0; i < iters; i++) {
        if ((rc = rl_validate_and_plan(&t, accts, 3, consumed, 2, bal, 3, &plan)) != 0)
            die("validate", rc);
        sink += plan.transfer_id[0];
    }
    bench_line("validate_and_plan", iters / (now_s() - t0), "encode+id", enc_s);

    /* select */
    const size_t sizes[2] = {1000, quick ? 5000 : 100000};
    for (int k = 0; k < 2; k++) {
        size_t n = sizes[k];
        rl_posting_t *p = calloc(n, sizeof *p);
        if (p == NULL) return 1;
        int64_t total = 0;
        for (size_t i = 0; i < n; i++) {
            memset(p[i].id.transfer_id, 0, 32);
            p[i].id.index = (uint32_t)i;
            memcpy(p[i].account, accts[0].id, 16);
            p[i].asset = usd;
            p[i].amount = 1000 + (int64_t)((i * 2654435761u) % 1000000);
            total += p[i].amount;
        }
        (void)total;
        /* a target the 8 largest just cover */
        uint32_t idx[16], n_sel = 0;
        int64_t sum = 0, change = 0;
        rc = rl_select_postings(p, n, accts[0].id, &usd, 1, idx, 16, &n_sel, &sum, &change);
        if (rc != 0) die("select probe", rc);
        int64_t target = 0;
        rc = rl_select_postings(p, n, accts[0].id, &usd, 7 * p[idx[0]].amount, idx, 16, &n_sel,
                                &sum, &change);
        if (rc != 0) die("select probe", rc);
        target = sum - 1;
        long sel_iters = (long)(quick ? 50 : 20000000 / n);
        if (sel_iters < 10) sel_iters = 10;
        t0 = now_s();
        for (long i = 0; i < sel_iters; i++) {
            rc =
                rl_select_postings(p, n, accts[0].id, &usd, target, idx, 16, &n_sel, &sum, &change);
            if (rc != 0) die("select", rc);
            sink += n_sel;
        }
        double sel_s = sel_iters / (now_s() - t0);
        t0 = now_s();
        for (long i = 0; i < sel_iters; i++) {
            int64_t s = 0;
            for (size_t j = 0; j < n; j++)
                if (p[j].status == RL_POSTING_ACTIVE && memcmp(p[j].account, accts[0].id, 16) == 0)
                    s += p[j].amount;
            sink += (uint64_t)s;
        }
        double pass_s = sel_iters / (now_s() - t0);
        char what[64];
        snprintf(what, sizeof what, "select_%zu_postings_%u_picks", n, n_sel);
        bench_line(what, sel_s, "one_linear_pass", pass_s);
        free(p);
    }
    if (out_file) fclose(out_file);
    return 0;
}
