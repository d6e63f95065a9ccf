/* ron.base.net.postgres_c: PostgreSQL connections driven by the host's one libuv loop,
 * through libpq's asynchronous API. The socket of each connection is watched by a uv_poll_t; the
 * loop thread never makes a blocking libpq call (PQconnectStart/PQconnectPoll,
 * PQsendQueryParams, PQflush in nonblocking mode, PQconsumeInput/PQisBusy/PQgetResult).
 * The task-friendly wrapper with reconnects and a pool is lua/ron/accounting/net/postgres.lua; the
 * PostgreSQL ledger on top of it is lua/ron/accounting/export/exporters/postgres.lua
 * (docs/EXPORT.md, "PostgreSQL ledger").
 *
 * Lua API (package.preload["ron.base.net.postgres_c"], registered by run.c):
 *
 *   local pq = require "ron.base.net.postgres_c"
 *   local conn = pq.connect(conninfo, cb [, { timeout_ms = 10000 }])
 *       conninfo: a libpq connection string or URI (a malformed one raises). cb(conn) once
 *       connected, or cb(nil, err, nil, class) on failure or when timeout_ms pass first.
 *   conn:query(sql, params, cb [, { timeout_ms = 0 }])  -> true
 *       One statement, $1..$n bound to params (a list, or nil; params.n counts trailing
 *       nils): nil -> NULL, a string -> text, a number -> its decimal text, a boolean ->
 *       "t"/"f", pq.bytea(s) -> binary format (a bytea parameter: raw bytes, no escaping).
 *       cb(rows) or cb(nil, err, sqlstate, class). rows[i] holds row i's values as strings
 *       by column name and by position (NULL: absent); rows.n, rows.columns (names),
 *       rows.command ("INSERT 0 1"...), rows.affected (a number, or nil).
 *   conn:exec(sql, cb [, opts])  -> true     several statements in one string (the simple
 *       protocol, no parameters): the last statement's rows, or the first error.
 *   conn:pipeline(list, cb [, opts])  -> true     libpq's pipeline mode (PostgreSQL 14+): every
 *       entry of list sent at once, one round trip for all. An entry is { sql, params } (as
 *       query's), { sql, prepare = name } (PQsendPrepare: sql made the session's named
 *       statement `name`, parsed and planned by the server once; answers no rows), { sql,
 *       params, name = name } (PQsendQueryPrepared: the named statement run with params; sql
 *       is not sent) or the string "sync" (PQpipelineSync: the statements since the previous
 *       sync run as ONE implicit transaction, committed there; a statement that fails
 *       aborts its transaction and the rest of it); the list ends with a sync (added when
 *       missing, not answered). cb(results): results[i] for list[i] is rows (as query's),
 *       { error = message, sqlstate = s } (the statement failed), { aborted = true } (an
 *       earlier statement of its transaction failed: not run) or { sync = true }. A
 *       connection failure answers cb(nil, err, sqlstate, class) as query does.
 *   conn:close()        idempotent. An operation in flight is answered
 *                       cb(nil, "Closed: ...", nil, "closed") on a later loop turn.
 *   conn:status()       "connecting" | "idle" | "busy" | "bad" (the connection broke) |
 *                       "closed"
 *   conn:error()        libpq's last error message for this connection, or nil
 *   conn:backend_pid(), conn:server_version()    numbers (0 when not connected)
 *   pq.bytea(s)         marks s as a binary (bytea) parameter
 *   pq.array(kind, list [, n])   a bytea[] ("bytea") or bigint[] ("int8") parameter, binary
 *   pq.unhex(s)         bytea text output ("\\x0a1b") -> bytes, or nil
 *   pq.live()           connections not yet freed (specs check for leaks)
 *   pq.libpq_version()  e.g. 150018
 *
 * Every callback runs on a later loop turn than the call that started its operation
 * (never inside it), on the main Lua state, through luv's callback runner: an error in it
 * is reported like an error in any luv callback (the host stops and exits 1). At most one
 * operation per connection is in flight: a second query() while one is raises (misuse).
 *
 * Error classes (the 4th value of a failure), so callers can map failures onto the export
 * contract without parsing messages:
 *   "network"  no answer from the server: cannot connect, the connection broke (also
 *              "connection is down" for a query on a broken connection: reconnect)
 *   "server"   the server answered with an error; sqlstate (3rd value) is its SQLSTATE
 *              (08xxx connection exception, 57P01 admin shutdown, 57014 canceled, ...)
 *   "timeout"  timeout_ms passed first; the connection is dropped (status "bad") and the
 *              running statement is canceled from the libuv threadpool (PQcancel blocks:
 *              it opens a connection of its own); the statement may or may not have
 *              committed
 *   "closed"   conn:close() ended the operation
 *   "client"   libpq refused the call (e.g. out of memory, a protocol error)
 *
 * Lifetimes:
 *   - While an operation is in flight the connection object is anchored in the registry:
 *     a script may drop its last reference mid-query; the callback still comes, then the
 *     object can be collected (its __gc closes the connection).
 *   - The poll handle is referenced while connecting or while a query is in flight, and
 *     unreferenced while idle: an open, idle connection never keeps the loop (the
 *     process) alive. An idle connection still watches its socket, so it notices at once
 *     when the server goes away (status "bad").
 *   - The uv_poll_t is closed before libpq closes its socket (before PQfinish), and
 *     recreated at each PQconnectPoll step (libpq may switch sockets while connecting):
 *     libuv never watches a descriptor number that libpq closed and reused.
 *   - close_all() (run.c calls it through ra_host_modules_close_all before it closes the
 *     loop) closes every connection still open without calling back into Lua and runs the
 *     loop until their handles are freed: luv's uv.walk, which the host then runs, only
 *     knows luv's own handles.
 *
 * Not covered: PQconnectStart resolves a host NAME with a blocking getaddrinfo (libpq
 * documents it); give hostaddr= or a numeric host (or a socket directory) on the loop. */
#include "host_name.h"
#include "lua/glue.h"
#include "lua/modules.h"

#include <libpq-fe.h>

#include <lauxlib.h>
#include <lua.h>
#include <luv/luv.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#define CONN_MT "ron.base.net.postgres_c.conn"
#define BYTEA_FIELD "bytea"
#define MAX_PARAMS 65535 /* the protocol's limit (a 16-bit count) */
#define DEFAULT_CONNECT_TIMEOUT_MS 10000
#define MAX_TIMEOUT_MS (24u * 3600u * 1000u)

enum { ST_CONNECTING, ST_IDLE, ST_BUSY, ST_BAD, ST_CLOSED };
static const char *const state_names[] = {"connecting", "idle", "busy", "bad", "closed"};

