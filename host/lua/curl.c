/* ron.base.net.http_client_c: HTTP requests on the host's one libuv loop, through libcurl's
 * multi-socket API. libcurl tells us which sockets to watch (CURLMOPT_SOCKETFUNCTION) and
 * when to wake it (CURLMOPT_TIMERFUNCTION); a uv_poll_t per socket and one uv_timer_t hand
 * the events back with curl_multi_socket_action. The loop thread never waits for the
 * network. The task-friendly wrapper is lua/ron/base/net/http_client.lua; the HTTP exporter
 * on top of it is lua/ron/accounting/export/exporters/http.lua (docs/EXPORT.md, "HTTP exporter and
 * ledger receiver").
 *
 * Lua API (package.preload["ron.base.net.http_client_c"], registered by run.c):
 *
 *   local curl = require "ron.base.net.http_client_c"
 *   local ok, err = curl.request({
 *       method = "PUT",              -- an HTTP token (default GET); HEAD sends no body back
 *       url = "http://127.0.0.1:9464/v1/slices/...",   -- http:// or https:// only
 *       headers = { ["Content-Type"] = "application/octet-stream", ... },  -- name -> value
 *       body = bytes,                -- a string (methods other than GET and HEAD); with a
 *                                    -- body and no Content-Type: application/octet-stream
 *       connect_timeout_ms = 5000,   -- TCP (and TLS) connect, 1..86400000
 *       timeout_ms = 10000,          -- the whole request, 1..86400000
 *       read_timeout_ms = nil,       -- abort when no byte arrives for this long (libcurl
 *                                    -- counts it in whole seconds: rounded up)
 *       max_response = 1048576,      -- response body bytes kept; more: class "protocol"
 *       proxy = nil,                 -- a proxy URL; default none (http_proxy and friends
 *                                    -- in the environment are ignored)
 *   }, cb)
 *       -> true, or nil, "Busy: ..." (MAX_TRANSFERS in flight) / nil, "Client: ..." (libcurl
 *          refused the transfer); cb is then never called. Misuse (a bad option) raises.
 *   cb(status, headers, body)     an HTTP answer, whatever its status (headers: lower-case
 *                                 name -> value, repeated headers joined with ", ")
 *   cb(nil, err, class)           no HTTP answer; err "Code: message"; class one of
 *       "network"   cannot resolve or connect (refused, unreachable), the connection broke
 *                   before a complete answer (reset, closed, nothing received)
 *       "timeout"   connect_timeout_ms, timeout_ms or read_timeout_ms passed first (the
 *                   request may or may not have been processed by the server)
 *       "protocol"  the server answered something that is not HTTP, or more than
 *                   max_response bytes (or 64 KiB of headers)
 *       "tls"       the TLS handshake or the peer's certificate failed
 *       "client"    anything else libcurl refused (a malformed URL, out of memory)
 *   curl.live()     -> transfers in flight, socket watchers open (specs check for leaks)
 *   curl.version()  -> libcurl's version string
 *
 * Every callback runs on a later loop turn than the request() that started it, on the
 * main Lua state, through luv's callback runner (an error in it ends the host like an
 * error in any luv callback). A callback may start new requests.
 *
 * Connections: one multi handle per process keeps a cache of up to MAX_CACHED_CONNS idle
 * connections (HTTP keep-alive), reused by later requests to the same host. "Expect:
 * 100-continue" is never sent (one round trip less for bodies over 1 KiB).
 *
 * Lifetimes:
 *   - A transfer in flight holds registry references to its callback and to its body
 *     string (libcurl reads the body from the Lua string itself: LuaJIT never moves
 *     strings); both go when the answer is delivered.
 *   - The timer and the socket watchers are referenced while a transfer is in flight and
 *     unreferenced otherwise: an idle connection never keeps the process alive.
 *   - A socket's uv_poll_t is recreated at every change of what libcurl wants from it, and
 *     closed when libcurl closes the socket (CURLOPT_CLOSESOCKETFUNCTION, before close(2))
 *     or forgets it (CURL_POLL_REMOVE): libuv never watches a descriptor number that
 *     libcurl closed and reused for another socket.
 *   - close_all() (run.c calls it through ra_host_modules_close_all before it closes the
 *     loop) drops every transfer still in flight without calling back into Lua, closes the
 *     cached connections and runs the loop until our handles are freed: luv's uv.walk,
 *     which the host then runs, only knows luv's own handles.
 *
 * Name resolution: Debian's libcurl resolves host names on a thread of its own (never on
 * the loop); numeric addresses and "localhost" need no resolver at all. */
