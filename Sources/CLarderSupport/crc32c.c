#include "CLarderSupport.h"
#include "crc32c_chain.h"

#include <pthread.h>
#include <string.h>

/* Software fallback: slicing-by-8 tables, built once (pthread_once: no thread reads a table
 * another is still writing). */
static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void build_table(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = table[0][n];
        for (int k = 1; k < 8; k++) {
            c = table[0][c & 0xFF] ^ (c >> 8);
            table[k][n] = c;
        }
    }
}

static uint32_t crc_software(uint32_t crc, const uint8_t *p, size_t n) {
    pthread_once(&table_once, build_table);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= crc; /* little-endian hosts only; see Package.swift */
        crc = table[7][w & 0xFF] ^ table[6][(w >> 8) & 0xFF] ^ table[5][(w >> 16) & 0xFF] ^
              table[4][(w >> 24) & 0xFF] ^ table[3][(w >> 32) & 0xFF] ^ table[2][(w >> 40) & 0xFF] ^
              table[1][(w >> 48) & 0xFF] ^ table[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) crc = table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return crc;
}

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>

/* CPUID itself (leaf 1, ECX bit 20), as the fold's probe below does: __builtin_cpu_supports reads
 * compiler-rt's __cpu_model, which not every toolchain links (reported missing with Apple's for
 * x86-64). */
static int probe_hardware(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    const unsigned sse42 = 1u << 20;
    return (c & sse42) != 0;
}
#elif defined(__aarch64__)
#if defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7)
#endif
#elif defined(__APPLE__)
#include <sys/sysctl.h>
#endif

static int probe_hardware(void) {
#if defined(__APPLE__)
    /* Not every Apple arm64 CPU has the CRC extension: the A7 to A9 do not, and tvOS 17 still
     * runs on the A8 of the Apple TV HD. The kernel says (under its newer name or its older);
     * without an answer, the table. */
    static const char *const names[] = {"hw.optional.arm.FEAT_CRC32", "hw.optional.armv8_crc32"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        int present = 0;
        size_t size = sizeof present;
        if (sysctlbyname(names[i], &present, &size, NULL, 0) == 0 && size == sizeof present) return present != 0;
    }
    return 0;
#elif defined(__linux__)
    return (getauxval(AT_HWCAP) & HWCAP_CRC32) != 0;
#else
    return 0;
#endif
}
#endif

#if defined(HARDWARE)
/* Whether the CPU has the instructions, asked when the library is loaded: the checksum functions
 * then test a plain flag, and save no registers for a question on their usual path. */
int lrd_crc32c_hardware_present;

__attribute__((constructor)) static void probe_hardware_at_load(void) {
    lrd_crc32c_hardware_present = probe_hardware() ? 1 : 0;
}

static inline int hardware_available(void) { return lrd_crc32c_hardware_present; }
#endif

#if defined(HARDWARE)
/* The hardware path. One crc32 instruction has a latency of three cycles but a throughput of one
 * per cycle, so a single chain of them runs at a third of the speed the unit can give. Long
 * buffers are therefore cut into blocks of three equal parts, checksummed as three interleaved
 * chains. The CRC register update is linear, so
 *     register(A ++ B) == shift_|B|(register(A)) ^ register_from_zero(B),
 * where shift_n is the effect of n zero bytes on the register, and shifts join the chains.
 * (Mark Adler's crc32c.c and Intel's crc_pcl do the same.) Blocks of 3 * LONG_BLOCK bytes start
 * their first chain from the running register; blocks of 3 * SHORT_BLOCK start all three from
 * zero and join the running register with one more shift, which keeps the joins off the chains'
 * critical path (worth some 8% on 16 KiB). Below 3 * SHORT_BLOCK bytes, one chain. On x86-64
 * CPUs that can fold (below), buffers of 2 * FOLD_BLOCK bytes and more are folded instead. */
#define LONG_BLOCK 8192
#define SHORT_BLOCK 256

/* shift_n as four tables of 256 entries, one per byte of the register. Built once, on first use,
 * like the software table. */
static uint32_t shift_long[4][256];      /* LONG_BLOCK zero bytes */
static uint32_t shift_short[4][256];     /* SHORT_BLOCK */
static uint32_t shift_short_all[4][256]; /* 3 * SHORT_BLOCK */
static pthread_once_t shift_once = PTHREAD_ONCE_INIT;

/* The register after `n` zero bytes (n a multiple of 8), by the software table: with a zero
 * word, only the register's own four bytes reach the slicing tables. */
