#ifndef LRD_CRC32C_CHAIN_H
#define LRD_CRC32C_CHAIN_H
/* The CRC32C instructions and the one-chain loop over short buffers, for the C files of this
 * target that checksum inline (crc32c.c, entry_read.c). Not part of the module's interface. */
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <nmmintrin.h>
#define HARDWARE __attribute__((target("sse4.2")))
/* The chains are kept 64 bits wide, as crc32q writes them: a 32-bit chain costs a zero-extending
 * move per step, a fourth cycle on the first chain. */
typedef uint64_t chain;
#define CRC64(crc, word) _mm_crc32_u64((crc), (word))
#define CRC32(crc, word) _mm_crc32_u32((crc), (word))
#define CRC16(crc, half) _mm_crc32_u16((crc), (half))
#define CRC8(crc, byte) _mm_crc32_u8((crc), (byte))
#elif defined(__aarch64__)
#include <arm_acle.h>
#define HARDWARE __attribute__((target("crc")))
typedef uint32_t chain;
#define CRC64(crc, word) __crc32cd((crc), (word))
#define CRC32(crc, word) __crc32cw((crc), (word))
#define CRC16(crc, half) __crc32ch((crc), (half))
#define CRC8(crc, byte) __crc32cb((crc), (byte))
#endif

#define ALWAYS_INLINE __attribute__((always_inline)) inline

/* Whether the CPU has the instructions (set when the library is loaded, in crc32c.c). */
extern int lrd_crc32c_hardware_present __attribute__((visibility("hidden")));

static inline uint64_t load64(const uint8_t *p) {
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

#if defined(HARDWARE)
/* The register over `n` bytes at `p` in one chain, copying them to `d` if `copy`: each piece is
 * stored from the register it was checksummed from, so the checksum is of the bytes copied. */
HARDWARE static ALWAYS_INLINE uint32_t crc_chain(uint32_t crc, int copy, uint8_t *d, const uint8_t *p, size_t n) {
    chain c = crc;
    /* Four words a step: the loop's own count and branch cost as much as a word's checksum. */
    for (; n >= 32; n -= 32, p += 32) {
        uint64_t w0 = load64(p), w1 = load64(p + 8), w2 = load64(p + 16), w3 = load64(p + 24);
        c = CRC64(CRC64(CRC64(CRC64(c, w0), w1), w2), w3);
        if (copy) {
            memcpy(d, &w0, 8);
            memcpy(d + 8, &w1, 8);
            memcpy(d + 16, &w2, 8);
            memcpy(d + 24, &w3, 8);
            d += 32;
        }
    }
    /* Below 32 bytes now: two words, then one, without a loop (whose unrolled setup cost a
     * short key or value more than its words). */
    if (n & 16) {
        uint64_t w0 = load64(p), w1 = load64(p + 8);
        c = CRC64(CRC64(c, w0), w1);
        if (copy) {
            memcpy(d, &w0, 8);
            memcpy(d + 8, &w1, 8);
            d += 16;
        }
        p += 16;
    }
    if (n & 8) {
        uint64_t w = load64(p);
        c = CRC64(c, w);
        if (copy) {
            memcpy(d, &w, 8);
            d += 8;
        }
        p += 8;
    }
    crc = (uint32_t)c;
    /* The last 0 to 7 bytes in at most three steps (keys and short values end here). */
    if (n & 4) {
        uint32_t w;
        memcpy(&w, p, 4);
        crc = CRC32(crc, w);
        if (copy) {
            memcpy(d, &w, 4);
            d += 4;
        }
        p += 4;
    }
    if (n & 2) {
        uint16_t h;
        memcpy(&h, p, 2);
        crc = CRC16(crc, h);
        if (copy) {
            memcpy(d, &h, 2);
            d += 2;
        }
        p += 2;
    }
    if (n & 1) {
        uint8_t b = *p;
        crc = CRC8(crc, b);
        if (copy) *d = b;
    }
    return crc;
}

/* The header checksum of docs/FORMAT.md (bytes 0-3 and 6-43 of a record header) from the header's
 * six words as they lie in the file, chained onto `seed`: for a reader, of the words it loaded
 * and checks; for a writer, of the words it stores. */
HARDWARE static ALWAYS_INLINE uint32_t header_crc_words(uint32_t seed, uint64_t w0, uint64_t w1, uint64_t w2,
                                                       uint64_t w3, uint64_t w4, uint64_t w5) {
    uint32_t crc = CRC16(CRC32(~seed, (uint32_t)w0), (uint16_t)(w0 >> 48));
    chain c = CRC64(CRC64(CRC64(CRC64((chain)crc, w1), w2), w3), w4);
    return ~CRC32((uint32_t)c, (uint32_t)w5);
}
#endif

#endif /* LRD_CRC32C_CHAIN_H */
