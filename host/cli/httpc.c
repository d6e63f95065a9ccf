/* One HTTP request to a running daemon through libcurl's easy API: the verbs that talk to it
 * (`streams` over the admin routes, `audit proof --url` and `audit witness --url` over the
 * audit trail's proof routes). The answer is kept in memory, at most 1 MiB (an answer of the
 * daemon is small; a bigger one is not our daemon). */
#include "host.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ANSWER (1u << 20)

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

int ra_host_http(const char *url, const char *body, const char *bearer, char **answer, size_t *len,
                 long *status, char *err, size_t errlen) {
    *answer = NULL;
    *len = 0;
    *status = 0;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(err, errlen, "libcurl did not initialise");
        return -1;
    }
    CURL *c = curl_easy_init();
    if (!c) {
        curl_global_cleanup();
        snprintf(err, errlen, "libcurl did not initialise");
        return -1;
    }
    answer_t a = {0};
    char cerr[CURL_ERROR_SIZE] = "", auth[4200];
    struct curl_slist *hdr = NULL;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &a);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 30000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    if (bearer) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", bearer);
        hdr = curl_slist_append(hdr, auth);
    }
    if (body) {
        hdr = curl_slist_append(hdr, "Content-Type: application/json");
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    }
    if (hdr) curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
    CURLcode rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    int out = 0;
    if (rc != CURLE_OK) {
        snprintf(err, errlen, "%s: %s", url,
                 a.too_big ? "the answer is larger than 1 MiB"
                           : (cerr[0] ? cerr : curl_easy_strerror(rc)));
        free(a.buf);
        a.buf = NULL;
        out = -1;
    }
    memset(auth, 0, sizeof auth);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(c);
    curl_global_cleanup();
    *answer = a.buf;
    *len = a.len;
    return out;
}
