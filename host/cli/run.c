/* `ron-accounting run SCRIPT.lua [ARGS...]`: one fresh LuaJIT state, the standard
 * libraries, the ron.accounting package on package.path, `arg` set the way the luajit CLI
 * sets it, and the script run under a traceback handler.
 *
 * The event loop: the host owns ONE libuv loop and binds luv to it (luv_set_loop before
 * luaopen_luv; require "luv" answers that instance), so Lua tasks (ron.base.task) and
 * the C side share it. After the script's main chunk returns, the host runs the loop until
 * no active handle is left, then closes every handle and the loop (docs/CONCURRENCY.md).
 *   - SIGINT/SIGTERM are watched on the loop (unreferenced: they never keep it alive). The
 *     first calls ron.base.task's _host_signal(name) when the script loaded that
 *     module (shutdown token, then a drain to its deadline), else stops the loop. A second
 *     signal exits at once with status 1.
 *   - An error in a luv callback (luv_set_callback) is reported like a script error; the
 *     loop stops and the exit status is 1. An error inside a task is the task module's:
 *     logged and counted; the host exits 1 when a failed task was never joined, or when
 *     tasks are still live (blocked forever) once the loop has nothing left to run.
 *
 * Where ron.accounting comes from, in order:
 *   1. an installed tree: <exe dir>/<up to the prefix>/RA_INSTALL_LUA_REL, when it holds
 *      ron/accounting.lua (the host was installed with `cmake --install`);
 *   2. the source tree the host was built from, RA_SOURCE_LUA_DIR (a build directory).
 * Then the script's own directory (its helper modules), then whatever package.path LuaJIT
 * set up from LUA_PATH or its defaults: an operator's LUA_PATH extends ours and never
 * shadows the binding. */
#include "host.h"

#include "lua/modules.h"

#include <lauxlib.h>
#include <limits.h>
#include <lua.h>
#include <lualib.h>
#include <luv/luv.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#ifndef RA_SOURCE_LUA_DIR
#error "RA_SOURCE_LUA_DIR must name the source tree's lua/ directory (CMakeLists.txt)"
#endif
#ifndef RA_INSTALL_LUA_REL
#define RA_INSTALL_LUA_REL "share/lua/5.1"
#endif
#ifndef RA_INSTALL_BIN_REL
#define RA_INSTALL_BIN_REL "bin"
#endif

/* The directory part of path, in place ("a/b" -> "a", "b" -> "."). */
static void dir_of(char *path) {
    char *slash = strrchr(path, '/');
    if (!slash)
        strcpy(path, ".");
    else if (slash == path)
        path[1] = '\0';
    else
        *slash = '\0';
}

/* Number of path components in a relative directory ("bin" 1, "opt/bin" 2). */
static int components(const char *rel) {
    int n = 0;
    for (const char *p = rel; *p;) {
        while (*p == '/')
            p++;
        if (!*p) break;
        n++;
        while (*p && *p != '/')
            p++;
    }
    return n;
}

/* The installed Lua directory next to this executable, or 0 when the host is not running
 * from an installed tree. out holds PATH_MAX bytes. */
static int installed_lua_dir(char *out) {
    char exe[PATH_MAX], candidate[PATH_MAX * 2];
    /* /proc/self/exe resolves symlinks: a /usr/local/bin link into /opt still finds /opt. */
    if (!realpath("/proc/self/exe", exe)) return 0;
    dir_of(exe);
    if (RA_INSTALL_LUA_REL[0] == '/') {
        snprintf(candidate, sizeof candidate, "%s", RA_INSTALL_LUA_REL);
    } else {
        if (RA_INSTALL_BIN_REL[0] == '/') return 0; /* no way back to the prefix */
        size_t len = (size_t)snprintf(candidate, sizeof candidate, "%s", exe);
        for (int i = components(RA_INSTALL_BIN_REL); i > 0 && len < sizeof candidate; i--)
            len += (size_t)snprintf(candidate + len, sizeof candidate - len, "/..");
        if (len < sizeof candidate)
            snprintf(candidate + len, sizeof candidate - len, "/%s", RA_INSTALL_LUA_REL);
    }
    if (!realpath(candidate, out)) return 0;
    char probe[PATH_MAX + 32];
    snprintf(probe, sizeof probe, "%s/ron/accounting.lua", out);
    return access(probe, R_OK) == 0;
}

