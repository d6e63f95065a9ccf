/* The audit tests' header: tests/check.h's assertions with return codes named by
 * rau_err_name, and the audit fixtures. */
#ifndef RAU_TEST_H
#define RAU_TEST_H

#include "fixtures.h"
#include "ron/audit.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RA_T_ERR_NAME(code) rau_err_name(code)
#include "../check.h"

static inline void rau_t_hex(const uint8_t *b, size_t n, char *out) {
    static const char d[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = d[b[i] >> 4];
        out[2 * i + 1] = d[b[i] & 15];
    }
    out[2 * n] = 0;
}

static inline size_t rau_t_unhex(const char *s, uint8_t *out, size_t cap) {
    size_t n = 0;
    for (; s[0] && s[1] && n < cap; s += 2) {
        unsigned v;
        if (sscanf(s, "%2x", &v) != 1) break;
        out[n++] = (uint8_t)v;
    }
    return n;
}

static inline const char *rau_t_tmpdir(void) {
    static char dir[512];
    if (!dir[0]) ra_fix_mkdtemp(dir, sizeof dir, NULL, "rau-test-");
    return dir;
}

/* The tests' signing key, made once per process by rau_t_keygen. */
typedef struct rau_t_key_s {
    char skey[RAU_KEY_TEXT_MAX], vkey[RAU_KEY_TEXT_MAX];
    char path[800]; /* the secret's file, for rau_log_config_t.key_path */
} rau_t_key_t;

static inline rau_t_key_t *rau_t_key(void) {
    static rau_t_key_t k;
    return &k;
}

/* Makes writer gw-1's key for stream (once: later calls keep the first) and writes the
 * secret to <dir>/signer.key; aborts when it cannot. */
static inline rau_t_key_t *rau_t_keygen(const char *stream, const char *dir) {
    rau_t_key_t *k = rau_t_key();
    if (k->skey[0]) return k;
    char id[128];
    snprintf(id, sizeof id, "ron-audit/gw-1/%s", stream);
    if (rau_note_keygen(id, k->skey, sizeof k->skey, k->vkey, sizeof k->vkey) != 0) abort();
    snprintf(k->path, sizeof k->path, "%s/signer.key", dir);
    FILE *f = fopen(k->path, "w");
    if (!f) abort();
    fputs(k->skey, f);
    fclose(f);
    return k;
}

/* Writer gw-1's log of stream in dir, signed with the key in key_path (NULL: unsigned;
 * rau_t_key()->path: the tests' key); other fields at their defaults. */
static inline void rau_t_log_config(rau_log_config_t *cfg, const char *stream, const char *dir,
                                    const char *key_path) {
    rau_log_config_init(cfg);
    cfg->writer_id = "gw-1";
    cfg->stream = stream;
    cfg->dir = dir;
    cfg->key_path = key_path;
}

/* What a verifier reported through rau_t_collect: how many problems, the first one, and
 * all of them a line each (cut at the buffer's end). Zero it before the run. */
typedef struct rau_t_rep_s {
    int n;
    char first[1024];
    char all[4096];
} rau_t_rep_t;

static inline void rau_t_collect(void *ud, const char *where, const char *what) {
    rau_t_rep_t *r = ud;
    if (r->n++ == 0) snprintf(r->first, sizeof r->first, "%s: %s", where, what);
    size_t k = strlen(r->all);
    snprintf(r->all + k, sizeof r->all - k, "%s: %s\n", where, what);
}

#endif
