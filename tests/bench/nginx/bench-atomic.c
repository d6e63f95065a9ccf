/* The "bare FFI atomic add" baseline of tests/bench/nginx (PRODUCT.md §7: "bare FFI atomic
 * add ≈ 10 ns"): one relaxed 64-bit fetch-add into shared memory, called from LuaJIT
 * through the FFI inside an nginx worker. Nothing else: no key lookup, no window, no
 * bounds. Built as a shared library only for the benchmark (ffi.load). */
#include <stdint.h>

void ra_bench_atomic_add(uint64_t *p, uint64_t v);

void ra_bench_atomic_add(uint64_t *p, uint64_t v) {
    __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
