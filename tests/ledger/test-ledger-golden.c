/* LED-15: the golden vectors of docs/LEDGER-FORMAT.md are what the encoders write, byte
 * for byte; each decodes back to the same value; each transfer's id is recomputed from the
 * written bytes by the `openssl` command (an implementation of SHA-256 independent of
 * the library's calls), so a wrong id in the doc or in rl_transfer_id fails here. The
 * doc's negative vectors fail to decode with the error the doc names.
 *
 *   test-ledger-golden            check docs/LEDGER-FORMAT.md (what ctest runs)
 *   test-ledger-golden print      print the ```golden blocks the vectors below produce
 *
 * Block syntax (inside a ```golden fence):
 *   vector <name> <asset|account|posting|transfer>
 *   <hex bytes, any spacing, any number of lines>
 *   id <64 hex>                   transfers only: SHA-256(SHA-256(bytes))
 *   error <ErrName>               negative vectors only: what decoding must return
 *   end */
#include "rl_test.h"

#include <ctype.h>
#include <unistd.h>

#ifndef RA_SOURCE_DIR
#define RA_SOURCE_DIR "."
#endif

enum { MAXB = 4096 };

typedef struct vec_s {
    const char *name;
    const char *kind;
    uint8_t bytes[MAXB];
    size_t len;
    int has_id;
    uint8_t id[32];
} vec_t;

/* ---- the values (fixed; changing one changes the doc) ---- */

static rl_asset_t usd(void) {
    return rl_t_asset("USD", 2);
}

static void fill_id(uint8_t id[16], uint8_t first) {
    for (int i = 0; i < 16; i++)
        id[i] = (uint8_t)(first + i);
}

/* An output of amount USD cents to account; a pin of account at version. */
static rl_output_t usd_out(const uint8_t account[16], int64_t amount) {
    rl_output_t o;
    memset(&o, 0, sizeof o);
    memcpy(o.account, account, 16);
    o.asset = usd();
    o.amount = amount;
    return o;
}

static rl_pin_t pin_of(const uint8_t account[16], uint64_t version) {
    rl_pin_t p;
    memset(&p, 0, sizeof p);
    memcpy(p.account, account, 16);
    p.version = version;
    return p;
}

static int build(int i, vec_t *v) {
    static rl_posting_ref_t in[2];
    static rl_output_t out[3];
    static rl_pin_t pin[3];
    rl_transfer_t t;
    memset(&t, 0, sizeof t);
    memset(v, 0, sizeof *v);
    uint8_t alice[16], bob[16], world[16], revenue[16];
    fill_id(alice, 0xa0);
    fill_id(bob, 0xb0);
    fill_id(world, 0x10);
    fill_id(revenue, 0xe0);
    switch (i) {
    case 0: {
        v->name = "asset-usd";
        v->kind = "asset";
        rl_asset_t a = usd();
        return rl_asset_encode(&a, v->bytes, MAXB, &v->len);
    }
    case 1: {
        v->name = "asset-usage-bytes";
        v->kind = "asset";
        rl_asset_t a = rl_t_asset("usage:bytes", 0);
        return rl_asset_encode(&a, v->bytes, MAXB, &v->len);
    }
    case 2: {
        v->name = "account-alice";
        v->kind = "account";
        rl_account_t a = rl_t_account(0, RL_POLICY_NO_OVERDRAFT, 0);
        memcpy(a.id, alice, 16);
        return rl_account_encode(&a, v->bytes, MAXB, &v->len);
    }
    case 3: {
        v->name = "account-bob-capped-frozen";
        v->kind = "account";
        rl_account_t a = rl_t_account(0, RL_POLICY_CAPPED, -5000);
        memcpy(a.id, bob, 16);
        a.version = 3;
        a.status = RL_ACCOUNT_FROZEN;
        return rl_account_encode(&a, v->bytes, MAXB, &v->len);
    }
    case 4: {
        v->name = "posting-alice";
        v->kind = "posting";
        rl_posting_t p;
        memset(&p, 0, sizeof p);
        for (int k = 0; k < 32; k++)
            p.id.transfer_id[k] = (uint8_t)k;
        p.id.index = 1;
        memcpy(p.account, alice, 16);
        p.asset = usd();
        p.amount = 1250;
        p.status = RL_POSTING_ACTIVE;
        return rl_posting_encode(&p, v->bytes, MAXB, &v->len);
    }
    case 5: /* issuance: the external world account goes negative, alice gets 10.00 USD */
        v->name = "transfer-issue";
        v->kind = "transfer";
        out[0] = usd_out(alice, 1000);
        out[1] = usd_out(world, -1000);
        pin[0] = pin_of(world, 1);
        pin[1] = pin_of(alice, 1);
        t = rl_t_transfer(NULL, 0, out, 2, pin, 2, NULL, "deposit:bank-ref-0001");
        break;
    case 6: /* alice pays bob 7.00 from two postings (10.00 + 2.50), change 5.50 */
        v->name = "transfer-pay";
        v->kind = "transfer";
        memset(in, 0, sizeof in);
        for (int k = 0; k < 32; k++)
            in[0].transfer_id[k] = (uint8_t)k;
        in[0].index = 0;
        in[1] = in[0];
        in[1].index = 1;
        out[0] = usd_out(bob, 700);
        out[1] = usd_out(alice, 550);
        pin[0] = pin_of(alice, 1);
        pin[1] = pin_of(bob, 2);
        t = rl_t_transfer(in, 2, out, 2, pin, 2, "{\"memo\":\"invoice 42\"}", "pay:alice:nonce:7");
        break;
    default:
        return 1; /* no more vectors */
    }
    int rc = rl_transfer_encode(&t, v->bytes, MAXB, &v->len);
    if (rc == 0) rc = rl_transfer_id(&t, v->id);
    v->has_id = 1;
    return rc;
}

