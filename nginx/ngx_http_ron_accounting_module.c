/*
 * ngx_http_ron_accounting_module: meters requests into ron-accounting's process-shared
 * counter plane from nginx's log phase, in C (issue 6, the native path). No Lua on the
 * request path; libronacct is linked in statically.
 *
 *   load_module /usr/lib/nginx/modules/ngx_http_ron_accounting_module.so;
 *   http {
 *       ron_accounting_plane /run/ron-accounting/plane window_len_s=300;
 *       server {
 *           ron_accounting_record $http_x_tenant_id $http_x_subject_id bytes $bytes_sent;
 *           ron_accounting_record $http_x_tenant_id $http_x_subject_id requests 1;
 *       }
 *       server { listen unix:/run/ron-accounting/metrics.sock;
 *                location = /metrics { ron_accounting_status; } }
 *   }
 *
 * Directives:
 *   ron_accounting_plane PATH [window_len_s=N] [shards=N] [capacity_rows=N]
 *                        [dimensions=a,b,...] [profile=macronode|micronode]
 *                        [stripes=on|off];                                       (http)
 *       the plane and its settings, which must be the sidecar's (the plane refuses a
 *       mismatch, and nginx does not start: the message names the field). stripes=on:
 *       each worker records into entries of its own (ra_meter_set_stripe).
 *   ron_accounting_record TENANT SUBJECT DIMENSION VALUE;    (http, server, location)
 *       TENANT, SUBJECT and VALUE take variables; DIMENSION is a registered name. Several
 *       per level; a level without any inherits its parent's (like access_log).
 *   ron_accounting_status;                                   (location)
 *       Prometheus text: this module's error counts and the plane's metrics.
 *   ron_accounting_test_clock BASE_UTC_S ORIGIN_UNIX_S SPEED;                  (http)
 *       tests only: the plane's clock runs at BASE + (now - ORIGIN) * SPEED.
 *
 * Where the plane is mapped (docs/ops/nginx.md): the http block's
 * postconfiguration runs in the master (as root) while it reads the configuration, before
 * the workers are forked and drop privileges. It opens (or creates, 0600) the plane and maps it;
 * every worker inherits the mapping and never opens the file. The meter belongs to the cycle: a
 * pool cleanup closes it when the cycle goes (a reload's old cycle, a failed reload, or exit). A
 * reload maps the same file again in the new cycle; old workers finish on their own copy of the
 * mapping.
 *
 * The request path (the log phase handler): per request, each distinct tenant and subject
 * expression is evaluated once, the tenant parsed (ra_tenant_parse), the subject hashed
 * (ra_meter_subject), both through a small per-worker cache; then one lock-free record
 * per directive through a cached key handle (ra_meter_record_key). A one-variable
 * expression ("$http_x_tenant_id") is read with ngx_http_get_flushed_variable, without a
 * copy. Errors never affect the request (it has been answered) and are always counted:
 * per reason node-wide in a small shared-memory zone (ron_accounting_status), bad input
 * also in the plane (accounting_rejected_total{reason="invalid"}), and logged at WARN at
 * most once per reason per worker every 10 seconds.
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <ron/accounting.h>

#include <time.h>

#define RA_NGX_RECORDS_MAX 16 /* ron_accounting_record directives in effect per location */
#define RA_NGX_LOG_INTERVAL_S 10
#define RA_NGX_ZONE_SIZE (32 * 1024)

/* Error reasons: ONE label set with the Lua path (lua/ron/accounting/nginx.lua's REASONS):
 * the same names in the same order, all printed, so one dashboard serves both. The module
 * never produces unknown_key (no API-key map) nor not_ready (it refuses to start without
 * its plane): they stay 0. */
enum {
    RA_NGX_NO_TENANT,
    RA_NGX_BAD_TENANT,
    RA_NGX_UNKNOWN_KEY,
    RA_NGX_NO_SUBJECT,
    RA_NGX_BAD_VALUE,
    RA_NGX_RECORD_FAILED,
    RA_NGX_NOT_READY,
    RA_NGX_REASONS
};

static const char *const ra_ngx_reason_names[RA_NGX_REASONS] = {
    "no_tenant", "bad_tenant",    "unknown_key", "no_subject",
    "bad_value", "record_failed", "not_ready"};

static const char *const ra_ngx_reason_messages[RA_NGX_REASONS] = {
    "request without a tenant (the tenant expression is empty)",
    "request with a malformed tenant (not a UUID)",
    "request with an API key that is not in the map",
    "request without a subject (the subject expression is empty)",
    "a value is not a non-negative integer (record skipped)",
    "the counter plane refused a record (see accounting_rejected_total)",
    "the counter plane is not open"};

/* An input expression: a constant, one variable (read without a copy), or a complex
 * value (evaluated into the request pool). */
typedef struct {
    ngx_http_complex_value_t cv;
    ngx_int_t var_index; /* >= 0: exactly "$name" */
    ngx_uint_t is_const;
} ngx_http_ron_expr_t;

