/* Glue shared by the host's Lua C modules (httpd.c, pq.c, curl.c), in the manner of luv's
 * lreq.c and lhandle.c: the one way a module registers itself, anchors a Lua value while a
 * libuv callback may still need it, calls back into Lua from the loop, registers its
 * classes, logs, and drains its handles when the host closes the loop.
 *
 * Every module runs on the host's one loop thread (luv's loop and main state), so none of
 * this is thread-safe and none of it needs to be. */
#ifndef RA_HOST_GLUE_H
#define RA_HOST_GLUE_H

#include <lauxlib.h>
#include <lua.h>
#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

/* How many loop turns a close_all gives its handles to close before it says so and gives
 * up (the process is ending: a leak then is harmless, a hang is not). */
#define RA_GLUE_CLOSE_TURNS 64

/* package.preload[name] = open. Called by the host after luv is set up. */
void ra_glue_preload(lua_State *L, const char *name, lua_CFunction open);

/* A registry reference to the value at idx (LUA_REFNIL for nil): the value stays alive
 * while a callback may still need it. */
int ra_glue_ref(lua_State *L, int idx);
/* Drops *ref (nothing when it is LUA_NOREF) and sets it to LUA_NOREF: safe to call twice. */
void ra_glue_unref(lua_State *L, int *ref);
/* Pushes the referenced value; false (nothing pushed) when ref is LUA_NOREF or the stack
 * cannot grow by room slots. */
bool ra_glue_push_ref(lua_State *L, int ref, int room);

/* Calls the function below nargs arguments on top of L with no results, from a loop
 * callback: an error goes through luv's handler (printed with a traceback, and the run
 * ends as for an error in a luv callback), never across the C frames of a library. */
void ra_glue_call(lua_State *L, int nargs);

/* A metatable named mt with methods in __index, __gc and __tostring (either may be NULL).
 * Registered once per state; later calls find it. Leaves nothing on the stack. */
void ra_glue_class(lua_State *L, const char *mt, const luaL_Reg *methods, lua_CFunction gc,
                   lua_CFunction tostring);

/* Pushes a module's table holding funcs (NULL-terminated); returns 1, for the luaopen
 * function to return. */
int ra_glue_module(lua_State *L, const luaL_Reg *funcs);

/* One line on stderr: "ron-accounting: <module>: <what>: <msg>", stdout flushed first so
 * the two streams interleave in order. */
void ra_glue_log(const char *module, const char *what, const char *msg);

/* Runs the loop without waiting, at most RA_GLUE_CLOSE_TURNS times, while busy(ud) says
 * handles are still closing; logs "<module>: closing: <what> did not close in time" and
 * returns false when they did not. */
bool ra_glue_drain(uv_loop_t *loop, bool (*busy)(void *ud), void *ud, const char *module,
                   const char *what);

/* RFC 9110 syntax shared by the server and the client: a token (method, header name), and
 * a field value with no CR, LF or NUL (either would split the header block). */
bool ra_glue_is_token(const char *s, size_t n);
bool ra_glue_is_field_value(const char *s, size_t n);

#endif /* RA_HOST_GLUE_H */
