/* The seal-to-WAL journal (journal.c): the meter's side of its write-ahead log.
 * Called under the seal lock; calls down into wal.c, heads.c and pending.c only. */
#ifndef RA_JOURNAL_H
#define RA_JOURNAL_H

RA_INTERNAL int ra__journal_open(ra_meter_t *m, const ra_config_t *cfg, char *err, size_t errlen);
RA_INTERNAL void ra__journal_close(ra_meter_t *m);
RA_INTERNAL void ra__journal_acked(ra_meter_t *m, uint64_t wal_seq);
/* While the WAL refuses rollovers the meter is degraded (I-8); refused: it just did. */
RA_INTERNAL void ra__journal_room_changed(ra_meter_t *m, int64_t now_ms, bool refused);
RA_INTERNAL int ra__journal_compact(ra_meter_t *m);
/* A sealed batch (durable in the WAL when there is one) into the ring, in order, as far as
 * it has room; with a WAL the rest is spilled (it waits on disk), and once anything is
 * spilled every newer slice is too, so the ring stays the oldest prefix. Takes the batch's
 * references. Returns how many went into the ring. */
RA_INTERNAL size_t ra__journal_publish(ra_meter_t *m, ra_slice_t *const *batch, size_t n);
/* Spilled slices back into the ring while it has room, in WAL order. */
RA_INTERNAL void ra__journal_refill(ra_meter_t *m);

#endif /* RA_JOURNAL_H */
