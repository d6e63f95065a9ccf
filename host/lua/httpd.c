/* ron.base.net.http_server: a small HTTP/1.1 server on the host's one libuv loop, built on
 * H2O's library (libh2o, libuv flavour). The daemon's HTTP surface (/metrics, /healthz,
 * /readyz: lua/ron/node/http.lua) sits on top of it; this file knows nothing of
 * routes.
 *
 * Lua API (package.preload["ron.base.net.http_server"], registered by run.c):
 *
 *   local httpd = require "ron.base.net.http_server"
 *   local srv, err = httpd.listen {
 *       host = "127.0.0.1",   -- numeric IPv4 or IPv6 address (default 127.0.0.1)
 *       port = 9464,          -- 0 picks a free port (default 9464)
 *       max_body = 1048576,   -- request bodies above it get 413, never buffered whole; the
 *                             -- same limit for Content-Length and chunked bodies (a
 *                             -- Content-Length of max_body + 1 is read, then refused)
 *       max_conns = 256,      -- connections at once (the reserve included), 1..16384
 *       max_conns_per_peer = 32, -- one peer address's connections outside the reserve
 *       reserved_conns = 8,   -- of max_conns, for loopback peers only (health probes)
 *       header_timeout_ms = 10000, -- a head (or an idle keep-alive wait) longer: closed
 *       body_timeout_ms = 30000,   -- the whole request within header + body timeout
 *       max_header_bytes = 16384,  -- a request head (request line and headers) above it:
 *                                  -- 431, before H2O buffers it (1024..262144)
 *       refusal = function(path, status, detail, header) ... end, -- optional, below
 *       handler = function(req) ... end,
 *   }
 *   The first look (issue 24 §3): before H2O parses a head, the server checks it by H2O's
 *   own rules (host/lua/http_head.h): a head H2O would refuse is refused here, 400, naming
 *   the header whose value holds a control byte; a head over max_header_bytes or with more
 *   than 100 header lines is 431; a Content-Length over max_body is 413 (before the body).
 *   Then, as for every answer the server makes before a handler (the 413 of a body over
 *   max_body, the framing 400 below), refusal(path, status, detail, header) shapes it: path
 *   is the request's path (without the query; "" when the request line is not readable),
 *   header the lower-case name of the header at fault or nil; it returns status (400..599),
 *   body [, content_type [, headers]] (a route's problem+json), or nothing for the default
 *   text/plain. The connection is closed after such an answer. A request sent before the
 *   previous answer (pipelined) is parsed by H2O alone: its refusals stay H2O's text.
 *   Admission (issue 14 item 6): a connection gets a general slot while the general pool
 *   (max_conns - reserved_conns) has room and its peer holds fewer than max_conns_per_peer
 *   of them; otherwise a loopback peer gets a reserved slot (evicting, when the reserve is
 *   full, the oldest reserved connection without a request in flight), anyone else is
 *   closed at accept (counted, logged sampled). A reserved connection serves one request
 *   (Connection: close) and its requests carry req.reserved = true.
 *   srv:stats()   -> { general, reserved (open now), refused_per_peer, refused_full,
 *                    evicted, header_timeouts, max_conns, reserved_conns }
 *   srv:port()    -> the bound port
 *   srv:early_rejects() -> { too_large = n, other = n }: responses sent before any handler
 *                    saw the request: 413 for a body over max_body (too_large), any other
 *                    4xx/5xx (a malformed request: h2o's own, counted by a logger on the
 *                    host's fallback path where h2o binds them, this file's framing
 *                    checks: two different Content-Length headers, or Content-Length
 *                    with Transfer-Encoding, are a 400 that closes the connection, and
 *                    the first look's refusals: 400, 413, 431).
 *   on_early = function(status, method, path) (optional listen option): called on the
 *                    loop for each of those responses, with the request's method and path
 *                    (without the query; "" when the request line is not readable), so the
 *                    caller attributes the refusal to the route that was asked; an error in
 *                    it is logged, never raised. It sees the status the server chose, before
 *                    refusal() shapes the answer.
 *   srv:close()   -> stops listening, answers 503 to requests still waiting for an async
 *                    response, drops the connections; idempotent. An open server is
 *                    anchored in the registry (dropping the Lua reference does not close
 *                    it); every server still open when the host closes the loop is closed
 *                    then (close_all).
 *
 *   req.method, req.path (normalized, without the query), req.query (string or nil),
 *   req.headers (lower-case name -> value; repeated headers joined with ", "), req.body
 *   (string, possibly empty), req.peer (the client's numeric address, "127.0.0.1", "::1";
 *   nil if the socket cannot tell), req.reserved (true on a loopback-reserve connection).
 *   The handler runs synchronously on the loop thread, from a loop callback (never inside
 *   a task's coroutine), and either returns status, body [, content_type [, headers]] or
 *   returns nothing and later calls
 *   req:respond(status, body [, content_type [, headers]]) -> true, or false when the
 *                    client or the server went away meanwhile (a safe no-op).
 *   req:alive()   -> false once the request is gone (client reset the connection, server
 *                    closed). A client that half-closes its socket (shutdown(SHUT_WR)
 *                    after sending, `nc -N`) is not gone: it still reads, and gets its
 *                    answer (issue 14 item 7).
 *   A handler error is logged on stderr and answered 500; the server keeps serving.
 *   A request the handler dropped (never answered, garbage-collected) is answered 500.
 *   Errors: misuse raises; a failed listen returns nil, "httpd: cannot listen on H:P: ..."
 *
 * Lifetimes:
 *   - The listener and the connections are unreferenced (uv_unref): an HTTP server never
 *     keeps the process alive on its own; the script's tasks do. A response being written
 *     is a write request, which does keep the loop running until it is done.
 *   - h2o_context_init creates a uv_async (its inter-thread queue) and timers; they are
 *     unreferenced too, for the same reason.
 *   - A request's Lua object holds a pointer to the h2o request only while a "lifeline"
 *     allocated in the request's pool (h2o_mem_alloc_shared) is alive: its dispose
 *     callback clears the pointer when h2o frees the request (client gone, response
 *     done), so a late req:respond never touches freed memory.
 *   - Closing: the listener is closed, every connection's socket is shut down (h2o then
 *     sees EOF or EPIPE and closes it through its own paths), and once the last one is
 *     gone the h2o context is disposed. Its timers are embedded in the server struct and
 *     closed with a NULL callback, so the struct is freed two loop turns later (two
 *     chained close callbacks of our own), when libuv is done with every embedded handle.
 *   - close_all() (run.c calls it through ra_host_modules_close_all before it closes the
 *     loop) closes every server still open and drives the loop until they are freed: luv's
 *     uv.walk, which the host then runs, asserts on any handle that is not luv's.
 *
 * SIGPIPE is ignored from the first listen on: writing a response to a client that went
 * away must be an EPIPE error, not the end of the process. */
#include "host_name.h"
#include "lua/glue.h"
#include "lua/http_head.h"
#include "lua/modules.h"

#include <h2o.h>

#include <errno.h>
#include <lauxlib.h>
#include <lua.h>
#include <luv/luv.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <uv.h>

#define SERVER_MT "ron.base.net.http_server.server"
#define REQ_MT "ron.base.net.http_server.req"
/* Connection limits and read deadlines (issue 14 item 6): defaults of httpd.listen. */
#define DEF_MAX_CONNS 256         /* connections per server, the reserve included */
#define DEF_MAX_CONNS_PER_PEER 32 /* a peer's connections outside the reserve */
#define DEF_RESERVED_CONNS 8      /* of max_conns, kept for loopback peers (health probes) */
#define DEF_HEADER_TIMEOUT_MS 10000
#define DEF_BODY_TIMEOUT_MS 30000
#define MAX_CONNS_LIMIT 16384 /* admission scans the connections: keep it small */
#define REFUSAL_LOG_EVERY 1000
#define MAX_BODY_LIMIT (64u << 20) /* the largest max_body a caller may ask for */
#define CLOSE_ALL_DEADLINE_MS 2000 /* close_all gives up (and leaks) after it */
#define DEF_MAX_HEADER_BYTES 16384 /* a request head (issue 24 §3): above it, 431 */
#define MAX_HEADERS 100            /* header lines: H2O's H2O_MAX_HEADERS (more: its 400) */
#define REFUSED_LINGER_MS 2000     /* a refused connection is read (and dropped) this long */
#define REFUSAL_MAX 8192           /* bytes of a first-look refusal (else the default text) */

typedef struct server server_t;
typedef struct req_ud req_ud_t;