void ra_host_lua_dir(char *out, size_t cap) {
    char dir[PATH_MAX];
    if (!installed_lua_dir(dir)) snprintf(dir, sizeof dir, "%s", RA_SOURCE_LUA_DIR);
    snprintf(out, cap, "%s", dir);
}

/* package.path = <binding>;<script dir>;<what LuaJIT derived from LUA_PATH or defaults>. */
static void set_package_path(lua_State *L, const char *script) {
    char lua_dir[PATH_MAX];
    if (!installed_lua_dir(lua_dir)) snprintf(lua_dir, sizeof lua_dir, "%s", RA_SOURCE_LUA_DIR);

    char script_dir[PATH_MAX];
    if (realpath(script, script_dir)) {
        dir_of(script_dir);
    } else {
        snprintf(script_dir, sizeof script_dir, "%s", script);
        dir_of(script_dir);
    }

    lua_getglobal(L, "package");
    lua_getfield(L, -1, "path");
    const char *rest = lua_tostring(L, -1);
    lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s/?.lua;%s/?/init.lua;%s", lua_dir, lua_dir,
                    script_dir, script_dir, rest ? rest : "");
    lua_setfield(L, -3, "path");
    lua_pop(L, 2);
}

/* arg[-1] = the host, arg[0] = the script, arg[1..n] = its arguments (luajit CLI layout). */
static void set_arg(lua_State *L, const char *exe, int argc, char **argv) {
    lua_createtable(L, argc, 1);
    lua_pushstring(L, exe);
    lua_rawseti(L, -2, -1);
    for (int i = 0; i < argc; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i);
    }
    lua_setglobal(L, "arg");
}

/* Message handler: the error message (or a description of a non-string error value) with
 * the stack traceback appended, computed before pcall unwinds the stack. */
static int traceback(lua_State *L) {
    const char *msg = lua_tostring(L, 1);
    if (!msg) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
            msg = lua_tostring(L, -1);
        else
            msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    luaL_traceback(L, L, msg, 1);
    return 1;
}

static void report(lua_State *L) {
    const char *msg = lua_tostring(L, -1);
    fflush(stdout); /* keep the script's own output ahead of the error */
    fprintf(stderr, RA_HOST_NAME ": %s\n", msg ? msg : "(error object is not a string)");
    fflush(stderr);
}

/* The run's state, reachable from the loop's callbacks (loop.data). */
typedef struct {
    lua_State *L;
    uv_loop_t loop;
    uv_signal_t sigint, sigterm;
    int signals;   /* SIGINT/SIGTERM seen so far */
    int cb_failed; /* a luv callback raised */
} host_t;

#define TASK_MODULE "ron.base.task"

/* luv's callback runner (luv_set_callback): the default prints "Uncaught Error" and calls
 * exit(-1) from inside the loop; ours reports with a traceback, stops the loop and lets
 * ra_host_run tear down and exit 1. Contract of luv_CFpcall: on success the number of
 * results left on the stack, on error a negative status with the stack cleaned. */
static int host_cb_pcall(lua_State *L, int nargs, int nresults, int flags) {
    (void)flags;
    int base = lua_gettop(L) - nargs; /* the function's slot */
    lua_pushcfunction(L, traceback);
    lua_insert(L, base);
    int status = lua_pcall(L, nargs, nresults, base);
    lua_remove(L, base);
    if (status != 0) {
        report(L);
        lua_pop(L, 1);
        host_t *host = luv_loop(L)->data;
        host->cb_failed = 1;
        uv_stop(&host->loop);
        return -status;
    }
    return nresults == LUA_MULTRET ? lua_gettop(L) - base + 1 : nresults;
}

/* Pushes package.loaded[TASK_MODULE][field] when it is a function; returns 0 (nothing
 * pushed) when the script never loaded the task module. */
