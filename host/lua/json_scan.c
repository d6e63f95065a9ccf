/* The host's shared JSON scanner: see json_scan.h. */
#include "json_scan.h"

#include <string.h>

void ra_json_init(ra_json_scan_t *s, const void *buf, size_t len) {
    s->base = s->p = (const unsigned char *)buf;
    s->end = s->base + len;
    s->fault_at = NULL;
    s->fault = NULL;
}

static int malformed(ra_json_scan_t *s, const unsigned char *at, const char *detail) {
    s->fault_at = at;
    s->fault = detail;
    return RA_JSON_MALFORMED;
}

static int bad_text(ra_json_scan_t *s, const unsigned char *at, const char *detail) {
    s->fault_at = at;
    s->fault = detail;
    return RA_JSON_BAD_TEXT;
}

void ra_json_skip_ws(ra_json_scan_t *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

const unsigned char *ra_json_malformed_at(const ra_json_scan_t *s, const unsigned char *at,
                                          const char **detail) {
    if (at < s->end) return at;
    *detail = "unexpected end of input";
    return s->end;
}

int ra_json_value_start(const ra_json_scan_t *s) {
    const unsigned char *p = s->p;
    size_t left = (size_t)(s->end - p);
    if (left == 0) return 0;
    switch (*p) {
    case '"':
    case '{':
    case '[':
    case '-':
    case '0':
    case '1':
    case '2':
    case '3':
    case '4':
    case '5':
    case '6':
    case '7':
    case '8':
    case '9':
        return 1;
    case 't':
        return left >= 4 && memcmp(p, "true", 4) == 0;
    case 'f':
        return left >= 5 && memcmp(p, "false", 5) == 0;
    case 'n':
        return left >= 4 && memcmp(p, "null", 4) == 0;
    default:
        return 0;
    }
}

/* The length of the valid UTF-8 sequence at p (2..4 bytes), or 0 (Unicode Table 3-7). */
static size_t utf8_seq(const unsigned char *p, const unsigned char *end) {
    unsigned c = p[0], lo = 0x80, hi = 0xBF;
    size_t n;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
    } else if (c == 0xE0) {
        n = 3;
        lo = 0xA0; /* no overlong 3-byte forms */
    } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
        n = 3;
    } else if (c == 0xED) {
        n = 3;
        hi = 0x9F; /* no UTF-16 surrogates */
    } else if (c == 0xF0) {
        n = 4;
        lo = 0x90; /* no overlong 4-byte forms */
    } else if (c >= 0xF1 && c <= 0xF3) {
        n = 4;
    } else if (c == 0xF4) {
        n = 4;
        hi = 0x8F; /* nothing above U+10FFFF */
    } else {
        return 0; /* ASCII is not handled here; C0, C1, F5..FF never start a sequence */
    }
    if ((size_t)(end - p) < n || p[1] < lo || p[1] > hi) return 0;
    for (size_t i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF) return 0;
    return n;
}

static int hex4(const unsigned char *p, const unsigned char *end, unsigned *out) {
    if (end - p < 4) return 0;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = p[i], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return 0;
        v = v << 4 | d;
    }
    *out = v;
    return 1;
}

/* Stores byte c at out[*n] while *n < cap; *n counts every byte (the full length). */
static inline void put(char *out, size_t cap, size_t *n, unsigned c) {
    if (*n < cap) out[*n] = (char)c;
    (*n)++;
}

