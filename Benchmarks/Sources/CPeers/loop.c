/* The one C loop that measures every C-side store. Sources/larder-bench/SwiftLoop.swift mirrors
 * it for Larder's Swift API: change one, change the other. */
#include "CPeers.h"
#include "peer_util.h"

#include <time.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

uint64_t bench_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t bench_heap_bytes(void) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    struct mallinfo2 info = mallinfo2();
    return (uint64_t)info.uordblks + (uint64_t)info.hblkhd;
#else
    return 0;
#endif
}

/* One operation; returns 1 when it found its key, 0 when not, -1 on a failure. */
static inline int one_op(const bench_peer *peer, void *handle, const bench_data *data, uint32_t op, void *buf) {
    uint32_t index = op & BENCH_OP_INDEX_MASK;
    const uint8_t *key = bench_key(data, index);
    size_t key_len = data->key_lens[index];
    switch (op >> BENCH_OP_SHIFT) {
    case BENCH_OP_GET: {
        size_t len = 0;
        int rc = peer->get(handle, key, key_len, buf, data->value_len, &len);
        if (rc == BENCH_FOUND) return len == data->value_len ? 1 : -1;
        return rc == BENCH_NOT_FOUND ? 0 : -1;
    }
    case BENCH_OP_PUT: {
        const uint8_t *value = data->values + (index % data->value_variants) * data->value_step;
        return peer->put(handle, key, key_len, value, data->value_len) == 0 ? 1 : -1;
    }
    default: {
        int rc = peer->del(handle, key, key_len);
        return rc == BENCH_FOUND ? 1 : rc == BENCH_NOT_FOUND ? 0 : -1;
    }
    }
}

void bench_run_ops(const bench_peer *peer, void *handle, const bench_data *data,
                   const uint32_t *ops, size_t ops_count, uint64_t max_ns,
                   size_t sample_every, uint64_t *samples, void *buf, bench_result *out) {
    bench_result r = {0};
    uint64_t start = bench_now_ns();
    uint64_t deadline = max_ns ? start + max_ns : UINT64_MAX;
    size_t i = 0;
    while (i < ops_count) {
        size_t end = i + 256 < ops_count ? i + 256 : ops_count;
        for (; i < end; i++) {
            int outcome;
            if (sample_every && i % sample_every == 0) {
                uint64_t t0 = bench_now_ns();
                outcome = one_op(peer, handle, data, ops[i], buf);
                samples[r.samples++] = bench_now_ns() - t0;
            } else {
                outcome = one_op(peer, handle, data, ops[i], buf);
            }
            if (outcome > 0) r.found++;
            else if (outcome == 0) r.not_found++;
            else r.errors++;
        }
        if (max_ns && bench_now_ns() >= deadline) break;
    }
    r.nanoseconds = bench_now_ns() - start;
    r.ops = i;
    *out = r;
}