typedef struct {
    ngx_http_ron_expr_t tenant, subject, value;
    ngx_str_t dim_name;
    int dim;                /* resolved at postconfiguration */
    ngx_uint_t tenant_slot; /* index of the first directive with the same tenant text */
    ngx_uint_t subject_slot;
    uint64_t const_value; /* when value.is_const */
    ngx_str_t conf_file;
    ngx_uint_t conf_line;
} ngx_http_ron_record_t;

typedef struct {
    ngx_array_t *records; /* of ngx_http_ron_record_t; NULL: none at this level */
} ngx_http_ron_loc_conf_t;

typedef struct {
    ngx_atomic_t reasons[RA_NGX_REASONS];
} ngx_http_ron_shctx_t;

typedef struct {
    ngx_str_t plane;
    uint32_t window_len_s, shards, capacity_rows;
    ngx_array_t *dimensions; /* of ngx_str_t */
    ngx_flag_t amnesia;
    ngx_flag_t stripes; /* stripes=on: each worker records into entries of its own */
    ngx_flag_t test_clock;
    int64_t clock_base_ms, clock_origin_ms, clock_speed;
    ngx_array_t levels; /* of ngx_array_t *: every level's records (dims resolved at
                           postconfiguration) */
    ngx_shm_zone_t *zone;
    ra_meter_t *meter;
} ngx_http_ron_main_conf_t;

