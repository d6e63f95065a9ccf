/* Signed checkpoints in the C2SP signed-note format (c2sp.org/signed-note,
 * c2sp.org/tlog-checkpoint), Ed25519 via libsodium, so off-the-shelf transparency-log
 * tooling (golang.org/x/mod/sumdb/note, witnesses) can check them (AUD-I-10), and
 * witness cosignatures (c2sp.org/tlog-cosignature, cosignature/v1, AUD-I-40).
 *
 *   <origin>\n<size>\n<base64 root>\n \n — <name> <base64(keyhash4 || sig64)>\n
 *
 * keyhash = SHA-256(name || "\n" || type || pubkey)[:4], type 0x01 for a log's key and 0x04
 * for a witness's (cosignature/v1). A log's signature covers the note text; a cosignature
 * covers "cosignature/v1\ntime <t>\n" || the text, and carries t (8 bytes, big-endian)
 * before the signature. A note's text ends at its LAST blank line; every line after it is
 * a signature. A verifier checks the signatures of the key it was given and ignores every
 * other, whatever its length (a witness's, an ECDSA or a post-quantum key's), up to 100
 * signature lines and RAU_NOTE_READ_MAX bytes, as sumdb/note's Open does.
 *
 * AUD-I-11: the signer's seed lives only in rau_signer_t, is wiped on free, and is never
 * printed: error paths name the file, never its contents. */
#include "internal.h"

#include <fcntl.h>
#include <sodium.h>
#include <string.h>
#include <unistd.h>

#define ALG_ED25519 0x01
#define ALG_COSIG_V1 0x04
#define MAX_SIGS 100
static const char EMDASH[] = "\xe2\x80\x94 ";
static const char COSIG_HDR[] = "cosignature/v1\ntime ";

struct rau_signer_s {
    char name[RAU_KEY_TEXT_MAX];
    uint32_t hash;
    uint8_t alg;
    uint8_t sk[crypto_sign_SECRETKEYBYTES];
    uint8_t pk[crypto_sign_PUBLICKEYBYTES];
};

/* The names this library makes and reads in keys: printable ASCII without '+'. */
static int name_ok(const char *s, size_t n) {
    if (n == 0 || n >= 128) return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= 0x20 || c == 0x7f || c == '+') return 0;
    }
    return 1;
}

/* One UTF-8 sequence at p (n bytes left): its code point and length, or -1. */
static int utf8_one(const unsigned char *p, size_t n, uint32_t *cp) {
    if (p[0] < 0x80) {
        *cp = p[0];
        return 1;
    }
    int len = p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 ? 2 : 0;
    if (!len || p[0] > 0xf4 || (size_t)len > n) return -1;
    uint32_t c = p[0] & (0x7f >> len);
    for (int i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80) return -1;
        c = c << 6 | (p[i] & 0x3f);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < min[len] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return -1;
    *cp = c;
    return len;
}

/* Go's unicode.IsSpace: a key name in a signature line must have none (sumdb/note). */
static int is_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0d) || c == 0x20 || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
           c == 0x205f || c == 0x3000;
}

/* sumdb/note's isValidName, for the names of signature lines. */
static int sig_name_ok(const char *s, size_t n) {
    if (n == 0) return 0;
    for (size_t i = 0; i < n;) {
        uint32_t c;
        int k = utf8_one((const unsigned char *)s + i, n - i, &c);
        if (k < 0 || c == '+' || is_space(c)) return 0;
        i += (size_t)k;
    }
    return 1;
}

