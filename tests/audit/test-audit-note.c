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
    rau_log_config_t cfg;
    rau_log_config_init(&cfg);
    cfg.writer_id = "w";
    cfg.stream = "s";
    cfg.amnesia = 1;
    cfg.key_path = path;
    rau_log_t *l = NULL;
    char err[512] = "";
    CHECK_RC(rau_log_open(&cfg, &l, err, sizeof err), RAU_EKEY);
    CHECK(strstr(err, path) != NULL);
    const char *secret = bad + strlen("PRIVATE+KEY+k1+01234567+");
    char piece[9];
    memcpy(piece, secret, 8);
    piece[8] = 0;
    CHECK(strstr(err, piece) == NULL);
    CHECK(strstr(err, "PRIVATE") == NULL);
}

int main(void) {
    if (sodium_init() < 0) return 2;
    RA_RUN(sign_and_verify, "AUD-I-10 C2SP checkpoint: sign, verify, every mutation refused");
    RA_RUN(origin_must_match_signer, "AUD-I-10 origin line must equal the signer's name");
    RA_RUN(key_files_and_secrecy, "AUD-I-11 key files; errors never show the key");
    RA_DONE();
}