static ngx_int_t ngx_http_ron_postconfiguration(ngx_conf_t *cf);
static void *ngx_http_ron_create_main_conf(ngx_conf_t *cf);
static void *ngx_http_ron_create_loc_conf(ngx_conf_t *cf);
static char *ngx_http_ron_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child);
static char *ngx_http_ron_plane(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_ron_record(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_ron_status(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_ron_test_clock(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static ngx_int_t ngx_http_ron_init_process(ngx_cycle_t *cycle);

static ngx_command_t ngx_http_ron_commands[] = {
    {ngx_string("ron_accounting_plane"), NGX_HTTP_MAIN_CONF | NGX_CONF_1MORE, ngx_http_ron_plane,
     NGX_HTTP_MAIN_CONF_OFFSET, 0, NULL},
    {ngx_string("ron_accounting_record"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_TAKE4,
     ngx_http_ron_record, NGX_HTTP_LOC_CONF_OFFSET, 0, NULL},
    {ngx_string("ron_accounting_status"), NGX_HTTP_LOC_CONF | NGX_CONF_NOARGS, ngx_http_ron_status,
     NGX_HTTP_LOC_CONF_OFFSET, 0, NULL},
    {ngx_string("ron_accounting_test_clock"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE3,
     ngx_http_ron_test_clock, NGX_HTTP_MAIN_CONF_OFFSET, 0, NULL},
    ngx_null_command};

static ngx_http_module_t ngx_http_ron_module_ctx = {
    NULL,                           /* preconfiguration */
    ngx_http_ron_postconfiguration, /* postconfiguration */
    ngx_http_ron_create_main_conf,  /* create main configuration */
    NULL,                           /* init main configuration */
    NULL,                           /* create server configuration */
    NULL,                           /* merge server configuration */
    ngx_http_ron_create_loc_conf,   /* create location configuration */
    ngx_http_ron_merge_loc_conf     /* merge location configuration */
};

ngx_module_t ngx_http_ron_accounting_module = {NGX_MODULE_V1,
                                               &ngx_http_ron_module_ctx,  /* module context */
                                               ngx_http_ron_commands,     /* module directives */
                                               NGX_HTTP_MODULE,           /* module type */
                                               NULL,                      /* init master */
                                               NULL,                      /* init module */
                                               ngx_http_ron_init_process, /* init process */
                                               NULL,                      /* init thread */
                                               NULL,                      /* exit thread */
                                               NULL,                      /* exit process */
                                               NULL,                      /* exit master */
                                               NGX_MODULE_V1_PADDING};

/* ---- configuration ------------------------------------------------------------------ */

static void *ngx_http_ron_create_main_conf(ngx_conf_t *cf) {
    ngx_http_ron_main_conf_t *mcf = ngx_pcalloc(cf->pool, sizeof *mcf);
    if (mcf == NULL) return NULL;
    if (ngx_array_init(&mcf->levels, cf->pool, 4, sizeof(ngx_array_t *)) != NGX_OK) return NULL;
    return mcf;
}

static void *ngx_http_ron_create_loc_conf(ngx_conf_t *cf) {
    ngx_http_ron_loc_conf_t *lcf = ngx_pcalloc(cf->pool, sizeof *lcf);
    return lcf; /* records = NULL: unset */
}

static char *ngx_http_ron_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child) {
    ngx_http_ron_loc_conf_t *prev = parent, *conf = child;
    (void)cf;
    if (conf->records == NULL) conf->records = prev->records;
    return NGX_CONF_OK;
}

/* "key=value" option of ron_accounting_plane: a uint32 in lo..hi. */
static char *ngx_http_ron_u32_opt(ngx_conf_t *cf, ngx_str_t *v, size_t keylen, uint32_t lo,
                                  uint32_t hi, uint32_t *out) {
    ngx_int_t n = ngx_atoi(v->data + keylen, v->len - keylen);
    if (n == NGX_ERROR || n < (ngx_int_t)lo || n > (ngx_int_t)hi) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "ron_accounting_plane: \"%V\": expected an "
                           "integer in %uD..%uD",
                           v, lo, hi);
        return NGX_CONF_ERROR;
    }
    *out = (uint32_t)n;
    return NGX_CONF_OK;
}

/* key=VALUE where VALUE is off_word (*out = 0) or on_word (*out = 1); what names the two
 * for the message. */
static char *ngx_http_ron_flag_opt(ngx_conf_t *cf, ngx_str_t *v, size_t keylen,
                                   const char *off_word, const char *on_word, const char *what,
                                   ngx_flag_t *out) {
    size_t n = v->len - keylen, off_len = ngx_strlen(off_word), on_len = ngx_strlen(on_word);
    if (n == off_len && ngx_strncmp(v->data + keylen, off_word, off_len) == 0) {
        *out = 0;
    } else if (n == on_len && ngx_strncmp(v->data + keylen, on_word, on_len) == 0) {
        *out = 1;
    } else {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "ron_accounting_plane: \"%V\": %s", v, what);
        return NGX_CONF_ERROR;
    }
    return NGX_CONF_OK;
}

#define RA_NGX_KEY(v, lit)                                                                         \
    ((v)->len > sizeof(lit) - 1 && ngx_strncmp((v)->data, lit, sizeof(lit) - 1) == 0)

static char *ngx_http_ron_plane(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) {
    ngx_http_ron_main_conf_t *mcf = conf;
    ngx_str_t *args = cf->args->elts;
    (void)cmd;
    if (mcf->plane.data) return "is duplicate";
    if (args[1].len == 0 || args[1].data[0] != '/') {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "ron_accounting_plane: \"%V\" must be an absolute path", &args[1]);
        return NGX_CONF_ERROR;
    }
    mcf->plane = args[1]; /* NUL-terminated by the configuration parser */
    /* The sidecar's defaults (ron.node): window 300 s, 64 shards, 200000
     * rows, macronode (durable: amnesia off). */
    mcf->window_len_s = 300;
    mcf->shards = 64;
    mcf->capacity_rows = 200000;
    mcf->amnesia = 0;
    for (ngx_uint_t i = 2; i < cf->args->nelts; i++) {
        ngx_str_t *v = &args[i];
        char *rv = NGX_CONF_OK;
        if (RA_NGX_KEY(v, "window_len_s=")) {
            rv = ngx_http_ron_u32_opt(cf, v, 13, RA_WINDOW_MIN_S, RA_WINDOW_MAX_S,
                                      &mcf->window_len_s);
        } else if (RA_NGX_KEY(v, "shards=")) {
            rv = ngx_http_ron_u32_opt(cf, v, 7, 1, 4096, &mcf->shards);
        } else if (RA_NGX_KEY(v, "capacity_rows=")) {
            rv = ngx_http_ron_u32_opt(cf, v, 14, 1, 0x7fffffff, &mcf->capacity_rows);
        } else if (RA_NGX_KEY(v, "profile=")) {
            rv = ngx_http_ron_flag_opt(cf, v, 8, "macronode", "micronode",
                                       "profile is macronode or micronode", &mcf->amnesia);
        } else if (RA_NGX_KEY(v, "stripes=")) {
            rv =
                ngx_http_ron_flag_opt(cf, v, 8, "off", "on", "stripes is on or off", &mcf->stripes);
        } else if (RA_NGX_KEY(v, "dimensions=")) {
            mcf->dimensions = ngx_array_create(cf->pool, 4, sizeof(ngx_str_t));
            if (mcf->dimensions == NULL) return NGX_CONF_ERROR;
            u_char *p = v->data + 11, *end = v->data + v->len;
            while (p < end) {
                u_char *comma = ngx_strlchr(p, end, ',');
                if (comma == NULL) comma = end;
                ngx_str_t *d = ngx_array_push(mcf->dimensions);
                if (d == NULL) return NGX_CONF_ERROR;
                d->len = (size_t)(comma - p);
                d->data = ngx_pnalloc(cf->pool, d->len + 1);
                if (d->data == NULL) return NGX_CONF_ERROR;
                ngx_memcpy(d->data, p, d->len);
                d->data[d->len] = '\0';
                p = comma + 1;
            }
        } else {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "ron_accounting_plane: unknown option "
                               "\"%V\" (window_len_s=, shards=, capacity_rows=, dimensions=, "
                               "profile=, stripes=)",
                               v);
            return NGX_CONF_ERROR;
        }
        if (rv != NGX_CONF_OK) return rv;
    }
    return NGX_CONF_OK;
}

/* stripes=on: the worker's own stripe (ra_meter_set_stripe), taken in the worker after the
 * fork, on its copy of the inherited meter handle: workers metering the same hot keys then
 * never share an entry's cache line; the sealer sums a key's entries. */
