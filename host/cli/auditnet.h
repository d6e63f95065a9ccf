/* The audit verbs' side of the daemon's proof routes (host/cli/auditnet.c): the text of a
 * proof, as `audit proof` prints it and the daemon answers it (docs/AUDIT.md, "Proofs for the
 * people the records are about"), parsed back. */
#ifndef RA_HOST_AUDITNET_H
#define RA_HOST_AUDITNET_H

#include "ron/audit.h"

typedef struct ra_host_proof {
    int inclusion;                          /* 1: an inclusion proof, 0: a consistency proof */
    uint64_t seq;                           /* inclusion: the record */
    uint64_t size1, size2;                  /* consistency: the trees; inclusion: size2 */
    uint8_t leaf[32], root1[32], root2[32]; /* inclusion: leaf, root2 (its "root" line) */
    int has_record;
    size_t record_len;
    uint8_t record[RAU_RECORD_MAX];
    size_t count;
    uint8_t proof[RAU_MERKLE_PROOF_MAX * 32];
} ra_host_proof_t;

/* 0, or -1 (a line that is not the format, a missing field) with the reason in err. */
int ra_host_proof_parse(const char *text, ra_host_proof_t *p, char *err, size_t errlen);
/* One line per record: "record <seq> <kind> ts_ms=<t> key=value ..." (auditcmd.c; the
 * `audit verify --list` form). */
void ra_host_audit_list_record(void *ud, const rau_record_t *r);
/* Prints lowercase hex after a label: "label <hex>\n". */
void ra_host_hex_line(const char *label, const uint8_t *b, size_t n);
/* A file whole (at most max bytes, NUL-terminated, malloc'd): 0 or -1. */
int ra_host_slurp(const char *path, size_t max, char **buf, size_t *len);
/* A key file's one line (trailing newlines cut) into buf: 0 or -1. */
int ra_host_key_text(const char *path, char *buf, size_t cap);
/* A checkpoint note verified with the log's key in vkey_path (what: the note's name in the
 * messages): its (size, root); 0, or an exit code with the reason printed. */
int ra_host_signed_note(const char *vkey_path, const char *what, const char *note, size_t len,
                        uint64_t *size, uint8_t *root);
/* The same for a note file. */
int ra_host_signed_file(const char *vkey_path, const char *note_path, uint64_t *size,
                        uint8_t *root);

#endif
