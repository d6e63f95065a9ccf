/* Signed checkpoints (AUD-I-10, AUD-I-11): C2SP signed notes with Ed25519 keys in the
 * golang.org/x/mod/sumdb/note text forms. A fixed key (below) pins the exact bytes; the
 * origin must equal the signer's name; every mutation of a note is refused. */
#include "rau_test.h"

#include <sodium.h>

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) abort();
    fputs(text, f);
    fclose(f);
}

/* rau_log_open of an amnesia log with the key file at path: its code, the message in err. */
static int open_with_key(const char *path, char *err, size_t errlen) {
    rau_log_config_t cfg;
    rau_log_config_init(&cfg);
    cfg.writer_id = "w";
    cfg.stream = "s";
    cfg.amnesia = 1;
    cfg.key_path = path;
    rau_log_t *l = NULL;
    int rc = rau_log_open(&cfg, &l, err, errlen);
    rau_log_close(l);
    return rc;
}

RA_TEST(sign_and_verify) {
    char sk[RAU_KEY_TEXT_MAX], vk[RAU_KEY_TEXT_MAX];
    CHECK_RC(rau_note_keygen("ron-audit/gw-1/rejects", sk, sizeof sk, vk, sizeof vk), 0);
    CHECK(strncmp(sk, "PRIVATE+KEY+ron-audit/gw-1/rejects+", 35) == 0);
    CHECK(strncmp(vk, "ron-audit/gw-1/rejects+", 23) == 0);
    rau_signer_t *s = NULL;
    REQUIRE(rau_signer_parse(sk, strlen(sk), &s) == 0);
    CHECK_STR(rau_signer_name(s), "ron-audit/gw-1/rejects");
    uint8_t root[32], got[32];
    for (int i = 0; i < 32; i++)
        root[i] = (uint8_t)i;
    char note[RAU_NOTE_MAX];
    size_t n = 0;
    REQUIRE(rau_checkpoint_sign(s, 12345, root, note, sizeof note, &n) == 0);
    const char *want_body = "ron-audit/gw-1/"
                            "rejects\n12345\nAAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
                            "\n\n\xe2\x80\x94 ron-audit/gw-1/rejects ";
    CHECK(strncmp(note, want_body, strlen(want_body)) == 0);
    uint64_t size = 0;
    CHECK_RC(rau_checkpoint_verify(note, n, vk, strlen(vk), &size, got), 0);
    CHECK_EQ_U64(size, 12345);
    CHECK(memcmp(got, root, 32) == 0);
    /* every single-byte change of the note is refused */
    char m[RAU_NOTE_MAX];
    int accepted = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(m, note, n);
        m[i] ^= 0x01;
        if (rau_checkpoint_verify(m, n, vk, strlen(vk), NULL, NULL) == 0) accepted++;
    }
    CHECK(accepted == 0);
    /* every truncation */
    for (size_t i = 0; i < n; i++)
        if (rau_checkpoint_verify(note, i, vk, strlen(vk), NULL, NULL) == 0) accepted++;
    CHECK(accepted == 0);
    /* another key of the same name: not its signature */
    char sk2[RAU_KEY_TEXT_MAX], vk2[RAU_KEY_TEXT_MAX];
    REQUIRE(rau_note_keygen("ron-audit/gw-1/rejects", sk2, sizeof sk2, vk2, sizeof vk2) == 0);
    CHECK_RC(rau_checkpoint_verify(note, n, vk2, strlen(vk2), NULL, NULL), RAU_EBADSIG);
    rau_signer_free(s);
}

