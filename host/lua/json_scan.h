/* The lexical half of the host's strict JSON decoders (RFC 8259): whitespace, strings
 * (escapes, surrogate pairs, UTF-8 validity, control characters), plain non-negative
 * integers, literals. The decoders of the daemon's request bodies (ingest_dto.c: POST
 * /v1/records; wallet_dto.c: the wallet's routes) each own their schema and errors and share
 * this scanner, so JSON is read the same way everywhere.
 *
 * A scanner never allocates and never recurses. A failing call returns a negative
 * RA_JSON_* code and leaves, in the scanner, where (fault_at) and why (fault, static text);
 * the caller turns that into its own typed error. */
#ifndef RA_HOST_JSON_SCAN_H
#define RA_HOST_JSON_SCAN_H

#include <stddef.h>
#include <stdint.h>

typedef struct ra_json_scan {
    const unsigned char *base, *p, *end;
    const unsigned char *fault_at; /* set by a failing call */
    const char *fault;             /* static text */
} ra_json_scan_t;

enum {
    RA_JSON_MALFORMED = -1,  /* not JSON (fault_at == end: the input ended) */
    RA_JSON_NOT_NUMBER = -2, /* a JSON value, but not a number */
    RA_JSON_NEGATIVE = -3,
    RA_JSON_LEADING_ZERO = -4,
    RA_JSON_TOO_BIG = -5, /* above the caller's maximum */
    RA_JSON_FRACTION = -6,
    RA_JSON_EXPONENT = -7,
    RA_JSON_BAD_TEXT = -8 /* well-formed JSON, but a string is not Unicode text: invalid
                             UTF-8, or a \u escape of a lone surrogate (RFC 8259 §8.2) */
};

void ra_json_init(ra_json_scan_t *s, const void *buf, size_t len);
void ra_json_skip_ws(ra_json_scan_t *s);
/* Where a decoder reports malformed JSON found at `at`: at itself, or the end of the input
 * with *detail "unexpected end of input" when at is not before it. */
const unsigned char *ra_json_malformed_at(const ra_json_scan_t *s, const unsigned char *at,
                                          const char **detail);
/* Is there a syntactically possible JSON value at p (so a type mismatch, not garbage)?
 * Literals are checked whole; strings, numbers and containers by their first byte. */
int ra_json_value_start(const ra_json_scan_t *s);
/* The string at p (which must be '"'), unescaped into out[0..cap); *len_out gets its full
 * unescaped length, which may exceed cap (then only cap bytes were stored). 0,
 * RA_JSON_MALFORMED (not JSON: a control byte, a bad escape, no end) or RA_JSON_BAD_TEXT
 * (JSON, but not text: a decoder names it apart, e.g. the wallet's bad_string). */
int ra_json_string(ra_json_scan_t *s, char *out, size_t cap, size_t *len_out);
/* A plain integer 0..max at p: no sign, no leading zero, no fraction, no exponent. 0 or
 * one of the negative codes above (fault_at = the number's first byte). */
int ra_json_uint(ra_json_scan_t *s, uint64_t max, uint64_t *out);
/* The literal true/false at p: 0 with *out set, or RA_JSON_NOT_NUMBER when p holds another
 * value (the caller's "wrong type"), RA_JSON_MALFORMED for garbage. */
int ra_json_bool(ra_json_scan_t *s, int *out);
/* An object member's name at p: '"' (else "expected a field name (a string)"), the string
 * unescaped into name[0..cap) as ra_json_string does, *at where it starts. 0 or
 * RA_JSON_MALFORMED. */
int ra_json_name(ra_json_scan_t *s, char *name, size_t cap, size_t *len_out,
                 const unsigned char **at);
/* The ':' after a member's name, with the whitespace around it. 0 or RA_JSON_MALFORMED. */
int ra_json_colon(ra_json_scan_t *s);
/* After a value in an object or array: whitespace, then ',' (taken with the whitespace
 * after it: 1, another one follows) or `close` (left at p: 0). Anything else is
 * RA_JSON_MALFORMED with `fault` as its text. */
int ra_json_next(ra_json_scan_t *s, char close, const char *fault);
/* A name made safe for a response and a log: [A-Za-z0-9_-] kept, any other byte '?', at
 * most 24 bytes then "...". len is the name's full length, stored how much of it is in
 * name. */
void ra_json_sanitize(const char *name, size_t len, size_t stored, char *out, size_t cap);

#endif
