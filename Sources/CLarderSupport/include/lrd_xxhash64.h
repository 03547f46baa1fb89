#ifndef LRD_XXHASH64_H
#define LRD_XXHASH64_H
/* XXH64, the hash of keys in the index: inline, so that a lookup hashes its key without a call. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* After the reference description in xxHash's doc/xxhash_spec.md. */
static const uint64_t LRD_XXH_P1 = 0x9E3779B185EBCA87ULL;
static const uint64_t LRD_XXH_P2 = 0xC2B2AE3D27D4EB4FULL;
static const uint64_t LRD_XXH_P3 = 0x165667B19E3779F9ULL;
static const uint64_t LRD_XXH_P4 = 0x85EBCA77C2B2AE63ULL;
static const uint64_t LRD_XXH_P5 = 0x27D4EB2F165667C5ULL;

static inline uint64_t lrd_xxh_rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
static inline uint64_t lrd_xxh_read64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline uint32_t lrd_xxh_read32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }

static inline uint64_t lrd_xxh_round(uint64_t acc, uint64_t input) {
    acc += input * LRD_XXH_P2;
    acc = lrd_xxh_rotl(acc, 31);
    return acc * LRD_XXH_P1;
}

static inline uint64_t lrd_xxh_merge(uint64_t acc, uint64_t val) {
    acc ^= lrd_xxh_round(0, val);
    return acc * LRD_XXH_P1 + LRD_XXH_P4;
}

__attribute__((always_inline)) static inline uint64_t lrd_xxh64(const void *data, size_t length, uint64_t seed) {
    const uint8_t *p = (const uint8_t *)data;
    const uint8_t *end = p + length;
    uint64_t h;
    if (length >= 32) {
        uint64_t v1 = seed + LRD_XXH_P1 + LRD_XXH_P2, v2 = seed + LRD_XXH_P2, v3 = seed, v4 = seed - LRD_XXH_P1;
        const uint8_t *limit = end - 32;
        do {
            v1 = lrd_xxh_round(v1, lrd_xxh_read64(p));
            v2 = lrd_xxh_round(v2, lrd_xxh_read64(p + 8));
            v3 = lrd_xxh_round(v3, lrd_xxh_read64(p + 16));
            v4 = lrd_xxh_round(v4, lrd_xxh_read64(p + 24));
            p += 32;
        } while (p <= limit);
        h = lrd_xxh_rotl(v1, 1) + lrd_xxh_rotl(v2, 7) + lrd_xxh_rotl(v3, 12) + lrd_xxh_rotl(v4, 18);
        h = lrd_xxh_merge(h, v1);
        h = lrd_xxh_merge(h, v2);
        h = lrd_xxh_merge(h, v3);
        h = lrd_xxh_merge(h, v4);
    } else {
        h = seed + LRD_XXH_P5;
    }
    h += (uint64_t)length;
    /* The tail, as the reference takes it (8-byte lanes, then one 4-byte lane, then bytes), with
     * its bounds taken from the length, without a loop: fewer than 32 bytes are left (the stripes
     * stop short of the last 32), so at most two lanes, one lane, a 4-byte lane and 0-3 bytes.
     * Keys of 16-24 bytes end here; a loop a lane cost them a third more. */
    size_t left = (size_t)(end - p);
    if (left & 16) {
        h ^= lrd_xxh_round(0, lrd_xxh_read64(p));
        h = lrd_xxh_rotl(h, 27) * LRD_XXH_P1 + LRD_XXH_P4;
        h ^= lrd_xxh_round(0, lrd_xxh_read64(p + 8));
        h = lrd_xxh_rotl(h, 27) * LRD_XXH_P1 + LRD_XXH_P4;
        p += 16;
    }
    if (left & 8) {
        h ^= lrd_xxh_round(0, lrd_xxh_read64(p));
        h = lrd_xxh_rotl(h, 27) * LRD_XXH_P1 + LRD_XXH_P4;
        p += 8;
    }
    if (left & 4) {
        h ^= (uint64_t)lrd_xxh_read32(p) * LRD_XXH_P1;
        h = lrd_xxh_rotl(h, 23) * LRD_XXH_P2 + LRD_XXH_P3;
        p += 4;
    }
    /* The last 0-3 bytes in order, as the reference takes them: two, then one, without the
     * jump table a switch on the count compiles to. */
    if (left & 2) {
        h ^= p[0] * LRD_XXH_P5;
        h = lrd_xxh_rotl(h, 11) * LRD_XXH_P1;
        h ^= p[1] * LRD_XXH_P5;
        h = lrd_xxh_rotl(h, 11) * LRD_XXH_P1;
        p += 2;
    }
    if (left & 1) {
        h ^= p[0] * LRD_XXH_P5;
        h = lrd_xxh_rotl(h, 11) * LRD_XXH_P1;
    }
    h ^= h >> 33;
    h *= LRD_XXH_P2;
    h ^= h >> 29;
    h *= LRD_XXH_P3;
    h ^= h >> 32;
    return h;
}

#endif /* LRD_XXHASH64_H */