static ngx_int_t ngx_http_ron_init_process(ngx_cycle_t *cycle) {
    if (cycle->conf_ctx == NULL || cycle->conf_ctx[ngx_http_module.index] == NULL) return NGX_OK;
    ngx_http_ron_main_conf_t *mcf =
        ngx_http_cycle_get_module_main_conf(cycle, ngx_http_ron_accounting_module);
    if (mcf == NULL || mcf->meter == NULL || !mcf->stripes) return NGX_OK;
    (void)ra_meter_set_stripe(mcf->meter, (uint32_t)(ngx_worker % RA_STRIPES_MAX));
    return NGX_OK;
}

static char *ngx_http_ron_test_clock(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) {
    ngx_http_ron_main_conf_t *mcf = conf;
    ngx_str_t *args = cf->args->elts;
    (void)cmd;
    ngx_int_t base = ngx_atoi(args[1].data, args[1].len);
    ngx_int_t origin = ngx_atoi(args[2].data, args[2].len);
    ngx_int_t speed = ngx_atoi(args[3].data, args[3].len);
    if (base == NGX_ERROR || origin == NGX_ERROR || speed == NGX_ERROR || speed < 1 ||
        speed > 3600) {
        return "needs BASE_UTC_S ORIGIN_UNIX_S SPEED (non-negative integers, SPEED 1..3600)";
    }
    mcf->test_clock = 1;
    mcf->clock_base_ms = (int64_t)base * 1000;
    mcf->clock_origin_ms = (int64_t)origin * 1000;
    mcf->clock_speed = speed;
    return NGX_CONF_OK;
}

static char *ngx_http_ron_expr(ngx_conf_t *cf, ngx_str_t *text, ngx_http_ron_expr_t *e) {
    e->var_index = NGX_ERROR;
    /* "$name" alone (letters, digits, '_'): read the variable itself, no copy. */
    if (text->len > 1 && text->data[0] == '$') {
        ngx_uint_t plain = 1;
        for (size_t i = 1; i < text->len; i++) {
            u_char c = text->data[i];
            if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_'))
                plain = 0;
        }
        if (plain) {
            ngx_str_t name = {text->len - 1, text->data + 1};
            e->var_index = ngx_http_get_variable_index(cf, &name);
            if (e->var_index == NGX_ERROR) return NGX_CONF_ERROR;
            e->cv.value = *text;
            return NGX_CONF_OK;
        }
    }
    ngx_http_compile_complex_value_t ccv;
    ngx_memzero(&ccv, sizeof ccv);
    ccv.cf = cf;
    ccv.value = text;
    ccv.complex_value = &e->cv;
    if (ngx_http_compile_complex_value(&ccv) != NGX_OK) return NGX_CONF_ERROR;
    e->is_const = e->cv.lengths == NULL;
    return NGX_CONF_OK;
}

