/* The list of the host's Lua C modules (modules.h). */
#include "lua/modules.h"

#include "lua/glue.h"

#include <stddef.h>

/* Close order: HTTP servers first (their handlers may still hold connections of the
 * others), then PostgreSQL connections, then the HTTP client's transfers. */
static const ra_host_module_t *const modules[] = {&ra_host_httpd, &ra_host_pq, &ra_host_curl};

void ra_host_modules_preload(lua_State *L) {
    for (size_t i = 0; i < sizeof modules / sizeof modules[0]; i++)
        ra_glue_preload(L, modules[i]->name, modules[i]->open);
}

void ra_host_modules_close_all(uv_loop_t *loop) {
    for (size_t i = 0; i < sizeof modules / sizeof modules[0]; i++)
        modules[i]->close_all(loop);
}
