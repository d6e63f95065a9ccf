/* libFuzzer harness for the HTTP server's first look at a request head (ra_http_head_check,
 * host/lua/http_head.c). Any input gives one of the documented answers with offsets inside
 * the input; never a crash, a hang, an out-of-bounds read (ASan) or undefined behaviour
 * (UBSan). And the answers agree with each other:
 *   - a complete head is within max_bytes, ends with its empty line, and alone (without what
 *     follows it) is the same complete head;
 *   - a prefix of the input is either incomplete or the same fault at the same offset (bytes
 *     arriving later never turn a refused head into an accepted one). */
#include "lua/http_head.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_BYTES 4096
#define MAX_HEADERS 100

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *s = (const char *)data;
    ra_http_head_t h, p;
    int rc = ra_http_head_check(s, size, MAX_BYTES, MAX_HEADERS, &h);
    if (rc < RA_HEAD_TOO_MANY || rc > RA_HEAD_COMPLETE) abort();
    if (rc == RA_HEAD_COMPLETE) {
        if (h.len > size || h.len > MAX_BYTES || h.len < 2 || s[h.len - 1] != '\n') abort();
        if (h.path_off + h.path_len > h.len) abort();
        if (ra_http_head_check(s, h.len, MAX_BYTES, MAX_HEADERS, &p) != rc || p.len != h.len)
            abort();
    } else if (rc < 0) {
        if (!h.why || h.fault_at > size) abort();
        if (rc == RA_HEAD_BAD_VALUE && h.name_off + h.name_len > size) abort();
    }
    size_t cuts[2] = {size / 2, size ? size - 1 : 0};
    for (int i = 0; i < 2 && rc != RA_HEAD_TOO_LARGE; i++) {
        int q = ra_http_head_check(s, cuts[i], MAX_BYTES, MAX_HEADERS, &p);
        if (q == RA_HEAD_INCOMPLETE) continue;
        if (rc == RA_HEAD_COMPLETE) {
            if (q != RA_HEAD_COMPLETE || p.len != h.len) abort(); /* the head was in the prefix */
        } else if (q != rc || p.fault_at != h.fault_at) {
            abort();
        }
    }
    return 0;
}
