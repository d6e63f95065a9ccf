/* `streams`: the operator's view of streams that cannot advance, through the running
 * daemon's admin routes (lua/ron/node/admin.lua; loopback only):
 *
 *   streams [--url URL] stuck
 *   streams [--url URL] accept-loss TENANT DIMENSION [--reason TEXT]
 *
 * URL defaults to http://127.0.0.1:9464 (the daemon's default listen). The daemon's JSON
 * answer goes to stdout; exit 0 on a 2xx answer, 1 on any other answer or when the daemon
 * cannot be reached (the reason on stderr), 2 for a bad command line. Accepting a loss
 * gives up, for good, the seqs a stuck-on-gap stream waits for (docs/ops/failure-modes.md):
 * the downstream records the range, the daemon logs it, `verify` lists it. */
#include "host.h"

#include <curl/curl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_URL "http://127.0.0.1:9464"
#define MAX_ANSWER (1u << 20) /* an admin answer is small; a bigger one is not our daemon */

typedef struct answer {
    char *buf;
    size_t len;
    bool too_big;
} answer_t;

static size_t on_data(char *p, size_t size, size_t n, void *ud) {
    answer_t *a = ud;
    size_t k = size * n;
    if (a->len + k > MAX_ANSWER) {
        a->too_big = true;
        return 0;
    }
    char *b = realloc(a->buf, a->len + k + 1);
    if (!b) return 0;
    memcpy(b + a->len, p, k);
    a->buf = b;
    a->len += k;
    a->buf[a->len] = '\0';
    return k;
}

static int streams_usage(void) {
    fputs("usage: " RA_HOST_NAME " streams [--url URL] stuck\n"
          "       " RA_HOST_NAME " streams [--url URL] accept-loss TENANT DIMENSION"
          " [--reason TEXT]\n",
          stderr);
    return RA_HOST_EXIT_USAGE;
}

/* Names and reasons go into a JSON string: only what the daemon accepts anyway. */
static bool json_safe(const char *s, size_t max) {
    size_t n = strlen(s);
    if (n > max) return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e || s[i] == '"' || s[i] == '\\')
            return false;
    return true;
}

static int request(const char *url, const char *path, const char *body) {
    char full[2048];
    if (snprintf(full, sizeof full, "%s%s", url, path) >= (int)sizeof full) {
        fprintf(stderr, RA_HOST_NAME " streams: the URL is too long\n");
        return RA_HOST_EXIT_USAGE;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, RA_HOST_NAME " streams: libcurl did not initialise\n");
        return RA_HOST_EXIT_FAILED;
    }
    CURL *c = curl_easy_init();
    if (!c) {
        curl_global_cleanup();
        fprintf(stderr, RA_HOST_NAME " streams: libcurl did not initialise\n");
        return RA_HOST_EXIT_FAILED;
    }
    answer_t a = {0};
    char err[CURL_ERROR_SIZE] = "";
    struct curl_slist *hdr = NULL;
    curl_easy_setopt(c, CURLOPT_URL, full);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &a);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, err);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 30000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    if (body) {
        hdr = curl_slist_append(hdr, "Content-Type: application/json");
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    }
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    int exit_code = RA_HOST_EXIT_FAILED;
    if (rc != CURLE_OK) {
        fprintf(stderr, RA_HOST_NAME " streams: %s: %s\n", full,
                a.too_big ? "the answer is larger than 1 MiB"
                          : (err[0] ? err : curl_easy_strerror(rc)));
    } else {
        if (a.len) fputs(a.buf, stdout);
        if (status >= 200 && status < 300) {
            exit_code = RA_HOST_EXIT_OK;
        } else {
            fprintf(stderr, RA_HOST_NAME " streams: %s answered %ld\n", full, status);
        }
    }
    curl_slist_free_all(hdr);
    curl_easy_cleanup(c);
    curl_global_cleanup();
    free(a.buf);
    return exit_code;
}

int ra_host_streams(const char *exe, int argc, char **argv) {
    (void)exe;
    const char *url = DEFAULT_URL, *reason = NULL;
    const char *pos[3] = {NULL, NULL, NULL};
    int npos = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--url") == 0 && i + 1 < argc) {
            url = argv[++i];
        } else if (strcmp(argv[i], "--reason") == 0 && i + 1 < argc) {
            reason = argv[++i];
        } else if (argv[i][0] == '-' || npos == 3) {
            return streams_usage();
        } else {
            pos[npos++] = argv[i];
        }
    }
    if (npos == 1 && strcmp(pos[0], "stuck") == 0 && !reason)
        return request(url, "/v1/admin/streams/stuck", NULL);
    if (npos == 3 && strcmp(pos[0], "accept-loss") == 0) {
        if (!json_safe(pos[1], 36) || !json_safe(pos[2], 32) ||
            (reason && !json_safe(reason, 200))) {
            fprintf(stderr,
                    RA_HOST_NAME " streams: TENANT, DIMENSION and --reason must be "
                                 "printable ASCII without quotes or backslashes (a reason at most "
                                 "200 bytes)\n");
            return RA_HOST_EXIT_USAGE;
        }
        char body[512];
        snprintf(body, sizeof body, "{\"tenant\":\"%s\",\"dimension\":\"%s\",\"reason\":\"%s\"}",
                 pos[1], pos[2], reason ? reason : "");
        return request(url, "/v1/admin/streams/accept-loss", body);
    }
    return streams_usage();
}
