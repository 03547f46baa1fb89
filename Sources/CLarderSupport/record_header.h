#ifndef LRD_RECORD_HEADER_H
#define LRD_RECORD_HEADER_H
/* The record header's constants (docs/FORMAT.md 4, Format/RecordHeader.swift) and its checksum
 * over words already loaded, for the C files that read, pass or write records (entry_read.c,
 * dead_entries.c, entry_write.c). Not part of the module's interface. */
#include "CLarderSupport.h"
#include "crc32c_chain.h"

enum {
    HEADER_SIZE = 48,
    ALIGNMENT = 16,
    MAGIC = 0x524C,
    KIND_ENTRY = 1,
    COMPRESSED_FLAG = 1,
    SLIDING_FLAG = 4,
};
/* Sequence numbers lie below 2^62. */
#define SEQUENCE_LIMIT ((uint64_t)1 << 62)

typedef uint32_t (*header_checksum_fn)(uint32_t seed, uint64_t w0, uint64_t w1, uint64_t w2, uint64_t w3,
                                       uint64_t w4, uint64_t w5);

/* The header checksum (bytes 0-3 and 6-43) of the words loaded: the bytes that were checked are
 * the bytes that are used. Without the CRC instructions inline: through lrd_crc32c_record_header. */
static inline uint32_t header_checksum_any(uint32_t seed, uint64_t w0, uint64_t w1, uint64_t w2, uint64_t w3,
                                           uint64_t w4, uint64_t w5) {
    uint64_t image[6] = {w0, w1, w2, w3, w4, w5};
    return lrd_crc32c_record_header(seed, image);
}

#if defined(HARDWARE)
HARDWARE static ALWAYS_INLINE uint32_t header_checksum_hardware(uint32_t seed, uint64_t w0, uint64_t w1, uint64_t w2,
                                                                uint64_t w3, uint64_t w4, uint64_t w5) {
    return header_crc_words(seed, w0, w1, w2, w3, w4, w5);
}
#endif

#endif /* LRD_RECORD_HEADER_H */
