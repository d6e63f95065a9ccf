/* Signed checkpoints in the C2SP signed-note format (c2sp.org/signed-note,
 * c2sp.org/tlog-checkpoint), Ed25519 via libsodium, so off-the-shelf transparency-log
 * tooling (golang.org/x/mod/sumdb/note, witnesses) can check them (AUD-I-10).
 *
 *   <origin>\n<size>\n<base64 root>\n \n — <name> <base64(keyhash4 || sig64)>\n
 *
 * keyhash = SHA-256(name || "\n" || 0x01 || pubkey)[:4]. The signature covers the body
 * only. AUD-I-11: the signer's seed lives only in rau_signer_t, is wiped on free, and is
 * never printed: error paths name the file, never its contents. */
#include "internal.h"

#include <fcntl.h>
#include <sodium.h>
#include <string.h>
#include <unistd.h>

#define ALG_ED25519 0x01
static const char EMDASH[] = "\xe2\x80\x94 ";

struct rau_signer_s {
    char name[RAU_KEY_TEXT_MAX];
    uint32_t hash;
    uint8_t sk[crypto_sign_SECRETKEYBYTES];
    uint8_t pk[crypto_sign_PUBLICKEYBYTES];
};

static int name_ok(const char *s, size_t n) {
    if (n == 0 || n >= 128) return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= 0x20 || c == 0x7f || c == '+') return 0;
    }
    return 1;
}

static uint32_t keyhash(const char *name, size_t n, const uint8_t *pk) {
    uint8_t tail[2 + 32], d[32];
    tail[0] = '\n';
    tail[1] = ALG_ED25519;
    memcpy(tail + 2, pk, 32);
    /* name || tail as two parts */
    rau__sha256_2(name, n, tail, sizeof tail, d);
    return rau__rd32(d);
}

static int b64_enc(char *out, size_t cap, const uint8_t *bin, size_t n) {
    if (sodium_base64_encoded_len(n, sodium_base64_VARIANT_ORIGINAL) > cap) return RAU_EBUFSIZE;
    sodium_bin2base64(out, cap, bin, n, sodium_base64_VARIANT_ORIGINAL);
    return 0;
}

/* Strict: all of s decoded, exactly want bytes, and s is the canonical encoding. */
static int b64_dec(const char *s, size_t n, uint8_t *bin, size_t want) {
    size_t got = 0;
    const char *end = NULL;
    if (sodium_base642bin(bin, want, s, n, NULL, &got, &end, sodium_base64_VARIANT_ORIGINAL) != 0 ||
        got != want || end != s + n)
        return -1;
    char again[256];
    if (b64_enc(again, sizeof again, bin, want) || strlen(again) != n || memcmp(again, s, n))
        return -1;
    return 0;
}

int rau_note_keygen(const char *name, char *skey, size_t skey_cap, char *vkey, size_t vkey_cap) {
    if (!name || !skey || !vkey || sodium_init() < 0) return RAU_EINVAL;
    size_t n = strlen(name);
    if (!name_ok(name, n)) return RAU_EKEY;
    uint8_t pk[32], sk[64], b[33];
    crypto_sign_keypair(pk, sk);
    uint32_t h = keyhash(name, n, pk);
    char e[64];
    b[0] = ALG_ED25519;
    memcpy(b + 1, sk, 32); /* libsodium's sk = seed || pk */
    b64_enc(e, sizeof e, b, 33);
    int w = snprintf(skey, skey_cap, "PRIVATE+KEY+%s+%08x+%s", name, h, e);
    sodium_memzero(sk, sizeof sk);
    sodium_memzero(b, sizeof b);
    sodium_memzero(e, sizeof e);
    if (w < 0 || (size_t)w >= skey_cap) return RAU_EBUFSIZE;
    b[0] = ALG_ED25519;
    memcpy(b + 1, pk, 32);
    b64_enc(e, sizeof e, b, 33);
    w = snprintf(vkey, vkey_cap, "%s+%08x+%s", name, h, e);
    if (w < 0 || (size_t)w >= vkey_cap) return RAU_EBUFSIZE;
    return 0;
}