/* A decimal uint64 (no sign, no spaces), or -1. */
static ngx_int_t ngx_http_ron_parse_u64(const u_char *p, size_t len, uint64_t *out) {
    if (len == 0 || len > 20) return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (p[i] < '0' || p[i] > '9') return -1;
        uint64_t d = (uint64_t)(p[i] - '0');
        if (v > (UINT64_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

static char *ngx_http_ron_record(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) {
    ngx_http_ron_loc_conf_t *lcf = conf;
    ngx_http_ron_main_conf_t *mcf =
        ngx_http_conf_get_module_main_conf(cf, ngx_http_ron_accounting_module);
    ngx_str_t *args = cf->args->elts;
    (void)cmd;
    if (lcf->records == NULL) {
        /* Sized for the maximum at once: elements never move, and the request path
         * indexes them. */
        lcf->records =
            ngx_array_create(cf->pool, RA_NGX_RECORDS_MAX, sizeof(ngx_http_ron_record_t));
        if (lcf->records == NULL) return NGX_CONF_ERROR;
        ngx_array_t **level = ngx_array_push(&mcf->levels);
        if (level == NULL) return NGX_CONF_ERROR;
        *level = lcf->records;
    }
    if (lcf->records->nelts == RA_NGX_RECORDS_MAX)
        return "is given too often (at most 16 per level)";
    ngx_http_ron_record_t *rec = ngx_array_push(lcf->records);
    if (rec == NULL) return NGX_CONF_ERROR;
    ngx_memzero(rec, sizeof *rec);
    if (ngx_http_ron_expr(cf, &args[1], &rec->tenant) != NGX_CONF_OK ||
        ngx_http_ron_expr(cf, &args[2], &rec->subject) != NGX_CONF_OK ||
        ngx_http_ron_expr(cf, &args[4], &rec->value) != NGX_CONF_OK)
        return NGX_CONF_ERROR;
    if (rec->value.is_const &&
        ngx_http_ron_parse_u64(args[4].data, args[4].len, &rec->const_value) != 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "ron_accounting_record: value \"%V\" is not "
                           "a non-negative integer",
                           &args[4]);
        return NGX_CONF_ERROR;
    }
    if (rec->tenant.is_const) {
        ra_tenant_t t;
        if (ra_tenant_parse((const char *)args[1].data, args[1].len, &t) != 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "ron_accounting_record: tenant \"%V\" is "
                               "not a UUID",
                               &args[1]);
            return NGX_CONF_ERROR;
        }
    }
    rec->dim_name = args[3];
    rec->dim = -1;
    rec->conf_file = cf->conf_file->file.name;
    rec->conf_line = cf->conf_file->line;
    /* Same text as an earlier directive of this level: evaluated once per request. */
    ngx_http_ron_record_t *all = lcf->records->elts;
    ngx_uint_t n = lcf->records->nelts - 1;
    rec->tenant_slot = rec->subject_slot = n;
    for (ngx_uint_t i = 0; i < n; i++) {
        if (rec->tenant_slot == n && all[i].tenant.cv.value.len == args[1].len &&
            ngx_strncmp(all[i].tenant.cv.value.data, args[1].data, args[1].len) == 0)
            rec->tenant_slot = i;
        if (rec->subject_slot == n && all[i].subject.cv.value.len == args[2].len &&
            ngx_strncmp(all[i].subject.cv.value.data, args[2].data, args[2].len) == 0)
            rec->subject_slot = i;
    }
    return NGX_CONF_OK;
}

/* ---- shared error counters ---------------------------------------------------------- */

static ngx_int_t ngx_http_ron_zone_init(ngx_shm_zone_t *zone, void *data) {
    if (data) { /* a reload with the same zone: keep the counts */
        zone->data = data;
        return NGX_OK;
    }
    ngx_slab_pool_t *shpool = (ngx_slab_pool_t *)zone->shm.addr;
    if (zone->shm.exists) {
        zone->data = shpool->data;
        return NGX_OK;
    }
    ngx_http_ron_shctx_t *ctx = ngx_slab_calloc(shpool, sizeof *ctx);
    if (ctx == NULL) return NGX_ERROR;
    shpool->data = ctx;
    zone->data = ctx;
    return NGX_OK;
}

static ngx_msec_t ra_ngx_last_log[RA_NGX_REASONS]; /* per worker: ngx_current_msec */
static ngx_uint_t ra_ngx_logged_once[RA_NGX_REASONS];

static void ngx_http_ron_fail(ngx_http_request_t *r, ngx_http_ron_main_conf_t *mcf, int reason,
                              int input_error) {
    if (mcf->zone && mcf->zone->data) {
        ngx_http_ron_shctx_t *ctx = mcf->zone->data;
        (void)ngx_atomic_fetch_add(&ctx->reasons[reason], 1);
    }
    if (input_error) ra_meter_count_invalid(mcf->meter);
    ngx_msec_t now = ngx_current_msec;
    if (!ra_ngx_logged_once[reason] ||
        now - ra_ngx_last_log[reason] >= RA_NGX_LOG_INTERVAL_S * 1000) {
        ra_ngx_logged_once[reason] = 1;
        ra_ngx_last_log[reason] = now;
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "ron-accounting: %s (counted; further ones for %d s only counted)",
                      ra_ngx_reason_messages[reason], RA_NGX_LOG_INTERVAL_S);
    }
}

/* ---- the request path --------------------------------------------------------------- */

/* Per-worker caches of the tenant parse and of the subject hash (keyed BLAKE3, the costly
 * one), keyed by the expression's bytes: direct-mapped, 256 slots chosen from the length
 * and three bytes, a hit confirmed by comparing every byte. A hit can only return what the
 * core computed for the same bytes; churn only costs the computation. Reset by
 * postconfiguration (in the master, before the fork) since a new plane may have another
 * subject key. Values longer than the key buffer are not cached. */
#define RA_NGX_CACHE_SLOTS 256
#define RA_NGX_CACHE_KEY_MAX 64

typedef struct {
    size_t len; /* 0: empty */
    union {
        ra_tenant_t tenant;
        ra_subject_t subject;
    } id;
    u_char key[RA_NGX_CACHE_KEY_MAX];
} ngx_http_ron_cache_slot_t;

static ngx_http_ron_cache_slot_t ra_ngx_tenant_cache[RA_NGX_CACHE_SLOTS];
static ngx_http_ron_cache_slot_t ra_ngx_subject_cache[RA_NGX_CACHE_SLOTS];

static ngx_http_ron_cache_slot_t *ngx_http_ron_cache_slot(ngx_http_ron_cache_slot_t *cache,
                                                          const ngx_str_t *v) {
    size_t n = v->len; /* 2..RA_NGX_CACHE_KEY_MAX */
    ngx_uint_t i = (ngx_uint_t)v->data[0] + (ngx_uint_t)v->data[n - 1] * 7 +
                   (ngx_uint_t)v->data[n - 2] * 13 + n * 31;
    return &cache[i & (RA_NGX_CACHE_SLOTS - 1)];
}

/* The tenant of v into *out; 0 or -1 (not a UUID). */
static int ngx_http_ron_tenant(const ngx_str_t *v, ra_tenant_t *out) {
    if (v->len != RA_UUID_STR_LEN) return -1;
    ngx_http_ron_cache_slot_t *e = ngx_http_ron_cache_slot(ra_ngx_tenant_cache, v);
    if (e->len != v->len || ngx_memcmp(e->key, v->data, v->len) != 0) {
        e->len = 0;
        if (ra_tenant_parse((const char *)v->data, v->len, &e->id.tenant) != 0) return -1;
        ngx_memcpy(e->key, v->data, v->len);
        e->len = v->len;
    }
    *out = e->id.tenant;
    return 0;
}

