/* The dedupe index (AUD-I-6): event key -> (seq, self_hash) for the last `cap` events of a
 * chain, so a re-emitted event is answered with its original position. Bounded: a ring of
 * entries and an open-addressing table twice its size; the oldest entry leaves the table
 * (backward-shift deletion) when a new one arrives. */
#include "internal.h"

#include <string.h>

static uint32_t slot_of(const rau__dedupe_t *d, const uint8_t *key) {
    uint32_t h;
    memcpy(&h, key, 4); /* the key is a BLAKE3 output: any 4 bytes are uniform */
    return h & d->mask;
}

int rau__dedupe_init(rau__dedupe_t *d, uint32_t cap) {
    memset(d, 0, sizeof *d);
    if (cap == 0 || cap > (1u << 28)) return RAU_EINVAL;
    uint32_t slots = 2;
    while (slots < 2 * cap)
        slots <<= 1;
    d->ents = calloc(cap, sizeof *d->ents);
    d->slots = calloc(slots, sizeof *d->slots);
    if (!d->ents || !d->slots) {
        rau__dedupe_free(d);
        return RAU_ENOMEM;
    }
    d->cap = cap;
    d->mask = slots - 1;
    return 0;
}

void rau__dedupe_free(rau__dedupe_t *d) {
    free(d->ents);
    free(d->slots);
    memset(d, 0, sizeof *d);
}

static int64_t find_slot(const rau__dedupe_t *d, const uint8_t *key) {
    for (uint32_t i = slot_of(d, key);; i = (i + 1) & d->mask) {
        uint32_t s = d->slots[i];
        if (!s) return -1;
        if (memcmp(d->ents[s - 1].key, key, 32) == 0) return i;
    }
}

const rau__dent_t *rau__dedupe_find(const rau__dedupe_t *d, const uint8_t *key) {
    int64_t i = find_slot(d, key);
    return i < 0 ? NULL : &d->ents[d->slots[i] - 1];
}

static void remove_slot(rau__dedupe_t *d, uint32_t i) {
    uint32_t j = i;
    for (;;) {
        j = (j + 1) & d->mask;
        if (!d->slots[j]) break;
        uint32_t k = slot_of(d, d->ents[d->slots[j] - 1].key);
        /* Move j back to i unless its home k lies cyclically in (i, j]. */
        int home_between = (i <= j) ? (i < k && k <= j) : (i < k || k <= j);
        if (!home_between) {
            d->slots[i] = d->slots[j];
            i = j;
        }
    }
    d->slots[i] = 0;
}

void rau__dedupe_add(rau__dedupe_t *d, const uint8_t *key, uint64_t seq, const uint8_t *hash) {
    rau__dent_t *e = &d->ents[d->head];
    if (d->count == d->cap) {
        int64_t s = find_slot(d, e->key);
        RAU_ASSERT(s >= 0);
        remove_slot(d, (uint32_t)s);
    } else {
        d->count++;
    }
    memcpy(e->key, key, 32);
    memcpy(e->hash, hash, 32);
    e->seq = seq;
    uint32_t i = slot_of(d, key);
    while (d->slots[i])
        i = (i + 1) & d->mask;
    d->slots[i] = d->head + 1;
    d->head = (d->head + 1) % d->cap;
}