/* rekor#2069: a checkpoint signed by a key whose name is not the origin line. */
RA_TEST(origin_must_match_signer) {
    char sk[RAU_KEY_TEXT_MAX], vk[RAU_KEY_TEXT_MAX];
    REQUIRE(rau_note_keygen("signer-a", sk, sizeof sk, vk, sizeof vk) == 0);
    rau_signer_t *s = NULL;
    REQUIRE(rau_signer_parse(sk, strlen(sk), &s) == 0);
    uint8_t root[32] = {0};
    char note[RAU_NOTE_MAX], forged[RAU_NOTE_MAX + 64];
    size_t n = 0;
    REQUIRE(rau_checkpoint_sign(s, 7, root, note, sizeof note, &n) == 0);
    /* Re-sign a body with another origin with the same key: the signature is valid, the
     * origin is not the signer's. */
    const char *body = "other-log\n7\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n";
    const char *sig_line = strstr(note, "\n\n") + 1;
    unsigned char seed[33];
    size_t got = 0;
    const char *b64 = sk + strlen("PRIVATE+KEY+signer-a+01234567+"); /* base64 has '+' */
    REQUIRE(sodium_base642bin(seed, sizeof seed, b64, strlen(b64), NULL, &got, NULL,
                              sodium_base64_VARIANT_ORIGINAL) == 0 &&
            got == 33);
    unsigned char pk[32], skx[64], sig[68];
    crypto_sign_seed_keypair(pk, skx, seed + 1);
    size_t sl = 0;
    const char *old64 = strrchr(sig_line, ' ') + 1;
    REQUIRE(sodium_base642bin(sig, sizeof sig, old64, strlen(old64) - 1, NULL, &sl, NULL,
                              sodium_base64_VARIANT_ORIGINAL) == 0);
    crypto_sign_detached(sig + 4, NULL, (const unsigned char *)body, strlen(body), skx);
    char s64[128];
    sodium_bin2base64(s64, sizeof s64, sig, 68, sodium_base64_VARIANT_ORIGINAL);
    snprintf(forged, sizeof forged, "%s\n\xe2\x80\x94 signer-a %s\n", body, s64);
    CHECK_RC(rau_checkpoint_verify(forged, strlen(forged), vk, strlen(vk), NULL, NULL),
             RAU_EBADSIG);
    /* the same construction with the right origin passes: the refusal was the origin */
    const char *body2 = "signer-a\n7\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n";
    crypto_sign_detached(sig + 4, NULL, (const unsigned char *)body2, strlen(body2), skx);
    sodium_bin2base64(s64, sizeof s64, sig, 68, sodium_base64_VARIANT_ORIGINAL);
    snprintf(forged, sizeof forged, "%s\n\xe2\x80\x94 signer-a %s\n", body2, s64);
    CHECK_RC(rau_checkpoint_verify(forged, strlen(forged), vk, strlen(vk), NULL, NULL), 0);
    rau_signer_free(s);
}

RA_TEST(key_files_and_secrecy) {
    char sk[RAU_KEY_TEXT_MAX], vk[RAU_KEY_TEXT_MAX], path[600];
    REQUIRE(rau_note_keygen("k1", sk, sizeof sk, vk, sizeof vk) == 0);
    snprintf(path, sizeof path, "%s/k1.key", rau_t_tmpdir());
    write_file(path, sk);
    rau_signer_t *s = NULL;
    CHECK_RC(rau_signer_load(path, &s), 0);
    rau_signer_free(s);
    /* a damaged key: its hash no longer matches */
    char bad[RAU_KEY_TEXT_MAX];
    snprintf(bad, sizeof bad, "%s", sk);
    bad[strlen(bad) - 5] = bad[strlen(bad) - 5] == 'A' ? 'B' : 'A';
    CHECK_RC(rau_signer_parse(bad, strlen(bad), &s), RAU_EKEY);
    CHECK_RC(rau_signer_parse(vk, strlen(vk), &s), RAU_EKEY); /* a verifier key is no signer */
    CHECK_RC(rau_signer_load("/nonexistent/key", &s), RAU_EIO);
    CHECK_RC(rau_note_keygen("bad name", sk, sizeof sk, vk, sizeof vk), RAU_EKEY);
    CHECK_RC(rau_note_keygen("a+b", sk, sizeof sk, vk, sizeof vk), RAU_EKEY);
    /* AUD-I-11: a log opened with a damaged key names the file, never the key */
    snprintf(path, sizeof path, "%s/bad.key", rau_t_tmpdir());
    write_file(path, bad);
    char err[512] = "";
    CHECK_RC(open_with_key(path, err, sizeof err), RAU_EKEY);
    CHECK(strstr(err, path) != NULL);
    const char *secret = bad + strlen("PRIVATE+KEY+k1+01234567+");
    char piece[9];
    memcpy(piece, secret, 8);
    piece[8] = 0;
    CHECK(strstr(err, piece) == NULL);
    CHECK(strstr(err, "PRIVATE") == NULL);
}