#include "host_name.h"
#include "lua/glue.h"
#include "lua/modules.h"

#include <curl/curl.h>

#include <lauxlib.h>
#include <lua.h>
#include <luv/luv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <uv.h>

#define MAX_TRANSFERS 1024  /* in flight at once; more: "Busy" */
#define MAX_CACHED_CONNS 64 /* idle keep-alive connections kept */
#define DEFAULT_CONNECT_TIMEOUT_MS 5000
#define DEFAULT_TIMEOUT_MS 10000
#define MAX_TIMEOUT_MS (24u * 3600u * 1000u)
#define DEFAULT_MAX_RESPONSE (1u << 20)
#define MAX_RESPONSE_LIMIT (64u << 20)
#define MAX_HEADER_BYTES (64u << 10) /* response header block */
#define MAX_BODY_BYTES (64u << 20)   /* request body */

typedef struct {
    char *p;
    size_t len, cap;
} buf_t;

/* A socket libcurl asked us to watch. */
typedef struct sock {
    curl_socket_t fd;
    uv_poll_t *poll; /* NULL when not watched (closed, or libcurl closed the socket) */
    int events;      /* UV_READABLE | UV_WRITABLE: what libcurl asked for */
    struct sock *next, *prev;
} sock_t;

typedef struct xfer {
    CURL *easy;
    struct curl_slist *hdrs;
    int cb_ref, body_ref;
    buf_t head, body;
    size_t max_response;
    int too_big; /* the response went over max_response (or the header limit) */
    char errbuf[CURL_ERROR_SIZE];
    struct xfer *next, *prev;
} xfer_t;

static struct {
    CURLM *multi; /* NULL until the first request (and after close_all) */
    uv_loop_t *loop;
    lua_State *L; /* the main state (luv_state) */
    uv_timer_t timer;
    sock_t *socks;
    xfer_t *xfers;
    int n_xfers, n_polls, timer_open;
} g;

/* ---- small helpers ------------------------------------------------------------------ */

static int buf_add(buf_t *b, const char *p, size_t n, size_t limit) {
    if (b->len + n > limit) return -1;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n)
            cap *= 2;
        if (cap > limit) cap = limit;
        char *q = realloc(b->p, cap);
        if (!q) return -1;
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
    return 0;
}

