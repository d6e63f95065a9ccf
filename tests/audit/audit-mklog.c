/* Writes a small audit log for the CLI tests (cmake/audit-tests.cmake):
 *   audit-mklog DIR SKEY-FILE|- N [BASE]   N records (events BASE.., default 0: an existing
 *                                          log with the same BASE deduplicates them), a
 *                                          checkpoint at the end ("-": no key, no checkpoint)
 * RAU_MKLOG_ROTATE=BYTES: segments of that many bytes (several segments for the tests that
 * delete one). */
#include "ron/audit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 4 && argc != 5) return 2;
    long long base = argc == 5 ? atoll(argv[4]) : 0;
    int keyed = strcmp(argv[2], "-") != 0;
    rau_log_config_t cfg;
    rau_log_config_init(&cfg);
    cfg.writer_id = "gw-1";
    cfg.stream = "rejects";
    cfg.dir = argv[1];
    cfg.key_path = keyed ? argv[2] : NULL;
    if (getenv("RAU_MKLOG_ROTATE")) cfg.rotate_bytes = strtoull(getenv("RAU_MKLOG_ROTATE"), 0, 10);
    rau_log_t *l = NULL;
    char err[512];
    int rc = rau_log_open(&cfg, &l, err, sizeof err);
    if (rc) {
        fprintf(stderr, "open: %s: %s\n", rau_err_name(rc), err);
        return 1;
    }
    int n = atoi(argv[3]);
    for (int i = 0; i < n && rc == 0; i++) {
        rau_attr_t a = {"n", 1, RAU_ATTR_INT, NULL, 0, base + i};
        rau_event_t ev = {"reject", 6, 1700000000000LL + i, &a, 1};
        rau_appended_t out;
        rc = rau_log_append(l, &ev, &out);
    }
    if (!rc) rc = keyed ? rau_log_checkpoint(l) : rau_log_sync(l);
    int crc = rau_log_close(l);
    if (rc || crc) {
        fprintf(stderr, "append: %s\n", rau_err_name(rc ? rc : crc));
        return 1;
    }
    return 0;
}