/* Allocated in the h2o request's pool; dispose runs when h2o frees the request. */
typedef struct lifeline {
    req_ud_t *ud; /* the Lua object, NULL once it was garbage-collected */
    server_t *srv;
    h2o_req_t *req;
    int gone;            /* the peer reset the connection: every later answer is moot */
    h2o_linklist_t link; /* srv->reqs: requests alive */
} lifeline_t;

struct req_ud {
    lifeline_t *life; /* NULL once the request is gone */
    int responded;
};

/* Which pool a connection holds a slot of (issue 14 item 6). */
enum { POOL_NONE, POOL_GENERAL, POOL_RESERVED };

typedef struct conn {
    uv_tcp_t tcp; /* first: the close callback gets &tcp */
    server_t *srv;
    h2o_socket_t *sock;  /* h2o's socket; NULL once h2o disposed it */
    uv_timer_t deadline; /* the head deadline (header_timeout_ms) */
    int timer_live;      /* deadline initialized: closed before the struct is freed */
    int pool;            /* the slot it holds; POOL_NONE once released (closing, evicted) */
    int loopback;
    int inflight;           /* requests handed to on_req and not freed yet */
    int refused;            /* answered by the first look: what it sends is read and dropped */
    uv_read_cb h2o_read;    /* H2O's read callback, behind the first look's (on_read_first) */
    unsigned char peer[16]; /* the peer's address, IPv4 as ::ffff:a.b.c.d */
    h2o_linklist_t link;    /* srv->conns, oldest first */
} conn_t;

typedef struct {
    h2o_handler_t super;
    server_t *srv;
} handler_t;

enum { SRV_OPEN, SRV_CLOSING, SRV_DISPOSED };

struct server {
    uv_loop_t *loop;
    lua_State *L; /* the main state (luv_state): callbacks never run on a coroutine's */
    int handler_ref;
    int early_ref; /* on_early, or LUA_NOREF */
    int self_ref;  /* the Lua server object, anchored while open: GC never closes a live server */
    int state;
    int listener_closed;
    int port;
    uv_tcp_t listener;
    uv_check_t reap1, reap2; /* never started: closed in turn to free the struct late */
    h2o_globalconf_t conf;
    h2o_context_t ctx;
    h2o_accept_ctx_t accept_ctx;
    h2o_linklist_t conns;
    size_t nconns;                /* structs alive (closing ones included) */
    size_t n_general, n_reserved; /* slots held */
    size_t max_conns, max_per_peer, reserved;
    uint64_t header_timeout_ms;
    uint64_t refused_per_peer, refused_full, evicted, header_timeouts; /* srv:stats() */
    h2o_linklist_t reqs;
    uint64_t early_413, early_other; /* srv:early_rejects() */
    size_t max_body;
    size_t max_header_bytes;
    int refusal_ref;    /* refusal(path, status, detail, header), or LUA_NOREF */
    struct server **ud; /* the Lua userdata's slot, NULL once collected */
    server_t *next;     /* all servers not yet freed (one loop per process) */
};

static server_t *servers;

/* ---- helpers ------------------------------------------------------------------------ */

static int traceback(lua_State *L) {
    const char *msg = lua_tostring(L, 1);
    if (!msg) msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    luaL_traceback(L, L, msg, 1);
    return 1;
}

static void log_line(const char *what, const char *msg) {
    ra_glue_log("httpd", what, msg);
}

static const char *reason_of(int status) {
    static const struct {
        int status;
        const char *reason;
    } reasons[] = {
        {200, "OK"},
        {201, "Created"},
        {202, "Accepted"},
        {204, "No Content"},
        {301, "Moved Permanently"},
        {302, "Found"},
        {304, "Not Modified"},
        {400, "Bad Request"},
        {401, "Unauthorized"},
        {403, "Forbidden"},
        {404, "Not Found"},
        {405, "Method Not Allowed"},
        {409, "Conflict"},
        {413, "Payload Too Large"},
        {415, "Unsupported Media Type"},
        {422, "Unprocessable Entity"},
        {429, "Too Many Requests"},
        {431, "Request Header Fields Too Large"},
        {500, "Internal Server Error"},
        {502, "Bad Gateway"},
        {503, "Service Unavailable"},
        {504, "Gateway Timeout"},
    };
    for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
        if (reasons[i].status == status) return reasons[i].reason;
    return status < 300   ? "OK"
           : status < 400 ? "Redirect"
           : status < 500 ? "Client Error"
                          : "Server Error";
}

/* Sends a complete response; the request may be freed before this returns. */
static void send_response(h2o_req_t *req, int status, const char *body, size_t len,
                          const char *ctype) {
    req->res.status = status;
    req->res.reason = reason_of(status);
    req->res.content_length = len;
    h2o_iovec_t ct = h2o_strdup(&req->pool, ctype, SIZE_MAX);
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, ct.base, ct.len);
    h2o_send_inline(req, body, len);
}

/* ---- connections: slots, peers, the head deadline (issue 14 item 6) ------------------ */

static void on_sock_disposed(void *data);

/* The connection a request arrived on: h2o's socket carries it in on_close (which h2o
 * itself uses only for client sockets of its socket pool). */
static conn_t *conn_of(h2o_req_t *req) {
    if (!req->conn->callbacks->get_socket) return NULL;
    h2o_socket_t *sock = req->conn->callbacks->get_socket(req->conn);
    if (!sock || sock->on_close.cb != on_sock_disposed) return NULL;
    return sock->on_close.data;
}

static void release_slot(conn_t *c) {
    if (c->pool == POOL_GENERAL) c->srv->n_general--;
    if (c->pool == POOL_RESERVED) c->srv->n_reserved--;
    c->pool = POOL_NONE;
}

/* Ends a connection through h2o's own paths: it reads EOF and closes (as in close). */
static void drop_conn(conn_t *c) {
    release_slot(c);
    if (c->timer_live) uv_timer_stop(&c->deadline);
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0) shutdown(fd, SHUT_RDWR);
}

/* h2o disposes its socket (the connection is closing): no more deadline, the slot is free. */
static void on_sock_disposed(void *data) {
    conn_t *c = data;
    c->sock = NULL;
    release_slot(c);
    if (c->timer_live) uv_timer_stop(&c->deadline);
}

/* The head has arrived when the input holds an empty line (h2o consumes a request's bytes
 * only after its response: the buffer starts with the current request). */
static int head_complete(const h2o_socket_t *sock) {
    const char *b = sock->input->bytes;
    size_t n = sock->input->size;
    for (size_t i = 0; i + 1 < n; i++)
        if (b[i] == '\n' &&
            (b[i + 1] == '\n' || (i + 2 < n && b[i + 1] == '\r' && b[i + 2] == '\n')))
            return 1;
    return 0;
}

/* header_timeout_ms after the connection opened or its last request was freed: a head
 * not complete by then (idle, or dripping) ends the connection. Once the head is there,
 * h2o's request deadline (header + body timeouts, from the same start) bounds the body. */
static void on_head_deadline(uv_timer_t *t) {
    conn_t *c = t->data;
    if (c->refused && c->pool != POOL_NONE) { /* its linger is over */
        drop_conn(c);
        return;
    }
    if (!c->sock || c->inflight > 0 || c->pool == POOL_NONE) return;
    if (c->sock->input && head_complete(c->sock)) return;
    c->srv->header_timeouts++;
    drop_conn(c);
}

static void arm_head_deadline(conn_t *c) {
    if (c->timer_live && c->sock && c->pool != POOL_NONE) {
        /* From now, not from the loop's cached time, as old as the turn: after a handler
         * held the loop past header_timeout_ms, a deadline armed from it at the answer was
         * due at once and dropped a keep-alive connection before its next request (pq.c's
         * query timer had the same fault). A vDSO clock read per request. */
        uv_update_time(c->srv->loop);
        uv_timer_start(&c->deadline, on_head_deadline, c->srv->header_timeout_ms, 0);
    }
}

typedef struct {
    conn_t *c;
} tracker_t;

/* A request is freed (answered, or its connection closed): the wait for the next head
 * starts now, as h2o's own request deadline does. */
static void request_freed(void *p) {
    conn_t *c = ((tracker_t *)p)->c;
    if (--c->inflight == 0) arm_head_deadline(c);
}

static void track_request(conn_t *c, h2o_req_t *req) {
    tracker_t *t = h2o_mem_alloc_shared(&req->pool, sizeof *t, request_freed);
    t->c = c;
    c->inflight++;
    if (c->timer_live) uv_timer_stop(&c->deadline);
}