static void buf_free(buf_t *b) {
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

static const char *class_of(CURLcode rc, const xfer_t *x) {
    if (x->too_big) return "protocol";
    switch (rc) {
    case CURLE_OPERATION_TIMEDOUT:
        return "timeout";
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_HTTP3:
    case CURLE_QUIC_CONNECT_ERROR:
        return "network";
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_BAD_CONTENT_ENCODING:
    case CURLE_FILESIZE_EXCEEDED:
    case CURLE_TOO_MANY_REDIRECTS:
        return "protocol";
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
        return "tls";
    default:
        return "client";
    }
}

static const char *code_of(const char *cls) {
    if (strcmp(cls, "network") == 0) return "Network";
    if (strcmp(cls, "timeout") == 0) return "Timeout";
    if (strcmp(cls, "protocol") == 0) return "Protocol";
    if (strcmp(cls, "tls") == 0) return "Tls";
    return "Client";
}

/* ---- references: in flight keeps the loop alive, idle does not ---------------------- */

static void update_refs(void) {
    int active = g.n_xfers > 0;
    if (g.timer_open) {
        if (active)
            uv_ref((uv_handle_t *)&g.timer);
        else
            uv_unref((uv_handle_t *)&g.timer);
    }
    for (sock_t *k = g.socks; k; k = k->next) {
        if (!k->poll) continue;
        if (active)
            uv_ref((uv_handle_t *)k->poll);
        else
            uv_unref((uv_handle_t *)k->poll);
    }
}

/* ---- socket watchers ---------------------------------------------------------------- */

static void on_poll_closed(uv_handle_t *h) {
    free(h);
    g.n_polls--;
}

static void poll_close(sock_t *k) {
    if (!k->poll) return;
    k->poll->data = NULL;
    uv_close((uv_handle_t *)k->poll, on_poll_closed);
    k->poll = NULL;
}

static void sock_free(sock_t *k) {
    poll_close(k);
    if (k->next) k->next->prev = k->prev;
    if (k->prev)
        k->prev->next = k->next;
    else
        g.socks = k->next;
    free(k);
}

static void check_done(void);

static void on_poll(uv_poll_t *p, int status, int events) {
    sock_t *k = p->data;
    if (!k || !g.multi) return;
    int flags = 0;
    if (status < 0) {
        /* POLLERR (libuv then stops the watcher). ERR alone makes libcurl fail the
         * transfer without reading: a server that answered early and closed (a 413
         * before the body was sent) would lose its answer. With the directions it
         * watched, libcurl reads what is there and finds the error itself. */
        flags = CURL_CSELECT_ERR;
        if (k->events & UV_READABLE) flags |= CURL_CSELECT_IN;
        if (k->events & UV_WRITABLE) flags |= CURL_CSELECT_OUT;
    } else {
        if (events & UV_READABLE) flags |= CURL_CSELECT_IN;
        if (events & UV_WRITABLE) flags |= CURL_CSELECT_OUT;
    }
    int running = 0;
    curl_multi_socket_action(g.multi, k->fd, flags, &running); /* may free k */
    if (status < 0) { /* still wanted: watch again (the handle is ours until closed) */
        for (sock_t *o = g.socks; o; o = o->next)
            if (o->poll == p) uv_poll_start(p, o->events, on_poll);
    }
    check_done();
}

/* CURLMOPT_SOCKETFUNCTION. A new uv_poll_t at every change (see the header). */
static int on_socket(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp) {
    (void)easy;
    (void)userp;
    sock_t *k = socketp;
    if (what == CURL_POLL_REMOVE) {
        if (k) {
            curl_multi_assign(g.multi, s, NULL);
            sock_free(k);
        }
        return 0;
    }
    if (!k) {
        k = calloc(1, sizeof *k);
        if (!k) return -1;
        k->fd = s;
        k->next = g.socks;
        if (g.socks) g.socks->prev = k;
        g.socks = k;
        curl_multi_assign(g.multi, s, k);
    }
    poll_close(k);
    k->fd = s;
    /* Another entry on the same number is stale (libcurl closed that socket without
     * telling us): it must not keep watching, and libuv allows one watcher per fd. */
    for (sock_t *o = g.socks; o; o = o->next)
        if (o != k && o->fd == s) {
            poll_close(o);
            o->fd = CURL_SOCKET_BAD;
        }
    uv_poll_t *p = malloc(sizeof *p);
    if (!p) return -1;
    if (uv_poll_init_socket(g.loop, p, s) != 0) {
        free(p);
        return -1;
    }
    g.n_polls++;
    p->data = k;
    k->poll = p;
    int events = 0;
    if (what == CURL_POLL_IN || what == CURL_POLL_INOUT) events |= UV_READABLE;
    if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT) events |= UV_WRITABLE;
    k->events = events;
    if (uv_poll_start(p, events, on_poll) != 0) return -1;
    if (g.n_xfers == 0) uv_unref((uv_handle_t *)p);
    return 0;
}

/* CURLOPT_CLOSESOCKETFUNCTION: stop watching before the descriptor number is free. */
static int on_close_socket(void *clientp, curl_socket_t s) {
    (void)clientp;
    for (sock_t *k = g.socks; k; k = k->next)
        if (k->fd == s) {
            poll_close(k);
            k->fd = CURL_SOCKET_BAD;
        }
    return close(s);
}

