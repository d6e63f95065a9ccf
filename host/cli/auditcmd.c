/* `ron-accounting audit ...`: the audit trail's offline tools (docs/AUDIT.md).
 *
 *   audit verify [--list] [--vkey FILE] [--checkpoint NOTE]... [--witness-vkey FILE] DIR
 *                                    --list: one line per record (seq, kind, ts_ms, attributes)
 *                                    every frame, record, chain link, dedupe key, checkpoint
 *                                    root and (with the verifier key) signature (AUD-I-15);
 *                                    --checkpoint: a note kept elsewhere (a witness's copy)
 *                                    whose root must match the log's first records (forks);
 *                                    with --vkey, a log no signed checkpoint covers fails, and
 *                                    the records past the newest one are counted (AUD-I-39);
 *                                    --witness-vkey: a checkpoint must carry a valid
 *                                    cosignature of that witness (AUD-I-40)
 *   audit proof ...                  RFC 6962 inclusion and consistency proofs (auditproof.c)
 *   audit witness ...                a witness that cosigns checkpoints (auditwitness.c)
 *   audit keygen [--witness] NAME SKEY VKEY
 *                                    a new Ed25519 key pair in the note text forms (--witness:
 *                                    a cosignature/v1 key, type 0x04); the signer key file is
 *                                    created 0600 and never printed
 *
 * Exit 0 when the log verifies, 1 with every problem listed by position, 2 on usage. */
#include "auditnet.h"
#include "host.h"

#include "ron/audit.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void report(void *ud, const char *where, const char *what) {
    (void)ud;
    printf("%s: %s\n", where, what);
}

/* One line per record: "record <seq> <kind> ts_ms=<t> key=value ...", string values quoted
 * with control characters, quotes and backslashes as \xHH (the line stays one line). */
void ra_host_audit_list_record(void *ud, const rau_record_t *r) {
    (void)ud;
    printf("record %" PRIu64 " %s ts_ms=%" PRId64, rau_record_seq(r), rau_record_kind(r),
           rau_record_ts_ms(r));
    rau_attr_t a;
    for (size_t i = 0; rau_record_attr(r, i, &a) == 0; i++) {
        printf(" %.*s=", (int)a.key_len, a.key);
        if (a.type == RAU_ATTR_STR) {
            putchar('"');
            for (size_t k = 0; k < a.str_len; k++) {
                unsigned char c = (unsigned char)a.str[k];
                if (c < 0x20 || c == 0x7f || c == '"' || c == '\\')
                    printf("\\x%02x", c);
                else
                    putchar(c);
            }
            putchar('"');
        } else if (a.type == RAU_ATTR_BOOL) {
            printf("%s", a.num ? "true" : "false");
        } else {
            printf("%" PRId64, a.num);
        }
    }
    putchar('\n');
}

static int verify_usage(void) {
    fprintf(stderr, "usage: " RA_HOST_NAME " audit verify [--list] [--vkey FILE] "
                    "[--checkpoint NOTE]... [--witness-vkey FILE] DIR\n");
    return RA_HOST_EXIT_USAGE;
}

/* What pins the head (AUD-I-39): the newest checkpoint that verified, and what follows it. */
static void coverage(const rau_verify_result_t *r, int signed_, int witness) {
    const char *which = signed_ ? "signed" : "(unsigned: no --vkey)";
    if (r->covered)
        printf("the newest %s checkpoint covers %" PRIu64 " of %" PRIu64 " records\n", which,
               r->covered, r->records);
    else if (r->records)
        printf("no %s checkpoint covers any record\n", which);
    if (r->records > r->covered)
        printf("%" PRIu64 " records not yet covered by a checkpoint\n", r->records - r->covered);
    if (witness && r->witnessed)
        printf("the newest checkpoint cosigned by the witness covers %" PRIu64
               " records (cosigned at %" PRIu64 ")\n",
               r->witnessed, r->witness_time);
}