static int peer_of(uv_tcp_t *tcp, unsigned char out[16], int *loopback) {
    struct sockaddr_storage ss;
    int len = sizeof ss;
    if (uv_tcp_getpeername(tcp, (struct sockaddr *)&ss, &len) != 0) return -1;
    memset(out, 0, 16);
    if (ss.ss_family == AF_INET) {
        const unsigned char *a = (const unsigned char *)&((struct sockaddr_in *)&ss)->sin_addr;
        out[10] = out[11] = 0xff;
        memcpy(out + 12, a, 4);
    } else if (ss.ss_family == AF_INET6) {
        memcpy(out, &((struct sockaddr_in6 *)&ss)->sin6_addr, 16);
    } else {
        return -1;
    }
    static const unsigned char v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    static const unsigned char v6loop[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    *loopback = (memcmp(out, v4mapped, 12) == 0 && out[12] == 127) || memcmp(out, v6loop, 16) == 0;
    return 0;
}

static size_t peer_conns(server_t *srv, const unsigned char peer[16]) {
    size_t n = 0;
    for (h2o_linklist_t *l = srv->conns.next; l != &srv->conns; l = l->next) {
        conn_t *o = H2O_STRUCT_FROM_MEMBER(conn_t, link, l);
        if (o->pool == POOL_GENERAL && memcmp(o->peer, peer, 16) == 0) n++;
    }
    return n;
}

/* The reserve is full: the oldest reserved connection without a request in flight (idle or
 * dripping its head) makes room, so a loopback flood cannot hold the reserve either. */
static int evict_reserved(server_t *srv) {
    for (h2o_linklist_t *l = srv->conns.next; l != &srv->conns; l = l->next) {
        conn_t *o = H2O_STRUCT_FROM_MEMBER(conn_t, link, l);
        if (o->pool == POOL_RESERVED && o->inflight == 0) {
            srv->evicted++;
            drop_conn(o);
            return 1;
        }
    }
    return 0;
}

/* Admission of a new connection -> its pool, or POOL_NONE (refused; *why set). */
static int admit(server_t *srv, const conn_t *c, const char **why) {
    if (srv->n_general < srv->max_conns - srv->reserved &&
        peer_conns(srv, c->peer) < srv->max_per_peer)
        return POOL_GENERAL;
    if (c->loopback && srv->reserved > 0 &&
        (srv->n_reserved < srv->reserved || evict_reserved(srv)))
        return POOL_RESERVED;
    if (srv->n_general < srv->max_conns - srv->reserved) {
        srv->refused_per_peer++;
        *why = "per_peer";
    } else {
        srv->refused_full++;
        *why = "full";
    }
    return POOL_NONE;
}

/* ---- requests ----------------------------------------------------------------------- */

static void lifeline_dispose(void *p) {
    lifeline_t *life = p;
    h2o_linklist_unlink(&life->link);
    if (life->ud) life->ud->life = NULL;
}

/* h2o's HTTP/1 connection does not read while a request is being handled, so it cannot
 * notice a client that went away before an async answer: peek at the socket. An error
 * (ECONNRESET: the peer reset) means gone. EOF does not (issue 14 item 7): a peer that
 * half-closes after sending (shutdown(SHUT_WR), `nc -N`) still reads, and its records may
 * be applied already: it must get its answer, or a retry without Idempotency-Key counts
 * them twice. A peer that closed both ways looks the same from here; its answer is
 * written and fails, and h2o cleans up. EAGAIN (nothing to read) or bytes (a pipelined
 * request) mean still there. */
static int peer_gone(lifeline_t *life) {
    if (life->gone) return 1;
    h2o_req_t *req = life->req;
    if (!req->conn->callbacks->get_socket) return 0;
    h2o_socket_t *sock = req->conn->callbacks->get_socket(req->conn);
    int fd = sock ? h2o_socket_get_fd(sock) : -1;
    if (fd < 0) return 0;
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n >= 0) return 0;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
    /* Shut it down so the write of the answer fails at once and h2o closes the
     * connection (and frees the request) through its own error path. */
    life->gone = 1;
    shutdown(fd, SHUT_RDWR);
    return 1;
}

static void send_plain_once(req_ud_t *ud, int status, const char *body) {
    if (ud->responded || !ud->life) return;
    ud->responded = 1;
    send_response(ud->life->req, status, body, strlen(body), "text/plain; charset=utf-8");
}

/* req.peer: the client's numeric address (http.lua keeps /metrics for loopback peers). */
static void push_peer(lua_State *L, h2o_req_t *req) {
    struct sockaddr_storage ss;
    char ip[INET6_ADDRSTRLEN];
    if (!req->conn->callbacks->get_peername ||
        req->conn->callbacks->get_peername(req->conn, (struct sockaddr *)&ss) == 0)
        return;
    int rc = ss.ss_family == AF_INET    ? uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof ip)
             : ss.ss_family == AF_INET6 ? uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof ip)
                                        : -1;
    if (rc != 0) return;
    lua_pushstring(L, ip);
    lua_setfield(L, -2, "peer");
}

/* The Lua request: a userdata whose environment table holds the fields. */
static req_ud_t *push_req(lua_State *L, server_t *srv, h2o_req_t *req) {
    req_ud_t *ud = lua_newuserdata(L, sizeof *ud);
    ud->life = NULL;
    ud->responded = 0;
    luaL_getmetatable(L, REQ_MT);
    lua_setmetatable(L, -2);

    lua_createtable(L, 0, 5);
    lua_pushlstring(L, req->method.base, req->method.len);
    lua_setfield(L, -2, "method");
    lua_pushlstring(L, req->path_normalized.base, req->path_normalized.len);
    lua_setfield(L, -2, "path");
    if (req->query_at != SIZE_MAX && req->query_at + 1 <= req->path.len) {
        lua_pushlstring(L, req->path.base + req->query_at + 1, req->path.len - req->query_at - 1);
        lua_setfield(L, -2, "query");
    }
    lua_pushlstring(L, req->entity.base ? req->entity.base : "",
                    req->entity.base ? req->entity.len : 0);
    lua_setfield(L, -2, "body");
    lua_createtable(L, 0, (int)req->headers.size);
    for (size_t i = 0; i < req->headers.size; i++) {
        h2o_header_t *h = &req->headers.entries[i];
        luaL_Buffer b;
        luaL_buffinit(L, &b);
        for (size_t j = 0; j < h->name->len; j++) {
            char c = h->name->base[j];
            luaL_addchar(&b, (c >= 'A' && c <= 'Z') ? (char)(c + 32) : c);
        }
        luaL_pushresult(&b);
        lua_pushvalue(L, -1);
        lua_rawget(L, -3);
        if (lua_isstring(L, -1)) { /* repeated header: "a, b" (RFC 9110 5.3) */
            lua_pushliteral(L, ", ");
            lua_pushlstring(L, h->value.base, h->value.len);
            lua_concat(L, 3);
        } else {
            lua_pop(L, 1);
            lua_pushlstring(L, h->value.base, h->value.len);
        }
        lua_rawset(L, -3);
    }
    if (req->authority.len) { /* h2o keeps Host apart, as the request's authority */
        lua_pushlstring(L, req->authority.base, req->authority.len);
        lua_setfield(L, -2, "host");
    }
    lua_setfield(L, -2, "headers");
    push_peer(L, req);
    conn_t *conn = conn_of(req);
    if (conn && conn->pool == POOL_RESERVED) {
        lua_pushboolean(L, 1);
        lua_setfield(L, -2, "reserved");
    }
    lua_setfenv(L, -2);

    /* Only now, with every allocation that could raise done: link the lifeline. */
    lifeline_t *life = h2o_mem_alloc_shared(&req->pool, sizeof *life, lifeline_dispose);
    life->ud = ud;
    life->srv = srv;
    life->req = req;
    life->gone = 0;
    h2o_linklist_insert(&srv->reqs, &life->link);
    ud->life = life;
    return ud;
}

static void check_headers_arg(lua_State *L, int idx) {
    if (lua_isnoneornil(L, idx)) return;
    luaL_checktype(L, idx, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        size_t nlen, vlen;
        if (lua_type(L, -2) != LUA_TSTRING) luaL_error(L, "httpd: header names must be strings");
        const char *name = lua_tolstring(L, -2, &nlen);
        if (!ra_glue_is_token(name, nlen)) luaL_error(L, "httpd: bad header name %q", name);
        if (!lua_isstring(L, -1)) luaL_error(L, "httpd: header %s: value must be a string", name);
        const char *value = lua_tolstring(L, -1, &vlen); /* numbers: converted in place */
        if (!ra_glue_is_field_value(value, vlen))
            luaL_error(L, "httpd: header %s: CR, LF or NUL in value", name);
        lua_pop(L, 1);
    }
}