/* Splits "name+hash8+base64" (the tail of both key forms). */
static int key_fields(const char *s, size_t n, const char **name, size_t *name_len, uint32_t *hash,
                      uint8_t *key33) {
    const char *p1 = memchr(s, '+', n);
    if (!p1) return RAU_EKEY;
    const char *p2 = memchr(p1 + 1, '+', (size_t)(s + n - p1 - 1));
    if (!p2 || p2 - p1 != 9) return RAU_EKEY;
    *name = s;
    *name_len = (size_t)(p1 - s);
    if (!name_ok(s, *name_len)) return RAU_EKEY;
    uint32_t h = 0;
    for (const char *q = p1 + 1; q < p2; q++) {
        int d = (*q >= '0' && *q <= '9') ? *q - '0' : (*q >= 'a' && *q <= 'f') ? *q - 'a' + 10 : -1;
        if (d < 0) return RAU_EKEY;
        h = h << 4 | (uint32_t)d;
    }
    *hash = h;
    if (b64_dec(p2 + 1, (size_t)(s + n - p2 - 1), key33, 33) || key33[0] != ALG_ED25519)
        return RAU_EKEY;
    return 0;
}

int rau_signer_parse(const char *text, size_t len, rau_signer_t **out) {
    if (!text || !out || sodium_init() < 0) return RAU_EINVAL;
    *out = NULL;
    while (len && (text[len - 1] == '\n' || text[len - 1] == '\r'))
        len--;
    static const char pfx[] = "PRIVATE+KEY+";
    if (len < sizeof pfx || memcmp(text, pfx, sizeof pfx - 1) != 0) return RAU_EKEY;
    const char *name;
    size_t nl;
    uint32_t h;
    uint8_t k[33];
    int rc = key_fields(text + sizeof pfx - 1, len - (sizeof pfx - 1), &name, &nl, &h, k);
    if (rc) return rc;
    rau_signer_t *s = sodium_malloc(sizeof *s);
    if (!s) return RAU_ENOMEM;
    memcpy(s->name, name, nl);
    s->name[nl] = 0;
    crypto_sign_seed_keypair(s->pk, s->sk, k + 1);
    sodium_memzero(k, sizeof k);
    s->hash = h;
    if (keyhash(s->name, nl, s->pk) != h) {
        rau_signer_free(s);
        return RAU_EKEY;
    }
    *out = s;
    return 0;
}

int rau_signer_load(const char *path, rau_signer_t **out) {
    if (!path || !out) return RAU_EINVAL;
    *out = NULL;
    char buf[RAU_KEY_TEXT_MAX + 2];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return RAU_EIO;
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    if (n < 0) return RAU_EIO;
    if ((size_t)n >= sizeof buf) return RAU_EKEY;
    int rc = rau_signer_parse(buf, (size_t)n, out);
    sodium_memzero(buf, sizeof buf);
    return rc;
}

const char *rau_signer_name(const rau_signer_t *s) {
    return s->name;
}

void rau_signer_free(rau_signer_t *s) {
    if (s) sodium_free(s); /* sodium_free wipes */
}

static int body(const char *origin, uint64_t size, const uint8_t *root, char *buf, size_t cap,
                size_t *len) {
    char r64[64];
    b64_enc(r64, sizeof r64, root, 32);
    int w = snprintf(buf, cap, "%s\n%llu\n%s\n", origin, (unsigned long long)size, r64);
    if (w < 0 || (size_t)w >= cap) return RAU_EBUFSIZE;
    *len = (size_t)w;
    return 0;
}

int rau_checkpoint_sign(const rau_signer_t *s, uint64_t size, const uint8_t *root, char *buf,
                        size_t cap, size_t *len_out) {
    if (!s || !root || !buf || !len_out) return RAU_EINVAL;
    size_t bl = 0;
    int rc = body(s->name, size, root, buf, cap, &bl);
    if (rc) return rc;
    uint8_t sig[4 + 64];
    rau__be32(sig, s->hash);
    crypto_sign_detached(sig + 4, NULL, (const uint8_t *)buf, bl, s->sk);
    char s64[128];
    b64_enc(s64, sizeof s64, sig, sizeof sig);
    int w = snprintf(buf + bl, cap - bl, "\n%s%s %s\n", EMDASH, s->name, s64);
    if (w < 0 || (size_t)w >= cap - bl) return RAU_EBUFSIZE;
    *len_out = bl + (size_t)w;
    return 0;
}

