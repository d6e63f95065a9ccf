/* `ron-accounting run SCRIPT.lua [ARGS...]`: one fresh LuaJIT state, the standard
 * libraries, the ron.accounting package on package.path, `arg` set the way the luajit CLI
 * sets it, and the script run under a traceback handler.
 *
 * Where ron.accounting comes from, in order:
 *   1. an installed tree: <exe dir>/<up to the prefix>/RA_INSTALL_LUA_REL, when it holds
 *      ron/accounting.lua (the host was installed with `cmake --install`);
 *   2. the source tree the host was built from, RA_SOURCE_LUA_DIR (a build directory).
 * Then the script's own directory (its helper modules), then whatever package.path LuaJIT
 * set up from LUA_PATH or its defaults: an operator's LUA_PATH extends ours and never
 * shadows the binding. */
#include "host.h"

#include <lauxlib.h>
#include <limits.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

int ra_host_run(const char *exe, int argc, char **argv) {
    const char *script = argv[0];
    lua_State *L = luaL_newstate();
    if (!L) {
        fprintf(stderr, RA_HOST_NAME ": cannot create a Lua state: out of memory\n");
        return RA_HOST_EXIT_FAILED;
    }
    luaL_openlibs(L);
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
    } else {
        if (!lua_checkstack(L, argc)) {
            fprintf(stderr, RA_HOST_NAME ": too many script arguments (%d)\n", argc - 1);
            lua_close(L);
            return RA_HOST_EXIT_USAGE;
        }
        for (int i = 1; i < argc; i++)
            lua_pushstring(L, argv[i]); /* the chunk's ... */
        if (lua_pcall(L, argc - 1, 0, handler) != 0) {
            report(L);
            rc = RA_HOST_EXIT_FAILED;
        }
    }
    /* Closing runs the finalizers: meters the script left open are closed (ffi.gc). */
    lua_close(L);
    return rc;
}
