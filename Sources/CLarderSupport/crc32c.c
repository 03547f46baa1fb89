#include "CLarderSupport.h"

#include <string.h>

/* Software fallback: slicing-by-8 tables, built once. */
static uint32_t table[8][256];
static int table_ready;

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
    __atomic_store_n(&table_ready, 1, __ATOMIC_RELEASE);
}

static uint32_t crc_software(uint32_t crc, const uint8_t *p, size_t n) {
    if (!__atomic_load_n(&table_ready, __ATOMIC_ACQUIRE)) build_table();
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
#include <nmmintrin.h>

__attribute__((target("sse4.2")))
static uint32_t crc_hardware(uint32_t crc, const uint8_t *p, size_t n) {
    uint64_t c = crc;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = _mm_crc32_u64(c, w);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--) c32 = _mm_crc32_u8(c32, *p++);
    return c32;
}

__attribute__((target("sse4.2")))
static uint32_t crc_copy_hardware(uint32_t crc, uint8_t *d, const uint8_t *p, size_t n) {
    uint64_t c = crc;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = _mm_crc32_u64(c, w);
        memcpy(d, &w, 8);
        p += 8;
        d += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--) {
        c32 = _mm_crc32_u8(c32, *p);
        *d++ = *p++;
    }
    return c32;
}

static int hardware_available(void) {
    static int cached = -1;
    int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (v < 0) {
        __builtin_cpu_init();
        v = __builtin_cpu_supports("sse4.2") ? 1 : 0;
        __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
    }
    return v;
}
#elif defined(__aarch64__)
#include <arm_acle.h>
#if defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7)
#endif
#endif

__attribute__((target("crc")))
static uint32_t crc_hardware(uint32_t crc, const uint8_t *p, size_t n) {
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        crc = __crc32cd(crc, w);
        p += 8;
        n -= 8;
    }
    while (n--) crc = __crc32cb(crc, *p++);
    return crc;
}

static int hardware_available(void) {
#if defined(__APPLE__)
    return 1; /* every Apple arm64 CPU has the CRC extension */
#elif defined(__linux__)
    static int cached = -1;
    int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (v < 0) {
        v = (getauxval(AT_HWCAP) & HWCAP_CRC32) ? 1 : 0;
        __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
    }
    return v;
#else
    return 0;
#endif
}
#else
static uint32_t crc_hardware(uint32_t crc, const uint8_t *p, size_t n) { return crc_software(crc, p, n); }
static int hardware_available(void) { return 0; }
#endif

#if !defined(__x86_64__)
/* Elsewhere the copy and the checksum are two passes (the ARM CRC loop is short already). */
static uint32_t crc_copy_hardware(uint32_t crc, uint8_t *d, const uint8_t *p, size_t n) {
    memcpy(d, p, n);
    return crc_hardware(crc, p, n);
}
#endif

uint32_t lrd_crc32c_copy(uint32_t crc, void *destination, const void *source, size_t length) {
    uint8_t *d = (uint8_t *)destination;
    const uint8_t *p = (const uint8_t *)source;
    crc = ~crc;
    if (hardware_available()) {
        crc = crc_copy_hardware(crc, d, p, length);
    } else {
        memcpy(d, p, length);
        crc = crc_software(crc, d, length);
    }
    return ~crc;
}

uint32_t lrd_crc32c(uint32_t crc, const void *data, size_t length) {
    const uint8_t *p = (const uint8_t *)data;
    crc = ~crc;
    crc = hardware_available() ? crc_hardware(crc, p, length) : crc_software(crc, p, length);
    return ~crc;
}

uint32_t lrd_crc32c_then_copy(uint32_t crc, const void *prefix, size_t prefix_length,
                              void *destination, const void *source, size_t length) {
    const uint8_t *q = (const uint8_t *)prefix;
    uint8_t *d = (uint8_t *)destination;
    const uint8_t *p = (const uint8_t *)source;
    crc = ~crc;
    if (hardware_available()) {
        crc = crc_hardware(crc, q, prefix_length);
        crc = crc_copy_hardware(crc, d, p, length);
    } else {
        crc = crc_software(crc, q, prefix_length);
        memcpy(d, p, length);
        crc = crc_software(crc, d, length);
    }
    return ~crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2")))
static uint32_t header_crc_hardware(uint32_t crc, const uint8_t *h) {
    uint64_t w[4];
    uint32_t first, last;
    uint16_t middle;
    memcpy(&first, h, 4);
    memcpy(&middle, h + 6, 2);
    memcpy(w, h + 8, 32);
    memcpy(&last, h + 40, 4);
    crc = _mm_crc32_u32(crc, first);
    crc = _mm_crc32_u16(crc, middle);
    uint64_t c = crc;
    for (int i = 0; i < 4; i++) c = _mm_crc32_u64(c, w[i]);
    return _mm_crc32_u32((uint32_t)c, last);
}
#else
static uint32_t header_crc_hardware(uint32_t crc, const uint8_t *h) {
    return crc_hardware(crc_hardware(crc, h, 4), h + 6, 38);
}
#endif

uint32_t lrd_crc32c_record_header(uint32_t crc, const void *header) {
    const uint8_t *h = (const uint8_t *)header;
    crc = ~crc;
    if (hardware_available()) {
        crc = header_crc_hardware(crc, h);
    } else {
        crc = crc_software(crc_software(crc, h, 4), h + 6, 38);
    }
    return ~crc;
}
