/* The host's Lua C modules: each is one file of host/lua/ exporting one descriptor, and
 * modules.c lists them. A new module is a file plus a row in that list: run.c preloads
 * every listed module once luv is set up, and closes them (in list order) before it
 * closes the loop, because luv's uv.walk only knows luv's own handles. */
#ifndef RA_HOST_MODULES_H
#define RA_HOST_MODULES_H

#include <lua.h>
#include <uv.h>

typedef struct ra_host_module {
    const char *name;   /* require name, e.g. "ron.base.net.http_server" */
    lua_CFunction open; /* the luaopen function, put in package.preload[name] */
    /* Closes whatever the module still has open, without calling back into Lua, and runs
     * the loop (bounded) until its handles are freed. */
    void (*close_all)(uv_loop_t *loop);
} ra_host_module_t;

extern const ra_host_module_t ra_host_httpd; /* httpd.c: HTTP/1.1 server (libh2o) */
extern const ra_host_module_t ra_host_pq;    /* pq.c: PostgreSQL (libpq async) */
extern const ra_host_module_t ra_host_curl;  /* curl.c: HTTP client (libcurl multi) */

void ra_host_modules_preload(lua_State *L);
void ra_host_modules_close_all(uv_loop_t *loop);

#endif /* RA_HOST_MODULES_H */