/* Adds the headers table at idx (checked: check_headers_arg, headers_ok) to req's answer. */
static void add_headers(lua_State *L, int idx, h2o_req_t *req) {
    if (lua_isnoneornil(L, idx)) return;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        size_t nlen, vlen;
        const char *name = lua_tolstring(L, -2, &nlen);
        const char *value = lua_tolstring(L, -1, &vlen);
        h2o_iovec_t n = h2o_strdup(&req->pool, name, nlen);
        for (size_t i = 0; i < n.len; i++) /* h2o's token lookup wants lower case */
            if (n.base[i] >= 'A' && n.base[i] <= 'Z') n.base[i] = (char)(n.base[i] + 32);
        h2o_iovec_t v = h2o_strdup(&req->pool, value, vlen);
        h2o_add_header_by_str(&req->pool, &req->res.headers, n.base, n.len, 1, NULL, v.base, v.len);
        lua_pop(L, 1);
    }
}

/* req:respond(status, body [, content_type [, headers]]) -> true | false */
static int l_req_respond(lua_State *L) {
    req_ud_t *ud = luaL_checkudata(L, 1, REQ_MT);
    lua_Integer status = luaL_checkinteger(L, 2);
    luaL_argcheck(L, status >= 100 && status <= 599, 2, "status must be 100..599");
    size_t blen;
    const char *body = luaL_optlstring(L, 3, "", &blen);
    size_t clen;
    const char *ctype = luaL_optlstring(L, 4, "text/plain; charset=utf-8", &clen);
    luaL_argcheck(L, ra_glue_is_field_value(ctype, clen), 4, "CR, LF or NUL in content type");
    check_headers_arg(L, 5);
    if (ud->responded) return luaL_error(L, "httpd: request already responded");
    ud->responded = 1;
    if (!ud->life) { /* the client or the server went away: nothing to answer */
        lua_pushboolean(L, 0);
        return 1;
    }
    h2o_req_t *req = ud->life->req;
    if (peer_gone(ud->life)) { /* answer anyway (it fails, h2o cleans up) and say so */
        send_response(req, 503, "", 0, "text/plain; charset=utf-8");
        lua_pushboolean(L, 0);
        return 1;
    }
    add_headers(L, 5, req);
    send_response(req, (int)status, body, blen, ctype);
    lua_pushboolean(L, 1);
    return 1;
}

static int l_req_alive(lua_State *L) {
    req_ud_t *ud = luaL_checkudata(L, 1, REQ_MT);
    lua_pushboolean(L, ud->life != NULL && (ud->responded || !peer_gone(ud->life)));
    return 1;
}

/* __index: its upvalues are the methods and the metatable. The check is luaL_checkudata's
 * against the metatable held by the closure, not looked up by its name in the registry on
 * every field read: a name lookup hashes and interns the 28-byte name, a dozen times per
 * request (issue 25's profile of the loop thread). */
static int l_req_index(lua_State *L) {
    int ok = lua_touserdata(L, 1) != NULL && lua_getmetatable(L, 1);
    if (ok) {
        ok = lua_rawequal(L, -1, lua_upvalueindex(2));
        lua_pop(L, 1);
    }
    if (!ok) return luaL_typerror(L, 1, REQ_MT);
    lua_pushvalue(L, 2);
    lua_rawget(L, lua_upvalueindex(1)); /* methods */
    if (!lua_isnil(L, -1)) return 1;
    lua_pop(L, 1);
    lua_getfenv(L, 1);
    lua_pushvalue(L, 2);
    lua_rawget(L, -2);
    return 1;
}

/* A request nobody will answer any more: answer it, so the client is not left hanging. */
static int l_req_gc(lua_State *L) {
    req_ud_t *ud = luaL_checkudata(L, 1, REQ_MT);
    if (ud->life) {
        if (!ud->responded) {
            log_line("request dropped by the handler (never responded)", "answered 500");
            send_plain_once(ud, 500, "internal server error\n");
        }
        if (ud->life) ud->life->ud = NULL;
        ud->life = NULL;
    }
    return 0;
}

/* ---- the h2o handler ---------------------------------------------------------------- */

/* Builds the request object and calls the handler, under the caller's pcall: any Lua error
 * (the handler's, or out of memory while building the object) unwinds to it, never across
 * h2o's frames. Arguments: the server, the h2o request, a req_ud_t ** that receives the
 * object once it exists. Returns the object, then the handler's first four results. */
static int dispatch(lua_State *L) {
    server_t *srv = lua_touserdata(L, 1);
    h2o_req_t *req = lua_touserdata(L, 2);
    req_ud_t **out = lua_touserdata(L, 3);
    lua_settop(L, 0);
    lua_rawgeti(L, LUA_REGISTRYINDEX, srv->handler_ref);
    *out = push_req(L, srv, req);
    lua_pushvalue(L, -1);
    lua_insert(L, 1); /* [req, handler, req] */
    lua_call(L, 1, 4);
    return 5;
}

/* The request head as it arrived, from the connection's input buffer: h2o parses it in
 * place and consumes it only after the response (HTTP/1: the buffer starts with the
 * request line while the request is handled; header names are lower-cased in place).
 * Checked against the method h2o saw; 0 when the head cannot be found. */
static int raw_head(h2o_req_t *req, const char **head, size_t *len) {
    if (!req->conn->callbacks->get_socket) return 0;
    h2o_socket_t *sock = req->conn->callbacks->get_socket(req->conn);
    if (!sock || !sock->input) return 0;
    const char *b = sock->input->bytes;
    size_t n = sock->input->size, m = req->input.method.len;
    if (n <= m || memcmp(b, req->input.method.base, m) != 0 || b[m] != ' ') return 0;
    for (size_t i = 0; i + 1 < n; i++) /* the empty line: "\n\n" or "\n\r\n" */
        if (b[i] == '\n' &&
            (b[i + 1] == '\n' || (i + 2 < n && b[i + 1] == '\r' && b[i + 2] == '\n'))) {
            *head = b;
            *len = i + 1;
            return 1;
        }
    return 0;
}

/* Request smuggling (issue 14 item 8): h2o takes the first Content-Length and drops the
 * others, and lets Transfer-Encoding win over Content-Length on a connection it keeps
 * open. A proxy in front that reads the other length would see other requests in the
 * same bytes. Such a head is refused: 400, and the connection is closed. Identical
 * repeated lengths are one length (RFC 9110 8.6). Returns the reason, or NULL. */
static const char *bad_framing(h2o_req_t *req) {
    const char *head;
    size_t len;
    if (!raw_head(req, &head, &len)) return NULL;
    const char *first = NULL;
    size_t first_len = 0;
    int te = 0;
    const char *end = head + len;
    const char *line = memchr(head, '\n', len);
    while (line && ++line < end) {
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        if (!eol) break;
        size_t ll = (size_t)(eol - line);
        if (ll >= 15 && memcmp(line, "content-length:", 15) == 0) {
            const char *v = line + 15, *ve = eol;
            while (v < ve && (*v == ' ' || *v == '\t'))
                v++;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            if (!first) {
                first = v;
                first_len = (size_t)(ve - v);
            } else if ((size_t)(ve - v) != first_len || memcmp(v, first, first_len) != 0) {
                return "two different Content-Length headers\n";
            }
        } else if (ll >= 18 && memcmp(line, "transfer-encoding:", 18) == 0) {
            te = 1;
        }
        line = eol;
    }
    if (te && first) return "Content-Length with Transfer-Encoding\n";
    return NULL;
}

/* ---- refusals: the answers the server makes before any handler (issue 24 §3) ---------- */

/* A headers table a refusal returned: string names (tokens) and values, or nil. */
static int headers_ok(lua_State *L, int idx) {
    if (lua_isnil(L, idx)) return 1;
    if (!lua_istable(L, idx)) return 0;
    int ok = 1;
    lua_pushnil(L);
    while (ok && lua_next(L, idx)) {
        size_t nlen, vlen;
        ok = lua_type(L, -2) == LUA_TSTRING && lua_type(L, -1) == LUA_TSTRING;
        if (ok) {
            const char *n = lua_tolstring(L, -2, &nlen), *v = lua_tolstring(L, -1, &vlen);
            ok = ra_glue_is_token(n, nlen) && ra_glue_is_field_value(v, vlen);
        }
        lua_pop(L, ok ? 1 : 2);
    }
    return ok;
}