static uint32_t zeros_software(uint32_t crc, size_t n) {
    for (; n >= 8; n -= 8)
        crc = table[7][crc & 0xFF] ^ table[6][(crc >> 8) & 0xFF] ^ table[5][(crc >> 16) & 0xFF] ^
              table[4][crc >> 24];
    return crc;
}

/* By linearity, shift_n(v) is the XOR of shift_n of v's set bits: 32 real computations fill
 * 1024 entries. */
static void build_shift(uint32_t shift[4][256], size_t n) {
    uint32_t bit[32];
    for (int i = 0; i < 32; i++) bit[i] = zeros_software((uint32_t)1 << i, n);
    for (int k = 0; k < 4; k++) {
        shift[k][0] = 0;
        for (uint32_t v = 1; v < 256; v++) shift[k][v] = shift[k][v & (v - 1)] ^ bit[8 * k + __builtin_ctz(v)];
    }
}

static void build_shift_tables(void) {
    pthread_once(&table_once, build_table);
    build_shift(shift_long, LONG_BLOCK);
    build_shift(shift_short, SHORT_BLOCK);
    build_shift(shift_short_all, 3 * SHORT_BLOCK);
}

static inline uint32_t shift(uint32_t op[4][256], uint32_t crc) {
    return op[0][crc & 0xFF] ^ op[1][(crc >> 8) & 0xFF] ^ op[2][(crc >> 16) & 0xFF] ^ op[3][crc >> 24];
}


/* The `copy` argument of the loops below: 0 (none), 1 (a copy), or STORE_AHEAD, a copy whose
 * destination the fold asks for ahead (a constant once inlined; the other loops copy either way). */
#define STORE_AHEAD 2

/* The register over one block of 3 * part bytes at `p`, the first chain starting from `crc`.
 * If `copy` (a constant once inlined), each word is also stored to `d`: the checksum is of the
 * bytes copied, and the copy costs no second pass (faster here than a memcpy of the block first). */
HARDWARE static ALWAYS_INLINE uint32_t crc_block(uint32_t crc, int copy, uint8_t *d, const uint8_t *p,
                                                 size_t part, uint32_t join[4][256]) {
    chain c0 = crc, c1 = 0, c2 = 0;
    for (size_t i = 0; i < part; i += 8) {
        uint64_t w0 = load64(p + i), w1 = load64(p + part + i), w2 = load64(p + 2 * part + i);
        c0 = CRC64(c0, w0);
        c1 = CRC64(c1, w1);
        c2 = CRC64(c2, w2);
        if (copy) {
            memcpy(d + i, &w0, 8);
            memcpy(d + part + i, &w1, 8);
            memcpy(d + 2 * part + i, &w2, 8);
        }
    }
    return shift(join, shift(join, (uint32_t)c0) ^ (uint32_t)c1) ^ (uint32_t)c2;
}


#if defined(__x86_64__)
/* Folding, for long buffers on CPUs with carry-less multiplication of 256-bit vectors (VPCLMULQDQ
 * with AVX2: AMD Zen 3 and later, Intel Ice Lake and Alder Lake and later). The crc32 instruction
 * checksums 8 bytes per cycle at best; folding takes 32 bytes per instruction pair, so that a
 * copy out of memory runs at the memory's speed instead of the checksum's. The CRC register
 * update is linear: a 16-byte piece A followed by D more bits contributes A * x^D (mod P), and
 * with A = a_lo * x^64 + a_hi (reflected: the first eight bytes are the high terms)
 *     A * x^D == a_lo * (x^(D+32) mod P) + a_hi * (x^(D-32) mod P)      (times x^32, mod P)
 * where each product is a 64 x 33-bit carry-less multiplication that fits 16 bytes. Folding
 * carries every 16-byte lane of the running state D bits forward onto the data there, until
 * one 16-byte lane is left, whose CRC from a zero register (two crc32 instructions) is the CRC of
 * everything. The constants are bit-reflected and shifted left by one (the reflected product
 * lands one bit low), as in Intel's white paper "Fast CRC Computation for Generic Polynomials
 * Using PCLMULQDQ"; a pair per distance D, (x^(D+32) mod P, x^(D-32) mod P), for P = CRC32C. */
#define FOLDING __attribute__((target("avx2,vpclmulqdq,pclmul,sse4.2,prfchw")))
#define FOLD_BLOCK 128 /* four 256-bit lanes: 1024 bits */

static int folding_allowed = 1;

/* Asks CPUID itself: __builtin_cpu_supports("vpclmulqdq") reads __cpu_features2, which runtime
 * libraries before GCC 8's libgcc do not have (a link error there). */