/* ---- curl's timer ------------------------------------------------------------------- */

static void on_timer(uv_timer_t *t) {
    (void)t;
    if (!g.multi) return;
    int running = 0;
    curl_multi_socket_action(g.multi, CURL_SOCKET_TIMEOUT, 0, &running);
    check_done();
}

/* CURLMOPT_TIMERFUNCTION: never calls back into libcurl from here (libcurl forbids it);
 * a 0 ms timeout runs on the next loop iteration. */
static int on_curl_timer(CURLM *multi, long timeout_ms, void *userp) {
    (void)multi;
    (void)userp;
    if (!g.timer_open) return 0;
    if (timeout_ms < 0)
        uv_timer_stop(&g.timer);
    else {
        /* From now, not the loop's cached time (httpd.c's arm_head_deadline): after a long
         * turn it fired early. Harmless here, libcurl keeps its own clock and only asks
         * again, but each such fire was a wasted turn. */
        uv_update_time(g.timer.loop);
        uv_timer_start(&g.timer, on_timer, (uint64_t)timeout_ms, 0);
    }
    return 0;
}

/* ---- transfers ---------------------------------------------------------------------- */

static size_t on_header(char *p, size_t size, size_t n, void *ud) {
    xfer_t *x = ud;
    size_t len = size * n;
    /* A new status line starts a new header block (after a 1xx, or a redirect): keep the
     * final response's headers only. */
    if (len >= 5 && memcmp(p, "HTTP/", 5) == 0) x->head.len = 0;
    if (buf_add(&x->head, p, len, MAX_HEADER_BYTES) != 0) {
        x->too_big = 1;
        return 0;
    }
    return len;
}

static size_t on_write(char *p, size_t size, size_t n, void *ud) {
    xfer_t *x = ud;
    size_t len = size * n;
    if (buf_add(&x->body, p, len, x->max_response) != 0) {
        x->too_big = 1;
        return 0; /* CURLE_WRITE_ERROR */
    }
    return len;
}

static void xfer_unlink(xfer_t *x) {
    if (x->next) x->next->prev = x->prev;
    if (x->prev)
        x->prev->next = x->next;
    else
        g.xfers = x->next;
    x->next = x->prev = NULL;
    g.n_xfers--;
}

/* Frees the transfer; the Lua references are dropped (L is still open). */
static void xfer_free(lua_State *L, xfer_t *x) {
    if (x->easy) curl_easy_cleanup(x->easy);
    curl_slist_free_all(x->hdrs);
    buf_free(&x->head);
    buf_free(&x->body);
    ra_glue_unref(L, &x->cb_ref);
    ra_glue_unref(L, &x->body_ref);
    free(x);
}

/* Pushes the header block as a table: lower-case name -> value (trimmed), repeated
 * headers joined with ", " (RFC 9110 5.3). The status line and folded lines are skipped. */
static void push_headers(lua_State *L, const buf_t *b) {
    lua_newtable(L);
    const char *p = b->p, *end = b->p + b->len;
    while (p && p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        const char *line_end = eol ? eol : end;
        const char *le = line_end;
        if (le > p && le[-1] == '\r') le--;
        const char *colon = memchr(p, ':', (size_t)(le - p));
        if (colon && colon > p && *p != ' ' && *p != '\t' && memcmp(p, "HTTP/", 5) != 0) {
            luaL_Buffer nb;
            luaL_buffinit(L, &nb);
            for (const char *c = p; c < colon; c++)
                luaL_addchar(&nb, (*c >= 'A' && *c <= 'Z') ? (char)(*c + 32) : *c);
            luaL_pushresult(&nb);
            const char *v = colon + 1;
            while (v < le && (*v == ' ' || *v == '\t'))
                v++;
            const char *ve = le;
            while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            lua_pushvalue(L, -1);
            lua_rawget(L, -3);
            if (lua_isstring(L, -1)) {
                lua_pushliteral(L, ", ");
                lua_pushlstring(L, v, (size_t)(ve - v));
                lua_concat(L, 3);
            } else {
                lua_pop(L, 1);
                lua_pushlstring(L, v, (size_t)(ve - v));
            }
            lua_rawset(L, -3);
        }
        p = eol ? eol + 1 : end;
    }
}