/* Calls the listener's refusal(path, status, detail, header) under a pcall. 1: its answer
 * is on L's stack at top+2 .. top+5 (status, body, content type, headers; the caller
 * restores the stack with lua_settop(L, top)); 0: the default text (no refusal function,
 * nothing returned, an error or a bad value: logged). */
static int ask_refusal(server_t *srv, int top, const char *path, size_t plen, int status,
                       const char *detail, const char *header, size_t hlen) {
    lua_State *L = srv->L;
    if (srv->refusal_ref == LUA_NOREF || !lua_checkstack(L, 16)) return 0;
    lua_pushcfunction(L, traceback);
    lua_rawgeti(L, LUA_REGISTRYINDEX, srv->refusal_ref);
    lua_pushlstring(L, path, plen);
    lua_pushinteger(L, status);
    lua_pushstring(L, detail);
    if (header)
        lua_pushlstring(L, header, hlen);
    else
        lua_pushnil(L);
    if (lua_pcall(L, 4, 4, top + 1) != 0) {
        log_line("refusal error", lua_tostring(L, -1));
        lua_settop(L, top);
        return 0;
    }
    if (lua_isnil(L, top + 2)) {
        lua_settop(L, top);
        return 0;
    }
    lua_Integer st = lua_tointeger(L, top + 2);
    size_t clen = 0;
    const char *ctype = lua_isnil(L, top + 4) ? NULL : lua_tolstring(L, top + 4, &clen);
    if (lua_type(L, top + 2) != LUA_TNUMBER || st < 400 || st > 599 ||
        lua_type(L, top + 3) != LUA_TSTRING || (ctype && !ra_glue_is_field_value(ctype, clen)) ||
        !headers_ok(L, top + 5)) {
        log_line("refusal error", "bad answer (status 400..599, body, content type, headers)");
        lua_settop(L, top);
        return 0;
    }
    if (!ctype) {
        lua_pushliteral(L, "text/plain; charset=utf-8");
        lua_replace(L, top + 4);
    }
    return 1;
}

/* Counts a response sent before any handler and tells on_early which route was asked: the
 * method and the path (without the query) as the request line has them (m or p NULL: ""). */
static void early_note(server_t *srv, int status, const char *m, size_t mlen, const char *p,
                       size_t plen) {
    if (status == 413)
        srv->early_413++;
    else
        srv->early_other++;
    lua_State *L = srv->L;
    if (srv->state != SRV_OPEN || !ra_glue_push_ref(L, srv->early_ref, 4)) return;
    const char *q = p ? memchr(p, '?', plen) : NULL;
    lua_pushinteger(L, status);
    lua_pushlstring(L, m ? m : "", m ? mlen : 0);
    lua_pushlstring(L, p ? p : "", q ? (size_t)(q - p) : p ? plen : 0);
    if (lua_pcall(L, 3, 0, 0) != 0) {
        log_line("on_early error", lua_tostring(L, -1));
        lua_pop(L, 1);
    }
}

/* early_note for a request H2O parsed. */
static void early(server_t *srv, h2o_req_t *req, int status) {
    h2o_iovec_t m = req->input.method, p = req->input.path;
    early_note(srv, status, m.base, m.len, p.base, p.len);
}

/* Answers an early refusal (before any handler) and closes the connection after it. */
static void refuse_early(server_t *srv, h2o_req_t *req, int status, const char *body) {
    early(srv, req, status);
    req->http1_is_persistent = 0;
    lua_State *L = srv->L;
    int top = lua_gettop(L);
    size_t dlen = strlen(body);
    char detail[128];
    snprintf(detail, sizeof detail, "%.*s", (int)(dlen && body[dlen - 1] == '\n' ? dlen - 1 : dlen),
             body);
    if (ask_refusal(srv, top, req->path_normalized.base, req->path_normalized.len, status, detail,
                    NULL, 0)) {
        size_t blen;
        const char *b = lua_tolstring(L, top + 3, &blen);
        add_headers(L, top + 5, req);
        send_response(req, (int)lua_tointeger(L, top + 2), b, blen, lua_tostring(L, top + 4));
        lua_settop(L, top);
        return;
    }
    send_response(req, status, body, dlen, "text/plain; charset=utf-8");
}

/* ---- the first look at a head, before H2O parses it (issue 24 §3) --------------------- */

/* A refusal written on the socket itself (H2O has not parsed the head: there is no h2o
 * request to answer). Then the connection is half-closed, what the peer still sends is read
 * and dropped (closing with unread bytes would reset it, losing the answer), and it is
 * closed after REFUSED_LINGER_MS or when the peer closes (H2O sees the EOF). */
static void refuse_raw(conn_t *c, int status, const char *why, const char *method, size_t mlen,
                       const char *path, size_t plen, const char *header, size_t hlen) {
    server_t *srv = c->srv;
    early_note(srv, status, method, mlen, path, plen);
    lua_State *L = srv->L;
    int top = lua_gettop(L);
    char out[REFUSAL_MAX];
    int n = -1;
    if (ask_refusal(srv, top, path, plen, status, why, header, hlen)) {
        size_t blen;
        const char *body = lua_tolstring(L, top + 3, &blen);
        int st = (int)lua_tointeger(L, top + 2);
        n = snprintf(out, sizeof out,
                     "HTTP/1.1 %d %s\r\nServer: " RA_HOST_NAME "\r\nConnection: close\r\n"
                     "Content-Type: %s\r\nContent-Length: %zu\r\n",
                     st, reason_of(st), lua_tostring(L, top + 4), blen);
        if (!lua_isnil(L, top + 5)) {
            lua_pushnil(L);
            while (n >= 0 && lua_next(L, top + 5)) {
                int k = snprintf(out + n, sizeof out - (size_t)n, "%s: %s\r\n", lua_tostring(L, -2),
                                 lua_tostring(L, -1));
                n = k < 0 || (size_t)k >= sizeof out - (size_t)n ? -1 : n + k;
                lua_pop(L, 1);
            }
        }
        if (n >= 0 && (size_t)n + 2 + blen <= sizeof out) {
            memcpy(out + n, "\r\n", 2);
            memcpy(out + n + 2, body, blen);
            n += 2 + (int)blen;
        } else {
            n = -1; /* too large for a refusal: the default */
        }
        lua_settop(L, top);
    }
    if (n < 0)
        n = snprintf(out, sizeof out,
                     "HTTP/1.1 %d %s\r\nServer: " RA_HOST_NAME "\r\nConnection: close\r\n"
                     "Content-Type: text/plain; charset=utf-8\r\nContent-Length: %zu\r\n\r\n%s\n",
                     status, reason_of(status), strlen(why) + 1, why);
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0) {
        ssize_t w;
        do /* a small answer on a connection that sent only a head: it fits the buffer */
            w = send(fd, out, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
        while (w < 0 && errno == EINTR);
        shutdown(fd, SHUT_WR);
    }
    c->refused = 1;
    if (c->timer_live) {
        uint64_t linger =
            srv->header_timeout_ms < REFUSED_LINGER_MS ? srv->header_timeout_ms : REFUSED_LINGER_MS;
        uv_timer_start(&c->deadline, on_head_deadline, linger, 0);
    }
}

/* The bytes H2O's buffer holds for the request being read, the nread just read included:
 * 1 when they were refused (H2O must not see them), 0 to let H2O parse. */
static int first_look(conn_t *c, size_t nread) {
    server_t *srv = c->srv;
    const char *b = c->sock->input->bytes;
    ra_http_head_t h;
    int rc =
        ra_http_head_check(b, c->sock->input->size + nread, srv->max_header_bytes, MAX_HEADERS, &h);
    if (rc == RA_HEAD_INCOMPLETE) return 0;
    if (rc == RA_HEAD_COMPLETE) {
        if (h.content_length < 0 || (uint64_t)h.content_length <= srv->max_body) return 0;
        refuse_raw(c, 413, "request entity is too large", b, h.method_len, b + h.path_off,
                   h.path_len, NULL, 0);
        return 1;
    }
    char name[64];
    size_t nlen = h.name_len < sizeof name ? h.name_len : sizeof name;
    for (size_t i = 0; i < nlen; i++) { /* lower case, as req.headers names them */
        char ch = b[h.name_off + i];
        name[i] = (char)(ch >= 'A' && ch <= 'Z' ? ch + 32 : ch);
    }
    int status = rc == RA_HEAD_TOO_LARGE || rc == RA_HEAD_TOO_MANY ? 431 : 400;
    refuse_raw(c, status, h.why, b, h.method_len, b + h.path_off, h.path_len,
               rc == RA_HEAD_BAD_VALUE ? name : NULL, nlen);
    return 1;
}

