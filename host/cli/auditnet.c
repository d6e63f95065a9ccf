/* The audit verbs' side of the daemon's proof routes (docs/AUDIT.md, "Proofs for the people
 * the records are about"): a route's text fetched with a bearer token read from a file (never
 * from the command line, where `ps` shows it), and a proof's text parsed back. */
#include "auditnet.h"
#include "host.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ra_host_hex_line(const char *label, const uint8_t *b, size_t n) {
    printf("%s ", label);
    for (size_t i = 0; i < n; i++)
        printf("%02x", b[i]);
    putchar('\n');
}

int ra_host_audit_fetch(const char *url, const char *route, const char *token_file, char **text,
                        size_t *len) {
    char token[4100] = "", full[4200], err[2600];
    if (token_file) {
        FILE *f = fopen(token_file, "r");
        size_t n = f ? fread(token, 1, sizeof token - 1, f) : 0;
        if (f) fclose(f);
        token[n] = 0;
        while (n && (token[n - 1] == '\n' || token[n - 1] == '\r'))
            token[--n] = 0;
        if (!f || n == 0) {
            fprintf(stderr, "%s: cannot read the token\n", token_file);
            return RA_HOST_EXIT_USAGE;
        }
    }
    if (snprintf(full, sizeof full, "%s%s", url, route) >= (int)sizeof full) {
        fprintf(stderr, RA_HOST_NAME " audit: the URL is too long\n");
        return RA_HOST_EXIT_USAGE;
    }
    long status = 0;
    int rc =
        ra_host_http(full, NULL, token_file ? token : NULL, text, len, &status, err, sizeof err);
    memset(token, 0, sizeof token);
    if (rc != 0) {
        printf("FAILED: %s\n", err);
        return RA_HOST_EXIT_FAILED;
    }
    if (status != 200) {
        printf("FAILED: %s answered %ld: %s", full, status, *text ? *text : "\n");
        free(*text);
        *text = NULL;
        return RA_HOST_EXIT_FAILED;
    }
    return 0;
}

static int unhex(const char *s, uint8_t *out, size_t cap, size_t *n) {
    size_t k = 0;
    for (; s[0] && s[0] != '\n'; s += 2) {
        unsigned v;
        if (!s[1] || k == cap || sscanf(s, "%2x", &v) != 1) return -1;
        out[k++] = (uint8_t)v;
    }
    *n = k;
    return 0;
}

static int hash_line(const char *line, const char *label, uint8_t *out) {
    size_t ll = strlen(label), n = 0;
    if (strncmp(line, label, ll) || line[ll] != ' ') return 0;
    return unhex(line + ll + 1, out, 32, &n) == 0 && n == 32 ? 1 : -1;
}

int ra_host_proof_parse(const char *text, ra_host_proof_t *p, char *err, size_t errlen) {
    memset(p, 0, sizeof *p);
    int head = 0, leaf = 0, r1 = 0, r2 = 0;
    for (const char *line = text; line && *line;) {
        unsigned long long a, b, c;
        unsigned idx;
        int got;
        if (sscanf(line, "inclusion: seq %llu (leaf index %llu) in the tree of %llu records", &a,
                   &b, &c) == 3) {
            p->inclusion = 1, p->seq = a, p->size2 = c, head = 1;
        } else if (sscanf(line, "consistency: the tree of %llu records -> the tree of %llu records",
                          &a, &b) == 2) {
            p->inclusion = 0, p->size1 = a, p->size2 = b, head = 1;
        } else if (sscanf(line, "proof[%u] ", &idx) == 1) {
            size_t n = 0;
            const char *h = strchr(line, ' ') + 1;
            if (idx != p->count || idx >= RAU_MERKLE_PROOF_MAX ||
                unhex(h, p->proof + 32 * idx, 32, &n) || n != 32) {
                snprintf(err, errlen, "proof[%u]: not the next 32-byte hash", idx);
                return -1;
            }
            p->count++;
        } else if (!strncmp(line, "record ", 7) &&
                   strspn(line + 7, "0123456789abcdef") == strcspn(line + 7, "\n") &&
                   strcspn(line + 7, "\n") > 88) { /* (not a listed record: seq kind ...) */
            if (unhex(line + 7, p->record, sizeof p->record, &p->record_len)) {
                snprintf(err, errlen, "record: not hex");
                return -1;
            }
            p->has_record = 1;
        } else if ((got = hash_line(line, "leaf", p->leaf)) != 0) {
            leaf = got;
        } else if ((got = hash_line(line, "root", p->root2)) != 0) {
            r2 = got;
        } else if ((got = hash_line(line, "root1", p->root1)) != 0) {
            r1 = got;
        } else if ((got = hash_line(line, "root2", p->root2)) != 0) {
            r2 = got;
        }
        if (leaf < 0 || r1 < 0 || r2 < 0) {
            snprintf(err, errlen, "a hash line is not 32 bytes of hex");
            return -1;
        }
        line = strchr(line, '\n');
        if (line) line++;
    }
    if (!head || !r2 || (p->inclusion ? !leaf : !r1)) {
        snprintf(err, errlen, "not a proof (its first line, a leaf or its roots are missing)");
        return -1;
    }
    return 0;
}

int ra_host_slurp(const char *path, size_t max, char **buf, size_t *len) {
    *buf = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    char *b = malloc(max + 1);
    size_t n = b ? fread(b, 1, max + 1, f) : 0;
    int bad = !b || ferror(f) || n > max;
    fclose(f);
    if (bad) {
        free(b);
        return -1;
    }
    b[n] = 0;
    *buf = b;
    *len = n;
    return 0;
}

int ra_host_key_text(const char *path, char *buf, size_t cap) {
    char *t = NULL;
    size_t n = 0;
    if (ra_host_slurp(path, cap - 1, &t, &n)) return -1;
    while (n && (t[n - 1] == '\n' || t[n - 1] == '\r'))
        t[--n] = 0;
    memcpy(buf, t, n + 1);
    free(t);
    return n ? 0 : -1;
}

int ra_host_signed_note(const char *vkey_path, const char *what, const char *note, size_t len,
                        uint64_t *size, uint8_t *root) {
    char vkey[RAU_KEY_TEXT_MAX + 2];
    if (!vkey_path || ra_host_key_text(vkey_path, vkey, sizeof vkey) != 0) {
        fprintf(stderr, "%s: a checkpoint needs a readable --vkey\n", vkey_path ? vkey_path : what);
        return RA_HOST_EXIT_USAGE;
    }
    int rc = rau_checkpoint_verify(note, len, vkey, strlen(vkey), size, root);
    if (rc) {
        printf("FAILED: %s: %s (%s)\n", what, rau_err_name(rc), rau_strerror(rc));
        return RA_HOST_EXIT_FAILED;
    }
    return 0;
}

int ra_host_signed_file(const char *vkey_path, const char *note_path, uint64_t *size,
                        uint8_t *root) {
    char *note = NULL;
    size_t n = 0;
    if (ra_host_slurp(note_path, RAU_NOTE_READ_MAX, &note, &n)) {
        fprintf(stderr, "%s: cannot read the checkpoint\n", note_path);
        return RA_HOST_EXIT_USAGE;
    }
    int rc = ra_host_signed_note(vkey_path, note_path, note, n, size, root);
    free(note);
    return rc;
}
