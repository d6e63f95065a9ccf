/* The host's name, shared by everything under host/: the command line (host/cli/) prints
 * it in its messages, the Lua C modules (host/lua/) in theirs and as the HTTP server's
 * name. A header of its own, so that host/lua/ never includes host/cli/'s. */
#ifndef RA_HOST_NAME_H
#define RA_HOST_NAME_H

#define RA_HOST_NAME "ron-accounting"

#endif /* RA_HOST_NAME_H */
