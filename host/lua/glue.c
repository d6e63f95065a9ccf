/* Glue shared by the host's Lua C modules: glue.h says what and why. */
#include "lua/glue.h"

#include "host_name.h"

#include <luv/luv.h>
#include <stdio.h>
#include <string.h>

void ra_glue_preload(lua_State *L, const char *name, lua_CFunction open) {
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "preload");
    lua_pushcfunction(L, open);
    lua_setfield(L, -2, name);
    lua_pop(L, 2);
}

int ra_glue_ref(lua_State *L, int idx) {
    lua_pushvalue(L, idx);
    return luaL_ref(L, LUA_REGISTRYINDEX);
}

void ra_glue_unref(lua_State *L, int *ref) {
    if (*ref == LUA_NOREF) return;
    luaL_unref(L, LUA_REGISTRYINDEX, *ref);
    *ref = LUA_NOREF;
}

bool ra_glue_push_ref(lua_State *L, int ref, int room) {
    if (ref == LUA_NOREF || !lua_checkstack(L, room + 1)) return false;
    lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
    return true;
}

void ra_glue_call(lua_State *L, int nargs) {
    luv_context(L)->cb_pcall(L, nargs, 0, 0);
}

void ra_glue_class(lua_State *L, const char *mt, const luaL_Reg *methods, lua_CFunction gc,
                   lua_CFunction tostring) {
    if (luaL_newmetatable(L, mt)) {
        lua_newtable(L);
        luaL_register(L, NULL, methods);
        lua_setfield(L, -2, "__index");
        if (gc) {
            lua_pushcfunction(L, gc);
            lua_setfield(L, -2, "__gc");
        }
        if (tostring) {
            lua_pushcfunction(L, tostring);
            lua_setfield(L, -2, "__tostring");
        }
    }
    lua_pop(L, 1);
}

int ra_glue_module(lua_State *L, const luaL_Reg *funcs) {
    int n = 0;
    while (funcs[n].name)
        n++;
    lua_createtable(L, 0, n);
    luaL_register(L, NULL, funcs);
    return 1;
}

void ra_glue_log(const char *module, const char *what, const char *msg) {
    fflush(stdout);
    fprintf(stderr, RA_HOST_NAME ": %s: %s: %s\n", module, what, msg ? msg : "(no message)");
    fflush(stderr);
}

bool ra_glue_drain(uv_loop_t *loop, bool (*busy)(void *ud), void *ud, const char *module,
                   const char *what) {
    for (int i = 0; i < RA_GLUE_CLOSE_TURNS && busy(ud); i++)
        uv_run(loop, UV_RUN_NOWAIT);
    if (!busy(ud)) return true;
    char msg[128];
    snprintf(msg, sizeof msg, "%s did not close in time", what);
    ra_glue_log(module, "closing", msg);
    return false;
}

bool ra_glue_is_token(const char *s, size_t n) {
    if (n == 0) return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= 32 || c >= 127 || strchr("\"(),/:;<=>?@[\\]{}", c)) return false;
    }
    return true;
}

bool ra_glue_is_field_value(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] == '\r' || s[i] == '\n' || s[i] == '\0') return false;
    return true;
}