static int cpu_can_fold(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    const unsigned pclmul = 1u << 1, sse42 = 1u << 20, osxsave = 1u << 27, avx = 1u << 28;
    if ((c & (pclmul | sse42 | osxsave | avx)) != (pclmul | sse42 | osxsave | avx)) return 0;
    /* The system saves the SSE and AVX registers on a context switch (XCR0 bits 1 and 2). */
    unsigned xcr0_low, xcr0_high;
    __asm__ volatile("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
    if ((xcr0_low & 6) != 6) return 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    const unsigned avx2 = 1u << 5, vpclmulqdq = 1u << 10; /* EBX, ECX of leaf 7 */
    return (b & avx2) && (c & vpclmulqdq);
}

static int folding_available(void) {
    if (!__atomic_load_n(&folding_allowed, __ATOMIC_RELAXED)) return 0;
    static int cached = -1;
    int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (v < 0) {
        v = cpu_can_fold();
        __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
    }
    return v;
}

/* The fold asks for the bytes ahead of it itself (prefetch instructions): the hardware's stream
 * prefetchers learn a stream anew at every 4 KiB page, and the fold's loads reach the memory
 * system only as fast as the folding retires them. The buffer's first PREFETCH_FIRST bytes are
 * asked for at once; then each step asks for the block a fixed distance ahead of it: 1 KiB, or
 * 4 KiB for buffers of 8 KiB and more, where the loop's pace is the memory's. For those, the
 * bytes from 1 KiB to 4 KiB past the start are left to the hardware's prefetchers, which have
 * caught on by then (asking for the first 2 KiB at once instead was slower). Never past the
 * buffer's end, where the lines belong to another record. Measured on AMD Zen 4 (random records
 * of a 256 MiB file, copied and checked): 2 KiB +8%, 4 and 8 KiB +17%, 16 KiB +22%, 64 KiB +27%,
 * 1 MiB +15%; 1 KiB unchanged.
 *
 * A copy into the file (STORE_AHEAD, a put's) also asks for its destination's lines ahead, for
 * writing (PREFETCHW, which every CPU that can fold has): each store into the file's cold pages
 * otherwise waits for its line. Not a copy out of the file: its destination, the caller's
 * buffer, is usually in cache, and asking for it slowed 1 MiB reads by a fifth. */
#define PREFETCH_FIRST 1024

static inline size_t prefetch_distance(size_t n) { return n >= 8192 ? 4096 : 1024; }

/* x * x^D folded, for each 16-byte lane of x, by the constant pair of D. */
FOLDING static inline __m256i fold256(__m256i x, __m256i k) {
    return _mm256_xor_si256(_mm256_clmulepi64_epi128(x, k, 0x00), _mm256_clmulepi64_epi128(x, k, 0x11));
}

FOLDING static inline __m128i fold128(__m128i x, __m128i k) {
    return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

/* The register over `n` bytes at `p` (n a positive multiple of FOLD_BLOCK), copying them to `d`
 * if `copy`; each 32-byte load is stored as loaded, so the checksum is of the bytes copied. */
FOLDING static uint32_t crc_fold(uint32_t crc, int copy, uint8_t *d, const uint8_t *p, size_t n) {
    const __m256i by1024 = _mm256_broadcastsi128_si256(_mm_set_epi64x(0x0d3b6092, 0x6992cea2));
    const __m256i by256 = _mm256_broadcastsi128_si256(_mm_set_epi64x(0xba4fc28e, 0x1384aa63a));
    const __m128i by128 = _mm_set_epi64x(0x14cd00bd6, 0xf20c0dfe);
    for (size_t at = FOLD_BLOCK; at < n && at < PREFETCH_FIRST; at += 64) _mm_prefetch((const char *)p + at, _MM_HINT_T0);
    __m256i x[4];
    for (int i = 0; i < 4; i++) {
        x[i] = _mm256_loadu_si256((const __m256i *)(p + 32 * i));
        if (copy) _mm256_storeu_si256((__m256i *)(d + 32 * i), x[i]);
    }
    /* The running register enters as the first four bytes' complement, as in crc32. */
    x[0] = _mm256_xor_si256(x[0], _mm256_zextsi128_si256(_mm_cvtsi32_si128((int)crc)));
    size_t ahead = prefetch_distance(n);
    for (size_t at = FOLD_BLOCK; at < n; at += FOLD_BLOCK) {
        if (at + ahead < n) {
            _mm_prefetch((const char *)p + at + ahead, _MM_HINT_T0);
            _mm_prefetch((const char *)p + at + ahead + 64, _MM_HINT_T0);
            if (copy == STORE_AHEAD) {
                /* For writing: PREFETCHW under this function's target (clang before 21 declares
                 * _m_prefetchw only in a header immintrin.h does not include). */
                __builtin_prefetch(d + at + ahead, 1, 3);
                __builtin_prefetch(d + at + ahead + 64, 1, 3);
            }
        }
        for (int i = 0; i < 4; i++) {
            __m256i y = _mm256_loadu_si256((const __m256i *)(p + at + 32 * i));
            if (copy) _mm256_storeu_si256((__m256i *)(d + at + 32 * i), y);
            x[i] = _mm256_xor_si256(fold256(x[i], by1024), y);
        }
    }
    /* Four 32-byte lanes into the last, then its two 16-byte halves into the second. */
    __m256i v = _mm256_xor_si256(fold256(x[0], by256), x[1]);
    v = _mm256_xor_si256(fold256(v, by256), x[2]);
    v = _mm256_xor_si256(fold256(v, by256), x[3]);
    __m128i last = _mm_xor_si128(fold128(_mm256_castsi256_si128(v), by128), _mm256_extracti128_si256(v, 1));
    uint64_t register_ = _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(last));
    return (uint32_t)_mm_crc32_u64(register_, (uint64_t)_mm_extract_epi64(last, 1));
}
#endif

/* The register over `n` bytes at `p`, copying them to `d` if `copy`. */
HARDWARE static ALWAYS_INLINE uint32_t crc_blocks(uint32_t crc, int copy, uint8_t *d, const uint8_t *p, size_t n) {
#if defined(__x86_64__)
    if (n >= 2 * FOLD_BLOCK && folding_available()) {
        size_t folded = n & ~(size_t)(FOLD_BLOCK - 1);
        crc = crc_fold(crc, copy, d, p, folded);
        n -= folded;
        p += folded;
        if (copy) d += folded;
    } else
#endif
    if (n >= 3 * SHORT_BLOCK) {
        pthread_once(&shift_once, build_shift_tables);
        for (; n >= 3 * LONG_BLOCK; n -= 3 * LONG_BLOCK, p += 3 * LONG_BLOCK) {
            crc = crc_block(crc, copy, d, p, LONG_BLOCK, shift_long);
            if (copy) d += 3 * LONG_BLOCK;
        }
        for (; n >= 3 * SHORT_BLOCK; n -= 3 * SHORT_BLOCK, p += 3 * SHORT_BLOCK) {
            crc = shift(shift_short_all, crc) ^ crc_block(0, copy, d, p, SHORT_BLOCK, shift_short);
            if (copy) d += 3 * SHORT_BLOCK;
        }
    }
    return crc_chain(crc, copy, d, p, n);
}

HARDWARE static uint32_t crc_hardware(uint32_t crc, const uint8_t *p, size_t n) {
    return crc_blocks(crc, 0, NULL, p, n);
}

/* The register over `q` then `p`, copying `p` to `d`: one call for a record's key and value. */
HARDWARE static uint32_t crc_then_copy_hardware(uint32_t crc, const uint8_t *q, size_t q_length, uint8_t *d,
                                                const uint8_t *p, size_t n) {
    return crc_blocks(crc_blocks(crc, 0, NULL, q, q_length), 1, d, p, n);
}

/* `crc_then_copy_hardware` into the file: the destination is asked for ahead. */
HARDWARE static uint32_t crc_then_store_hardware(uint32_t crc, const uint8_t *q, size_t q_length, uint8_t *d,
                                                 const uint8_t *p, size_t n) {
    return crc_blocks(crc_blocks(crc, 0, NULL, q, q_length), STORE_AHEAD, d, p, n);
}

/* Below this, key and value each take one chain: the path of a short record's read and write. */
#define SHORT_LENGTH 256

/* `crc_then_copy_hardware` for a key and a value both shorter than SHORT_LENGTH: a leaf without
 * the long paths, whose registers (saved and restored on every call) it does not need. */
HARDWARE static uint32_t crc_then_copy_short(uint32_t crc, const uint8_t *q, size_t q_length, uint8_t *d,
                                             const uint8_t *p, size_t n) {
    return crc_chain(crc_chain(crc, 0, NULL, q, q_length), 1, d, p, n);
}

/* Bytes 0-3 and 6-43 of a record header: six steps, no loop, no length to dispatch on. */
HARDWARE static uint32_t header_crc_hardware(uint32_t crc, const uint8_t *h) {
    uint32_t first, last;
    uint16_t middle;
    memcpy(&first, h, 4);
    memcpy(&middle, h + 6, 2);
    memcpy(&last, h + 40, 4);
    crc = CRC16(CRC32(crc, first), middle);
    chain c = crc;
    for (int i = 0; i < 4; i++) c = CRC64(c, load64(h + 8 + 8 * i));
    return CRC32((uint32_t)c, last);
}
#else
static uint32_t crc_hardware(uint32_t crc, const uint8_t *p, size_t n) { return crc_software(crc, p, n); }
static uint32_t crc_then_copy_hardware(uint32_t crc, const uint8_t *q, size_t q_length, uint8_t *d,
                                       const uint8_t *p, size_t n) {
    memcpy(d, p, n);
    return crc_software(crc_software(crc, q, q_length), d, n);
}
#define crc_then_store_hardware crc_then_copy_hardware
static uint32_t header_crc_hardware(uint32_t crc, const uint8_t *h) {
    return crc_software(crc_software(crc, h, 4), h + 6, 38);
}
static int hardware_available(void) { return 0; }
#endif

/* The entry points below test for the hardware and make one call either way: the test, the
 * complements and the call are all a 100-byte read pays besides the checksum itself. */

uint32_t lrd_crc32c(uint32_t crc, const void *data, size_t length) {
    const uint8_t *p = (const uint8_t *)data;
    return ~(hardware_available() ? crc_hardware(~crc, p, length) : crc_software(~crc, p, length));
}

static __attribute__((noinline)) uint32_t crc_then_copy_software(uint32_t crc, const uint8_t *q, size_t q_length,
                                                                 uint8_t *d, const uint8_t *p, size_t n) {
    crc = crc_software(crc, q, q_length);
    memcpy(d, p, n);
    return crc_software(crc, d, n);
}

/* The two copying entry points, one body: `store` (a constant in each) picks the hardware copy
 * that asks for its destination ahead. */
static inline __attribute__((always_inline)) uint32_t crc_then_copy_any(uint32_t crc, const void *prefix, size_t prefix_length,
                                                                         void *destination, const void *source, size_t length,
                                                                         int store) {
    const uint8_t *q = (const uint8_t *)prefix;
    uint8_t *d = (uint8_t *)destination;
    const uint8_t *p = (const uint8_t *)source;
    if (!hardware_available()) return ~crc_then_copy_software(~crc, q, prefix_length, d, p, length);
#if defined(HARDWARE)
    if (prefix_length < SHORT_LENGTH && length < SHORT_LENGTH) return ~crc_then_copy_short(~crc, q, prefix_length, d, p, length);
#endif
    return ~(store ? crc_then_store_hardware(~crc, q, prefix_length, d, p, length)
                   : crc_then_copy_hardware(~crc, q, prefix_length, d, p, length));
}

uint32_t lrd_crc32c_then_copy(uint32_t crc, const void *prefix, size_t prefix_length,
                              void *destination, const void *source, size_t length) {
    return crc_then_copy_any(crc, prefix, prefix_length, destination, source, length, 0);
}

uint32_t lrd_crc32c_then_store(uint32_t crc, const void *prefix, size_t prefix_length,
                               void *destination, const void *source, size_t length) {
    return crc_then_copy_any(crc, prefix, prefix_length, destination, source, length, 1);
}

static __attribute__((noinline)) uint32_t header_crc_software(uint32_t crc, const uint8_t *h) {
    return crc_software(crc_software(crc, h, 4), h + 6, 38);
}

uint32_t lrd_crc32c_record_header(uint32_t crc, const void *header) {
    const uint8_t *h = (const uint8_t *)header;
    return ~(hardware_available() ? header_crc_hardware(~crc, h) : header_crc_software(~crc, h));
}

#if defined(HARDWARE)
HARDWARE static int header_holds_hardware(uint32_t seed, const uint8_t *h, uint64_t w0, uint64_t w1, uint64_t w5) {
    return header_crc_words(seed, w0, w1, load64(h + 16), load64(h + 24), load64(h + 32), w5) == (uint32_t)(w5 >> 32);
}
#endif

int lrd_record_header_holds(uint32_t seed, const void *header, uint64_t w0, uint64_t w1, uint64_t w5) {
#if defined(HARDWARE)
    if (hardware_available()) return header_holds_hardware(seed, (const uint8_t *)header, w0, w1, w5);
#endif
    return lrd_crc32c_record_header(seed, header) == (uint32_t)(w5 >> 32);
}

int lrd_crc32c_allow_folding(int allowed) {
#if defined(__x86_64__)
    __atomic_store_n(&folding_allowed, allowed != 0, __ATOMIC_RELAXED);
    return folding_available();
#else
    (void)allowed;
    return 0;
#endif
}
