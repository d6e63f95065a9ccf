/* The strict decoder of the wallet's request bodies: see wallet_dto.h for the contract. */
#include "wallet_dto.h"
#include "dto.h"
#include "json_scan.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    ra_json_scan_t s;
    ra_wdto_error_t *err;
} parser_t;

static int fail(parser_t *ps, const unsigned char *at, int code, const char *detail,
                const char *field) {
    ra_wdto_error_t *e = ps->err;
    e->pos = (uint32_t)(at - ps->s.base);
    e->code = code;
    e->detail = detail;
    snprintf(e->field, sizeof e->field, "%s", field);
    return code;
}

static int malformed(parser_t *ps, const unsigned char *at, const char *detail) {
    at = ra_json_malformed_at(&ps->s, at, &detail);
    return fail(ps, at, RA_WDTO_EMALFORMED, detail, "");
}

static int wrong_type(parser_t *ps, const char *detail, const char *field) {
    if (!ra_json_value_start(&ps->s)) return malformed(ps, ps->s.p, "expected a JSON value");
    return fail(ps, ps->s.p, RA_WDTO_EWRONG_TYPE, detail, field);
}

static int schema_ok(const ra_wdto_field_t *f, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (!f[i].name) return 0;
        size_t len = strlen(f[i].name);
        if (len == 0 || len > RA_WDTO_NAME_MAX) return 0;
        for (size_t j = 0; j < len; j++) {
            char c = f[i].name[j];
            if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_'))
                return 0;
        }
        for (size_t k = 0; k < i; k++)
            if (strcmp(f[k].name, f[i].name) == 0) return 0;
        if (f[i].min > f[i].max) return 0;
        if (f[i].type == RA_WDTO_STRING) {
            if (f[i].max > UINT32_MAX) return 0;
        } else if (f[i].type == RA_WDTO_UINT) {
            if (f[i].max > RA_WDTO_UINT_MAX) return 0;
        } else if (f[i].type != RA_WDTO_BOOL) {
            return 0;
        }
    }
    return 1;
}

static int number(parser_t *ps, const ra_wdto_field_t *f, ra_wdto_value_t *v) {
    const unsigned char *at = ps->s.p;
    uint64_t u;
    switch (ra_json_uint(&ps->s, f->max, &u)) {
    case 0:
        if (u < f->min)
            return fail(ps, at, RA_WDTO_EBAD_NUMBER, "number is below the field's minimum",
                        f->name);
        v->u = u;
        return 0;
    case RA_JSON_NOT_NUMBER:
        return fail(ps, at, RA_WDTO_EWRONG_TYPE, "field must be an integer (a JSON number)",
                    f->name);
    case RA_JSON_NEGATIVE:
        return fail(ps, at, RA_WDTO_EBAD_NUMBER, "number must not be negative", f->name);
    case RA_JSON_LEADING_ZERO:
        return fail(ps, at, RA_WDTO_EBAD_NUMBER, "number has a leading zero", f->name);
    case RA_JSON_TOO_BIG:
        return fail(ps, at, RA_WDTO_EBAD_NUMBER, "number is above the field's maximum", f->name);
    case RA_JSON_FRACTION:
        return fail(ps, at, RA_WDTO_EBAD_NUMBER, "number must be an integer (no fraction)",
                    f->name);
    case RA_JSON_EXPONENT:
        return fail(ps, at, RA_WDTO_EBAD_NUMBER, "number must be plain (no exponent)", f->name);
    default:
        return malformed(ps, ps->s.fault_at, ps->s.fault);
    }
}

static int value(parser_t *ps, const ra_wdto_field_t *f, ra_wdto_value_t *v, char *scratch,
                 size_t scratch_cap, size_t *used) {
    v->pos = (uint32_t)(ps->s.p - ps->s.base);
    if (f->type == RA_WDTO_UINT) return number(ps, f, v);
    if (f->type == RA_WDTO_BOOL) {
        int b;
        int rc = ra_json_bool(&ps->s, &b);
        if (rc == RA_JSON_NOT_NUMBER)
            return fail(ps, ps->s.p, RA_WDTO_EWRONG_TYPE, "field must be true or false", f->name);
        if (rc) return malformed(ps, ps->s.fault_at, ps->s.fault);
        v->u = (uint64_t)b;
        return 0;
    }
    if (ps->s.p >= ps->s.end || *ps->s.p != '"')
        return wrong_type(ps, "field must be a string", f->name);
    const unsigned char *at = ps->s.p;
    size_t len, room = scratch_cap - *used;
    int rc = ra_json_string(&ps->s, scratch + *used, room, &len);
    if (rc == RA_JSON_BAD_TEXT) /* JSON, but not text: the string's fault, not the body's */
        return fail(ps, ps->s.fault_at, RA_WDTO_EBAD_STRING, ps->s.fault, f->name);
    if (rc) return malformed(ps, ps->s.fault_at, ps->s.fault);
    if (len < f->min) return fail(ps, at, RA_WDTO_EBAD_STRING, "string is too short", f->name);
    if (len > f->max) return fail(ps, at, RA_WDTO_EBAD_STRING, "string is too long", f->name);
    v->off = (uint32_t)*used; /* len <= room: scratch_cap >= body length >= unescaped length */
    v->len = (uint32_t)len;
    *used += len;
    return 0;
}

