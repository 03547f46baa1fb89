#include "record_header.h"

/* The run of dead entries at the ring's tail, in one call (see CLarderSupport.h). The header's
 * layout and checks are those of docs/FORMAT.md 4 and Format/RecordHeader.swift (`read`), which
 * the tail's general step uses: a test checks that both accept the same headers.
 *
 * Invariant: no byte outside [record, record + room) is read. Every length is taken from a word
 * loaded once and checked against what is left of `room` before the next record is read. The
 * caller holds the writer lock: no one changes a dead record's header meanwhile. */

/* Magic, kind and state of the first word: a dead entry has state 0. */
static const uint64_t SIGNIFICANT = 0x000000FF00FFFFFFULL;
static const uint64_t DEAD_ENTRY = (uint64_t)MAGIC | (uint64_t)KIND_ENTRY << 16;
/* LZ4Codec.maximumInputSize: the longest value that is ever compressed. */
static const uint64_t LZ4_LONGEST = 0x7E000000;

static inline __attribute__((always_inline)) uint64_t dead_entries(header_checksum_fn header_checksum,
                                                                    const uint8_t *record, uint64_t room,
                                                                    uint64_t budget, uint32_t seed) {
    if (((uintptr_t)record & (ALIGNMENT - 1)) != 0) return 0;
    uint64_t passed = 0;
    while (passed < budget && room - passed >= HEADER_SIZE) {
        const uint8_t *h = record + passed;
        uint64_t w0 = __atomic_load_n((const uint64_t *)h, __ATOMIC_ACQUIRE);
        if ((w0 & SIGNIFICANT) != DEAD_ENTRY) break;
        uint64_t w1 = __atomic_load_n((const uint64_t *)(h + 8), __ATOMIC_RELAXED);
        uint64_t w2 = __atomic_load_n((const uint64_t *)(h + 16), __ATOMIC_RELAXED);
        uint64_t w3 = __atomic_load_n((const uint64_t *)(h + 24), __ATOMIC_RELAXED);
        uint64_t w4 = __atomic_load_n((const uint64_t *)(h + 32), __ATOMIC_RELAXED);
        uint64_t w5 = __atomic_load_n((const uint64_t *)(h + 40), __ATOMIC_RELAXED);
        if (header_checksum(seed, w0, w1, w2, w3, w4, w5) != (uint32_t)(w5 >> 32)) break;
        uint64_t key_length = w0 >> 48, stored_length = (uint32_t)w1, raw_length = w1 >> 32;
        uint64_t total = (HEADER_SIZE + key_length + stored_length + ALIGNMENT - 1) & ~(uint64_t)(ALIGNMENT - 1);
        if (key_length == 0 || total > room - passed || w2 >= SEQUENCE_LIMIT) break;
        if ((w0 >> 24) & COMPRESSED_FLAG) {
            /* LZ4Codec.mayDecompress */
            if (stored_length == 0 || raw_length == 0 || raw_length > LZ4_LONGEST
                || raw_length > stored_length * 255 + 16) break;
        } else if (raw_length != stored_length) {
            break;
        }
        passed += total;
    }
    return passed;
}

#if defined(HARDWARE)
HARDWARE static uint64_t dead_entries_hardware(const uint8_t *record, uint64_t room, uint64_t budget, uint32_t seed) {
    return dead_entries(header_checksum_hardware, record, room, budget, seed);
}
#endif

/* Off only in tests of the path CPUs without CRC instructions take. */
static int hardware_allowed = 1;

int lrd_dead_entries_allow_hardware(int allowed) {
    __atomic_store_n(&hardware_allowed, allowed != 0, __ATOMIC_RELAXED);
#if defined(HARDWARE)
    return allowed != 0 && lrd_crc32c_hardware_present;
#else
    return 0;
#endif
}

uint64_t lrd_dead_entries(const void *record, uint64_t room, uint64_t budget, uint32_t seed) {
#if defined(HARDWARE)
    if (lrd_crc32c_hardware_present && __atomic_load_n(&hardware_allowed, __ATOMIC_RELAXED))
        return dead_entries_hardware((const uint8_t *)record, room, budget, seed);
#endif
    return dead_entries(header_checksum_any, (const uint8_t *)record, room, budget, seed);
}