static void ngx_http_ron_subject(ra_meter_t *m, const ngx_str_t *v, ra_subject_t *out) {
    if (v->len < 2 || v->len > RA_NGX_CACHE_KEY_MAX) {
        ra_meter_subject(m, v->data, v->len, out);
        return;
    }
    ngx_http_ron_cache_slot_t *e = ngx_http_ron_cache_slot(ra_ngx_subject_cache, v);
    if (e->len != v->len || ngx_memcmp(e->key, v->data, v->len) != 0) {
        ra_meter_subject(m, v->data, v->len, &e->id.subject);
        ngx_memcpy(e->key, v->data, v->len);
        e->len = v->len;
    }
    *out = e->id.subject;
}

/* Per-worker cache of key handles (ra_key_t): a worker records the same (tenant, subject,
 * dimension) keys again and again, and a handle whose cached plane entry is still the
 * key's makes the record one 16-byte CAS, with no key hash, probe or compare. Direct-
 * mapped by a mix of the key's bytes; a hit is confirmed by comparing the whole key, so a
 * collision only costs a ra_key_init. A handle is used by one thread at a time, as the
 * core requires: a worker runs the log phase on its one thread. Reset with the other
 * caches (a new plane: other meter, maybe another subject key). */
#define RA_NGX_KEY_SLOTS 1024

typedef struct {
    ra_key_t k;
    ngx_uint_t used;
} ngx_http_ron_key_slot_t;

static ngx_http_ron_key_slot_t ra_ngx_key_cache[RA_NGX_KEY_SLOTS];

static ra_key_t *ngx_http_ron_key(ra_meter_t *m, const ra_tenant_t *t, const ra_subject_t *s,
                                  int dim) {
    uint64_t a, b;
    ngx_memcpy(&a, t->b, 8);
    ngx_memcpy(&b, s->b, 8);
    uint64_t h = (a ^ (b * 0x9E3779B97F4A7C15ull) ^ (uint64_t)dim) * 0xBF58476D1CE4E5B9ull;
    ngx_http_ron_key_slot_t *e = &ra_ngx_key_cache[(h >> 40) & (RA_NGX_KEY_SLOTS - 1)];
    if (!e->used || e->k.dim != dim || ngx_memcmp(e->k.tenant.b, t->b, 16) != 0 ||
        ngx_memcmp(e->k.subject.b, s->b, 16) != 0) {
        if (ra_key_init(&e->k, m, t, s, dim) != 0) return NULL;
        e->used = 1;
    }
    return &e->k;
}

/* The expression's value for this request; 0 or NGX_ERROR (treated as empty). */
static ngx_int_t ngx_http_ron_eval(ngx_http_request_t *r, ngx_http_ron_expr_t *e, ngx_str_t *out) {
    if (e->var_index != NGX_ERROR) {
        ngx_http_variable_value_t *vv = ngx_http_get_flushed_variable(r, e->var_index);
        if (vv == NULL || vv->not_found || !vv->valid) {
            out->len = 0;
            out->data = NULL;
            return NGX_OK;
        }
        out->len = vv->len;
        out->data = vv->data;
        return NGX_OK;
    }
    if (ngx_http_complex_value(r, &e->cv, out) != NGX_OK) {
        out->len = 0;
        return NGX_ERROR;
    }
    return NGX_OK;
}

/* A tenant or subject slot's value, evaluated once per request (*state 0: not yet, 1: ok,
 * -1: bad): true with *v set when it is evaluated now and not empty (then *state is 1); an
 * empty value marks the slot bad and counts reason. */
static ngx_flag_t ngx_http_ron_slot_eval(ngx_http_request_t *r, ngx_http_ron_main_conf_t *mcf,
                                         ngx_http_ron_expr_t *e, int8_t *state, int reason,
                                         ngx_str_t *v) {
    if (*state != 0) return 0;
    ngx_http_ron_eval(r, e, v);
    if (v->len == 0) {
        *state = -1;
        ngx_http_ron_fail(r, mcf, reason, 1);
        return 0;
    }
    *state = 1;
    return 1;
}

