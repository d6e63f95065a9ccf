/* Fixtures shared by the C tests, the benchmarks and the fuzz seed generator: one copy of
 * each (a PRNG, temporary directories), header-only so every program takes only what it
 * uses. */
#ifndef RA_TEST_FIXTURES_H
#define RA_TEST_FIXTURES_H

#include <ctype.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* splitmix64: deterministic from a printed seed (property and stress tests print theirs),
 * tiny, and trivially reproduced in LuaJIT with uint64_t cdata (bench-record.lua does). */
static inline uint64_t ra_fix_splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A fresh directory <base>/<prefix>XXXXXX into out (base: $RA_TEST_TMP, else $TMPDIR,
 * else /tmp, when NULL); exits with a message when it cannot be made. */
static inline const char *ra_fix_mkdtemp(char *out, size_t n, const char *base,
                                         const char *prefix) {
    if (!base || !*base) base = getenv("RA_TEST_TMP");
    if (!base || !*base) base = getenv("TMPDIR");
    if (!base || !*base) base = "/tmp";
    mkdir(base, 0700); /* RA_TEST_TMP may not exist yet */
    snprintf(out, n, "%s/%sXXXXXX", base, prefix);
    if (!mkdtemp(out)) {
        perror(out);
        exit(2);
    }
    return out;
}

/* Removes a directory and the files in it (one level: what the tests make). */
static inline int ra_fix_rm_rf(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    struct dirent *e;
    char p[4400];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    return rmdir(dir);
}

/* Reads the block opened by the line "```<tag> <name>" in path (docs/FORMAT.md's golden
 * vectors and WAL examples) as bytes, from its lines of hex pairs; its "b3 <hex>" line goes
 * to b3hex (65 bytes) when not NULL. 0, or -1 when the file or the block is missing, a line
 * is not hex or the bytes pass cap. */
static inline int ra_fix_doc_block(const char *path, const char *tag, const char *name,
                                   uint8_t *out, size_t cap, size_t *len, char *b3hex) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[512], want[128];
    snprintf(want, sizeof want, "```%s %s", tag, name);
    int in = 0, found = 0;
    *len = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (!in) {
            in = strcmp(line, want) == 0;
            continue;
        }
        found = 1;
        if (strncmp(line, "```", 3) == 0) break;
        if (strncmp(line, "b3 ", 3) == 0) {
            if (b3hex) snprintf(b3hex, 65, "%.64s", line + 3);
            continue;
        }
        for (char *p = line; *p;) {
            while (*p == ' ')
                p++;
            if (!*p) break;
            unsigned b;
            if (!isxdigit((unsigned char)p[0]) || sscanf(p, "%2x", &b) != 1 || *len >= cap) {
                fclose(f);
                return -1;
            }
            out[(*len)++] = (uint8_t)b;
            p += 2;
        }
    }
    fclose(f);
    return found ? 0 : -1;
}

#endif /* RA_TEST_FIXTURES_H */