static uint32_t keyhash(const char *name, size_t n, uint8_t alg, const uint8_t *pk) {
    uint8_t tail[2 + 32], d[32];
    tail[0] = '\n';
    tail[1] = alg;
    memcpy(tail + 2, pk, 32);
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

static int keygen(const char *name, uint8_t alg, char *skey, size_t skey_cap, char *vkey,
                  size_t vkey_cap) {
    if (!name || !skey || !vkey || sodium_init() < 0) return RAU_EINVAL;
    size_t n = strlen(name);
    if (!name_ok(name, n)) return RAU_EKEY;
    uint8_t pk[32], sk[64], b[33];
    crypto_sign_keypair(pk, sk);
    uint32_t h = keyhash(name, n, alg, pk);
    char e[64];
    b[0] = alg;
    memcpy(b + 1, sk, 32); /* libsodium's sk = seed || pk */
    b64_enc(e, sizeof e, b, 33);
    int w = snprintf(skey, skey_cap, "PRIVATE+KEY+%s+%08x+%s", name, h, e);
    sodium_memzero(sk, sizeof sk);
    sodium_memzero(b, sizeof b);
    sodium_memzero(e, sizeof e);
    if (w < 0 || (size_t)w >= skey_cap) return RAU_EBUFSIZE;
    b[0] = alg;
    memcpy(b + 1, pk, 32);
    b64_enc(e, sizeof e, b, 33);
    w = snprintf(vkey, vkey_cap, "%s+%08x+%s", name, h, e);
    if (w < 0 || (size_t)w >= vkey_cap) return RAU_EBUFSIZE;
    return 0;
}

int rau_note_keygen(const char *name, char *skey, size_t skey_cap, char *vkey, size_t vkey_cap) {
    return keygen(name, ALG_ED25519, skey, skey_cap, vkey, vkey_cap);
}

int rau_cosigner_keygen(const char *name, char *skey, size_t skey_cap, char *vkey,
                        size_t vkey_cap) {
    return keygen(name, ALG_COSIG_V1, skey, skey_cap, vkey, vkey_cap);
}

/* Splits "name+hash8+base64" (the tail of both key forms); key33[0] is the key's type. */
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
    if (b64_dec(p2 + 1, (size_t)(s + n - p2 - 1), key33, 33) ||
        (key33[0] != ALG_ED25519 && key33[0] != ALG_COSIG_V1))
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
    s->alg = k[0];
    crypto_sign_seed_keypair(s->pk, s->sk, k + 1);
    sodium_memzero(k, sizeof k);
    s->hash = h;
    if (keyhash(s->name, nl, s->alg, s->pk) != h) {
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

int rau_signer_is_cosigner(const rau_signer_t *s) {
    return s && s->alg == ALG_COSIG_V1;
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
    if (s->alg != ALG_ED25519) return RAU_EKEY; /* a witness's key cosigns, never signs */
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

/* A verifier key: its name, key ID, type and Ed25519 public key. */
typedef struct vkey_s {
    const char *name;
    size_t nl;
    uint32_t id;
    uint8_t alg;
    uint8_t pk[32];
} vkey_t;

static int vkey_parse(const char *vkey, size_t len, uint8_t alg, vkey_t *k) {
    while (len && (vkey[len - 1] == '\n' || vkey[len - 1] == '\r'))
        len--;
    uint8_t b[33];
    int rc = key_fields(vkey, len, &k->name, &k->nl, &k->id, b);
    if (rc) return rc;
    if (b[0] != alg || keyhash(k->name, k->nl, b[0], b + 1) != k->id) return RAU_EKEY;
    k->alg = b[0];
    memcpy(k->pk, b + 1, 32);
    return 0;
}

/* The note's form (c2sp.org/signed-note): valid UTF-8 without control characters but
 * newlines, a text ending in a newline, a blank line (the last one of the note), one or more
 * signature lines. -> 0 and the text's length (through its last newline), or RAU_ENONCANON. */
static int note_text(const char *note, size_t len, size_t *text_len) {
    if (len < 4 || len > RAU_NOTE_READ_MAX || note[len - 1] != '\n') return RAU_ENONCANON;
    for (size_t i = 0; i < len;) {
        uint32_t c;
        int k = utf8_one((const unsigned char *)note + i, len - i, &c);
        if (k < 0 || (c < 0x20 && c != '\n')) return RAU_ENONCANON;
        i += (size_t)k;
    }
    for (size_t i = len - 2; i-- > 0;)
        if (note[i] == '\n' && note[i + 1] == '\n') {
            *text_len = i + 1;
            return 0;
        }
    return RAU_ENONCANON;
}

/* What a cosignature/v1 signs: "cosignature/v1\ntime <t>\n" || the checkpoint's text
 * (malloc'd, its length in *len; NULL when out of memory). */
static uint8_t *cosig_message(uint64_t t, const char *text, size_t tl, size_t *len) {
    char hdr[64];
    int hl = snprintf(hdr, sizeof hdr, "%s%llu\n", COSIG_HDR, (unsigned long long)t);
    uint8_t *m = malloc((size_t)hl + tl);
    if (!m) return NULL;
    memcpy(m, hdr, (size_t)hl);
    memcpy(m + hl, text, tl);
    *len = (size_t)hl + tl;
    return m;
}

/* One signature line's key and signature by k: verified (alg 1: Ed25519 over the text;
 * alg 4: cosignature/v1). -> 0, or RAU_EBADSIG. */
static int check_sig(const vkey_t *k, const char *text, size_t tl, const uint8_t *sig, size_t n,
                     uint64_t *ts) {
    if (k->alg == ALG_ED25519) {
        if (n != 4 + 64) return RAU_EBADSIG;
        return crypto_sign_verify_detached(sig + 4, (const uint8_t *)text, tl, k->pk) ? RAU_EBADSIG
                                                                                      : 0;
    }
    if (n != 4 + 8 + 64) return RAU_EBADSIG;
    uint64_t t = rau__rd64(sig + 4);
    if (t > (uint64_t)INT64_MAX) return RAU_EBADSIG;
    size_t ml = 0;
    uint8_t *m = cosig_message(t, text, tl, &ml);
    if (!m) return RAU_ENOMEM;
    int rc = crypto_sign_verify_detached(sig + 12, m, ml, k->pk) ? RAU_EBADSIG : 0;
    free(m);
    if (!rc) *ts = t;
    return rc;
}

/* Opens a note (sumdb/note's Open for one known key): the form, then every signature line
 * (at most MAX_SIGS, each "— <name> <base64 of at least 5 bytes>"); a line with k's name and
 * key ID is verified (the first one: repeats are ignored), every other line is ignored.
 * -> 0 (text_len set; ts_out: the cosignature's time), RAU_ENONCANON (malformed),
 * RAU_EBADSIG (no signature by k, or one that does not verify). */
static int note_open(const char *note, size_t len, const vkey_t *k, size_t *text_len,
                     uint64_t *ts_out) {
    size_t tl = 0;
    int rc = note_text(note, len, &tl);
    if (rc) return rc;
    int seen = 0, nsig = 0;
    uint8_t *sig = NULL;
    for (const char *p = note + tl + 1; p < note + len && !rc;) {
        const char *eol = memchr(p, '\n', (size_t)(note + len - p));
        const char *nm = p + sizeof EMDASH - 1;
        const char *sp = nm < eol ? memchr(nm, ' ', (size_t)(eol - nm)) : NULL;
        size_t b64n = sp ? (size_t)(eol - sp - 1) : 0, got = 0;
        if (++nsig > MAX_SIGS || (size_t)(eol - p) < sizeof EMDASH ||
            memcmp(p, EMDASH, sizeof EMDASH - 1) || !sp || b64n == 0 ||
            !sig_name_ok(nm, (size_t)(sp - nm))) {
            rc = RAU_ENONCANON;
            break;
        }
        free(sig);
        sig = malloc(b64n);
        if (!sig) {
            rc = RAU_ENOMEM;
            break;
        }
        const char *end = NULL;
        if (sodium_base642bin(sig, b64n, sp + 1, b64n, NULL, &got, &end,
                              sodium_base64_VARIANT_ORIGINAL) != 0 ||
            end != eol || got < 5) {
            rc = RAU_ENONCANON;
            break;
        }
        if (!seen && (size_t)(sp - nm) == k->nl && memcmp(nm, k->name, k->nl) == 0 &&
            rau__rd32(sig) == k->id) {
            rc = check_sig(k, note, tl, sig, got, ts_out);
            seen = 1;
        }
        p = eol + 1;
    }
    free(sig);
    if (!rc && !seen) rc = RAU_EBADSIG;
    *text_len = tl;
    return rc;
}

/* The checkpoint in a note's text (c2sp.org/tlog-checkpoint): origin, a decimal size without
 * leading zeros, the base64 root; extension lines may follow. */
int rau__checkpoint_body(const char *text, size_t len, size_t *origin_len, uint64_t *size_out,
                         uint8_t *root_out) {
    const char *end = text + len;
    const char *l1 = memchr(text, '\n', len);
    const char *l2 = l1 ? memchr(l1 + 1, '\n', (size_t)(end - l1 - 1)) : NULL;
    const char *l3 = l2 ? memchr(l2 + 1, '\n', (size_t)(end - l2 - 1)) : NULL;
    if (!l3 || l1 == text) return RAU_ENONCANON;
    uint64_t size = 0;
    size_t dl = (size_t)(l2 - l1 - 1);
    if (dl == 0 || dl > 20 || (dl > 1 && l1[1] == '0')) return RAU_ENONCANON;
    for (const char *q = l1 + 1; q < l2; q++) {
        if (*q < '0' || *q > '9') return RAU_ENONCANON;
        uint64_t d = (uint64_t)(*q - '0');
        if (size > (UINT64_MAX - d) / 10) return RAU_ENONCANON;
        size = size * 10 + d;
    }
    uint8_t root[32];
    if (b64_dec(l2 + 1, (size_t)(l3 - l2 - 1), root, 32)) return RAU_ENONCANON;
    if (origin_len) *origin_len = (size_t)(l1 - text);
    if (size_out) *size_out = size;
    if (root_out) memcpy(root_out, root, 32);
    return 0;
}

int rau__checkpoint_parse(const char *note, size_t len, uint64_t *size, uint8_t *root) {
    size_t tl = 0;
    int rc = note_text(note, len, &tl);
    return rc ? rc : rau__checkpoint_body(note, tl, NULL, size, root);
}

int rau_checkpoint_verify(const char *note, size_t len, const char *vkey, size_t vkey_len,
                          uint64_t *size_out, uint8_t *root_out) {
    if (!note || !vkey || sodium_init() < 0) return RAU_EINVAL;
    vkey_t k;
    int rc = vkey_parse(vkey, vkey_len, ALG_ED25519, &k);
    if (rc) return rc;
    size_t tl = 0, ol = 0;
    uint64_t ts = 0;
    if ((rc = note_open(note, len, &k, &tl, &ts))) return rc;
    if ((rc = rau__checkpoint_body(note, tl, &ol, size_out, root_out))) return rc;
    /* AUD-I-10: the origin is the signer's name (rekor#2069: a mismatch went unnoticed). */
    if (ol != k.nl || memcmp(note, k.name, k.nl) != 0) return RAU_EBADSIG;
    return 0;
}

int rau_cosignature_verify(const char *note, size_t len, const char *wvkey, size_t wvkey_len,
                           uint64_t *size_out, uint8_t *root_out, uint64_t *time_out) {
    if (!note || !wvkey || sodium_init() < 0) return RAU_EINVAL;
    vkey_t k;
    int rc = vkey_parse(wvkey, wvkey_len, ALG_COSIG_V1, &k);
    if (rc) return rc;
    size_t tl = 0;
    uint64_t ts = 0;
    if ((rc = note_open(note, len, &k, &tl, &ts))) return rc;
    if ((rc = rau__checkpoint_body(note, tl, NULL, size_out, root_out))) return rc;
    if (time_out) *time_out = ts;
    return 0;
}

int rau_cosign(const rau_signer_t *w, const char *note, size_t len, uint64_t time, char *out,
               size_t cap, size_t *len_out) {
    if (!w || !note || !out || !len_out || time > (uint64_t)INT64_MAX) return RAU_EINVAL;
    if (w->alg != ALG_COSIG_V1) return RAU_EKEY;
    size_t tl = 0;
    int rc = note_text(note, len, &tl);
    if (!rc) rc = rau__checkpoint_body(note, tl, NULL, NULL, NULL);
    if (rc) return rc;
    /* the note as it is, without an earlier cosignature of this witness (one per key) */
    char mine[RAU_KEY_TEXT_MAX + 16];
    int ml = snprintf(mine, sizeof mine, "%s%s ", EMDASH, w->name);
    size_t o = 0;
    for (const char *p = note; p < note + len;) {
        const char *eol = (const char *)memchr(p, '\n', (size_t)(note + len - p)) + 1;
        size_t n = (size_t)(eol - p);
        uint8_t id[6];
        size_t got = 0;
        int drop = p > note + tl && n > (size_t)ml + 8 && memcmp(p, mine, (size_t)ml) == 0 &&
                   sodium_base642bin(id, sizeof id, p + ml, 8, NULL, &got, NULL,
                                     sodium_base64_VARIANT_ORIGINAL_NO_PADDING) == 0 &&
                   got == 6 && rau__rd32(id) == w->hash;
        if (!drop) {
            if (o + n > cap) return RAU_EBUFSIZE;
            memcpy(out + o, p, n);
            o += n;
        }
        p = eol;
    }
    size_t msg_len = 0;
    uint8_t *m = cosig_message(time, note, tl, &msg_len);
    if (!m) return RAU_ENOMEM;
    uint8_t sig[4 + 8 + 64];
    rau__be32(sig, w->hash);
    rau__be64(sig + 4, time);
    crypto_sign_detached(sig + 12, NULL, m, msg_len, w->sk);
    free(m);
    char s64[160];
    b64_enc(s64, sizeof s64, sig, sizeof sig);
    int wl = snprintf(out + o, cap - o, "%s%s %s\n", EMDASH, w->name, s64);
    if (wl < 0 || (size_t)wl >= cap - o) return RAU_EBUFSIZE;
    *len_out = o + (size_t)wl;
    return 0;
}

int rau__b64_32(const char *s, size_t n, uint8_t *out32) {
    return b64_dec(s, n, out32, 32) ? RAU_ENONCANON : 0;
}