/* libuv calls it with what it read into H2O's buffer, before H2O's own callback (on_io put
 * it in front). A refused connection's bytes are dropped; EOF and errors go to H2O, which
 * closes through its own paths. */
static void on_read_first(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
    conn_t *c = (conn_t *)s;
    uv_read_cb h2o_read = c->h2o_read;
    if (c->refused && nread >= 0) return;
    if (nread > 0 && !c->refused && c->inflight == 0 && c->sock && c->pool != POOL_NONE &&
        c->sock->input && buf->base == c->sock->input->bytes + c->sock->input->size &&
        first_look(c, (size_t)nread))
        return;
    h2o_read(s, nread, buf);
    /* (libuv reads again at once with the callback the stream holds: keep this one in front
     * unless H2O stopped or restarted reading meanwhile) */
    if (c->tcp.read_cb == h2o_read) c->tcp.read_cb = on_read_first;
}

/* libuv's I/O callback of the connection's stream (its io_watcher, the private fields of a
 * unix uv_stream_t): H2O sets the stream's read callback whenever it starts reading, so the
 * first look is put in front of it here, at every I/O event, before libuv reads. */
static void (*stream_io)(uv_loop_t *, uv__io_t *, unsigned int);

static void on_io(uv_loop_t *loop, uv__io_t *w, unsigned int events) {
    conn_t *c = H2O_STRUCT_FROM_MEMBER(conn_t, tcp.io_watcher, w);
    if (c->tcp.read_cb && c->tcp.read_cb != on_read_first) {
        c->h2o_read = c->tcp.read_cb;
        c->tcp.read_cb = on_read_first;
    }
    stream_io(loop, w, events);
}

static void hook_reads(conn_t *c) {
    uv__io_t *w = &c->tcp.io_watcher;
    if (!stream_io) stream_io = w->cb;
    if (w->cb == stream_io) w->cb = on_io; /* (another callback: no first look, H2O's rules) */
}

static int on_req(h2o_handler_t *self, h2o_req_t *req) {
    server_t *srv = ((handler_t *)self)->srv;
    if (srv->state != SRV_OPEN) {
        send_response(req, 503, "closing\n", 8, "text/plain; charset=utf-8");
        return 0;
    }
    conn_t *c = conn_of(req);
    if (c) track_request(c, req);
    const char *framing = bad_framing(req);
    if (framing) {
        refuse_early(srv, req, 400, framing);
        return 0;
    }
    /* h2o refuses a chunked body when it reaches its limit and a Content-Length one only
     * above it: its limit is max_body + 1 (l_listen), so both framings are refused here
     * alike, for a body over max_body (issue 14 item 8). */
    if (req->entity.base && req->entity.len > srv->max_body) {
        refuse_early(srv, req, 413, "request entity is too large\n");
        return 0;
    }
    if (c && c->pool == POOL_RESERVED) /* one request per reserved slot */
        req->http1_is_persistent = 0;
    lua_State *L = srv->L;
    int top = lua_gettop(L);
    if (!lua_checkstack(L, 16)) {
        send_response(req, 503, "busy\n", 5, "text/plain; charset=utf-8");
        return 0;
    }
    req_ud_t *ud = NULL;
    lua_pushcfunction(L, traceback);
    lua_pushcfunction(L, dispatch);
    lua_pushlightuserdata(L, srv);
    lua_pushlightuserdata(L, req);
    lua_pushlightuserdata(L, &ud);
    if (lua_pcall(L, 3, 5, top + 1) != 0) {
        log_line("handler error", lua_tostring(L, -1));
        if (ud)
            send_plain_once(ud, 500, "internal server error\n");
        else /* the object was never made: nobody else can answer */
            send_response(req, 500, "internal server error\n", 22, "text/plain; charset=utf-8");
    } else if (!lua_isnil(L, -4)) { /* status [, body [, content_type [, headers]]] */
        if (ud->responded) {
            log_line("handler error", "returned a response after req:respond (ignored)");
        } else {
            /* The same checks as req:respond, under a pcall: a bad value is a handler
             * error, not a crash. Stack: [req, r1, r2, r3, r4]. */
            lua_pushcfunction(L, l_req_respond);
            lua_insert(L, -6);
            if (lua_pcall(L, 5, 0, 0) != 0) { /* the message says it all: no traceback */
                log_line("handler returned a bad response", lua_tostring(L, -1));
                send_plain_once(ud, 500, "internal server error\n");
            }
        }
    }
    /* Otherwise the handler answers later through req:respond (async). */
    lua_settop(L, top);
    return 0;
}

/* ---- the server --------------------------------------------------------------------- */

/* Responses h2o makes before routing (413 over max_body, 400 for a bad request) are bound
 * to the host's fallback path; a logger there counts them (srv:early_rejects()). */
typedef struct {
    h2o_logger_t super;
    server_t *srv;
} early_logger_t;

static void on_early_response(h2o_logger_t *self, h2o_req_t *req) {
    server_t *srv = ((early_logger_t *)self)->srv;
    if (req->res.status >= 400) early(srv, req, req->res.status);
}

static void free_server(uv_handle_t *h) {
    server_t *srv = h->data;
    for (server_t **p = &servers; *p; p = &(*p)->next)
        if (*p == srv) {
            *p = srv->next;
            break;
        }
    if (srv->ud) *srv->ud = NULL;
    free(srv);
}

/* Called in the close pass in which libuv finished the context's embedded timers: one more
 * close, so the struct is freed in a later pass, after libuv is done with all of them. */
static void reap_next(uv_handle_t *h) {
    server_t *srv = h->data;
    uv_close((uv_handle_t *)&srv->reap2, free_server);
}

static void maybe_dispose(server_t *srv) {
    if (srv->state != SRV_CLOSING || !srv->listener_closed || srv->nconns > 0) return;
    srv->state = SRV_DISPOSED;
    h2o_context_dispose(&srv->ctx);
    h2o_config_dispose(&srv->conf);
    uv_close((uv_handle_t *)&srv->reap1, reap_next);
}

static void on_listener_closed(uv_handle_t *h) {
    server_t *srv = h->data;
    srv->listener_closed = 1;
    maybe_dispose(srv);
}

static void free_conn(uv_handle_t *h) {
    conn_t *c = h->data;
    server_t *srv = c->srv;
    h2o_linklist_unlink(&c->link);
    srv->nconns--;
    free(c);
    maybe_dispose(srv);
}

static void on_conn_closed(uv_handle_t *h) {
    conn_t *c = (conn_t *)h;
    release_slot(c);
    c->sock = NULL;
    uv_close((uv_handle_t *)&c->deadline, free_conn); /* then the struct */
}

static void free_rejected(uv_handle_t *h) {
    free(h);
}

static void on_accept(uv_stream_t *listener, int status) {
    server_t *srv = listener->data;
    if (status != 0 || srv->state != SRV_OPEN) return;
    conn_t *c = calloc(1, sizeof *c);
    if (!c) return;
    uv_tcp_init(srv->loop, &c->tcp);
    c->srv = srv;
    const char *why = "full";
    int ok = uv_accept(listener, (uv_stream_t *)&c->tcp) == 0 &&
             peer_of(&c->tcp, c->peer, &c->loopback) == 0;
    if (ok) c->pool = admit(srv, c, &why);
    if (!ok || c->pool == POOL_NONE) {
        uint64_t n = srv->refused_per_peer + srv->refused_full;
        if (n == 1 || n % REFUSAL_LOG_EVERY == 0) {
            char msg[160];
            snprintf(msg, sizeof msg, "%s (%llu so far; accounting_http_connections_refused_total)",
                     strcmp(why, "per_peer") == 0 ? "a peer is over max_conns_per_peer"
                                                  : "max_conns reached",
                     (unsigned long long)n);
            log_line("connection refused", msg);
        }
        uv_close((uv_handle_t *)&c->tcp, free_rejected);
        return;
    }
    if (c->pool == POOL_GENERAL)
        srv->n_general++;
    else
        srv->n_reserved++;
    uv_unref((uv_handle_t *)&c->tcp); /* a connection never keeps the process alive */
    h2o_linklist_insert(&srv->conns, &c->link);
    srv->nconns++;
    uv_timer_init(srv->loop, &c->deadline);
    uv_unref((uv_handle_t *)&c->deadline);
    c->deadline.data = c;
    c->timer_live = 1;
    c->sock = h2o_uv_socket_create((uv_stream_t *)&c->tcp, on_conn_closed);
    c->sock->on_close.cb = on_sock_disposed;
    c->sock->on_close.data = c;
    arm_head_deadline(c);
    h2o_accept(&srv->accept_ctx, c->sock);
    hook_reads(c);
}

