#include "record_header.h"

/* The usual write of an entry's record, in one call (see CLarderSupport.h). The header's layout
 * and the order of its stores are those of docs/FORMAT.md 4 and Format/RecordHeader.swift
 * (`write`), which the other writes use: a test checks that both write the same bytes.
 *
 * Invariant: no byte outside [record, record + 48 + key_length + stored length) is written.
 * The caller holds the writer lock and has checked that range against the file. */

static const uint64_t LIVE_BIT = (uint64_t)1 << 32, VISITED_BIT = (uint64_t)1 << 40;

typedef uint32_t (*data_store_fn)(uint32_t seed, uint8_t *record, const uint8_t *key, size_t key_length,
                                  const uint8_t *value, size_t length);

/* Lengths up to which the key and value are checksummed and stored inline, in one chain each;
 * longer ones go through lrd_crc32c_then_store, whose blocks pay for the call. */
#define INLINE_LENGTH 256

/* The key (unless it is in place: `key` NULL) and the value stored after the header, and the data
 * checksum of the key ++ value as they lie in the record. */
static uint32_t data_store_any(uint32_t seed, uint8_t *record, const uint8_t *key, size_t key_length,
                               const uint8_t *value, size_t length) {
    uint8_t *key_start = record + HEADER_SIZE;
    if (key) memcpy(key_start, key, key_length);
    if (length == 0) return lrd_crc32c(seed, key_start, key_length);
    return lrd_crc32c_then_store(seed, key_start, key_length, key_start + key_length, value, length);
}

#if defined(HARDWARE)
/* Short keys and values copied from the registers they are checksummed from. */
HARDWARE static ALWAYS_INLINE uint32_t data_store_hardware(uint32_t seed, uint8_t *record, const uint8_t *key,
                                                           size_t key_length, const uint8_t *value, size_t length) {
    if (key_length >= INLINE_LENGTH || length >= INLINE_LENGTH)
        return data_store_any(seed, record, key, key_length, value, length);
    uint8_t *key_start = record + HEADER_SIZE;
    uint32_t crc = key ? crc_chain(~seed, 1, key_start, key, key_length) : crc_chain(~seed, 0, NULL, key_start, key_length);
    return ~crc_chain(crc, 1, key_start + key_length, value, length);
}
#endif

static inline __attribute__((always_inline)) uint32_t entry_write(data_store_fn data_store,
                                                                   header_checksum_fn header_checksum, uint8_t *record,
                                                                   uint32_t seed, uint32_t flags, const void *key,
                                                                   size_t key_length, const void *value,
                                                                   uint64_t lengths, uint64_t sequence,
                                                                   uint64_t expires_at, uint64_t stored_at) {
    uint32_t data_checksum = data_store(seed, record, (const uint8_t *)key, key_length, (const uint8_t *)value,
                                        (uint32_t)lengths);
    uint64_t w0 = (uint64_t)MAGIC | (uint64_t)KIND_ENTRY << 16 | (uint64_t)(uint8_t)flags << 24 | (uint64_t)key_length << 48;
    uint32_t checksum = header_checksum(seed, w0, lengths, sequence, expires_at, stored_at, data_checksum);
    uint64_t *words = (uint64_t *)record;
    /* Not live yet. The key and value become visible no later than any word below: a reader that
     * sees this header's words (ordered by its acquire fence) sees this record's key and value. */
    __atomic_store_n(&words[0], w0, __ATOMIC_RELEASE);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&words[1], lengths, __ATOMIC_RELAXED);
    __atomic_store_n(&words[2], sequence, __ATOMIC_RELAXED);
    __atomic_store_n(&words[3], expires_at, __ATOMIC_RELAXED);
    __atomic_store_n(&words[4], stored_at, __ATOMIC_RELAXED);
    __atomic_store_n(&words[5], (uint64_t)data_checksum | (uint64_t)checksum << 32, __ATOMIC_RELAXED);
    /* Live last: a plain store, as no one else writes the first word of a record not yet live. */
    __atomic_store_n(&words[0], w0 | LIVE_BIT | ((flags & LRD_ENTRY_VISITED) ? VISITED_BIT : 0), __ATOMIC_RELEASE);
    return data_checksum;
}

/* The arguments of lrd_entry_write, in the same order: its call is a jump. */
#define ENTRY_WRITE_PARAMETERS                                                                                    \
    uint8_t *record, uint32_t seed, uint32_t flags, const void *key, size_t key_length, const void *value,        \
        uint64_t lengths, uint64_t sequence, uint64_t expires_at, uint64_t stored_at
#define ENTRY_WRITE_ARGUMENTS record, seed, flags, key, key_length, value, lengths, sequence, expires_at, stored_at

#if defined(HARDWARE)
HARDWARE static uint32_t entry_write_hardware(ENTRY_WRITE_PARAMETERS) {
    return entry_write(data_store_hardware, header_checksum_hardware, ENTRY_WRITE_ARGUMENTS);
}
#endif

/* Out of line, so that the usual call is a test and a jump. */
static __attribute__((noinline)) uint32_t entry_write_software(ENTRY_WRITE_PARAMETERS) {
    return entry_write(data_store_any, header_checksum_any, ENTRY_WRITE_ARGUMENTS);
}

uint32_t lrd_entry_write(void *record, uint32_t seed, uint32_t flags, const void *key, size_t key_length,
                         const void *value, uint64_t lengths, uint64_t sequence, uint64_t expires_at,
                         uint64_t stored_at) {
#if defined(HARDWARE)
    if (lrd_crc32c_hardware_present)
        return entry_write_hardware((uint8_t *)record, seed, flags, key, key_length, value, lengths, sequence,
                                    expires_at, stored_at);
#endif
    return entry_write_software((uint8_t *)record, seed, flags, key, key_length, value, lengths, sequence, expires_at,
                                stored_at);
}