static ngx_int_t ngx_http_ron_log_handler(ngx_http_request_t *r) {
    ngx_http_ron_loc_conf_t *lcf = ngx_http_get_module_loc_conf(r, ngx_http_ron_accounting_module);
    if (lcf == NULL || lcf->records == NULL) return NGX_OK;
    ngx_http_ron_main_conf_t *mcf =
        ngx_http_get_module_main_conf(r, ngx_http_ron_accounting_module);
    if (mcf->meter == NULL) return NGX_OK;

    ngx_http_ron_record_t *recs = lcf->records->elts;
    ngx_uint_t n = lcf->records->nelts;
    ra_tenant_t tenants[RA_NGX_RECORDS_MAX];
    ra_subject_t subjects[RA_NGX_RECORDS_MAX];
    int8_t tstate[RA_NGX_RECORDS_MAX], sstate[RA_NGX_RECORDS_MAX]; /* 0 ?, 1 ok, -1 bad */
    ngx_memzero(tstate, n);
    ngx_memzero(sstate, n);

    for (ngx_uint_t i = 0; i < n; i++) {
        ngx_http_ron_record_t *rec = &recs[i];
        ngx_str_t v;
        /* tenant */
        ngx_uint_t ts = rec->tenant_slot;
        if (ngx_http_ron_slot_eval(r, mcf, &recs[ts].tenant, &tstate[ts], RA_NGX_NO_TENANT, &v) &&
            ngx_http_ron_tenant(&v, &tenants[ts]) != 0) {
            tstate[ts] = -1;
            ngx_http_ron_fail(r, mcf, RA_NGX_BAD_TENANT, 1);
        }
        if (tstate[ts] < 0) continue;
        /* subject */
        ngx_uint_t ss = rec->subject_slot;
        if (ngx_http_ron_slot_eval(r, mcf, &recs[ss].subject, &sstate[ss], RA_NGX_NO_SUBJECT, &v))
            ngx_http_ron_subject(mcf->meter, &v, &subjects[ss]);
        if (sstate[ss] < 0) continue;
        /* value */
        uint64_t inc = rec->const_value;
        if (!rec->value.is_const) {
            ngx_http_ron_eval(r, &rec->value, &v);
            if (ngx_http_ron_parse_u64(v.data, v.len, &inc) != 0) {
                ngx_http_ron_fail(r, mcf, RA_NGX_BAD_VALUE, 1);
                continue;
            }
        }
        ra_key_t *k = ngx_http_ron_key(mcf->meter, &tenants[ts], &subjects[ss], rec->dim);
        if (k == NULL || ra_meter_record_key(mcf->meter, k, inc) != 0)
            ngx_http_ron_fail(r, mcf, RA_NGX_RECORD_FAILED, 0);
    }
    return NGX_OK;
}

/* ---- ron_accounting_status ---------------------------------------------------------- */

static ngx_int_t ngx_http_ron_status_handler(ngx_http_request_t *r) {
    ngx_http_ron_main_conf_t *mcf =
        ngx_http_get_module_main_conf(r, ngx_http_ron_accounting_module);
    if (!(r->method & (NGX_HTTP_GET | NGX_HTTP_HEAD))) return NGX_HTTP_NOT_ALLOWED;
    ngx_int_t rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) return rc;

    size_t head_cap = 256 + RA_NGX_REASONS * 96;
    size_t cap = head_cap + 16384;
    u_char *buf = NULL;
    size_t len = 0;
    for (int attempt = 0; attempt < 4; attempt++) {
        buf = ngx_pnalloc(r->pool, cap);
        if (buf == NULL) return NGX_HTTP_INTERNAL_SERVER_ERROR;
        u_char *p = ngx_snprintf(buf, head_cap,
                                 "# HELP ron_accounting_nginx_errors_total requests not "
                                 "metered (or partly), per reason\n"
                                 "# TYPE ron_accounting_nginx_errors_total counter\n");
        ngx_http_ron_shctx_t *ctx = mcf->zone ? mcf->zone->data : NULL;
        for (int i = 0; i < RA_NGX_REASONS; i++)
            p = ngx_snprintf(p, head_cap - (size_t)(p - buf),
                             "ron_accounting_nginx_errors_total{reason=\"%s\"} %uA\n",
                             ra_ngx_reason_names[i], ctx ? ctx->reasons[i] : 0);
        len = (size_t)(p - buf);
        if (mcf->meter == NULL) break;
        size_t mlen = 0;
        int mrc = ra_meter_metrics(mcf->meter, (char *)p, cap - len, &mlen);
        if (mrc == 0) {
            len += mlen;
            break;
        }
        if (mrc != RA_EBUFSIZE) return NGX_HTTP_INTERNAL_SERVER_ERROR;
        cap = head_cap + mlen + 1024;
    }
    r->headers_out.status = NGX_HTTP_OK;
    r->headers_out.content_length_n = (off_t)len;
    ngx_str_set(&r->headers_out.content_type, "text/plain; version=0.0.4");
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    rc = ngx_http_send_header(r);
    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) return rc;
    ngx_buf_t *b = ngx_calloc_buf(r->pool);
    if (b == NULL) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    b->pos = buf;
    b->last = buf + len;
    b->memory = 1;
    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;
    ngx_chain_t out = {b, NULL};
    return ngx_http_output_filter(r, &out);
}

static char *ngx_http_ron_status(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) {
    (void)cmd;
    (void)conf;
    ngx_http_core_loc_conf_t *clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    clcf->handler = ngx_http_ron_status_handler;
    return NGX_CONF_OK;
}

/* ---- postconfiguration: open the plane (in the master), install the log handler ------ */

static int64_t ngx_http_ron_clock(void *ud) {
    ngx_http_ron_main_conf_t *mcf = ud;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t now_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    return mcf->clock_base_ms + (now_ms - mcf->clock_origin_ms) * mcf->clock_speed;
}