int rau_checkpoint_verify(const char *note, size_t len, const char *vkey, size_t vkey_len,
                          uint64_t *size_out, uint8_t *root_out) {
    if (!note || !vkey || sodium_init() < 0) return RAU_EINVAL;
    while (vkey_len && (vkey[vkey_len - 1] == '\n' || vkey[vkey_len - 1] == '\r'))
        vkey_len--;
    const char *vname;
    size_t vnl;
    uint32_t vh;
    uint8_t k[33];
    int rc = key_fields(vkey, vkey_len, &vname, &vnl, &vh, k);
    if (rc) return rc;
    if (keyhash(vname, vnl, k + 1) != vh) return RAU_EKEY;
    if (len > RAU_NOTE_MAX || len < 2 || note[len - 1] != '\n') return RAU_ENONCANON;
    if (memchr(note, 0, len)) return RAU_ENONCANON;
    /* The body ends at the first blank line. */
    const char *sep = NULL;
    for (size_t i = 0; i + 1 < len; i++)
        if (note[i] == '\n' && note[i + 1] == '\n') {
            sep = note + i;
            break;
        }
    if (!sep) return RAU_ENONCANON;
    size_t blen = (size_t)(sep - note) + 1;
    int good = 0;
    for (const char *p = sep + 2; p < note + len;) {
        const char *eol = memchr(p, '\n', (size_t)(note + len - p));
        if (!eol || (size_t)(eol - p) < sizeof EMDASH || memcmp(p, EMDASH, sizeof EMDASH - 1))
            return RAU_ENONCANON;
        const char *nm = p + sizeof EMDASH - 1;
        const char *sp = memchr(nm, ' ', (size_t)(eol - nm));
        if (!sp) return RAU_ENONCANON;
        uint8_t sig[68];
        if (b64_dec(sp + 1, (size_t)(eol - sp - 1), sig, sizeof sig)) return RAU_ENONCANON;
        if ((size_t)(sp - nm) == vnl && memcmp(nm, vname, vnl) == 0 && rau__rd32(sig) == vh) {
            if (crypto_sign_verify_detached(sig + 4, (const uint8_t *)note, blen, k + 1) != 0)
                return RAU_EBADSIG;
            good = 1;
        }
        p = eol + 1;
    }
    if (!good) return RAU_EBADSIG;
    /* AUD-I-10: the origin is the signer's name (rekor#2069: a mismatch went unnoticed). */
    const char *l1 = memchr(note, '\n', blen);
    if ((size_t)(l1 - note) != vnl || memcmp(note, vname, vnl) != 0) return RAU_EBADSIG;
    const char *l2 = memchr(l1 + 1, '\n', (size_t)(note + blen - l1 - 1));
    if (!l2) return RAU_ENONCANON;
    uint64_t size = 0;
    size_t dl = (size_t)(l2 - l1 - 1);
    if (dl == 0 || dl > 20 || (dl > 1 && l1[1] == '0')) return RAU_ENONCANON;
    for (const char *q = l1 + 1; q < l2; q++) {
        if (*q < '0' || *q > '9') return RAU_ENONCANON;
        uint64_t d = (uint64_t)(*q - '0');
        if (size > (UINT64_MAX - d) / 10) return RAU_ENONCANON;
        size = size * 10 + d;
    }
    const char *l3 = memchr(l2 + 1, '\n', (size_t)(note + blen - l2 - 1));
    if (!l3) return RAU_ENONCANON;
    uint8_t root[32];
    if (b64_dec(l2 + 1, (size_t)(l3 - l2 - 1), root, 32)) return RAU_ENONCANON;
    if (size_out) *size_out = size;
    if (root_out) memcpy(root_out, root, 32);
    return 0;
}

int rau__b64_32(const char *s, size_t n, uint8_t *out32) {
    return b64_dec(s, n, out32, 32) ? RAU_ENONCANON : 0;
}