static void server_close(server_t *srv) {
    if (srv->state != SRV_OPEN) return;
    srv->state = SRV_CLOSING;
    ra_glue_unref(srv->L, &srv->handler_ref);
    ra_glue_unref(srv->L, &srv->refusal_ref);
    ra_glue_unref(srv->L, &srv->early_ref);
    ra_glue_unref(srv->L, &srv->self_ref);
    uv_close((uv_handle_t *)&srv->listener, on_listener_closed);
    /* Requests waiting for an async answer: 503 (the write then fails on the shut-down
     * socket below, and h2o closes the connection). */
    while (!h2o_linklist_is_empty(&srv->reqs)) {
        lifeline_t *life = H2O_STRUCT_FROM_MEMBER(lifeline_t, link, srv->reqs.next);
        h2o_linklist_unlink(&life->link);
        h2o_linklist_init_anchor(&life->link); /* dispose unlinks it again: harmless */
        /* Detach first: the send may free the request (and the lifeline) at once. The Lua
         * object then answers respond() with false, as for a client that left. */
        req_ud_t *ud = life->ud;
        h2o_req_t *req = life->req;
        int answer = ud && !ud->responded;
        if (ud) {
            ud->life = NULL;
            life->ud = NULL;
        }
        if (answer) send_response(req, 503, "closing\n", 8, "text/plain; charset=utf-8");
    }
    for (h2o_linklist_t *l = srv->conns.next; l != &srv->conns; l = l->next) {
        conn_t *c = H2O_STRUCT_FROM_MEMBER(conn_t, link, l);
        uv_os_fd_t fd;
        if (uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0) shutdown(fd, SHUT_RDWR);
    }
    maybe_dispose(srv);
}

/* Unreferences every handle h2o_context_init added to the loop (its queue's uv_async and
 * its timers): `before` lists the handles that were there already. */
typedef struct {
    uv_handle_t **v;
    size_t n, cap;
} handles_t;

static void collect(uv_handle_t *h, void *arg) {
    handles_t *hs = arg;
    if (hs->n < hs->cap) hs->v[hs->n++] = h;
}

static void unref_new(uv_handle_t *h, void *arg) {
    handles_t *before = arg;
    for (size_t i = 0; i < before->n; i++)
        if (before->v[i] == h) return;
    uv_unref(h);
}

static void count_one(uv_handle_t *h, void *arg) {
    (void)h;
    (*(size_t *)arg)++;
}

static void context_init_unref(server_t *srv) {
    size_t n = 0;
    uv_walk(srv->loop, count_one, &n);
    handles_t before = {calloc(n + 1, sizeof(uv_handle_t *)), 0, n};
    if (before.v) uv_walk(srv->loop, collect, &before);
    h2o_context_init(&srv->ctx, srv->loop, &srv->conf);
    if (before.v) uv_walk(srv->loop, unref_new, &before);
    free(before.v);
}

static int opt_field(lua_State *L, const char *key, int type) {
    lua_getfield(L, 1, key);
    if (lua_isnil(L, -1)) return 0;
    if (lua_type(L, -1) != type)
        luaL_error(L, "httpd.listen: %s must be a %s", key, lua_typename(L, type));
    return 1;
}

/* httpd.listen{host, port, max_body, handler} -> server | nil, err */
/* Unknown option keys are errors (STYLE §12): a misspelt limit is never silently the
 * default. */
static void check_listen_keys(lua_State *L) {
    lua_pushnil(L);
    while (lua_next(L, 1)) {
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
        static const char *const known[] = {"host",
                                            "port",
                                            "max_body",
                                            "handler",
                                            "max_conns",
                                            "max_conns_per_peer",
                                            "reserved_conns",
                                            "header_timeout_ms",
                                            "body_timeout_ms",
                                            "max_header_bytes",
                                            "refusal",
                                            "on_early",
                                            NULL};
        int found = 0;
        for (int i = 0; known[i]; i++)
            if (strcmp(k, known[i]) == 0) found = 1;
        if (!found) luaL_error(L, "httpd.listen: unknown option '%s'", k);
        lua_pop(L, 1);
    }
}

static int l_listen(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    check_listen_keys(L);
    const char *host = "127.0.0.1";
    if (opt_field(L, "host", LUA_TSTRING)) host = lua_tostring(L, -1);
    lua_Integer port = 9464;
    if (opt_field(L, "port", LUA_TNUMBER)) port = lua_tointeger(L, -1);
    if (port < 0 || port > 65535) return luaL_error(L, "httpd.listen: port must be 0..65535");
    lua_Integer max_body = 1 << 20;
    if (opt_field(L, "max_body", LUA_TNUMBER)) max_body = lua_tointeger(L, -1);
    if (max_body < 0 || (uint64_t)max_body > MAX_BODY_LIMIT)
        return luaL_error(L, "httpd.listen: max_body must be 0..%d", (int)MAX_BODY_LIMIT);
    lua_Integer lim[5] = {DEF_MAX_CONNS, DEF_MAX_CONNS_PER_PEER, DEF_RESERVED_CONNS,
                          DEF_HEADER_TIMEOUT_MS, DEF_BODY_TIMEOUT_MS};
    static const char *const lim_names[5] = {"max_conns", "max_conns_per_peer", "reserved_conns",
                                             "header_timeout_ms", "body_timeout_ms"};
    static const lua_Integer lim_lo[5] = {1, 1, 0, 10, 10};
    static const lua_Integer lim_hi[5] = {MAX_CONNS_LIMIT, MAX_CONNS_LIMIT, MAX_CONNS_LIMIT - 1,
                                          86400000, 86400000};
    for (int i = 0; i < 5; i++) {
        if (opt_field(L, lim_names[i], LUA_TNUMBER)) lim[i] = lua_tointeger(L, -1);
        lua_pop(L, 1);
        if (lim[i] < lim_lo[i] || lim[i] > lim_hi[i])
            return luaL_error(L, "httpd.listen: %s must be %d..%d", lim_names[i], (int)lim_lo[i],
                              (int)lim_hi[i]);
    }
    if (lim[2] >= lim[0])
        return luaL_error(L, "httpd.listen: reserved_conns must be less than max_conns");
    lua_Integer max_header = DEF_MAX_HEADER_BYTES;
    if (opt_field(L, "max_header_bytes", LUA_TNUMBER)) max_header = lua_tointeger(L, -1);
    lua_pop(L, 1);
    if (max_header < 1024 || max_header > 262144)
        return luaL_error(L, "httpd.listen: max_header_bytes must be 1024..262144");
    int refusal_idx = 0;
    if (opt_field(L, "refusal", LUA_TFUNCTION))
        refusal_idx = lua_gettop(L);
    else
        lua_pop(L, 1);
    if (!opt_field(L, "handler", LUA_TFUNCTION))
        return luaL_error(L, "httpd.listen: handler (a function) is required");
    int handler_idx = lua_gettop(L);
    int early_idx = opt_field(L, "on_early", LUA_TFUNCTION) ? lua_gettop(L) : 0;
    if (!early_idx) lua_pop(L, 1);

    struct sockaddr_storage addr;
    if (uv_ip4_addr(host, (int)port, (struct sockaddr_in *)&addr) != 0 &&
        uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)&addr) != 0) {
        lua_pushnil(L);
        lua_pushfstring(L, "httpd: cannot listen on %s:%d: not a numeric IPv4 or IPv6 address",
                        host, (int)port);
        return 2;
    }

    static int sigpipe_ignored;
    if (!sigpipe_ignored) {
        signal(SIGPIPE, SIG_IGN);
        sigpipe_ignored = 1;
    }

    server_t **slot = lua_newuserdata(L, sizeof *slot);
    *slot = NULL;
    luaL_getmetatable(L, SERVER_MT);
    lua_setmetatable(L, -2);

    server_t *srv = calloc(1, sizeof *srv);
    if (!srv) return luaL_error(L, "httpd.listen: out of memory");
    srv->loop = luv_loop(L);
    srv->L = luv_state(L);
    srv->handler_ref = srv->self_ref = srv->refusal_ref = srv->early_ref = LUA_NOREF;
    srv->state = SRV_OPEN;
    h2o_linklist_init_anchor(&srv->conns);
    h2o_linklist_init_anchor(&srv->reqs);
    uv_tcp_init(srv->loop, &srv->listener);
    srv->listener.data = srv;
    uv_check_init(srv->loop, &srv->reap1);
    uv_check_init(srv->loop, &srv->reap2);
    srv->reap1.data = srv->reap2.data = srv;

    int rc = uv_tcp_bind(&srv->listener, (struct sockaddr *)&addr, 0);
    if (rc == 0) rc = uv_listen((uv_stream_t *)&srv->listener, 128, on_accept);
    if (rc != 0) {
        /* Nothing of h2o exists yet: close the listener, then free the struct two close
         * passes later (reap1 -> reap2), as in maybe_dispose: a close pass finishes every
         * handle closed before it, in any order, so freeing in the same pass is unsafe. */
        srv->state = SRV_DISPOSED;
        uv_close((uv_handle_t *)&srv->listener, NULL);
        uv_close((uv_handle_t *)&srv->reap1, reap_next);
        srv->next = servers;
        servers = srv;
        lua_pushnil(L);
        lua_pushfstring(L, "httpd: cannot listen on %s:%d: %s: %s", host, (int)port,
                        uv_err_name(rc), uv_strerror(rc));
        return 2;
    }
    uv_unref((uv_handle_t *)&srv->listener); /* never keeps the process alive on its own */
    struct sockaddr_storage bound;
    int len = sizeof bound;
    uv_tcp_getsockname(&srv->listener, (struct sockaddr *)&bound, &len);
    srv->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                  : ((struct sockaddr_in *)&bound)->sin_port);

    h2o_config_init(&srv->conf);
    srv->conf.server_name = h2o_iovec_init(H2O_STRLIT(RA_HOST_NAME));
    /* +1: h2o refuses a chunked body at its limit, a Content-Length one above it; on_req
     * applies max_body itself, the same to both. */
    srv->max_body = (size_t)max_body;
    srv->max_header_bytes = (size_t)max_header;
    srv->max_conns = (size_t)lim[0];
    srv->max_per_peer = (size_t)lim[1];
    srv->reserved = (size_t)lim[2];
    srv->header_timeout_ms = (uint64_t)lim[3];
    /* h2o's request deadline runs from the same start as the head deadline (the
     * connection's accept, or the end of the previous response) to the end of the body. */
    srv->conf.http1.req_timeout = (uint64_t)(lim[3] + lim[4]);
    srv->conf.max_request_entity_size = (size_t)max_body + 1;
    srv->conf.http1.upgrade_to_http2 = 0; /* HTTP/1.1 only: one protocol to reason about */
    h2o_hostconf_t *hostconf =
        h2o_config_register_host(&srv->conf, h2o_iovec_init(H2O_STRLIT("default")), 65535);
    h2o_pathconf_t *pathconf = h2o_config_register_path(hostconf, "/", 0);
    handler_t *handler = (handler_t *)h2o_create_handler(pathconf, sizeof *handler);
    handler->super.on_req = on_req;
    handler->srv = srv;
    early_logger_t *early =
        (early_logger_t *)h2o_create_logger(&hostconf->fallback_path, sizeof *early);
    early->super.log_access = on_early_response;
    early->srv = srv;
    context_init_unref(srv);
    srv->accept_ctx.ctx = &srv->ctx;
    srv->accept_ctx.hosts = srv->conf.hosts;

    srv->handler_ref = ra_glue_ref(L, handler_idx);
    if (refusal_idx) srv->refusal_ref = ra_glue_ref(L, refusal_idx);
    if (early_idx) srv->early_ref = ra_glue_ref(L, early_idx);
    srv->self_ref = ra_glue_ref(L, -1); /* the userdata */
    srv->ud = slot;
    *slot = srv;
    srv->next = servers;
    servers = srv;
    return 1;
}

