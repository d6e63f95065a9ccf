/* A first look at an HTTP/1.1 request head, before H2O parses it (host/lua/httpd.c; issue 24
 * §3). H2O answers a head its parser refuses with a fixed text/plain 400, and buffers a head
 * of up to 417,792 bytes: the server looks first, so that a refusal is the listener's own
 * answer (a route's problem+json: a control byte in Authorization is the wallet's 401) and a
 * head is bounded by max_bytes (431).
 *
 * The rules are H2O 2.2's (picohttpparser's), so a head this accepts H2O parses too, and a
 * head H2O would refuse is refused here first, with where and why:
 *   request line  METHOD SP TARGET SP "HTTP/1." DIGIT, CRLF or LF; METHOD and TARGET are bytes
 *                 other than SP, control bytes and DEL (bytes >= 0x80 pass, as in H2O); no
 *                 empty line before it
 *   header line   NAME ":" VALUE: NAME a token (RFC 9110 tchar), nothing before the colon;
 *                 VALUE without control bytes other than HT, without DEL; a line starting
 *                 with SP or HT continues the previous value (H2O drops it; checked alike)
 *   end           an empty line (CRLF or LF); a CR only before LF
 * Plain C, no allocation, O(len). Content-Length is read (the first one, digits only) so the
 * server can refuse a declared body over its limit before H2O answers its own 413. */
#ifndef RA_HOST_HTTP_HEAD_H
#define RA_HOST_HTTP_HEAD_H

#include <stddef.h>
#include <stdint.h>

enum {
    RA_HEAD_INCOMPLETE = 0, /* no fault in the bytes so far; the empty line not yet seen */
    RA_HEAD_COMPLETE = 1,   /* a whole head, valid: out->len bytes */
    RA_HEAD_BAD = -1,       /* 400: the request line or a header line is malformed */
    RA_HEAD_BAD_VALUE = -2, /* 400: a header's value holds a control byte (out->name) */
    RA_HEAD_TOO_LARGE = -3, /* 431: over max_bytes (complete or not) */
    RA_HEAD_TOO_MANY = -4   /* 431: over max_headers header lines */
};

typedef struct ra_http_head {
    size_t len;                /* RA_HEAD_COMPLETE: bytes of the head, its empty line included */
    size_t method_len;         /* the method (at offset 0); 0 when not read yet */
    size_t path_off, path_len; /* the target's path (before '?'); len 0 when not read yet */
    size_t name_off, name_len; /* RA_HEAD_BAD_VALUE: the header's name */
    size_t fault_at;           /* a fault's byte offset */
    int64_t content_length;    /* the first Content-Length (digits only), or -1 */
    const char *why;           /* a fault's static text */
} ra_http_head_t;

int ra_http_head_check(const char *buf, size_t len, size_t max_bytes, size_t max_headers,
                       ra_http_head_t *out);

#endif
