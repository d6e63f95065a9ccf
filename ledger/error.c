/* The error map (include/ron/ledger.h RL_ERRNO_MAP) turned into rl_strerror/rl_err_name. */
#include "internal.h"

#define RL__STR_CASE(s, v, n, m)                                                                   \
    case RL_E##s:                                                                                  \
        return m;
#define RL__NAME_CASE(s, v, n, m)                                                                  \
    case RL_E##s:                                                                                  \
        return n;

const char *rl_version(void) {
    return RL_VERSION_STRING;
}

const char *rl_strerror(int code) {
    switch (code) {
    case RL_OK:
        return "success";
        RL_ERRNO_MAP(RL__STR_CASE)
    default:
        return "unknown error";
    }
}

const char *rl_err_name(int code) {
    switch (code) {
    case RL_OK:
        return "OK";
        RL_ERRNO_MAP(RL__NAME_CASE)
    default:
        return "Unknown";
    }
}