/* A signature line of an unknown key: name, then base64(4-byte id || n random bytes). */
static size_t unknown_sig(char *out, size_t cap, const char *name, size_t n) {
    uint8_t *b = malloc(4 + n);
    randombytes_buf(b, 4 + n);
    size_t e = sodium_base64_encoded_len(4 + n, sodium_base64_VARIANT_ORIGINAL);
    char *b64 = malloc(e);
    sodium_bin2base64(b64, e, b, 4 + n, sodium_base64_VARIANT_ORIGINAL);
    int w = snprintf(out, cap, "\xe2\x80\x94 %s %s\n", name, b64);
    free(b);
    free(b64);
    return w > 0 && (size_t)w < cap ? (size_t)w : 0;
}

typedef struct keys_s {
    char sk[RAU_KEY_TEXT_MAX], vk[RAU_KEY_TEXT_MAX], wsk[RAU_KEY_TEXT_MAX], wvk[RAU_KEY_TEXT_MAX];
    rau_signer_t *s, *w;
} keys_t;

static void keys(keys_t *k) {
    REQUIRE(rau_note_keygen("example.com/log", k->sk, sizeof k->sk, k->vk, sizeof k->vk) == 0);
    REQUIRE(rau_cosigner_keygen("witness.example.com/w1", k->wsk, sizeof k->wsk, k->wvk,
                                sizeof k->wvk) == 0);
    REQUIRE(rau_signer_parse(k->sk, strlen(k->sk), &k->s) == 0);
    REQUIRE(rau_signer_parse(k->wsk, strlen(k->wsk), &k->w) == 0);
}

/* c2sp.org/signed-note: signatures of unknown keys are ignored whatever their length, at
 * least 16 signatures are accepted (sumdb/note: up to 100), the note is not capped at 1 KiB.
 * Before: every signature line was decoded as exactly 4+64 bytes (a witness's 4+8+64 was
 * NonCanonical) and notes were capped at 1024 bytes. */
RA_TEST(unknown_signatures_of_any_length_are_ignored) {
    keys_t k;
    keys(&k);
    uint8_t root[32] = {7};
    char note[RAU_NOTE_MAX];
    size_t n = 0;
    REQUIRE(rau_checkpoint_sign(k.s, 42, root, note, sizeof note, &n) == 0);
    char *big = malloc(RAU_NOTE_READ_MAX + 1);
    uint64_t size = 0;
    /* a 5 kB signature (a post-quantum key's) after the log's */
    memcpy(big, note, n);
    size_t m = n + unknown_sig(big + n, RAU_NOTE_READ_MAX - n, "pq.example.com/slh", 5000);
    CHECK(m > 6000);
    CHECK_RC(rau_checkpoint_verify(big, m, k.vk, strlen(k.vk), &size, NULL), 0);
    CHECK_EQ_U64(size, 42);
    /* ... and before it: the order of the lines does not matter */
    size_t t = strstr(note, "\n\n") + 2 - note;
    memcpy(big, note, t);
    m = t + unknown_sig(big + t, RAU_NOTE_READ_MAX - t, "pq.example.com/slh", 5000);
    memcpy(big + m, note + t, n - t);
    m += n - t;
    CHECK_RC(rau_checkpoint_verify(big, m, k.vk, strlen(k.vk), NULL, NULL), 0);
    /* 16 signatures: the log's and 15 others of every length from 5 to 3000 bytes */
    memcpy(big, note, n);
    m = n;
    for (int i = 0; i < 15; i++) {
        char name[64];
        snprintf(name, sizeof name, "other-%d.example.com", i);
        m += unknown_sig(big + m, RAU_NOTE_READ_MAX - m, name, (size_t)(1 + i * 200));
    }
    CHECK_RC(rau_checkpoint_verify(big, m, k.vk, strlen(k.vk), NULL, NULL), 0);
    /* 100 signature lines are accepted, 101 are not (sumdb/note's bound) */
    memcpy(big, note, n);
    m = n;
    for (int i = 0; i < 99; i++)
        m += unknown_sig(big + m, RAU_NOTE_READ_MAX - m, "x.example.com", 64);
    CHECK_RC(rau_checkpoint_verify(big, m, k.vk, strlen(k.vk), NULL, NULL), 0);
    m += unknown_sig(big + m, RAU_NOTE_READ_MAX - m, "x.example.com", 64);
    CHECK_RC(rau_checkpoint_verify(big, m, k.vk, strlen(k.vk), NULL, NULL), RAU_ENONCANON);
    /* an unknown key with the log's name but another id: ignored (signed-note: "even if
     * they share a name or ID (but not both)") */
    memcpy(big, note, n);
    m = n + unknown_sig(big + n, RAU_NOTE_READ_MAX - n, "example.com/log", 64);
    CHECK_RC(rau_checkpoint_verify(big, m, k.vk, strlen(k.vk), NULL, NULL), 0);
    /* malformed lines are refused: a name with a Unicode space, a signature under 5 bytes */
    memcpy(big, note, n);
    m = n + unknown_sig(big + n, RAU_NOTE_READ_MAX - n,
                        "a\xc2\xa0"
                        "b",
                        64);
    CHECK_RC(rau_checkpoint_verify(big, m, k.vk, strlen(k.vk), NULL, NULL), RAU_ENONCANON);
    memcpy(big, note, n);
    m = n + (size_t)snprintf(big + n, 64, "\xe2\x80\x94 short AAAAAA==\n");
    CHECK_RC(rau_checkpoint_verify(big, m, k.vk, strlen(k.vk), NULL, NULL), RAU_ENONCANON);
    /* a control character anywhere */
    memcpy(big, note, n);
    big[3] = '\t';
    CHECK_RC(rau_checkpoint_verify(big, n, k.vk, strlen(k.vk), NULL, NULL), RAU_ENONCANON);
    free(big);
    rau_signer_free(k.s);
    rau_signer_free(k.w);
}