static void print_hex_lines(FILE *f, const uint8_t *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%02x%s", b[i], (i % 16 == 15 || i + 1 == n) ? "\n" : " ");
}

/* ---- the doc ---- */

typedef struct docvec_s {
    char name[64];
    char kind[16];
    uint8_t bytes[MAXB];
    size_t len;
    int has_id, has_error;
    uint8_t id[32];
    char error[64];
} docvec_t;

enum { MAXDOC = 64 };
static docvec_t doc[MAXDOC];
static int n_doc;

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

static int parse_hex(const char *s, uint8_t *out, size_t cap, size_t *len) {
    int hi = -1;
    for (; *s; s++) {
        if (isspace((unsigned char)*s)) continue;
        int v = hexval(*s);
        if (v < 0) return -1;
        if (hi < 0) {
            hi = v;
        } else {
            if (*len >= cap) return -1;
            out[(*len)++] = (uint8_t)(hi << 4 | v);
            hi = -1;
        }
    }
    return hi < 0 ? 0 : -1;
}

static int load_doc(void) {
    FILE *f = fopen(RA_SOURCE_DIR "/docs/LEDGER-FORMAT.md", "r");
    if (f == NULL) {
        RL_FAILF("cannot open docs/LEDGER-FORMAT.md");
        return -1;
    }
    char line[1024];
    int in_fence = 0;
    docvec_t *cur = NULL;
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "```", 3) == 0) {
            in_fence = strncmp(line, "```golden", 9) == 0 && !in_fence;
            continue;
        }
        if (!in_fence) continue;
        if (strncmp(line, "vector ", 7) == 0) {
            if (n_doc == MAXDOC) break;
            cur = &doc[n_doc++];
            memset(cur, 0, sizeof *cur);
            if (sscanf(line, "vector %63s %15s", cur->name, cur->kind) != 2) {
                RL_FAILF("bad line: %s", line);
                cur = NULL;
            }
        } else if (cur != NULL && strncmp(line, "id ", 3) == 0) {
            size_t n = 0;
            if (parse_hex(line + 3, cur->id, 32, &n) != 0 || n != 32)
                RL_FAILF("%s: bad id line", cur->name);
            cur->has_id = 1;
        } else if (cur != NULL && strncmp(line, "error ", 6) == 0) {
            if (sscanf(line, "error %63s", cur->error) == 1) cur->has_error = 1;
        } else if (cur != NULL && strncmp(line, "end", 3) == 0) {
            cur = NULL;
        } else if (cur != NULL) {
            if (parse_hex(line, cur->bytes, MAXB, &cur->len) != 0)
                RL_FAILF("%s: bad hex line: %s", cur->name, line);
        }
    }
    fclose(f);
    return 0;
}

static const docvec_t *find_doc(const char *name) {
    for (int i = 0; i < n_doc; i++)
        if (strcmp(doc[i].name, name) == 0) return &doc[i];
    return NULL;
}

/* SHA-256(SHA-256(bytes)) by the openssl command, never by the library under test. */
static int openssl_sha256d(const uint8_t *b, size_t n, char out_hex[65]) {
    const char *dir = getenv("RA_TEST_TMP");
    char path[512], cmd[1200];
    snprintf(path, sizeof path, "%s/ledger-golden-%ld.bin", dir && *dir ? dir : "/tmp",
             (long)getpid());
    if (dir && *dir) {
        snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
        if (system(cmd) != 0) return -1;
    }
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(b, 1, n, f) != n) {
        if (f) fclose(f);
        return -1;
    }
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s dgst -sha256 -binary '%s' | %s dgst -sha256 -r", RL_OPENSSL, path,
             RL_OPENSSL);
    FILE *p = popen(cmd, "r");
    if (p == NULL) return -1;
    char buf[256] = {0};
    size_t got = fread(buf, 1, sizeof buf - 1, p);
    int st = pclose(p);
    unlink(path);
    if (st != 0 || got < 64) return -1;
    memcpy(out_hex, buf, 64);
    out_hex[64] = '\0';
    return 0;
}