static int audit_verify(int argc, char **argv) {
    const char *vkey_path = NULL, *wkey_path = NULL, *dir = NULL;
    const char *extra[64];
    size_t n_extra = 0;
    int list = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--list"))
            list = 1;
        else if (!strcmp(argv[i], "--vkey") && i + 1 < argc)
            vkey_path = argv[++i];
        else if (!strcmp(argv[i], "--witness-vkey") && i + 1 < argc)
            wkey_path = argv[++i];
        else if (!strcmp(argv[i], "--checkpoint") && i + 1 < argc && n_extra < 64)
            extra[n_extra++] = argv[++i];
        else if (!dir && argv[i][0] != '-')
            dir = argv[i];
        else
            return verify_usage();
    }
    if (!dir) return verify_usage();
    char vkey[RAU_KEY_TEXT_MAX + 2], wkey[RAU_KEY_TEXT_MAX + 2];
    const char *bad = vkey_path && ra_host_key_text(vkey_path, vkey, sizeof vkey)   ? vkey_path
                      : wkey_path && ra_host_key_text(wkey_path, wkey, sizeof wkey) ? wkey_path
                                                                                    : NULL;
    if (bad) {
        fprintf(stderr, "%s: cannot read the verifier key\n", bad);
        return RA_HOST_EXIT_USAGE;
    }
    rau_verify_opts_t o = {vkey_path ? vkey : NULL,
                           wkey_path ? wkey : NULL,
                           extra,
                           n_extra,
                           report,
                           list ? ra_host_audit_list_record : NULL,
                           NULL};
    rau_verify_result_t r;
    int n = rau_verify(dir, &o, &r);
    if (n < 0) {
        printf("FAILED: %s: %s\n", dir, rau_strerror(n));
        return RA_HOST_EXIT_FAILED;
    }
    if (!vkey_path) printf("note: checkpoint signatures not checked (no --vkey)\n");
    coverage(&r, vkey_path != NULL, wkey_path != NULL);
    if (n > 0) {
        printf("FAILED: %d problem%s in %" PRIu64 " records\n", n, n == 1 ? "" : "s", r.records);
        return RA_HOST_EXIT_FAILED;
    }
    printf("OK: %" PRIu64 " records\n", r.records);
    return RA_HOST_EXIT_OK;
}

static int audit_keygen(int argc, char **argv) {
    int witness = argc > 0 && !strcmp(argv[0], "--witness");
    argc -= witness, argv += witness;
    if (argc != 3) {
        fprintf(stderr,
                "usage: " RA_HOST_NAME " audit keygen [--witness] NAME SKEY-FILE VKEY-FILE\n");
        return RA_HOST_EXIT_USAGE;
    }
    char sk[RAU_KEY_TEXT_MAX], vk[RAU_KEY_TEXT_MAX];
    int rc = witness ? rau_cosigner_keygen(argv[0], sk, sizeof sk, vk, sizeof vk)
                     : rau_note_keygen(argv[0], sk, sizeof sk, vk, sizeof vk);
    if (rc) {
        fprintf(stderr, "keygen: %s\n", rau_strerror(rc));
        return RA_HOST_EXIT_FAILED;
    }
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    size_t sl = strlen(sk);
    int ok = fd >= 0 && write(fd, sk, sl) == (ssize_t)sl && write(fd, "\n", 1) == 1;
    if (fd >= 0) close(fd);
    memset(sk, 0, sizeof sk);
    FILE *f = ok ? fopen(argv[2], "wx") : NULL;
    if (!f || fprintf(f, "%s\n", vk) < 0 || fclose(f) != 0) {
        fprintf(stderr, "keygen: cannot write %s\n", ok ? argv[2] : argv[1]);
        return RA_HOST_EXIT_FAILED;
    }
    printf("%s\n", vk);
    return RA_HOST_EXIT_OK;
}

int ra_host_audit(const char *exe, int argc, char **argv) {
    (void)exe;
    if (argc >= 1 && !strcmp(argv[0], "verify")) return audit_verify(argc - 1, argv + 1);
    if (argc >= 1 && !strcmp(argv[0], "keygen")) return audit_keygen(argc - 1, argv + 1);
    if (argc >= 1 && !strcmp(argv[0], "proof")) return ra_host_audit_proof(argc - 1, argv + 1);
    if (argc >= 1 && !strcmp(argv[0], "witness")) return ra_host_audit_witness(argc - 1, argv + 1);
    fprintf(stderr, "usage: " RA_HOST_NAME " audit verify [--list] [--vkey FILE] "
                    "[--checkpoint NOTE]... [--witness-vkey FILE] DIR\n"
                    "       " RA_HOST_NAME " audit keygen [--witness] NAME SKEY-FILE VKEY-FILE\n"
                    "       " RA_HOST_NAME " audit proof inclusion|consistency|checkpoint ...\n"
                    "       " RA_HOST_NAME " audit witness cosign ...\n");
    return RA_HOST_EXIT_USAGE;
}
