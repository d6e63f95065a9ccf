/* The dedupe index (AUD-I-6): event key -> (seq, self_hash) for the last `cap` events of a
 * chain, so a re-emitted event is answered with its original position. Bounded: a ring of
 * entries and an open-addressing table twice its size; the oldest entry leaves the table
 * (backward-shift deletion) when a new one arrives. A slot keeps the key's first 32 bits
 * (its hash) beside the entry's number, so a probe compares those before it reads the entry
 * and a deletion finds homes without reading entries: a new event (the common case) costs
 * no cache miss in the entries (bench-audit's profile showed find_slot at ~5 % of an append
 * before). */
#include "internal.h"

#include <string.h>

static uint32_t slot_of(const rau__dedupe_t *d, const uint8_t *key) {
    uint32_t h;
    memcpy(&h, key, 4); /* the key is a BLAKE3 output: any 4 bytes are uniform */
    return h & d->mask;
}

static uint64_t tag_of(const uint8_t *key) {
    uint32_t t;
    memcpy(&t, key, 4);
    return (uint64_t)t << 32;
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

#define ENT(s) ((uint32_t)(s)) /* a slot's entry number + 1; 0: empty */
#define TAG(s) ((s) & ~(uint64_t)0xffffffffu)

static int64_t find_slot(const rau__dedupe_t *d, const uint8_t *key) {
    uint64_t tag = tag_of(key);
    for (uint32_t i = slot_of(d, key);; i = (i + 1) & d->mask) {
        uint64_t s = d->slots[i];
        if (!ENT(s)) return -1;
        if (TAG(s) == tag && memcmp(d->ents[ENT(s) - 1].key, key, 32) == 0) return i;
    }
}

const rau__dent_t *rau__dedupe_find(const rau__dedupe_t *d, const uint8_t *key) {
    int64_t i = find_slot(d, key);
    return i < 0 ? NULL : &d->ents[ENT(d->slots[i]) - 1];
}

static void remove_slot(rau__dedupe_t *d, uint32_t i) {
    uint32_t j = i;
    for (;;) {
        j = (j + 1) & d->mask;
        if (!ENT(d->slots[j])) break;
        uint32_t k = (uint32_t)(d->slots[j] >> 32) & d->mask; /* its home: slot_of its key */
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
    while (ENT(d->slots[i]))
        i = (i + 1) & d->mask;
    d->slots[i] = tag_of(key) | (d->head + 1);
    d->head = (d->head + 1) % d->cap;
}