static int push_task_hook(lua_State *L, const char *field) {
    lua_getfield(L, LUA_REGISTRYINDEX, "_LOADED");
    lua_getfield(L, -1, TASK_MODULE);
    if (!lua_istable(L, -1)) {
        lua_pop(L, 2);
        return 0;
    }
    lua_getfield(L, -1, field);
    lua_remove(L, -2);
    lua_remove(L, -2);
    if (!lua_isfunction(L, -1)) {
        lua_pop(L, 1);
        return 0;
    }
    return 1;
}

static void on_signal(uv_signal_t *sig, int signum) {
    host_t *host = sig->data;
    const char *name = signum == SIGINT ? "SIGINT" : "SIGTERM";
    if (host->signals++ > 0) {
        fflush(stdout);
        fprintf(stderr, RA_HOST_NAME ": second signal (%s): exiting now\n", name);
        fflush(stderr);
        _exit(RA_HOST_EXIT_FAILED);
    }
    fprintf(stderr, RA_HOST_NAME ": %s: graceful shutdown\n", name);
    fflush(stderr);
    lua_State *L = host->L;
    if (!push_task_hook(L, "_host_signal")) {
        uv_stop(&host->loop); /* no tasks to drain: close the handles and leave */
        return;
    }
    lua_pushstring(L, name);
    host_cb_pcall(L, 1, 0, 0);
}

/* Asks the task module for the exit status (0, or 1 on an unjoined failure or a leaked
 * task; it prints why). 0 when the module was never loaded. */
static int task_exit_status(host_t *host) {
    lua_State *L = host->L;
    if (!push_task_hook(L, "_host_exit_status")) return RA_HOST_EXIT_OK;
    int n = host_cb_pcall(L, 0, 1, 0);
    if (n < 0) return RA_HOST_EXIT_FAILED;
    int rc = (int)lua_tointeger(L, -1);
    lua_pop(L, 1);
    return rc ? RA_HOST_EXIT_FAILED : RA_HOST_EXIT_OK;
}

static void on_closed(uv_handle_t *h) {
    (void)h;
}

static void unref_one(uv_handle_t *h, void *arg) {
    (void)arg;
    uv_unref(h);
}

/* Closes what is left on the loop: every handle unreferenced first (after a uv_stop some
 * may still be active: they must not keep the closing runs below waiting), our signal
 * watchers closed (they are not luv handles, and luv's walk only knows its own), then
 * every luv handle through luv's own close (uv.walk), then the loop. The Lua state is
 * still open so luv's close callbacks can run. */
static void close_loop(host_t *host) {
    ra_host_modules_close_all(&host->loop); /* not luv handles (host/lua/modules.h) */
    uv_walk(&host->loop, unref_one, NULL);
    uv_close((uv_handle_t *)&host->sigint, on_closed);
    uv_close((uv_handle_t *)&host->sigterm, on_closed);
    uv_run(&host->loop, UV_RUN_DEFAULT);
    static const char walk[] = "local uv = require 'luv'\n"
                               "uv.walk(function(h) if not h:is_closing() then h:close() end end)";
    lua_State *L = host->L;
    if (luaL_loadbuffer(L, walk, sizeof walk - 1, "=(host close)") == 0)
        host_cb_pcall(L, 0, 0, 0);
    else
        lua_pop(L, 1);
    uv_run(&host->loop, UV_RUN_DEFAULT);
    int rc = uv_loop_close(&host->loop);
    if (rc != 0) fprintf(stderr, RA_HOST_NAME ": closing the event loop: %s\n", uv_strerror(rc));
}

