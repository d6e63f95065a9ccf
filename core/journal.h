/* The seal-to-WAL journal (journal.c): the meter's side of its write-ahead log, the only
 * caller of wal.c. Called under the seal lock; calls down into wal.c, heads.c and pending.c
 * only. */
#ifndef RA_JOURNAL_H
#define RA_JOURNAL_H

RA_INTERNAL int ra__journal_open(ra_meter_t *m, const ra_config_t *cfg, char *err, size_t errlen);
RA_INTERNAL void ra__journal_close(ra_meter_t *m);
RA_INTERNAL void ra__journal_acked(ra_meter_t *m, uint64_t wal_seq);
RA_INTERNAL int ra__journal_compact(ra_meter_t *m);

/* Whether the meter keeps a WAL (amnesia = false): counts are then frozen, not drained,
 * until the journal's commit. */
static inline bool ra__journal_on(const ra_meter_t *m) {
    return m->wal != NULL;
}
/* A segment's directory entry could be neither made durable nor undone: nothing more is
 * sealed until a restart decides from the disk (docs/ARCHITECTURE.md, the WAL). */
RA_INTERNAL bool ra__journal_in_doubt(const ra_meter_t *m);
/* Whether a segment with this id is in the WAL (false without one). */
RA_INTERNAL bool ra__journal_has_segment(const ra_meter_t *m, uint64_t id);

/* The room a rollover's plan (seal.c step 3) may fill: what the WAL's caps leave
 * (unbounded without a WAL), and what the plan took of it so far. */
typedef struct ra__journal_room {
    uint64_t frames, bytes;           /* what the caps allow */
    uint64_t frames_used, bytes_used; /* what the plan took */
    bool reclaimed;                   /* a compaction ran for this plan */
    int64_t now_ms;                   /* the rollover's time (the age cap) */
} ra__journal_room_t;
RA_INTERNAL void ra__journal_room_init(ra_meter_t *m, int64_t now_ms, ra__journal_room_t *r);
/* Takes n more slices of at most payload_bytes encoded bytes in all, when they fit. ACKed
 * frames count against the caps until a compaction drops them, so before saying no (and the
 * meter is degraded for a full WAL) the journal compacts, once per plan. */
RA_INTERNAL bool ra__journal_fits(ra_meter_t *m, ra__journal_room_t *r, uint64_t n,
                                  uint64_t payload_bytes);
/* The rollover's plan stopped at the WAL's caps: counted, and the meter degraded (I-8)
 * until compaction makes room. */
RA_INTERNAL void ra__journal_refused(ra_meter_t *m);
/* Step 6 of a rollover: the batch as one new segment (group commit, P-9); each slice gets
 * its frame seq. 0 (durable; also without a WAL), a negative RA_E* code when the segment is
 * certainly not in the WAL (RA_EPERSISTFULL: the file system is full; counted, degraded),
 * or RA__EINDOUBT when it may or may not be. Logged here; the caller settles the counts. */
RA_INTERNAL int ra__journal_commit(ra_meter_t *m, ra_slice_t *const *batch, size_t n,
                                   int64_t now_ms);
/* A sealed batch (durable in the WAL when there is one) into the ring, in order, as far as
 * it has room; with a WAL the rest is spilled (it waits on disk), and once anything is
 * spilled every newer slice is too, so the ring stays the oldest prefix. Takes the batch's
 * references. Returns how many went into the ring. */
RA_INTERNAL size_t ra__journal_publish(ra_meter_t *m, ra_slice_t *const *batch, size_t n);
/* Spilled slices back into the ring while it has room, in WAL order. */
RA_INTERNAL void ra__journal_refill(ra_meter_t *m);

#endif /* RA_JOURNAL_H */