/* Delivers the answer of a finished transfer (already removed from the multi). */
static void finish(xfer_t *x, CURLcode rc) {
    lua_State *L = g.L;
    xfer_unlink(x);
    update_refs();
    if (!ra_glue_push_ref(L, x->cb_ref, 8)) { /* cannot happen in practice: dropped */
        xfer_free(L, x);
        return;
    }
    int nargs;
    if (rc == CURLE_OK) {
        long status = 0;
        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
        lua_pushinteger(L, status);
        push_headers(L, &x->head);
        lua_pushlstring(L, x->body.p ? x->body.p : "", x->body.len);
        nargs = 3;
    } else {
        const char *cls = class_of(rc, x);
        lua_pushnil(L);
        if (x->too_big)
            lua_pushfstring(L,
                            "Protocol: the response is over its limit (%d bytes of body, "
                            "%d of headers)",
                            (int)x->max_response, (int)MAX_HEADER_BYTES);
        else
            lua_pushfstring(L, "%s: %s", code_of(cls),
                            x->errbuf[0] ? x->errbuf : curl_easy_strerror(rc));
        lua_pushstring(L, cls);
        nargs = 3;
    }
    xfer_free(L, x); /* the callback is on the stack: unref'ing it is safe */
    ra_glue_call(L, nargs);
}

static void check_done(void) {
    CURLMsg *msg;
    int left;
    while (g.multi && (msg = curl_multi_info_read(g.multi, &left))) {
        if (msg->msg != CURLMSG_DONE) continue;
        CURL *easy = msg->easy_handle;
        CURLcode rc = msg->data.result;
        char *priv = NULL;
        curl_easy_getinfo(easy, CURLINFO_PRIVATE, &priv);
        xfer_t *x = (xfer_t *)(void *)priv;
        curl_multi_remove_handle(g.multi, easy);
        if (x) finish(x, rc);
    }
}

/* ---- setup -------------------------------------------------------------------------- */