/* c2sp.org/tlog-cosignature: a witness's cosignature/v1 (4+8+64 bytes) next to the log's
 * signature; each key verifies its own line and ignores the other's. */
RA_TEST(a_witness_cosignature) {
    keys_t k;
    keys(&k);
    CHECK(strncmp(k.wsk, "PRIVATE+KEY+witness.example.com/w1+", 35) == 0);
    CHECK(rau_signer_is_cosigner(k.w) == 1 && rau_signer_is_cosigner(k.s) == 0);
    uint8_t root[32] = {1, 2, 3}, got[32];
    char note[RAU_NOTE_MAX], cos[RAU_NOTE_MAX], twice[RAU_NOTE_MAX];
    size_t n = 0, cn = 0, tn = 0;
    REQUIRE(rau_checkpoint_sign(k.s, 20852163, root, note, sizeof note, &n) == 0);
    CHECK_RC(rau_cosign(k.w, note, n, 1679315147, cos, sizeof cos, &cn), 0);
    /* the cosignature's bytes: key id, time, Ed25519 signature over the fixed message */
    const char *line = strstr(cos, "\xe2\x80\x94 witness.example.com/w1 ");
    REQUIRE(line);
    uint8_t sig[80];
    size_t got_n = 0;
    const char *b64 = strchr(line + 4, ' ') + 1;
    REQUIRE(sodium_base642bin(sig, sizeof sig, b64, strcspn(b64, "\n"), NULL, &got_n, NULL,
                              sodium_base64_VARIANT_ORIGINAL) == 0);
    CHECK(got_n == 4 + 8 + 64);
    uint8_t t8[8] = {0, 0, 0, 0, 0x64, 0x18, 0x50, 0xcb}; /* 1679315147 */
    CHECK(memcmp(sig + 4, t8, 8) == 0);
    char msg[512];
    size_t tl = (size_t)(strstr(note, "\n\n") + 1 - note);
    int ml = snprintf(msg, sizeof msg, "cosignature/v1\ntime 1679315147\n%.*s", (int)tl, note);
    uint8_t wpk[33];
    size_t pk_n = 0;
    const char *wb64 = strchr(strchr(k.wvk, '+') + 1, '+') + 1; /* (base64 may hold '+') */
    REQUIRE(sodium_base642bin(wpk, sizeof wpk, wb64, strlen(wb64), NULL, &pk_n, NULL,
                              sodium_base64_VARIANT_ORIGINAL) == 0 &&
            pk_n == 33 && wpk[0] == 0x04);
    CHECK(crypto_sign_verify_detached(sig + 12, (const uint8_t *)msg, (size_t)ml, wpk + 1) == 0);
    /* the log's key still verifies the cosigned note (the cosignature is ignored) */
    uint64_t size = 0, t = 0;
    CHECK_RC(rau_checkpoint_verify(cos, cn, k.vk, strlen(k.vk), &size, got), 0);
    CHECK_EQ_U64(size, 20852163);
    CHECK_RC(rau_cosignature_verify(cos, cn, k.wvk, strlen(k.wvk), &size, got, &t), 0);
    CHECK_EQ_U64(t, 1679315147);
    CHECK(memcmp(got, root, 32) == 0);
    /* not cosigned, or cosigned by another witness */
    CHECK_RC(rau_cosignature_verify(note, n, k.wvk, strlen(k.wvk), NULL, NULL, NULL), RAU_EBADSIG);
    char wsk2[RAU_KEY_TEXT_MAX], wvk2[RAU_KEY_TEXT_MAX];
    REQUIRE(rau_cosigner_keygen("witness.example.com/w1", wsk2, sizeof wsk2, wvk2, sizeof wvk2) ==
            0);
    CHECK_RC(rau_cosignature_verify(cos, cn, wvk2, strlen(wvk2), NULL, NULL, NULL), RAU_EBADSIG);
    /* a key of the wrong type for each function */
    CHECK_RC(rau_cosignature_verify(cos, cn, k.vk, strlen(k.vk), NULL, NULL, NULL), RAU_EKEY);
    CHECK_RC(rau_checkpoint_verify(cos, cn, k.wvk, strlen(k.wvk), NULL, NULL), RAU_EKEY);
    CHECK_RC(rau_checkpoint_sign(k.w, 1, root, twice, sizeof twice, &tn), RAU_EKEY);
    CHECK_RC(rau_cosign(k.s, note, n, 1, twice, sizeof twice, &tn), RAU_EKEY);
    /* every single-byte change of the cosignature line is refused */
    size_t at = (size_t)(line - cos), bad = 0;
    for (size_t i = at; i < cn - 1; i++) {
        memcpy(twice, cos, cn);
        twice[i] ^= 0x01;
        if (rau_cosignature_verify(twice, cn, k.wvk, strlen(k.wvk), NULL, NULL, NULL) == 0) bad++;
    }
    CHECK(bad == 0);
    /* cosigning again replaces the witness's line: one per key */
    CHECK_RC(rau_cosign(k.w, cos, cn, 1679315200, twice, sizeof twice, &tn), 0);
    CHECK(tn == cn);
    CHECK_RC(rau_cosignature_verify(twice, tn, k.wvk, strlen(k.wvk), NULL, NULL, &t), 0);
    CHECK_EQ_U64(t, 1679315200);
    /* a log cannot be opened with a witness's key */
    char path[600], err[512] = "";
    snprintf(path, sizeof path, "%s/witness.key", rau_t_tmpdir());
    write_file(path, k.wsk);
    CHECK_RC(open_with_key(path, err, sizeof err), RAU_EKEY);
    CHECK(strstr(err, "witness") != NULL);
    rau_signer_free(k.s);
    rau_signer_free(k.w);
}

int main(void) {
    if (sodium_init() < 0) return 2;
    RA_RUN(sign_and_verify, "AUD-I-10 C2SP checkpoint: sign, verify, every mutation refused");
    RA_RUN(origin_must_match_signer, "AUD-I-10 origin line must equal the signer's name");
    RA_RUN(key_files_and_secrecy, "AUD-I-11 key files; errors never show the key");
    RA_RUN(unknown_signatures_of_any_length_are_ignored,
           "AUD-I-10 signed-note: unknown signatures of any length ignored, 16+ signatures");
    RA_RUN(a_witness_cosignature, "AUD-I-40 tlog-cosignature/v1: cosign, verify, key types");
    RA_DONE();
}