static server_t **check_server(lua_State *L) {
    return luaL_checkudata(L, 1, SERVER_MT);
}

static int l_server_port(lua_State *L) {
    server_t *srv = *check_server(L);
    if (!srv || srv->state != SRV_OPEN) return luaL_error(L, "httpd: server is closed");
    lua_pushinteger(L, srv->port);
    return 1;
}

static int l_server_early_rejects(lua_State *L) {
    server_t *srv = *check_server(L);
    if (!srv) return luaL_error(L, "httpd: server is closed");
    lua_createtable(L, 0, 2);
    lua_pushnumber(L, (lua_Number)srv->early_413);
    lua_setfield(L, -2, "too_large");
    lua_pushnumber(L, (lua_Number)srv->early_other);
    lua_setfield(L, -2, "other");
    return 1;
}

/* srv:stats() -> the connection counters of issue 14 item 6 */
static int l_server_stats(lua_State *L) {
    server_t *srv = *check_server(L);
    if (!srv) return luaL_error(L, "httpd: server is closed");
    lua_createtable(L, 0, 8);
    const struct {
        const char *k;
        double v;
    } f[] = {{"general", (double)srv->n_general},
             {"reserved", (double)srv->n_reserved},
             {"refused_per_peer", (double)srv->refused_per_peer},
             {"refused_full", (double)srv->refused_full},
             {"evicted", (double)srv->evicted},
             {"header_timeouts", (double)srv->header_timeouts},
             {"max_conns", (double)srv->max_conns},
             {"reserved_conns", (double)srv->reserved}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        lua_pushnumber(L, f[i].v);
        lua_setfield(L, -2, f[i].k);
    }
    return 1;
}

static int l_server_close(lua_State *L) {
    server_t **slot = check_server(L);
    if (*slot) server_close(*slot);
    return 0;
}

static int l_server_gc(lua_State *L) {
    server_t **slot = check_server(L);
    if (*slot) {
        (*slot)->ud = NULL;
        server_close(*slot);
        *slot = NULL;
    }
    return 0;
}

static int l_server_tostring(lua_State *L) {
    server_t *srv = *check_server(L);
    if (srv && srv->state == SRV_OPEN)
        lua_pushfstring(L, "httpd.server(port %d)", srv->port);
    else
        lua_pushliteral(L, "httpd.server(closed)");
    return 1;
}

static int luaopen_httpd(lua_State *L) {
    static const luaL_Reg server_methods[] = {{"port", l_server_port},
                                              {"close", l_server_close},
                                              {"early_rejects", l_server_early_rejects},
                                              {"stats", l_server_stats},
                                              {NULL, NULL}};
    ra_glue_class(L, SERVER_MT, server_methods, l_server_gc, l_server_tostring);

    static const luaL_Reg req_methods[] = {
        {"respond", l_req_respond}, {"alive", l_req_alive}, {NULL, NULL}};
    luaL_newmetatable(L, REQ_MT);
    lua_newtable(L);
    luaL_register(L, NULL, req_methods);
    lua_pushvalue(L, -2); /* the metatable: l_req_index's check */
    lua_pushcclosure(L, l_req_index, 2);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, l_req_gc);
    lua_setfield(L, -2, "__gc");
    lua_pop(L, 1);

    lua_newtable(L);
    lua_pushcfunction(L, l_listen);
    lua_setfield(L, -2, "listen");
    return 1;
}

static void on_deadline(uv_timer_t *t) {
    *(int *)t->data = 1;
}

static void close_all(uv_loop_t *loop) {
    if (!servers) return;
    for (server_t *s = servers; s; s = s->next)
        server_close(s);
    /* Drive the loop until every server is freed: the connections are referenced again so
     * the loop polls them for the EOF/EPIPE their shutdown causes; a watchdog timer bounds
     * it (a server that is still not freed then is leaked, and said so). */
    int expired = 0;
    uv_timer_t watchdog;
    uv_timer_init(loop, &watchdog);
    watchdog.data = &expired;
    uv_timer_start(&watchdog, on_deadline, CLOSE_ALL_DEADLINE_MS, 0);
    while (servers && !expired) {
        for (server_t *s = servers; s; s = s->next)
            for (h2o_linklist_t *l = s->conns.next; l != &s->conns; l = l->next)
                uv_ref((uv_handle_t *)&H2O_STRUCT_FROM_MEMBER(conn_t, link, l)->tcp);
        uv_run(loop, UV_RUN_ONCE);
    }
    uv_close((uv_handle_t *)&watchdog, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
    if (servers) {
        log_line("closing", "a server did not close in time: leaking it");
        for (server_t *s = servers; s; s = s->next)
            if (s->ud) *s->ud = NULL;
        servers = NULL;
    }
}

const ra_host_module_t ra_host_httpd = {"ron.base.net.http_server", luaopen_httpd, close_all};