static int ensure_multi(lua_State *L) {
    if (g.multi) return 1;
    static int global_done;
    if (!global_done) {
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return 0;
        global_done = 1;
    }
    g.multi = curl_multi_init();
    if (!g.multi) return 0;
    g.loop = luv_loop(L);
    g.L = luv_state(L);
    uv_timer_init(g.loop, &g.timer);
    uv_unref((uv_handle_t *)&g.timer);
    g.timer_open = 1;
    curl_multi_setopt(g.multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(g.multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
    curl_multi_setopt(g.multi, CURLMOPT_MAXCONNECTS, (long)MAX_CACHED_CONNS);
    return 1;
}

/* opts[name]: nil -> dflt (0: not set), else an integer number of ms in 1..MAX. */
static unsigned opt_ms(lua_State *L, const char *name, unsigned dflt) {
    lua_getfield(L, 1, name);
    unsigned ms = dflt;
    if (!lua_isnil(L, -1)) {
        if (lua_type(L, -1) != LUA_TNUMBER)
            luaL_error(L, "ron.base.net.http_client_c: %s must be a number", name);
        lua_Number n = lua_tonumber(L, -1);
        if (!(n >= 1 && n <= MAX_TIMEOUT_MS))
            luaL_error(L, "ron.base.net.http_client_c: %s must be in 1..%u", name, MAX_TIMEOUT_MS);
        ms = (unsigned)n;
    }
    lua_pop(L, 1);
    return ms;
}

/* Checks opts.headers (a table of name -> value) and builds the libcurl list. Raises on
 * misuse (after freeing what it built). has_ctype: Content-Type was given. */
static struct curl_slist *build_headers(lua_State *L, int *has_ctype) {
    struct curl_slist *list = NULL;
    *has_ctype = 0;
    lua_getfield(L, 1, "headers");
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return NULL;
    }
    if (!lua_istable(L, -1)) luaL_error(L, "ron.base.net.http_client_c: headers must be a table");
    int t = lua_gettop(L);
    const char *bad = NULL;
    lua_pushnil(L);
    while (!bad && lua_next(L, t)) {
        size_t nlen, vlen;
        if (lua_type(L, -2) != LUA_TSTRING || !lua_isstring(L, -1)) {
            bad = "headers: names and values must be strings";
        } else {
            const char *name = lua_tolstring(L, -2, &nlen);
            const char *value = lua_tolstring(L, -1, &vlen); /* numbers: converted here */
            if (!ra_glue_is_token(name, nlen)) {
                bad = "headers: a name is not an HTTP token";
            } else if (!ra_glue_is_field_value(value, vlen)) {
                bad = "headers: CR, LF or NUL in a value";
            } else {
                if (nlen == 12 && strncasecmp(name, "content-type", 12) == 0) *has_ctype = 1;
                lua_pushfstring(L, vlen ? "%s: %s" : "%s;", name, value);
                struct curl_slist *n = curl_slist_append(list, lua_tostring(L, -1));
                lua_pop(L, 1);
                if (!n)
                    bad = "out of memory";
                else
                    list = n;
            }
        }
        lua_pop(L, 1);
    }
    if (bad) {
        curl_slist_free_all(list);
        luaL_error(L, "ron.base.net.http_client_c: %s", bad);
    }
    lua_pop(L, 1);
    return list;
}

static struct curl_slist *slist_add(struct curl_slist *list, const char *s, int *oom) {
    struct curl_slist *n = curl_slist_append(list, s);
    if (!n) {
        *oom = 1;
        return list;
    }
    return n;
}

/* The checked options of one request: stack indexes into l_request's frame, which keeps
 * the strings alive until libcurl has copied them (the body: until the transfer ends). */
typedef struct {
    int url_idx, method_idx, body_idx, proxy_idx;
    const char *method;
    size_t blen, max_response;
    int has_body, is_get, is_head;
    unsigned connect_ms, total_ms, read_ms;
} req_opts_t;

static void check_url(lua_State *L, req_opts_t *r) {
    lua_getfield(L, 1, "url");
    size_t ulen;
    const char *url = lua_tolstring(L, -1, &ulen);
    if (!url || lua_type(L, -1) != LUA_TSTRING)
        luaL_error(L, "ron.base.net.http_client_c: url must be a string");
    if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)
        luaL_error(L, "ron.base.net.http_client_c: url must start with http:// or https://");
    if (!ra_glue_is_field_value(url, ulen) || strchr(url, ' '))
        luaL_error(L, "ron.base.net.http_client_c: url contains a space, CR, LF or NUL");
    r->url_idx = lua_gettop(L);
}

static void check_method_body(lua_State *L, req_opts_t *r) {
    lua_getfield(L, 1, "method");
    r->method = "GET";
    if (!lua_isnil(L, -1)) {
        size_t mlen;
        if (lua_type(L, -1) != LUA_TSTRING)
            luaL_error(L, "ron.base.net.http_client_c: method must be a string");
        r->method = lua_tolstring(L, -1, &mlen);
        if (!ra_glue_is_token(r->method, mlen) || mlen > 16)
            luaL_error(L, "ron.base.net.http_client_c: method is not an HTTP token");
    }
    r->method_idx = lua_gettop(L);
    lua_getfield(L, 1, "body");
    r->blen = 0;
    r->has_body = !lua_isnil(L, -1);
    if (r->has_body) {
        if (lua_type(L, -1) != LUA_TSTRING)
            luaL_error(L, "ron.base.net.http_client_c: body must be a string");
        lua_tolstring(L, -1, &r->blen);
        if (r->blen > MAX_BODY_BYTES)
            luaL_error(L, "ron.base.net.http_client_c: body is over %d bytes", (int)MAX_BODY_BYTES);
    }
    r->body_idx = lua_gettop(L);
    r->is_get = strcmp(r->method, "GET") == 0;
    r->is_head = strcmp(r->method, "HEAD") == 0;
    if (r->has_body && (r->is_get || r->is_head))
        luaL_error(L, "ron.base.net.http_client_c: a %s request has no body", r->method);
}