static void ngx_http_ron_log_cb(void *ud, int level, const char *msg) {
    ngx_log_t *log = ud;
    ngx_uint_t nlevel = NGX_LOG_INFO; /* the macro needs a plain operand */
    if (level == RA_LOG_ERROR) nlevel = NGX_LOG_ERR;
    if (level == RA_LOG_WARN) nlevel = NGX_LOG_WARN;
    ngx_log_error(nlevel, log, 0, "ron-accounting: %s", msg);
}

static void ngx_http_ron_cleanup(void *data) {
    ngx_http_ron_main_conf_t *mcf = data;
    if (mcf->meter) ra_meter_close(mcf->meter);
    mcf->meter = NULL;
}

static ngx_int_t ngx_http_ron_postconfiguration(ngx_conf_t *cf) {
    ngx_http_ron_main_conf_t *mcf =
        ngx_http_conf_get_module_main_conf(cf, ngx_http_ron_accounting_module);
    if (mcf->plane.data == NULL) {
        if (mcf->levels.nelts) {
            ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                          "ron_accounting_record needs ron_accounting_plane in the http block");
            return NGX_ERROR;
        }
        return NGX_OK;
    }

    ra_config_t cfg;
    ra_config_init(&cfg);
    cfg.window_len_s = mcf->window_len_s;
    cfg.shards = mcf->shards;
    cfg.capacity_rows = mcf->capacity_rows;
    cfg.amnesia = (int)mcf->amnesia;
    cfg.shm_path = (const char *)mcf->plane.data;
    cfg.log = ngx_http_ron_log_cb;
    cfg.log_ud = cf->cycle->log;
    const char *dims[RA_DIM_MAX];
    if (mcf->dimensions) {
        ngx_str_t *d = mcf->dimensions->elts;
        if (mcf->dimensions->nelts > RA_DIM_MAX) {
            ngx_log_error(NGX_LOG_EMERG, cf->log, 0, "ron_accounting_plane: too many dimensions");
            return NGX_ERROR;
        }
        for (ngx_uint_t i = 0; i < mcf->dimensions->nelts; i++)
            dims[i] = (const char *)d[i].data;
        cfg.dimensions = dims;
        cfg.n_dimensions = (uint32_t)mcf->dimensions->nelts;
    }
    if (mcf->test_clock) {
        cfg.clock = ngx_http_ron_clock;
        cfg.clock_ud = mcf;
    }
    char err[512];
    int rc = ra_meter_open(&cfg, &mcf->meter, err, sizeof err);
    if (rc != 0) {
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0, "ron_accounting_plane: cannot open %V: %s: %s",
                      &mcf->plane, ra_err_name(rc), err[0] ? err : ra_strerror(rc));
        return NGX_ERROR;
    }
    ngx_pool_cleanup_t *cln = ngx_pool_cleanup_add(cf->pool, 0);
    if (cln == NULL) {
        ra_meter_close(mcf->meter);
        mcf->meter = NULL;
        return NGX_ERROR;
    }
    cln->handler = ngx_http_ron_cleanup;
    cln->data = mcf;
    ngx_memzero(ra_ngx_tenant_cache, sizeof ra_ngx_tenant_cache);
    ngx_memzero(ra_ngx_subject_cache, sizeof ra_ngx_subject_cache);
    ngx_memzero(ra_ngx_key_cache, sizeof ra_ngx_key_cache);

    /* Dimension names -> ids, now that the plane's list is known. */
    ngx_array_t **levels = mcf->levels.elts;
    for (ngx_uint_t l = 0; l < mcf->levels.nelts; l++) {
        ngx_http_ron_record_t *recs = levels[l]->elts;
        for (ngx_uint_t i = 0; i < levels[l]->nelts; i++) {
            if (recs[i].dim >= 0) continue;
            int id = ra_meter_dimension(mcf->meter, (const char *)recs[i].dim_name.data,
                                        recs[i].dim_name.len);
            if (id < 0) {
                ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                              "ron_accounting_record: unknown dimension \"%V\" in %V:%ui (the "
                              "plane registers bytes, requests, cpu_units and those of "
                              "ron_accounting_plane dimensions=)",
                              &recs[i].dim_name, &recs[i].conf_file, recs[i].conf_line);
                return NGX_ERROR;
            }
            recs[i].dim = id;
        }
    }

    ngx_str_t zname = ngx_string("ron_accounting");
    mcf->zone =
        ngx_shared_memory_add(cf, &zname, RA_NGX_ZONE_SIZE, &ngx_http_ron_accounting_module);
    if (mcf->zone == NULL) return NGX_ERROR;
    mcf->zone->init = ngx_http_ron_zone_init;

    ngx_http_core_main_conf_t *cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);
    ngx_http_handler_pt *h = ngx_array_push(&cmcf->phases[NGX_HTTP_LOG_PHASE].handlers);
    if (h == NULL) return NGX_ERROR;
    *h = ngx_http_ron_log_handler;
    return NGX_OK;
}