typedef struct pqc pqc_t;
struct pqc {
    PGconn *pg; /* NULL once finished */
    uv_loop_t *loop;
    lua_State *L;     /* the main state (luv_state): callbacks never run on a coroutine */
    uv_timer_t timer; /* timeouts and deferred answers; closing it frees the struct */
    uv_poll_t *poll;  /* NULL when no socket is watched */
    int state;
    int cb_ref;          /* the operation in flight's callback (LUA_NOREF: none) */
    int self_ref;        /* the Lua object, anchored while an operation is in flight */
    int op_connect;      /* the operation in flight is the connect */
    int want_write;      /* query: PQflush has not sent everything yet */
    unsigned timeout_ms; /* of the operation in flight, 0: none */
    PGresult *res;       /* query: the result kept so far */
    PGresult **pipe_res; /* pipeline: one result per entry (NULL: none yet) */
    int pipe_n, pipe_i;  /* pipeline: entries (0: not a pipeline), the one being read */
    int pipe_ans;        /* pipeline: entries answered (the list's: not an added sync) */
    char *err;           /* a failure waiting to be delivered by the timer (malloc) */
    char sqlstate[6];
    const char *err_class;
    int deferred;       /* the timer delivers err */
    int kick;           /* connecting without a socket yet: the timer calls PQconnectPoll */
    uint64_t deadline;  /* connecting: uv_now() by which it must be done */
    int freeing;        /* the timer is closing: the struct goes in its close callback */
    pqc_t **ud;         /* the Lua object's pointer to us (cleared when we go) */
    pqc_t *next, *prev; /* all structs not yet freed (close_all) */
};

static pqc_t *conns; /* not yet freed */
static int n_structs, n_polls;

/* ---- small helpers ------------------------------------------------------------------ */

static void log_line(const char *what, const char *msg) {
    ra_glue_log("pq", what, msg);
}

/* libpq's messages end with a newline (sometimes several lines, tab-indented): one line,
 * whitespace runs collapsed, trimmed. */
static char *dup_msg(const char *m) {
    if (!m || !*m) m = "unknown error";
    size_t n = strlen(m), k = 0;
    char *s = malloc(n + 1);
    if (!s) return NULL;
    for (size_t i = 0; i < n; i++) {
        int ws = m[i] == '\n' || m[i] == '\t' || m[i] == ' ';
        if (ws && (k == 0 || s[k - 1] == ' ')) continue;
        s[k++] = ws ? ' ' : m[i];
    }
    while (k > 0 && s[k - 1] == ' ')
        k--;
    s[k] = '\0';
    return s;
}

static void set_err(pqc_t *c, const char *msg, const char *sqlstate, const char *cls) {
    free(c->err);
    c->err = dup_msg(msg);
    snprintf(c->sqlstate, sizeof c->sqlstate, "%s", sqlstate ? sqlstate : "");
    c->err_class = cls;
}

/* Notices: WARNING and worse on stderr; NOTICE ("already exists, skipping"), INFO, LOG
 * and DEBUG are dropped. */
static void on_notice(void *arg, const PGresult *res) {
    (void)arg;
    const char *sev = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
    if (!sev) sev = PQresultErrorField(res, PG_DIAG_SEVERITY);
    if (!sev || strcmp(sev, "NOTICE") == 0 || strcmp(sev, "INFO") == 0 || strcmp(sev, "LOG") == 0 ||
        strncmp(sev, "DEBUG", 5) == 0)
        return;
    char *m = dup_msg(PQresultErrorMessage(res));
    log_line("server notice", m);
    free(m);
}

/* ---- the poll handle ---------------------------------------------------------------- */

static void on_poll_closed(uv_handle_t *h) {
    free(h);
    n_polls--;
}

static void poll_close(pqc_t *c) {
    if (!c->poll) return;
    c->poll->data = NULL;
    uv_close((uv_handle_t *)c->poll, on_poll_closed);
    c->poll = NULL;
}

static void on_poll(uv_poll_t *p, int status, int events);

/* Watches the connection's socket for events; recreate: a new handle even when one
 * exists (libpq may have switched sockets). Referenced unless idle. 0 or a libuv error. */
static int poll_watch(pqc_t *c, int events, int recreate) {
    if (recreate) poll_close(c);
    if (!c->poll) {
        int fd = c->pg ? PQsocket(c->pg) : -1;
        if (fd < 0) return UV_EBADF;
        uv_poll_t *p = malloc(sizeof *p);
        if (!p) return UV_ENOMEM;
        int rc = uv_poll_init(c->loop, p, fd);
        if (rc != 0) {
            free(p);
            return rc;
        }
        n_polls++;
        p->data = c;
        c->poll = p;
    }
    int rc = uv_poll_start(c->poll, events, on_poll);
    if (rc != 0) return rc;
    if (c->state == ST_IDLE)
        uv_unref((uv_handle_t *)c->poll);
    else
        uv_ref((uv_handle_t *)c->poll);
    return 0;
}

/* The connection is unusable: stop watching it (before libpq's socket goes). */
static void mark_bad(pqc_t *c) {
    poll_close(c);
    c->state = ST_BAD;
}

/* ---- answering -------------------------------------------------------------------- */

static void on_timer_closed(uv_handle_t *h) {
    pqc_t *c = h->data;
    if (c->next) c->next->prev = c->prev;
    if (c->prev)
        c->prev->next = c->next;
    else
        conns = c->next;
    free(c->err);
    free(c);
    n_structs--;
}

/* Drops the operation's references (callback, anchor) without calling anything. */
static void drop_refs(pqc_t *c) {
    ra_glue_unref(c->L, &c->cb_ref);
    ra_glue_unref(c->L, &c->self_ref);
}

/* Drops a pipeline's results (answered, failed or abandoned). */
static void pipe_clear(pqc_t *c) {
    for (int i = 0; i < c->pipe_n; i++)
        PQclear(c->pipe_res[i]);
    free(c->pipe_res);
    c->pipe_res = NULL;
    c->pipe_n = c->pipe_i = 0;
}

/* The server connection goes: its poll handle, the libpq connection and every result. */
static void disconnect(pqc_t *c) {
    poll_close(c);
    if (c->pg) {
        PQfinish(c->pg);
        c->pg = NULL;
    }
    PQclear(c->res);
    c->res = NULL;
    pipe_clear(c);
}

/* The struct goes (on a later loop turn): the Lua object is detached first. */
static void release(pqc_t *c) {
    if (c->freeing) return;
    c->freeing = 1;
    if (c->ud) *c->ud = NULL;
    c->ud = NULL;
    disconnect(c);
    drop_refs(c);
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, on_timer_closed);
}

/* Calls the operation's callback with the nargs values on top of c->L (pushed after
 * begin_answer). The state is final before: the callback may start the next query or
 * close the connection. */
static int begin_answer(pqc_t *c) {
    lua_State *L = c->L;
    return ra_glue_push_ref(L, c->cb_ref, 8);
}

static void end_answer(pqc_t *c, int nargs) {
    lua_State *L = c->L;
    /* The anchor goes after the call: the arguments may hold the object itself. */
    int self_ref = c->self_ref;
    c->self_ref = LUA_NOREF;
    ra_glue_unref(L, &c->cb_ref);
    c->timeout_ms = 0;
    ra_glue_call(L, nargs);
    ra_glue_unref(L, &self_ref);
}