/* Everything of opts but the headers; raises on misuse (luaL_error does not return). */
static void check_request(lua_State *L, req_opts_t *r) {
    check_url(L, r);
    check_method_body(L, r);
    r->connect_ms = opt_ms(L, "connect_timeout_ms", DEFAULT_CONNECT_TIMEOUT_MS);
    r->total_ms = opt_ms(L, "timeout_ms", DEFAULT_TIMEOUT_MS);
    r->read_ms = opt_ms(L, "read_timeout_ms", 0);
    r->max_response = DEFAULT_MAX_RESPONSE;
    lua_getfield(L, 1, "max_response");
    if (!lua_isnil(L, -1)) {
        lua_Number n = lua_tonumber(L, -1);
        if (lua_type(L, -1) != LUA_TNUMBER || !(n >= 0 && n <= MAX_RESPONSE_LIMIT))
            luaL_error(L, "ron.base.net.http_client_c: max_response must be in 0..%d",
                       (int)MAX_RESPONSE_LIMIT);
        r->max_response = (size_t)n;
    }
    lua_pop(L, 1);
    lua_getfield(L, 1, "proxy");
    if (!lua_isnil(L, -1) && lua_type(L, -1) != LUA_TSTRING)
        luaL_error(L, "ron.base.net.http_client_c: proxy must be a string");
    r->proxy_idx = lua_gettop(L);
}

static CURLcode set_options(lua_State *L, xfer_t *x, const req_opts_t *r) {
    CURL *e = x->easy;
    CURLcode rc = CURLE_OK;
#define SET(opt, val)                                                                              \
    do {                                                                                           \
        if (rc == CURLE_OK) rc = curl_easy_setopt(e, opt, val);                                    \
    } while (0)
    SET(CURLOPT_URL, lua_tostring(L, r->url_idx)); /* libcurl copies strings */
    SET(CURLOPT_PROTOCOLS_STR, "http,https");
    SET(CURLOPT_NOSIGNAL, 1L);
    SET(CURLOPT_PRIVATE, (void *)x);
    SET(CURLOPT_ERRORBUFFER, x->errbuf);
    SET(CURLOPT_HEADERFUNCTION, on_header);
    SET(CURLOPT_HEADERDATA, (void *)x);
    SET(CURLOPT_WRITEFUNCTION, on_write);
    SET(CURLOPT_WRITEDATA, (void *)x);
    SET(CURLOPT_CLOSESOCKETFUNCTION, on_close_socket);
    SET(CURLOPT_CLOSESOCKETDATA, (void *)NULL);
    SET(CURLOPT_CONNECTTIMEOUT_MS, (long)r->connect_ms);
    SET(CURLOPT_TIMEOUT_MS, (long)r->total_ms);
    if (r->read_ms) {
        SET(CURLOPT_LOW_SPEED_LIMIT, 1L);
        SET(CURLOPT_LOW_SPEED_TIME, (long)((r->read_ms + 999) / 1000));
    }
    SET(CURLOPT_PROXY, lua_isnil(L, r->proxy_idx) ? "" : lua_tostring(L, r->proxy_idx));
    SET(CURLOPT_HTTPHEADER, x->hdrs);
    if (r->is_get) {
        SET(CURLOPT_HTTPGET, 1L);
    } else if (r->is_head) {
        SET(CURLOPT_NOBODY, 1L);
    } else {
        /* The body is read from the Lua string in place (kept by body_ref). */
        const char *body = r->has_body ? lua_tostring(L, r->body_idx) : "";
        SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->blen);
        SET(CURLOPT_POSTFIELDS, body);
        SET(CURLOPT_CUSTOMREQUEST, lua_tostring(L, r->method_idx));
    }
#undef SET
    return rc;
}

