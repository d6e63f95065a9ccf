/* The sealer's sort: introsort on three-word keys (no indirect calls, no memcmp). The
 * sealer sorts its stream-windows by (window, tenant, dimension) and each stream's rows by
 * subject (seal.c, step 2); keys are big-endian words, so word order is byte order. */
#include "internal.h"

static inline bool key_less(const ra__sort_key_t *a, const ra__sort_key_t *b) {
    if (a->k[0] != b->k[0]) return a->k[0] < b->k[0];
    if (a->k[1] != b->k[1]) return a->k[1] < b->k[1];
    if (a->k[2] != b->k[2]) return a->k[2] < b->k[2];
    return a->v < b->v;
}

static inline void key_swap(ra__sort_key_t *a, ra__sort_key_t *b) {
    ra__sort_key_t t = *a;
    *a = *b;
    *b = t;
}

static void sift_down(ra__sort_key_t *a, size_t i, size_t n) {
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) return;
        if (c + 1 < n && key_less(&a[c], &a[c + 1])) c++;
        if (!key_less(&a[i], &a[c])) return;
        key_swap(&a[i], &a[c]);
        i = c;
    }
}

static void heap_sort(ra__sort_key_t *a, size_t n) {
    for (size_t i = n / 2; i-- > 0;)
        sift_down(a, i, n);
    for (size_t i = n; i-- > 1;) {
        key_swap(&a[0], &a[i]);
        sift_down(a, 0, i);
    }
}

/* Quicksort with median-of-three, insertion sort below 16 elements, and a depth bound
 * after which heapsort takes over: O(n log n) whatever the keys (tenants and raw subjects
 * come from callers). */
static void intro_sort(ra__sort_key_t *a, size_t n, int depth) {
    while (n > 16) {
        if (depth-- == 0) {
            heap_sort(a, n);
            return;
        }
        size_t mid = n / 2;
        if (key_less(&a[mid], &a[0])) key_swap(&a[mid], &a[0]);
        if (key_less(&a[n - 1], &a[0])) key_swap(&a[n - 1], &a[0]);
        if (key_less(&a[n - 1], &a[mid])) key_swap(&a[n - 1], &a[mid]);
        ra__sort_key_t pivot = a[mid];
        size_t i = 0, j = n - 1;
        for (;;) {
            while (key_less(&a[i], &pivot))
                i++;
            while (key_less(&pivot, &a[j]))
                j--;
            if (i >= j) break;
            key_swap(&a[i++], &a[j--]);
        }
        /* [0, j] <= pivot <= [j + 1, n): recurse on the smaller side, loop on the other. */
        size_t left = j + 1;
        if (left < n - left) {
            intro_sort(a, left, depth);
            a += left;
            n -= left;
        } else {
            intro_sort(a + left, n - left, depth);
            n = left;
        }
    }
    for (size_t i = 1; i < n; i++) {
        ra__sort_key_t t = a[i];
        size_t j = i;
        for (; j > 0 && key_less(&t, &a[j - 1]); j--)
            a[j] = a[j - 1];
        a[j] = t;
    }
}

void ra__sort_keys(ra__sort_key_t *a, size_t n) {
    int depth = 2;
    for (size_t k = n; k > 1; k >>= 1)
        depth += 2;
    intro_sort(a, n, depth);
}