/* Answers the operation in flight with the error in c (set_err). */
static void answer_error(pqc_t *c) {
    uv_timer_stop(&c->timer);
    c->deferred = 0;
    c->op_connect = 0;
    if (!begin_answer(c)) {
        drop_refs(c);
        return;
    }
    lua_State *L = c->L;
    lua_pushnil(L);
    lua_pushstring(L, c->err ? c->err : "out of memory");
    if (c->sqlstate[0])
        lua_pushstring(L, c->sqlstate);
    else
        lua_pushnil(L);
    lua_pushstring(L, c->err_class ? c->err_class : "client");
    end_answer(c, 4);
}

/* An error to answer on a later loop turn (the call that started the operation is still
 * running). */
static void on_timer(uv_timer_t *t);

static void defer_error(pqc_t *c, const char *msg, const char *sqlstate, const char *cls) {
    set_err(c, msg, sqlstate, cls);
    c->deferred = 1;
    uv_timer_start(&c->timer, on_timer, 0, 0);
}

/* ---- connecting --------------------------------------------------------------------- */

static void fail_connect(pqc_t *c, const char *msg, const char *cls) {
    set_err(c, msg, NULL, cls);
    mark_bad(c);
    answer_error(c);
}

static void connected(pqc_t *c) {
    uv_timer_stop(&c->timer);
    if (PQsetnonblocking(c->pg, 1) != 0) {
        fail_connect(c, PQerrorMessage(c->pg), "client");
        return;
    }
    PQsetNoticeReceiver(c->pg, on_notice, NULL);
    c->state = ST_IDLE;
    int rc = poll_watch(c, UV_READABLE, 1);
    if (rc != 0) {
        fail_connect(c, uv_strerror(rc), "client");
        return;
    }
    c->op_connect = 0;
    if (!begin_answer(c)) {
        drop_refs(c);
        return;
    }
    ra_glue_push_ref(c->L, c->self_ref, 0); /* begin_answer made room */
    end_answer(c, 1);
}

/* The timer runs PQconnectPoll on the next loop turn (libpq has no socket to wait on:
 * an address failed at once and it moves to the next), then goes back to the deadline. */
static void kick_later(pqc_t *c) {
    c->kick = 1;
    uv_timer_start(&c->timer, on_timer, 0, 0);
}

/* One PQconnectPoll step, then the socket watched for what it asked. */
static void connect_step(pqc_t *c) {
    PostgresPollingStatusType st = PQconnectPoll(c->pg);
    int rc = 0;
    if ((st == PGRES_POLLING_READING || st == PGRES_POLLING_WRITING) && PQsocket(c->pg) < 0) {
        poll_close(c);
        kick_later(c);
        return;
    }
    switch (st) {
    case PGRES_POLLING_READING:
        rc = poll_watch(c, UV_READABLE, 1);
        break;
    case PGRES_POLLING_WRITING:
        rc = poll_watch(c, UV_WRITABLE, 1);
        break;
    case PGRES_POLLING_OK:
        connected(c);
        return;
    default: {
        /* The server answered (starting up, shutting down, too many clients, auth...):
         * "server"; else it could not be reached: "network". */
        const char *m = PQerrorMessage(c->pg);
        fail_connect(c, m, strstr(m, "FATAL:") ? "server" : "network");
        return;
    }
    }
    if (rc != 0) fail_connect(c, uv_strerror(rc), "network");
}

/* ---- queries ------------------------------------------------------------------------ */

/* Pushes rows (see the header) for a TUPLES_OK / COMMAND_OK result. */
static void push_rows(lua_State *L, const PGresult *res) {
    int nt = PQntuples(res), nf = PQnfields(res);
    lua_createtable(L, nt, 4);
    lua_createtable(L, nf, 0);
    for (int j = 0; j < nf; j++) {
        lua_pushstring(L, PQfname(res, j));
        lua_rawseti(L, -2, j + 1);
    }
    lua_setfield(L, -2, "columns");
    for (int i = 0; i < nt; i++) {
        lua_createtable(L, nf, nf);
        for (int j = 0; j < nf; j++) {
            if (PQgetisnull(res, i, j)) continue;
            lua_pushlstring(L, PQgetvalue(res, i, j), (size_t)PQgetlength(res, i, j));
            lua_pushvalue(L, -1);
            lua_rawseti(L, -3, j + 1);
            lua_setfield(L, -2, PQfname(res, j));
        }
        lua_rawseti(L, -2, i + 1);
    }
    lua_pushinteger(L, nt);
    lua_setfield(L, -2, "n");
    lua_pushstring(L, PQcmdStatus((PGresult *)res));
    lua_setfield(L, -2, "command");
    const char *aff = PQcmdTuples((PGresult *)res);
    if (aff && *aff) {
        lua_pushnumber(L, strtod(aff, NULL));
        lua_setfield(L, -2, "affected");
    }
}

static int result_ok(const PGresult *r) {
    ExecStatusType s = PQresultStatus(r);
    return s == PGRES_TUPLES_OK || s == PGRES_COMMAND_OK || s == PGRES_EMPTY_QUERY ||
           s == PGRES_SINGLE_TUPLE;
}

/* PQgetResult said NULL: the query is over. */
static void query_done(pqc_t *c) {
    uv_timer_stop(&c->timer);
    PGresult *res = c->res;
    c->res = NULL;
    if (PQstatus(c->pg) == CONNECTION_OK) {
        c->state = ST_IDLE;
        int rc = poll_watch(c, UV_READABLE, 0);
        if (rc != 0) mark_bad(c);
    } else {
        mark_bad(c);
    }
    if (!res) {
        set_err(c, c->state == ST_BAD ? PQerrorMessage(c->pg) : "no result", NULL,
                c->state == ST_BAD ? "network" : "client");
        answer_error(c);
        return;
    }
    if (!result_ok(res)) {
        const char *st = PQresultErrorField(res, PG_DIAG_SQLSTATE);
        const char *prim = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
        const char *cls = st ? "server" : (c->state == ST_BAD ? "network" : "client");
        set_err(c, prim ? prim : PQresultErrorMessage(res), st, cls);
        PQclear(res);
        answer_error(c);
        return;
    }
    if (!begin_answer(c)) {
        PQclear(res);
        drop_refs(c);
        return;
    }
    push_rows(c->L, res);
    PQclear(res);
    end_answer(c, 1);
}

static void fail_query(pqc_t *c, const char *msg, const char *cls) {
    uv_timer_stop(&c->timer);
    PQclear(c->res);
    c->res = NULL;
    pipe_clear(c);
    set_err(c, msg, NULL, cls);
    mark_bad(c);
    answer_error(c);
}