static int open_loop(host_t *host) {
    int rc = uv_loop_init(&host->loop);
    if (rc != 0) {
        fprintf(stderr, RA_HOST_NAME ": cannot create the event loop: %s\n", uv_strerror(rc));
        return rc;
    }
    host->loop.data = host;
    uv_signal_t *sigs[] = {&host->sigint, &host->sigterm};
    int nums[] = {SIGINT, SIGTERM};
    for (int i = 0; i < 2; i++) {
        uv_signal_init(&host->loop, sigs[i]);
        sigs[i]->data = host;
        rc = uv_signal_start(sigs[i], on_signal, nums[i]);
        if (rc != 0) {
            fprintf(stderr, RA_HOST_NAME ": cannot watch signal %d: %s\n", nums[i],
                    uv_strerror(rc));
            return rc;
        }
        uv_unref((uv_handle_t *)sigs[i]); /* watching a signal never keeps the loop alive */
    }
    return 0;
}

/* luv on the host's loop, in package.loaded["luv"]. */
static void open_luv(host_t *host) {
    lua_State *L = host->L;
    luv_set_loop(L, &host->loop);
    luv_set_callback(L, host_cb_pcall);
    lua_getfield(L, LUA_REGISTRYINDEX, "_LOADED");
    lua_pushcfunction(L, luaopen_luv);
    lua_call(L, 0, 1);
    lua_setfield(L, -2, "luv");
    lua_pop(L, 1);
    ra_host_modules_preload(L); /* httpd, pq, curl on this loop (host/lua/modules.h) */
}

int ra_host_run(const char *exe, int argc, char **argv) {
    const char *script = argv[0];
    static host_t host; /* one run per process; static keeps the loop off the stack */
    memset(&host, 0, sizeof host);
    lua_State *L = luaL_newstate();
    if (!L) {
        fprintf(stderr, RA_HOST_NAME ": cannot create a Lua state: out of memory\n");
        return RA_HOST_EXIT_FAILED;
    }
    host.L = L;
    if (open_loop(&host) != 0) {
        lua_close(L);
        return RA_HOST_EXIT_FAILED;
    }
    luaL_openlibs(L);
    open_luv(&host);
    set_package_path(L, script);
    set_arg(L, exe, argc, argv);

    lua_pushcfunction(L, traceback);
    int handler = lua_gettop(L);
    int rc = RA_HOST_EXIT_OK;
    int status = luaL_loadfile(L, script);
    if (status == LUA_ERRFILE) {
        report(L); /* "cannot open x.lua: No such file or directory" */
        rc = RA_HOST_EXIT_USAGE;
    } else if (status != 0) {
        report(L); /* syntax error, or out of memory */
        rc = RA_HOST_EXIT_FAILED;
    } else if (!lua_checkstack(L, argc)) {
        fprintf(stderr, RA_HOST_NAME ": too many script arguments (%d)\n", argc - 1);
        rc = RA_HOST_EXIT_USAGE;
    } else {
        for (int i = 1; i < argc; i++)
            lua_pushstring(L, argv[i]); /* the chunk's ... */
        if (lua_pcall(L, argc - 1, 0, handler) != 0) {
            report(L);
            rc = RA_HOST_EXIT_FAILED;
        } else {
            /* The main chunk returned: now the tasks and handles it started run. */
            uv_run(&host.loop, UV_RUN_DEFAULT);
            if (host.cb_failed) rc = RA_HOST_EXIT_FAILED;
            if (task_exit_status(&host) != RA_HOST_EXIT_OK) rc = RA_HOST_EXIT_FAILED;
        }
    }
    close_loop(&host);
    /* Closing runs the finalizers: meters the script left open are closed (ffi.gc). */
    lua_close(L);
    return rc;
}

int ra_host_run_lua(const char *exe, const char *verb, const char *rel, int argc, char **argv) {
    char dir[PATH_MAX], script[PATH_MAX + 64];
    ra_host_lua_dir(dir, sizeof dir);
    snprintf(script, sizeof script, "%s/%s", dir, rel);
    char **args = calloc((size_t)argc + 2, sizeof *args);
    if (!args) {
        fprintf(stderr, RA_HOST_NAME " %s: out of memory\n", verb);
        return RA_HOST_EXIT_FAILED;
    }
    args[0] = script;
    for (int i = 0; i < argc; i++)
        args[i + 1] = argv[i];
    int rc = ra_host_run(exe, argc + 1, args);
    free(args);
    return rc;
}