/* A refusal past the checks: nil, message (the transfer, if any, freed). */
static int refuse(lua_State *L, xfer_t *x, const char *fmt, const char *what) {
    if (x) xfer_free(L, x);
    lua_pushnil(L);
    lua_pushfstring(L, fmt, what);
    return 2;
}

/* curl.request(opts, cb) -> true | nil, err */
static int l_request(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_checktype(L, 2, LUA_TFUNCTION);
    lua_settop(L, 2);
    req_opts_t r;
    check_request(L, &r);
    int has_ctype;
    struct curl_slist *hdrs = build_headers(L, &has_ctype); /* raises on misuse */

    /* Past the checks: no raising below without freeing (only refusals). */
    if (g.n_xfers >= MAX_TRANSFERS) {
        curl_slist_free_all(hdrs);
        lua_pushnil(L);
        lua_pushfstring(L, "Busy: %d requests in flight", g.n_xfers);
        return 2;
    }
    int oom = 0;
    hdrs = slist_add(hdrs, "Expect:", &oom); /* no 100-continue round trip */
    if (r.has_body && !has_ctype)
        hdrs = slist_add(hdrs, "Content-Type: application/octet-stream", &oom);
    xfer_t *x = oom ? NULL : calloc(1, sizeof *x);
    if (!x || !ensure_multi(L)) {
        curl_slist_free_all(hdrs);
        free(x);
        return refuse(L, NULL, "%s", "Client: out of memory (or libcurl failed to initialise)");
    }
    x->hdrs = hdrs;
    x->cb_ref = x->body_ref = LUA_NOREF;
    x->max_response = r.max_response;
    x->easy = curl_easy_init();
    if (!x->easy) return refuse(L, x, "%s", "Client: out of memory (curl_easy_init)");
    CURLcode rc = set_options(L, x, &r);
    if (rc != CURLE_OK) return refuse(L, x, "Client: %s", curl_easy_strerror(rc));
    x->cb_ref = ra_glue_ref(L, 2);
    if (r.has_body) x->body_ref = ra_glue_ref(L, r.body_idx);
    CURLMcode mrc = curl_multi_add_handle(g.multi, x->easy); /* starts curl's timer: async */
    if (mrc != CURLM_OK) return refuse(L, x, "Client: %s", curl_multi_strerror(mrc));
    x->next = g.xfers;
    if (g.xfers) g.xfers->prev = x;
    g.xfers = x;
    g.n_xfers++;
    update_refs();
    lua_pushboolean(L, 1);
    return 1;
}

static int l_live(lua_State *L) {
    lua_pushinteger(L, g.n_xfers);
    lua_pushinteger(L, g.n_polls);
    return 2;
}

static int l_version(lua_State *L) {
    lua_pushstring(L, curl_version());
    return 1;
}

static int luaopen_curl(lua_State *L) {
    static const luaL_Reg funcs[] = {
        {"request", l_request},
        {"live", l_live},
        {"version", l_version},
        {NULL, NULL},
    };
    return ra_glue_module(L, funcs);
}

static void on_timer_closed(uv_handle_t *h) {
    (void)h;
    g.timer_open = 0;
}

static bool closing(void *ud) {
    (void)ud;
    return g.n_polls || g.timer_open;
}

static void close_all(uv_loop_t *loop) {
    if (!g.multi) return;
    while (g.xfers) { /* no callback: the loop is ending */
        xfer_t *x = g.xfers;
        curl_multi_remove_handle(g.multi, x->easy);
        xfer_unlink(x);
        xfer_free(g.L, x);
    }
    CURLM *m = g.multi;
    curl_multi_cleanup(m); /* closes the cached connections (on_close_socket) */
    g.multi = NULL;
    while (g.socks)
        sock_free(g.socks);
    uv_timer_stop(&g.timer);
    uv_close((uv_handle_t *)&g.timer, on_timer_closed);
    ra_glue_drain(loop, closing, NULL, "curl", "handles");
}

const ra_host_module_t ra_host_curl = {"ron.base.net.http_client_c", luaopen_curl, close_all};