/* The pipeline's last sync came: back to normal mode, the results to Lua. */
static void pipeline_done(pqc_t *c) {
    uv_timer_stop(&c->timer);
    if (!PQexitPipelineMode(c->pg) && !PQisBusy(c->pg)) {
        PGresult *r = PQgetResult(c->pg); /* the end of the last sync's results */
        PQclear(r);
    }
    if (PQpipelineStatus(c->pg) != PQ_PIPELINE_OFF && !PQexitPipelineMode(c->pg)) {
        fail_query(c, PQerrorMessage(c->pg), "client");
        return;
    }
    if (PQstatus(c->pg) != CONNECTION_OK) {
        fail_query(c, PQerrorMessage(c->pg), "network");
        return;
    }
    c->state = ST_IDLE;
    if (poll_watch(c, UV_READABLE, 0) != 0) mark_bad(c);
    if (!begin_answer(c)) {
        pipe_clear(c);
        drop_refs(c);
        return;
    }
    lua_State *L = c->L;
    lua_createtable(L, c->pipe_ans, 0);
    for (int i = 0; i < c->pipe_ans; i++) {
        PGresult *r = c->pipe_res[i];
        ExecStatusType rs = r ? PQresultStatus(r) : PGRES_PIPELINE_ABORTED;
        if (rs == PGRES_PIPELINE_SYNC) {
            lua_createtable(L, 0, 1);
            lua_pushboolean(L, 1);
            lua_setfield(L, -2, "sync");
        } else if (rs == PGRES_PIPELINE_ABORTED) {
            lua_createtable(L, 0, 1);
            lua_pushboolean(L, 1);
            lua_setfield(L, -2, "aborted");
        } else if (result_ok(r)) {
            push_rows(L, r);
        } else {
            const char *st = PQresultErrorField(r, PG_DIAG_SQLSTATE);
            const char *prim = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
            char *m = dup_msg(prim ? prim : PQresultErrorMessage(r));
            lua_createtable(L, 0, 2);
            lua_pushstring(L, m ? m : "out of memory");
            lua_setfield(L, -2, "error");
            free(m);
            if (st) {
                lua_pushstring(L, st);
                lua_setfield(L, -2, "sqlstate");
            }
        }
        lua_rawseti(L, -2, i + 1);
    }
    pipe_clear(c);
    end_answer(c, 1);
}

/* A pipeline's results as they come: each statement's (the first error, else the last)
 * until PQgetResult says NULL, which moves to the next entry; a sync's is its own. */
static void pipeline_collect(pqc_t *c) {
    while (!PQisBusy(c->pg)) {
        PGresult *r = PQgetResult(c->pg);
        if (!r) {
            if (c->pipe_i >= c->pipe_n || !c->pipe_res[c->pipe_i]) break; /* nothing yet */
            if (++c->pipe_i >= c->pipe_n) {
                pipeline_done(c);
                return;
            }
            continue;
        }
        if (c->pipe_i >= c->pipe_n) { /* more than was sent: a protocol surprise */
            PQclear(r);
            fail_query(c, "unexpected result after the pipeline's end", "client");
            return;
        }
        ExecStatusType rs = PQresultStatus(r);
        PGresult **slot = &c->pipe_res[c->pipe_i];
        if (rs == PGRES_PIPELINE_SYNC) {
            PQclear(*slot);
            *slot = r;
            if (++c->pipe_i >= c->pipe_n) {
                pipeline_done(c);
                return;
            }
        } else if (*slot && !result_ok(*slot)) {
            PQclear(r);
        } else {
            PQclear(*slot);
            *slot = r;
        }
    }
}

/* Socket events while a query is in flight: send what is left, read what came, collect
 * results until libpq would block. */
static void query_step(pqc_t *c, int events) {
    if ((events & UV_READABLE) && !PQconsumeInput(c->pg)) {
        fail_query(c, PQerrorMessage(c->pg), "network");
        return;
    }
    if (c->want_write) {
        int f = PQflush(c->pg);
        if (f < 0) {
            fail_query(c, PQerrorMessage(c->pg), "network");
            return;
        }
        c->want_write = f == 1;
    }
    if (c->pipe_n) {
        pipeline_collect(c);
        if (c->state != ST_BUSY || !c->pipe_n) return; /* answered, or failed */
    }
    while (!c->pipe_n && !PQisBusy(c->pg)) {
        PGresult *r = PQgetResult(c->pg);
        if (!r) {
            query_done(c);
            return;
        }
        ExecStatusType rs = PQresultStatus(r);
        if (rs == PGRES_COPY_IN || rs == PGRES_COPY_OUT || rs == PGRES_COPY_BOTH) {
            PQclear(r);
            fail_query(c, "COPY is not supported by ron.base.net.postgres_c", "client");
            return;
        }
        /* exec() may bring several: keep the first error, else the last result. */
        if (c->res && !result_ok(c->res)) {
            PQclear(r);
        } else {
            PQclear(c->res);
            c->res = r;
        }
    }
    if (PQstatus(c->pg) != CONNECTION_OK) {
        fail_query(c, PQerrorMessage(c->pg), "network");
        return;
    }
    int rc = poll_watch(c, UV_READABLE | (c->want_write ? UV_WRITABLE : 0), 0);
    if (rc != 0) fail_query(c, uv_strerror(rc), "network");
}

/* ---- the statement canceled from the threadpool (a query timeout) ----------------- */

typedef struct {
    uv_work_t req;
    PGcancel *cancel;
} cancel_t;

static void cancel_work(uv_work_t *req) {
    cancel_t *w = req->data;
    char buf[256];
    PQcancel(w->cancel, buf, sizeof buf); /* best effort: the connection is dropped anyway */
}

static void cancel_after(uv_work_t *req, int status) {
    (void)status;
    cancel_t *w = req->data;
    PQfreeCancel(w->cancel);
    free(w);
}

static void cancel_in_pool(pqc_t *c) {
    PGcancel *pc = PQgetCancel(c->pg);
    if (!pc) return;
    cancel_t *w = malloc(sizeof *w);
    if (!w) {
        PQfreeCancel(pc);
        return;
    }
    w->cancel = pc;
    w->req.data = w;
    if (uv_queue_work(c->loop, &w->req, cancel_work, cancel_after) != 0) {
        PQfreeCancel(pc);
        free(w);
    }
}

/* ---- loop callbacks ------------------------------------------------------------------ */

static void on_poll(uv_poll_t *p, int status, int events) {
    pqc_t *c = p->data;
    if (!c) return; /* closing */
    /* libuv answers EPOLLERR/EPOLLHUP (a refused connect, a reset) with UV_EBADF and stops
     * the handle: libpq reads the socket's real error itself, so take it as "readable and
     * writable" and let the step below find out (it re-arms or fails). */
    if (status < 0) events = UV_READABLE | UV_WRITABLE;
    switch (c->state) {
    case ST_CONNECTING:
        connect_step(c);
        break;
    case ST_BUSY:
        query_step(c, events);
        break;
    case ST_IDLE:
        /* Idle: the server may have gone away (a FATAL message, then EOF), or sent a
         * notification (dropped: nothing here LISTENs). */
        if (!PQconsumeInput(c->pg) || PQstatus(c->pg) != CONNECTION_OK) {
            mark_bad(c);
            return;
        }
        for (PGnotify *n; (n = PQnotifies(c->pg));)
            PQfreemem(n);
        break;
    default:
        poll_close(c);
    }
}

static void start_timer(pqc_t *c, uint64_t ms);