int ra_json_string(ra_json_scan_t *s, char *out, size_t cap, size_t *len_out) {
    const unsigned char *p = s->p + 1, *end = s->end;
    size_t n = 0;
    for (;;) {
        /* the common case: a run of printable ASCII, copied at once */
        const unsigned char *run = p;
        while (p < end && *p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\')
            p++;
        if (p > run) {
            size_t k = (size_t)(p - run);
            if (n < cap) memcpy(out + n, run, k < cap - n ? k : cap - n);
            n += k;
        }
        if (p >= end) return malformed(s, end, "unterminated string");
        unsigned c = *p;
        if (c == '"') break;
        if (c < 0x20) return malformed(s, p, "control character in a string");
        if (c < 0x80 && c != '\\') {
            put(out, cap, &n, c);
            p++;
            continue;
        }
        if (c >= 0x80) {
            size_t k = utf8_seq(p, end);
            if (!k) return bad_text(s, p, "invalid UTF-8 in a string");
            for (size_t i = 0; i < k; i++)
                put(out, cap, &n, p[i]);
            p += k;
            continue;
        }
        /* an escape */
        if (end - p < 2) return malformed(s, end, "unterminated string");
        const unsigned char *esc = p;
        unsigned cp;
        switch (p[1]) {
        case '"':
            cp = '"';
            break;
        case '\\':
            cp = '\\';
            break;
        case '/':
            cp = '/';
            break;
        case 'b':
            cp = '\b';
            break;
        case 'f':
            cp = '\f';
            break;
        case 'n':
            cp = '\n';
            break;
        case 'r':
            cp = '\r';
            break;
        case 't':
            cp = '\t';
            break;
        case 'u':
            if (!hex4(p + 2, end, &cp)) return malformed(s, esc, "bad \\u escape");
            if (cp >= 0xDC00 && cp <= 0xDFFF) return bad_text(s, esc, "lone low surrogate");
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned lo;
                if (end - p < 12 || p[6] != '\\' || p[7] != 'u' || !hex4(p + 8, end, &lo) ||
                    lo < 0xDC00 || lo > 0xDFFF)
                    return bad_text(s, esc, "lone high surrogate");
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                p += 6;
            }
            p += 4;
            break;
        default:
            return malformed(s, esc, "bad escape in a string");
        }
        p += 2;
        if (cp < 0x80) {
            put(out, cap, &n, cp);
        } else if (cp < 0x800) {
            put(out, cap, &n, 0xC0 | cp >> 6);
            put(out, cap, &n, 0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            put(out, cap, &n, 0xE0 | cp >> 12);
            put(out, cap, &n, 0x80 | (cp >> 6 & 0x3F));
            put(out, cap, &n, 0x80 | (cp & 0x3F));
        } else {
            put(out, cap, &n, 0xF0 | cp >> 18);
            put(out, cap, &n, 0x80 | (cp >> 12 & 0x3F));
            put(out, cap, &n, 0x80 | (cp >> 6 & 0x3F));
            put(out, cap, &n, 0x80 | (cp & 0x3F));
        }
    }
    s->p = p + 1;
    *len_out = n;
    return 0;
}

void ra_json_sanitize(const char *name, size_t len, size_t stored, char *out, size_t cap) {
    size_t n = 0, keep = len < stored ? len : stored;
    if (keep > 24) keep = 24;
    for (size_t i = 0; i < keep && n + 1 < cap; i++) {
        unsigned char c = (unsigned char)name[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '_' || c == '-';
        out[n++] = ok ? (char)c : '?';
    }
    if (len > keep)
        for (int i = 0; i < 3 && n + 1 < cap; i++)
            out[n++] = '.';
    out[n] = '\0';
}

int ra_json_uint(ra_json_scan_t *s, uint64_t max, uint64_t *out) {
    const unsigned char *p = s->p, *end = s->end;
    s->fault_at = p;
    s->fault = NULL;
    if (p < end && *p == '-') return RA_JSON_NEGATIVE;
    if (p >= end || *p < '0' || *p > '9') {
        if (!ra_json_value_start(s)) return malformed(s, p, "expected a JSON value");
        return RA_JSON_NOT_NUMBER;
    }
    if (*p == '0' && p + 1 < end && p[1] >= '0' && p[1] <= '9') return RA_JSON_LEADING_ZERO;
    uint64_t v = 0;
    while (p < end && *p >= '0' && *p <= '9') {
        unsigned d = (unsigned)(*p - '0');
        if (d > max || v > (max - d) / 10) return RA_JSON_TOO_BIG;
        v = v * 10 + d;
        p++;
    }
    if (p < end && *p == '.') return RA_JSON_FRACTION;
    if (p < end && (*p == 'e' || *p == 'E')) return RA_JSON_EXPONENT;
    s->p = p;
    *out = v;
    return 0;
}

int ra_json_bool(ra_json_scan_t *s, int *out) {
    size_t left = (size_t)(s->end - s->p);
    if (left >= 4 && memcmp(s->p, "true", 4) == 0) {
        s->p += 4;
        *out = 1;
        return 0;
    }
    if (left >= 5 && memcmp(s->p, "false", 5) == 0) {
        s->p += 5;
        *out = 0;
        return 0;
    }
    if (!ra_json_value_start(s)) return malformed(s, s->p, "expected a JSON value");
    s->fault_at = s->p;
    return RA_JSON_NOT_NUMBER;
}

int ra_json_name(ra_json_scan_t *s, char *name, size_t cap, size_t *len_out,
                 const unsigned char **at) {
    if (s->p >= s->end || *s->p != '"')
        return malformed(s, s->p, "expected a field name (a string)");
    *at = s->p;
    return ra_json_string(s, name, cap, len_out);
}

int ra_json_colon(ra_json_scan_t *s) {
    ra_json_skip_ws(s);
    if (s->p >= s->end || *s->p != ':') return malformed(s, s->p, "expected ':'");
    s->p++;
    ra_json_skip_ws(s);
    return 0;
}

int ra_json_next(ra_json_scan_t *s, char close, const char *fault) {
    ra_json_skip_ws(s);
    if (s->p < s->end && *s->p == ',') {
        s->p++;
        ra_json_skip_ws(s);
        return 1;
    }
    if (s->p < s->end && *s->p == (unsigned char)close) return 0;
    return malformed(s, s->p, fault);
}
