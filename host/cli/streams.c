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
    char full[2048], err[CURL_ERROR_SIZE + 2200];
    if (snprintf(full, sizeof full, "%s%s", url, path) >= (int)sizeof full) {
        fprintf(stderr, RA_HOST_NAME " streams: the URL is too long\n");
        return RA_HOST_EXIT_USAGE;
    }
    char *answer = NULL;
    size_t len = 0;
    long status = 0;
    if (ra_host_http(full, body, NULL, &answer, &len, &status, err, sizeof err) != 0) {
        fprintf(stderr, RA_HOST_NAME " streams: %s\n", err);
        return RA_HOST_EXIT_FAILED;
    }
    int exit_code = RA_HOST_EXIT_FAILED;
    if (len) fputs(answer, stdout);
    if (status >= 200 && status < 300)
        exit_code = RA_HOST_EXIT_OK;
    else
        fprintf(stderr, RA_HOST_NAME " streams: %s answered %ld\n", full, status);
    free(answer);
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