static void on_timer(uv_timer_t *t) {
    pqc_t *c = t->data;
    if (c->kick && !c->deferred) {
        c->kick = 0;
        uint64_t now = uv_now(c->loop);
        if (c->state == ST_CONNECTING && now < c->deadline) {
            start_timer(c, c->deadline - now);
            connect_step(c);
            return;
        }
    }
    c->kick = 0;
    if (c->deferred) {
        c->deferred = 0;
        answer_error(c);
        if (c->state == ST_CLOSED) release(c);
        return;
    }
    char msg[128];
    if (c->state == ST_CONNECTING) {
        snprintf(msg, sizeof msg, "Timeout: not connected within %u ms", c->timeout_ms);
        set_err(c, msg, NULL, "timeout");
        mark_bad(c);
        PQfinish(c->pg); /* after poll_close (mark_bad) */
        c->pg = NULL;
        answer_error(c);
    } else if (c->state == ST_BUSY) {
        snprintf(msg, sizeof msg,
                 "Timeout: no answer within %u ms (statement canceled, connection dropped)",
                 c->timeout_ms);
        cancel_in_pool(c);
        PQclear(c->res);
        c->res = NULL;
        pipe_clear(c);
        set_err(c, msg, NULL, "timeout");
        mark_bad(c);
        PQfinish(c->pg); /* after poll_close (mark_bad): the socket goes now */
        c->pg = NULL;
        answer_error(c);
    }
}

static void start_timer(pqc_t *c, uint64_t ms) {
    /* From now, not from the loop's cached time: that is as old as the loop's turn, and
     * after Lua held the loop longer than ms (verify's replay of a large ledger) a timer
     * started from it was already due, so a query answered in milliseconds timed out. */
    uv_update_time(c->loop);
    uv_timer_start(&c->timer, on_timer, ms, 0);
}

/* ---- Lua: helpers --------------------------------------------------------------------- */

static pqc_t *check_conn(lua_State *L, int idx, int open) {
    pqc_t **ud = luaL_checkudata(L, idx, CONN_MT);
    if (open && (!*ud || (*ud)->state == ST_CLOSED))
        luaL_error(L, "ron.base.net.postgres_c: the connection is closed");
    return *ud;
}

static unsigned opt_timeout(lua_State *L, int idx, unsigned dflt) {
    if (lua_isnoneornil(L, idx)) return dflt;
    luaL_checktype(L, idx, LUA_TTABLE);
    lua_getfield(L, idx, "timeout_ms");
    unsigned ms = dflt;
    if (!lua_isnil(L, -1)) {
        lua_Number n = luaL_checknumber(L, -1);
        if (!(n >= 0 && n <= MAX_TIMEOUT_MS))
            luaL_error(L, "ron.base.net.postgres_c: timeout_ms must be in 0..%u", MAX_TIMEOUT_MS);
        ms = (unsigned)n;
    }
    lua_pop(L, 1);
    return ms;
}

/* ---- Lua: pq.connect ------------------------------------------------------------------ */

static int l_connect(lua_State *L) {
    const char *conninfo = luaL_checkstring(L, 1);
    luaL_checktype(L, 2, LUA_TFUNCTION);
    unsigned timeout_ms = opt_timeout(L, 3, DEFAULT_CONNECT_TIMEOUT_MS);
    char *perr = NULL;
    PQconninfoOption *opts = PQconninfoParse(conninfo, &perr);
    if (!opts) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", perr ? perr : "out of memory");
        PQfreemem(perr);
        char *m = dup_msg(msg);
        lua_pushfstring(L, "ron.base.net.postgres_c: bad conninfo: %s", m ? m : "");
        free(m);
        return lua_error(L);
    }
    PQconninfoFree(opts);

    pqc_t *c = calloc(1, sizeof *c);
    if (!c) return luaL_error(L, "ron.base.net.postgres_c: out of memory");
    c->loop = luv_loop(L);
    c->L = luv_state(L);
    c->cb_ref = c->self_ref = LUA_NOREF;
    uv_timer_init(c->loop, &c->timer);
    c->timer.data = c;
    n_structs++;
    c->next = conns;
    if (conns) conns->prev = c;
    conns = c;

    pqc_t **ud = lua_newuserdata(L, sizeof *ud);
    *ud = c;
    c->ud = ud;
    luaL_getmetatable(L, CONN_MT);
    lua_setmetatable(L, -2);

    c->cb_ref = ra_glue_ref(L, 2);
    c->self_ref = ra_glue_ref(L, -1);
    c->op_connect = 1;
    c->timeout_ms = timeout_ms;
    c->state = ST_CONNECTING;
    uv_update_time(c->loop); /* (the deadline from now: start_timer) */
    c->deadline = uv_now(c->loop) + (timeout_ms ? timeout_ms : MAX_TIMEOUT_MS);
    start_timer(c, timeout_ms ? timeout_ms : MAX_TIMEOUT_MS);

    c->pg = PQconnectStart(conninfo);
    if (!c->pg) {
        c->state = ST_BAD;
        defer_error(c, "out of memory", NULL, "client");
        return 1;
    }
    if (PQstatus(c->pg) == CONNECTION_BAD) {
        c->state = ST_BAD;
        defer_error(c, PQerrorMessage(c->pg), NULL, "network");
        return 1;
    }
    /* libpq: start as if PQconnectPoll had answered PGRES_POLLING_WRITING (without a
     * socket yet: PQconnectPoll on the next loop turn). */
    if (PQsocket(c->pg) < 0) {
        kick_later(c);
        return 1;
    }
    int rc = poll_watch(c, UV_WRITABLE, 1);
    if (rc != 0) {
        c->state = ST_BAD;
        defer_error(c, uv_strerror(rc), NULL, "network");
    }
    return 1;
}

/* ---- Lua: conn:query / conn:exec ------------------------------------------------------- */

/* Starts sending; the answer comes through the poll handle (or a deferred error). */
static void start_op(lua_State *L, pqc_t *c, int cb_idx, unsigned timeout_ms, int sent) {
    c->cb_ref = ra_glue_ref(L, cb_idx);
    c->self_ref = ra_glue_ref(L, 1);
    c->timeout_ms = timeout_ms;
    if (!sent) {
        int bad = PQstatus(c->pg) != CONNECTION_OK;
        if (bad) mark_bad(c);
        defer_error(c, PQerrorMessage(c->pg), NULL, bad ? "network" : "client");
        return;
    }
    c->state = ST_BUSY;
    start_timer(c, timeout_ms ? timeout_ms : MAX_TIMEOUT_MS);
    int f = PQflush(c->pg);
    if (f < 0) {
        mark_bad(c);
        defer_error(c, PQerrorMessage(c->pg), NULL, "network");
        return;
    }
    c->want_write = f == 1;
    int rc = poll_watch(c, UV_READABLE | (c->want_write ? UV_WRITABLE : 0), 0);
    if (rc != 0) {
        mark_bad(c);
        defer_error(c, uv_strerror(rc), NULL, "network");
    }
}