int ra_wdto_decode(const char *body, size_t len, const ra_wdto_field_t *fields, size_t n_fields,
                   ra_wdto_value_t *out, char *scratch, size_t scratch_cap, ra_wdto_error_t *err) {
    if (!err) return RA_WDTO_EUSAGE;
    memset(err, 0, sizeof *err);
    err->code = RA_WDTO_EUSAGE;
    err->detail = "bad arguments to ra_wdto_decode";
    if ((!body && len) || !fields || !n_fields || n_fields > RA_WDTO_MAX_FIELDS || !out ||
        (!scratch && scratch_cap) || scratch_cap < len || len > UINT32_MAX ||
        !schema_ok(fields, n_fields))
        return RA_WDTO_EUSAGE;
    memset(out, 0, n_fields * sizeof *out);
    parser_t ps;
    ra_json_init(&ps.s, body, len);
    ps.err = err;
    size_t used = 0;
    ra_json_skip_ws(&ps.s);
    if (ps.s.p >= ps.s.end) return fail(&ps, ps.s.p, RA_WDTO_EEMPTY, "the body is empty", "");
    if (*ps.s.p != '{') {
        if (!ra_json_value_start(&ps.s)) return malformed(&ps, ps.s.p, "expected a JSON value");
        return fail(&ps, ps.s.p, RA_WDTO_ENOT_OBJECT, "the body must be a JSON object", "");
    }
    ps.s.p++;
    ra_json_skip_ws(&ps.s);
    if (ps.s.p < ps.s.end && *ps.s.p == '}') goto close;
    for (;;) {
        const unsigned char *key_at;
        char name[RA_WDTO_NAME_MAX + 1];
        size_t nlen;
        int nrc = ra_json_name(&ps.s, name, sizeof name, &nlen, &key_at);
        if (nrc == RA_JSON_BAD_TEXT)
            return fail(&ps, ps.s.fault_at, RA_WDTO_EBAD_STRING, ps.s.fault, "");
        if (nrc) return malformed(&ps, ps.s.fault_at, ps.s.fault);
        size_t which = n_fields;
        for (size_t i = 0; nlen < sizeof name && i < n_fields; i++)
            if (strlen(fields[i].name) == nlen && memcmp(fields[i].name, name, nlen) == 0) {
                which = i;
                break;
            }
        if (which == n_fields) {
            char safe[RA_WDTO_FIELD_LEN];
            ra_json_sanitize(name, nlen, sizeof name, safe, sizeof safe);
            return fail(&ps, key_at, RA_WDTO_EUNKNOWN_FIELD, "unknown field", safe);
        }
        if (out[which].present)
            return fail(&ps, key_at, RA_WDTO_EDUPLICATE_FIELD, "field given twice",
                        fields[which].name);
        if (ra_json_colon(&ps.s)) return malformed(&ps, ps.s.fault_at, ps.s.fault);
        int rc = value(&ps, &fields[which], &out[which], scratch, scratch_cap, &used);
        if (rc) return rc;
        out[which].present = 1;
        int more = ra_json_next(&ps.s, '}', "expected ',' or '}'");
        if (more < 0) return malformed(&ps, ps.s.fault_at, ps.s.fault);
        if (!more) break;
    }
close:
    for (size_t i = 0; i < n_fields; i++)
        if (fields[i].required && !out[i].present)
            return fail(&ps, ps.s.p, RA_WDTO_EMISSING_FIELD, "required field missing",
                        fields[i].name);
    ps.s.p++; /* '}' */
    ra_json_skip_ws(&ps.s);
    if (ps.s.p < ps.s.end) return malformed(&ps, ps.s.p, "bytes after the JSON document");
    memset(err, 0, sizeof *err);
    return 0;
}

/* ra_wdto_reason, ra_wdto_message */
RA_DTO_DEFINE_NAMES(ra_wdto, RA_WDTO_ERR_MAP)

int ra_wdto_abi(size_t *field_size, size_t *value_size, size_t *error_size) {
    if (field_size) *field_size = sizeof(ra_wdto_field_t);
    if (value_size) *value_size = sizeof(ra_wdto_value_t);
    if (error_size) *error_size = sizeof(ra_wdto_error_t);
    return RA_WDTO_ABI;
}
