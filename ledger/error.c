/* The error map (include/ron/ledger.h RL_ERRNO_MAP) turned into rl_strerror/rl_err_name by
 * the shape every library shares (include/ron/errmap.h). */
#include "internal.h"
#include "ron/errmap.h"

RON_ERRMAP_CHECK(RL_ERRNO_MAP, RL_ERRNO_MIN, RL_EUNDECIDED);
RON_ERRMAP_DEFINE(RL_ERRNO_MAP, RL_OK, rl_strerror, rl_err_name)

const char *rl_version(void) {
    return RL_VERSION_STRING;
}