/* Raises on misuse; answers "connection is down" (deferred) on a broken connection.
 * Returns 1 when the caller may send. */
static int ready_for_query(lua_State *L, pqc_t *c, int cb_idx) {
    if (c->deferred || c->cb_ref != LUA_NOREF)
        luaL_error(L, "ron.base.net.postgres_c: an operation is in flight on this connection "
                      "(one at a time)");
    if (c->state == ST_CONNECTING)
        luaL_error(L, "ron.base.net.postgres_c: query before the connection is established");
    if (c->state == ST_IDLE) return 1;
    /* ST_BAD */
    char msg[512];
    const char *last = c->pg ? PQerrorMessage(c->pg) : "";
    snprintf(msg, sizeof msg, "connection is down%s%s", *last ? ": " : "", last);
    c->cb_ref = ra_glue_ref(L, cb_idx);
    c->self_ref = ra_glue_ref(L, 1);
    defer_error(c, msg, NULL, "network");
    return 0;
}

/* Converts the parameters of the table at tidx (a list, or nil: none) for
 * PQsendQueryParams into values/lengths/formats (allocated; the caller frees them) and
 * their count; the converted strings stay on the Lua stack until the caller pops them.
 * NULL, or a misuse message (nothing allocated then). */
typedef struct {
    int n;
    const char **values;
    int *lengths, *formats;
} params_t;

static void params_free(params_t *p) {
    free(p->values);
    free(p->lengths);
    free(p->formats);
    p->values = NULL;
    p->lengths = p->formats = NULL;
}

static const char *params_from(lua_State *L, int tidx, params_t *p) {
    p->n = 0;
    p->values = NULL;
    p->lengths = p->formats = NULL;
    if (lua_istable(L, tidx)) {
        lua_getfield(L, tidx, "n");
        p->n = lua_isnumber(L, -1) ? (int)lua_tointeger(L, -1) : (int)lua_objlen(L, tidx);
        lua_pop(L, 1);
        if (p->n < 0 || p->n > MAX_PARAMS) return "too many parameters (0..65535)";
    }
    int n = p->n;
    if (!lua_checkstack(L, n + 8)) return "too many parameters";
    p->values = n ? calloc((size_t)n, sizeof *p->values) : NULL;
    p->lengths = n ? calloc((size_t)n, sizeof *p->lengths) : NULL;
    p->formats = n ? calloc((size_t)n, sizeof *p->formats) : NULL;
    if (n && (!p->values || !p->lengths || !p->formats)) {
        params_free(p);
        return "out of memory";
    }
    const char *bad = NULL;
    for (int i = 0; i < n && !bad; i++) {
        lua_rawgeti(L, tidx, i + 1);
        int t = lua_type(L, -1);
        size_t len = 0;
        if (t == LUA_TNIL) {
            p->values[i] = NULL;
        } else if (t == LUA_TSTRING) {
            p->values[i] = lua_tolstring(L, -1, &len);
        } else if (t == LUA_TNUMBER) {
            lua_Number v = lua_tonumber(L, -1);
            if (v != v || isinf(v)) {
                bad = "a parameter is NaN or infinite";
            } else if (v == floor(v) && fabs(v) < 9.2e18) {
                char buf[32];
                snprintf(buf, sizeof buf, "%lld", (long long)v);
                lua_pushstring(L, buf);
                lua_replace(L, -2);
            } else {
                char buf[40];
                snprintf(buf, sizeof buf, "%.17g", v);
                lua_pushstring(L, buf);
                lua_replace(L, -2);
            }
            if (!bad) p->values[i] = lua_tolstring(L, -1, &len);
        } else if (t == LUA_TBOOLEAN) {
            lua_pushstring(L, lua_toboolean(L, -1) ? "t" : "f");
            lua_replace(L, -2);
            p->values[i] = lua_tolstring(L, -1, &len);
        } else if (t == LUA_TTABLE) {
            lua_getfield(L, -1, BYTEA_FIELD);
            if (lua_type(L, -1) != LUA_TSTRING) {
                bad = "a table parameter must be pq.bytea(string)";
            } else {
                lua_replace(L, -2);
                p->values[i] = lua_tolstring(L, -1, &len);
                p->formats[i] = 1;
            }
        } else {
            bad = "a parameter must be nil, a string, a number, a boolean or pq.bytea(s)";
        }
        if (len > 0x7fffffff) bad = "a parameter is over 2 GiB";
        p->lengths[i] = (int)len;
    }
    if (bad) params_free(p);
    return bad;
}

static int l_query(lua_State *L) {
    pqc_t *c = check_conn(L, 1, 1);
    const char *sql = luaL_checkstring(L, 2);
    if (!lua_isnoneornil(L, 3)) luaL_checktype(L, 3, LUA_TTABLE);
    luaL_checktype(L, 4, LUA_TFUNCTION);
    unsigned timeout_ms = opt_timeout(L, 5, 0);
    /* Convert (and check) every parameter before touching the connection. The strings
     * stay on the Lua stack (so alive) until PQsendQueryParams has copied them. */
    int base = lua_gettop(L);
    params_t p;
    const char *bad = params_from(L, 3, &p);
    if (bad) return luaL_error(L, "ron.base.net.postgres_c: query: parameter: %s", bad);
    if (ready_for_query(L, c, 4)) {
        int sent = PQsendQueryParams(c->pg, sql, p.n, NULL, p.values, p.lengths, p.formats, 0);
        start_op(L, c, 4, timeout_ms, sent);
    }
    params_free(&p);
    lua_settop(L, base);
    lua_pushboolean(L, 1);
    return 1;
}

/* conn:pipeline(list, cb [, opts]): see the header. Every entry is checked before anything
 * is sent; then pipeline mode, each statement sent (its parameters copied by libpq before
 * the next is converted), a sync where asked and at the end, one flush. */