static int decode_as(const char *kind, const uint8_t *b, size_t n, uint8_t *again, size_t *len) {
    static rl_posting_ref_t in[RL_MAX_INPUTS];
    static rl_output_t out[RL_MAX_OUTPUTS];
    static rl_pin_t pin[RL_MAX_PINS];
    int rc;
/* The value of type T that b[0..n) decodes to, encoded again into again[0..*len). */
#define DECODE_ENCODE(T, type)                                                                     \
    do {                                                                                           \
        T x;                                                                                       \
        rc = rl_##type##_decode(b, n, &x);                                                         \
        return rc ? rc : rl_##type##_encode(&x, again, MAXB, len);                                 \
    } while (0)
    if (strcmp(kind, "asset") == 0) DECODE_ENCODE(rl_asset_t, asset);
    if (strcmp(kind, "account") == 0) DECODE_ENCODE(rl_account_t, account);
    if (strcmp(kind, "posting") == 0) DECODE_ENCODE(rl_posting_t, posting);
#undef DECODE_ENCODE
    if (strcmp(kind, "transfer") == 0) {
        rl_transfer_t t;
        rc = rl_transfer_decode(b, n, &t, in, RL_MAX_INPUTS, out, RL_MAX_OUTPUTS, pin, RL_MAX_PINS);
        return rc ? rc : rl_transfer_encode(&t, again, MAXB, len);
    }
    return RL_EINVAL;
}

RL_TEST(vectors_match_encoders) {
    if (load_doc() != 0) return;
    int checked = 0, ids = 0;
    vec_t v;
    for (int i = 0; build(i, &v) != 1; i++) {
        const docvec_t *d = find_doc(v.name);
        if (d == NULL) {
            RL_FAILF("vector %s missing from docs/LEDGER-FORMAT.md", v.name);
            continue;
        }
        if (strcmp(d->kind, v.kind) != 0) RL_FAILF("%s: kind %s, want %s", v.name, d->kind, v.kind);
        if (d->len != v.len || memcmp(d->bytes, v.bytes, v.len) != 0) {
            RL_FAILF("%s: the doc's bytes differ from the encoder's:", v.name);
            print_hex_lines(stderr, v.bytes, v.len);
        }
        checked++;
        if (v.has_id) {
            char want[65], ossl[65];
            rl_t_hex(v.id, 32, want);
            if (!d->has_id || memcmp(d->id, v.id, 32) != 0)
                RL_FAILF("%s: the doc's id differs from rl_transfer_id %s", v.name, want);
            if (openssl_sha256d(d->bytes, d->len, ossl) != 0)
                RL_FAILF("%s: openssl dgst failed", v.name);
            else if (strcmp(ossl, want) != 0)
                RL_FAILF("%s: openssl says %s, rl_transfer_id %s", v.name, ossl, want);
            ids++;
        }
    }
    printf("# %d vectors match the encoders, %d ids confirmed by openssl dgst\n", checked, ids);
    CHECK(checked >= 7 && ids >= 2);
}

RL_TEST(doc_vectors_decode_strictly) {
    int pos = 0, neg = 0;
    for (int i = 0; i < n_doc; i++) {
        const docvec_t *d = &doc[i];
        uint8_t again[MAXB];
        size_t len = 0;
        int rc = decode_as(d->kind, d->bytes, d->len, again, &len);
        if (d->has_error) {
            if (strcmp(rl_err_name(rc), d->error) != 0)
                RL_FAILF("%s: decodes to %s, the doc says %s", d->name, rl_err_name(rc), d->error);
            neg++;
        } else {
            if (rc != 0)
                RL_FAILF("%s: does not decode: %s", d->name, rl_err_name(rc));
            else if (len != d->len || memcmp(again, d->bytes, len) != 0)
                RL_FAILF("%s: re-encodes differently", d->name);
            pos++;
        }
    }
    printf("# doc: %d vectors decode and re-encode, %d negative vectors fail as documented\n", pos,
           neg);
    CHECK(neg >= 5);
}

static int print_blocks(void) {
    vec_t v;
    for (int i = 0; build(i, &v) != 1; i++) {
        printf("```golden\nvector %s %s\n", v.name, v.kind);
        print_hex_lines(stdout, v.bytes, v.len);
        if (v.has_id) {
            char h[65];
            rl_t_hex(v.id, 32, h);
            printf("id %s\n", h);
        }
        printf("end\n```\n\n");
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "print") == 0) return print_blocks();
    RL_RUN(vectors_match_encoders, "LED-15 LED-1 LED-2 golden vectors are the encoders' bytes; "
                                   "ids confirmed by openssl");
    RL_RUN(doc_vectors_decode_strictly, "LED-1 doc vectors decode; negative vectors fail as "
                                        "documented");
    RL_DONE();
}