static int l_pipeline(lua_State *L) {
    pqc_t *c = check_conn(L, 1, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    luaL_checktype(L, 3, LUA_TFUNCTION);
    unsigned timeout_ms = opt_timeout(L, 4, 0);
    int n = (int)lua_objlen(L, 2);
    if (n < 1 || n > MAX_PARAMS)
        return luaL_error(L, "ron.base.net.postgres_c: pipeline: 1..%d entries", MAX_PARAMS);
    int last_sync = 0;
    for (int i = 1; i <= n; i++) {
        lua_rawgeti(L, 2, i);
        int ok = 0;
        last_sync = 0;
        if (lua_type(L, -1) == LUA_TSTRING) {
            ok = last_sync = strcmp(lua_tostring(L, -1), "sync") == 0;
        } else if (lua_istable(L, -1)) {
            lua_rawgeti(L, -1, 1);
            lua_rawgeti(L, -2, 2);
            ok = lua_type(L, -2) == LUA_TSTRING && (lua_isnil(L, -1) || lua_istable(L, -1));
            lua_pop(L, 2);
        }
        lua_pop(L, 1);
        if (!ok)
            return luaL_error(L,
                              "ron.base.net.postgres_c: pipeline: entry %d is not "
                              "{ sql, params } or \"sync\"",
                              i);
    }
    int total = n + (last_sync ? 0 : 1);
    if (!ready_for_query(L, c, 3)) {
        lua_pushboolean(L, 1);
        return 1;
    }
    int sent = PQenterPipelineMode(c->pg);
    int base = lua_gettop(L);
    const char *bad = NULL;
    for (int i = 1; i <= n && sent && !bad; i++) {
        lua_rawgeti(L, 2, i);
        if (lua_type(L, -1) == LUA_TSTRING) {
            sent = PQpipelineSync(c->pg);
        } else {
            lua_rawgeti(L, -1, 1);
            lua_rawgeti(L, -2, 2);
            lua_getfield(L, -3, "prepare");
            lua_getfield(L, -4, "name");
            const char *prep = lua_tostring(L, base + 4), *name = lua_tostring(L, base + 5);
            params_t p;
            if (prep) {
                sent = PQsendPrepare(c->pg, prep, lua_tostring(L, base + 2), 0, NULL);
            } else if (!(bad = params_from(L, base + 3, &p))) {
                sent =
                    name ? PQsendQueryPrepared(c->pg, name, p.n, p.values, p.lengths, p.formats, 0)
                         : PQsendQueryParams(c->pg, lua_tostring(L, base + 2), p.n, NULL, p.values,
                                             p.lengths, p.formats, 0);
                params_free(&p);
            }
        }
        lua_settop(L, base);
    }
    if (sent && !bad && !last_sync) sent = PQpipelineSync(c->pg);
    if (bad || !sent) {
        /* a half-sent pipeline leaves the connection in no known state: drop it */
        if (!bad) bad = PQerrorMessage(c->pg);
        char msg[512];
        snprintf(msg, sizeof msg, "pipeline: %s", bad);
        mark_bad(c);
        c->cb_ref = ra_glue_ref(L, 3);
        c->self_ref = ra_glue_ref(L, 1);
        defer_error(c, msg, NULL, "client");
        lua_pushboolean(L, 1);
        return 1;
    }
    c->pipe_res = calloc((size_t)total, sizeof *c->pipe_res);
    if (!c->pipe_res) {
        mark_bad(c);
        c->cb_ref = ra_glue_ref(L, 3);
        c->self_ref = ra_glue_ref(L, 1);
        defer_error(c, "out of memory", NULL, "client");
        lua_pushboolean(L, 1);
        return 1;
    }
    c->pipe_n = total;
    c->pipe_ans = n;
    c->pipe_i = 0;
    start_op(L, c, 3, timeout_ms, 1);
    lua_pushboolean(L, 1);
    return 1;
}

static int l_exec(lua_State *L) {
    pqc_t *c = check_conn(L, 1, 1);
    const char *sql = luaL_checkstring(L, 2);
    luaL_checktype(L, 3, LUA_TFUNCTION);
    unsigned timeout_ms = opt_timeout(L, 4, 0);
    if (ready_for_query(L, c, 3)) start_op(L, c, 3, timeout_ms, PQsendQuery(c->pg, sql));
    lua_pushboolean(L, 1);
    return 1;
}

/* ---- Lua: close, status, gc ----------------------------------------------------------- */

static int l_close(lua_State *L) {
    pqc_t *c = check_conn(L, 1, 0);
    if (!c || c->state == ST_CLOSED) return 0;
    disconnect(c);
    c->state = ST_CLOSED;
    if (c->ud) *c->ud = NULL; /* the object is closed from now on */
    c->ud = NULL;
    if (c->cb_ref != LUA_NOREF && !c->deferred) {
        /* the operation in flight gets its answer on a later loop turn, then we go */
        uv_timer_stop(&c->timer);
        defer_error(c, "Closed: the connection was closed", NULL, "closed");
    } else if (!c->deferred) {
        release(c);
    }
    /* a deferred answer already pending: on_timer delivers it, then releases */
    return 0;
}

static int l_gc(lua_State *L) {
    pqc_t **ud = luaL_checkudata(L, 1, CONN_MT);
    pqc_t *c = *ud;
    if (!c) return 0;
    *ud = NULL;
    c->ud = NULL;
    /* An operation in flight anchors the object: nothing can be pending here, except at
     * the very end (lua_close) after close_all, which detached everything. */
    c->state = ST_CLOSED;
    release(c);
    return 0;
}

static int l_status(lua_State *L) {
    pqc_t **ud = luaL_checkudata(L, 1, CONN_MT);
    pqc_t *c = *ud;
    lua_pushstring(L, state_names[c ? c->state : ST_CLOSED]);
    return 1;
}

static int l_error(lua_State *L) {
    pqc_t *c = check_conn(L, 1, 0);
    const char *m = c && c->pg ? PQerrorMessage(c->pg) : NULL;
    if (m && *m) {
        char *d = dup_msg(m);
        lua_pushstring(L, d ? d : m);
        free(d);
    } else if (c && c->err) {
        lua_pushstring(L, c->err);
    } else {
        lua_pushnil(L);
    }
    return 1;
}

static int l_backend_pid(lua_State *L) {
    pqc_t *c = check_conn(L, 1, 0);
    lua_pushinteger(L, c && c->pg && c->state != ST_CONNECTING ? PQbackendPID(c->pg) : 0);
    return 1;
}

static int l_server_version(lua_State *L) {
    pqc_t *c = check_conn(L, 1, 0);
    lua_pushinteger(L, c && c->pg && c->state != ST_CONNECTING ? PQserverVersion(c->pg) : 0);
    return 1;
}

static int l_tostring(lua_State *L) {
    pqc_t **ud = luaL_checkudata(L, 1, CONN_MT);
    lua_pushfstring(L, "pq connection (%s): %p", state_names[*ud ? (*ud)->state : ST_CLOSED],
                    (void *)ud);
    return 1;
}

/* ---- Lua: module ---------------------------------------------------------------------- */

static int l_bytea(lua_State *L) {
    luaL_checktype(L, 1, LUA_TSTRING);
    lua_createtable(L, 0, 1);
    lua_pushvalue(L, 1);
    lua_setfield(L, -2, BYTEA_FIELD);
    return 1;
}

/* pq.array(kind, list [, n]) (LED-51): a one-dimensional bytea[] ("bytea") or bigint[] ("int8")
 * parameter in PostgreSQL's binary array format (array_recv: ndim, has-null flag, element
 * type oid, then per dimension its length and lower bound 1, then per element a 32-bit
 * length, -1 for NULL, and its bytes), marked binary like pq.bytea. One parameter carries a
 * whole column, so a batch statement is `... FROM unnest($1::bytea[], $2::bigint[], ...)`:
 * a short text parsed and planned in the same time whatever the row count, instead of a
 * VALUES list of thousands of parameters. list[1..n]: nil -> NULL; bytea: strings; int8:
 * integral numbers (|v| < 2^63) or decimal strings (what an int64_t cdata prints). */
static char *put_be32(char *p, uint32_t v) {
    p[0] = (char)(v >> 24);
    p[1] = (char)(v >> 16);
    p[2] = (char)(v >> 8);
    p[3] = (char)v;
    return p + 4;
}

/* The element at list[i] as an int64, or an error message. */
static const char *array_int8(lua_State *L, int i, long long *v) {
    lua_rawgeti(L, 2, i);
    int t = lua_type(L, -1);
    const char *bad = NULL;
    if (t == LUA_TNUMBER) {
        lua_Number d = lua_tonumber(L, -1);
        if (d != floor(d) || !(fabs(d) < 9.2e18))
            bad = "is not an int64";
        else
            *v = (long long)d;
    } else if (t == LUA_TSTRING) {
        const char *s = lua_tostring(L, -1);
        char *end = NULL;
        *v = strtoll(s, &end, 10);
        if (end == s || *end != '\0') bad = "is not a decimal integer";
    } else {
        bad = "is not an integer";
    }
    lua_pop(L, 1);
    return bad;
}

static int l_array(lua_State *L) {
    const char *kind = luaL_checkstring(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    int is_bytea = strcmp(kind, "bytea") == 0;
    if (!is_bytea && strcmp(kind, "int8") != 0)
        return luaL_error(L, "ron.base.net.postgres_c: array kind is \"bytea\" or \"int8\"");
    lua_Integer n = luaL_optinteger(L, 3, (lua_Integer)lua_objlen(L, 2));
    if (n < 0 || n > 0x3fffffff) return luaL_error(L, "ron.base.net.postgres_c: bad length");
    /* first pass: the size and the NULLs (strings checked here, integers in the second pass,
     * which frees the buffer before it raises) */
    size_t size = 12 + (n > 0 ? 8 : 0);
    int has_null = 0;
    for (int i = 1; i <= (int)n; i++) {
        lua_rawgeti(L, 2, i);
        int t = lua_type(L, -1);
        size_t len = 0;
        if (t == LUA_TNIL) {
            has_null = 1;
        } else if (is_bytea) {
            if (t != LUA_TSTRING) {
                lua_pop(L, 1);
                return luaL_error(L,
                                  "ron.base.net.postgres_c: array: element %d is not "
                                  "a string",
                                  i);
            }
            lua_tolstring(L, -1, &len);
            if (len > 0x3fffffff) {
                lua_pop(L, 1);
                return luaL_error(L, "ron.base.net.postgres_c: array: element too long");
            }
        } else {
            len = 8;
        }
        lua_pop(L, 1);
        size += 4 + len;
        if (size > 0x7fffffff) return luaL_error(L, "ron.base.net.postgres_c: array over 2 GiB");
    }
    char *buf = malloc(size);
    if (!buf) return luaL_error(L, "ron.base.net.postgres_c: out of memory");
    char *p = put_be32(buf, n > 0 ? 1 : 0);
    p = put_be32(p, (uint32_t)has_null);
    p = put_be32(p, is_bytea ? 17u : 20u); /* BYTEAOID, INT8OID */
    if (n > 0) {
        p = put_be32(p, (uint32_t)n);
        p = put_be32(p, 1);
    }
    for (int i = 1; i <= (int)n; i++) {
        lua_rawgeti(L, 2, i);
        if (lua_isnil(L, -1)) {
            lua_pop(L, 1);
            p = put_be32(p, 0xffffffffu);
            continue;
        }
        if (is_bytea) {
            size_t len;
            const char *s = lua_tolstring(L, -1, &len);
            p = put_be32(p, (uint32_t)len);
            memcpy(p, s, len);
            p += len;
            lua_pop(L, 1);
            continue;
        }
        lua_pop(L, 1);
        long long v = 0;
        const char *bad = array_int8(L, i, &v);
        if (bad) {
            free(buf);
            return luaL_error(L, "ron.base.net.postgres_c: array: element %d %s", i, bad);
        }
        uint64_t u = (uint64_t)v;
        p = put_be32(p, 8);
        p = put_be32(p, (uint32_t)(u >> 32));
        p = put_be32(p, (uint32_t)u);
    }
    lua_pushlstring(L, buf, (size_t)(p - buf));
    free(buf);
    lua_createtable(L, 0, 1);
    lua_insert(L, -2);
    lua_setfield(L, -2, BYTEA_FIELD);
    return 1;
}

/* pq.unhex(s): bytea's text output "\\x0a1b..." -> the raw bytes; nil for anything else
 * (what ron.accounting.net.postgres's unhex does in Lua, one call per value instead of one
 * per byte: a batch read returns thousands of ids). */
static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int l_unhex(lua_State *L) {
    size_t len;
    const char *s = lua_type(L, 1) == LUA_TSTRING ? lua_tolstring(L, 1, &len) : NULL;
    if (!s || len < 2 || s[0] != '\\' || s[1] != 'x' || len % 2 != 0) {
        lua_pushnil(L);
        return 1;
    }
    size_t n = (len - 2) / 2;
    char small[256];
    char *out = n <= sizeof small ? small : malloc(n ? n : 1);
    if (!out) return luaL_error(L, "ron.base.net.postgres_c: out of memory");
    for (size_t i = 0; i < n; i++) {
        int hi = hexval((unsigned char)s[2 + 2 * i]), lo = hexval((unsigned char)s[3 + 2 * i]);
        if (hi < 0 || lo < 0) {
            if (out != small) free(out);
            lua_pushnil(L);
            return 1;
        }
        out[i] = (char)(hi << 4 | lo);
    }
    lua_pushlstring(L, out, n);
    if (out != small) free(out);
    return 1;
}

static int l_live(lua_State *L) {
    lua_pushinteger(L, n_structs);
    return 1;
}

static int l_libpq_version(lua_State *L) {
    lua_pushinteger(L, PQlibVersion());
    return 1;
}

static int luaopen_pq(lua_State *L) {
    static const luaL_Reg conn_methods[] = {
        {"query", l_query},
        {"exec", l_exec},
        {"pipeline", l_pipeline},
        {"close", l_close},
        {"status", l_status},
        {"error", l_error},
        {"backend_pid", l_backend_pid},
        {"server_version", l_server_version},
        {NULL, NULL},
    };
    ra_glue_class(L, CONN_MT, conn_methods, l_gc, l_tostring);
    static const luaL_Reg funcs[] = {
        {"connect", l_connect}, {"bytea", l_bytea}, {"array", l_array},
        {"unhex", l_unhex},     {"live", l_live},   {"libpq_version", l_libpq_version},
        {NULL, NULL},
    };
    return ra_glue_module(L, funcs);
}

static bool closing(void *ud) {
    (void)ud;
    return n_structs || n_polls;
}

static void close_all(uv_loop_t *loop) {
    if (!conns && !n_polls) return;
    for (pqc_t *c = conns; c; c = c->next) {
        c->deferred = 0;
        c->state = ST_CLOSED;
        release(c); /* no callback: the loop is ending */
    }
    ra_glue_drain(loop, closing, NULL, "pq", "connections");
}

const ra_host_module_t ra_host_pq = {"ron.base.net.postgres_c", luaopen_pq, close_all};
