#include "record_header.h"
#include "../../include/larder.h"

#include <time.h>

/* The usual read of a short entry, in one call (see CLarderSupport.h). The record header's layout
 * and checks are those of docs/FORMAT.md 4 and Format/RecordHeader.swift (`read`), which the
 * careful reads use: a test checks that both accept the same headers.
 *
 * Invariant: no byte outside [record, record + room) is read, and none outside
 * [destination, destination + capacity) written. Every length is taken from a word loaded once and
 * checked against `room` before it is used; the header checksum is computed from the same words.
 * A writer of another process may change the record meanwhile: the checksums then fail, or the
 * caller's re-check (live bit, sequence, change counter) does. */

/* Magic, kind, state and key length of the first word (flags and access bit may be anything). */
static const uint64_t SIGNIFICANT = 0xFFFF00FF00FFFFFFULL;

/* A call off the usual read's path that keeps the caller's registers (where the compiler can):
 * the read then does not move what it keeps into saved registers around it. The callee saves
 * them instead (7 more pairs in has_expired, paid by a hit of an entry with an expiry). Not for
 * value_checksum_long: the registers it would save cost a long value's get more than that. */
#if defined(__has_attribute)
#if __has_attribute(preserve_most)
#define RARE_CALL __attribute__((noinline, cold, preserve_most))
#endif
#endif
#if !defined(RARE_CALL)
#define RARE_CALL __attribute__((noinline, cold))
#endif

static inline lrd_entry_outcome outcome(uint64_t status, uint64_t flags, uint64_t length, uint64_t sequence) {
    lrd_entry_outcome result = {sequence, status | flags << 8 | length << 32};
    return result;
}

/* Whether the entry is expired now, by the clock of `SystemCall.nowMilliseconds`: its
 * `expires_at` (ms since the Unix epoch, 0 = none) has passed, or it was stored `maximum_age` ms
 * or more ago (0 = no maximum age; an entry stored after now is not over age). Called only when
 * one of the two is not 0. */
static RARE_CALL int has_expired(uint64_t expires_at, uint64_t stored_at, uint64_t maximum_age) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000 + (uint64_t)(ts.tv_nsec / 1000000);
    return (expires_at != 0 && expires_at <= now) ||
           (maximum_age != 0 && stored_at <= now && now - stored_at >= maximum_age);
}

/* Whether `n` bytes at `a` and `b` are the same: keys of 8 to 32 bytes as overlapping words,
 * inline (as `sameBytes` in Index/ByteComparison.swift); other lengths through memcmp. */
static ALWAYS_INLINE int same_bytes(const uint8_t *a, const uint8_t *b, size_t n) {
    if (n >= 8 && n <= 16) {
        size_t last = n - 8;
        return ((load64(a) ^ load64(b)) | (load64(a + last) ^ load64(b + last))) == 0;
    }
    if (n > 16 && n <= 32) {
        size_t last = n - 16;
        return ((load64(a) ^ load64(b)) | (load64(a + 8) ^ load64(b + 8)) | (load64(a + last) ^ load64(b + last)) |
                (load64(a + last + 8) ^ load64(b + last + 8))) == 0;
    }
    return memcmp(a, b, n) == 0;
}

/* Lengths below which a key's or value's checksum runs inline (crc_short); longer ones go through
 * lrd_crc32c and lrd_crc32c_then_copy, whose folding and blocks pay for the call. */
#define INLINE_LENGTH 256

typedef uint32_t (*key_checksum_fn)(uint32_t seed, const uint8_t *key, size_t key_length);
typedef uint32_t (*value_checksum_fn)(uint32_t key_crc, uint8_t *destination, const uint8_t *value, size_t length);

/* The data checksum is of key ++ value: the key's part first (before the record is read), then
 * the value's chained onto it while it is copied. */
static uint32_t key_checksum_any(uint32_t seed, const uint8_t *key, size_t key_length) {
    return lrd_crc32c(seed, key, key_length);
}

static uint32_t value_checksum_any(uint32_t key_crc, uint8_t *destination, const uint8_t *value, size_t length) {
    return lrd_crc32c_then_copy(key_crc, NULL, 0, destination, value, length);
}

#if defined(HARDWARE)
/* A word of a short buffer: its checksum, and its copy from the same register if `copy`. */
#define SHORT_STEP(offset)                                                                                        \
    do {                                                                                                          \
        uint64_t w = load64(p + (offset));                                                                        \
        c = CRC64(c, w);                                                                                          \
        if (copy) memcpy(d + (offset), &w, 8);                                                                    \
    } while (0)

/* crc_chain for fewer than INLINE_LENGTH (256) bytes, in fewer steps: by the bits of `n`, 16, 8,
 * 4, 2 and 1 words, then crc_chain's steps for the last 0 to 7 bytes, with no loop count. No jump
 * table either (Benchmarks/after_load.py follows none). */
HARDWARE static ALWAYS_INLINE uint32_t crc_short(uint32_t crc, int copy, uint8_t *d, const uint8_t *p, size_t n) {
    chain c = crc;
    if (n & 128) {
        SHORT_STEP(0); SHORT_STEP(8); SHORT_STEP(16); SHORT_STEP(24);
        SHORT_STEP(32); SHORT_STEP(40); SHORT_STEP(48); SHORT_STEP(56);
        SHORT_STEP(64); SHORT_STEP(72); SHORT_STEP(80); SHORT_STEP(88);
        SHORT_STEP(96); SHORT_STEP(104); SHORT_STEP(112); SHORT_STEP(120);
        p += 128;
        if (copy) d += 128;
    }
    if (n & 64) {
        SHORT_STEP(0); SHORT_STEP(8); SHORT_STEP(16); SHORT_STEP(24);
        SHORT_STEP(32); SHORT_STEP(40); SHORT_STEP(48); SHORT_STEP(56);
        p += 64;
        if (copy) d += 64;
    }
    if (n & 32) {
        SHORT_STEP(0); SHORT_STEP(8); SHORT_STEP(16); SHORT_STEP(24);
        p += 32;
        if (copy) d += 32;
    }
    if (n & 16) {
        SHORT_STEP(0); SHORT_STEP(8);
        p += 16;
        if (copy) d += 16;
    }
    if (n & 8) {
        SHORT_STEP(0);
        p += 8;
        if (copy) d += 8;
    }
    /* The last 0 to 7 bytes as crc_chain takes them. */
    return crc_chain((uint32_t)c, copy, d, p, n & 7);
}
#undef SHORT_STEP
_Static_assert(INLINE_LENGTH <= 256, "crc_short takes fewer than 256 bytes");

/* Short keys and values in one chain each, inline; longer ones through the call. */
HARDWARE static ALWAYS_INLINE uint32_t key_checksum_hardware(uint32_t seed, const uint8_t *key, size_t key_length) {
    if (__builtin_expect(key_length >= INLINE_LENGTH, 0)) return lrd_crc32c(seed, key, key_length);
    return ~crc_short(~seed, 0, NULL, key, key_length);
}

/* A value of INLINE_LENGTH bytes or more: its copy costs more than the call. */
static __attribute__((noinline, cold)) uint32_t value_checksum_long(uint32_t key_crc, uint8_t *destination,
                                                                    const uint8_t *value, size_t length) {
    return lrd_crc32c_then_copy(key_crc, NULL, 0, destination, value, length);
}

HARDWARE static ALWAYS_INLINE uint32_t value_checksum_hardware(uint32_t key_crc, uint8_t *destination,
                                                              const uint8_t *value, size_t length) {
    if (__builtin_expect(length >= INLINE_LENGTH, 0)) return value_checksum_long(key_crc, destination, value, length);
    return ~crc_short(~key_crc, 1, destination, value, length);
}
#endif

/* Makes `value` computed where this stands, not moved after a load that follows. */
#define COMPUTED_HERE(value) __asm__ volatile("" : "+r"(value))

/* What entry_check_copy found in an entry of the key: its sequence number, flags and value's
 * length as callers see it, and its first word as checked. */
typedef struct {
    uint64_t sequence, flags, raw_length, first_word;
} entry_found;

/* The checks and copy of lrd_entry_copy: its status, with `found` filled for an entry of the key.
 * Inlined into its two callers, which take the fields as they are (no outcome word to unpack). */
static inline __attribute__((always_inline)) uint64_t entry_check_copy(
    header_checksum_fn header_checksum, key_checksum_fn key_checksum, value_checksum_fn value_checksum,
    const uint8_t *record, uint64_t room, uint32_t seed, uint64_t first_valid_sequence,
    const uint8_t *key, size_t key_length, uint8_t *destination, size_t capacity, uint64_t maximum_age,
    entry_found *found) {
    const uint64_t other = LRD_ENTRY_OTHER;
    if (((uintptr_t)record & (ALIGNMENT - 1)) != 0 || room < HEADER_SIZE) return other;
    /* What does not depend on the record comes before its first load, whose wait it cannot
     * overlap after it: the key's part of the data checksum, and the first word expected. */
    uint32_t key_register = ~key_checksum(seed, key, key_length);
    uint64_t expected = (uint64_t)MAGIC | (uint64_t)KIND_ENTRY << 16 | (uint64_t)1 << 32 | (uint64_t)key_length << 48;
    COMPUTED_HERE(key_register);
    COMPUTED_HERE(expected);
    /* The first word rules out every other record before anything else is read. */
    uint64_t w0 = __atomic_load_n((const uint64_t *)record, __ATOMIC_ACQUIRE);
    if ((w0 & SIGNIFICANT) != expected) return other;
    uint64_t w1 = __atomic_load_n((const uint64_t *)(record + 8), __ATOMIC_RELAXED);
    uint64_t stored_length = (uint32_t)w1, raw_length = w1 >> 32;
    lrd_prefetch_following(record, HEADER_SIZE + key_length + stored_length);
    uint64_t w2 = __atomic_load_n((const uint64_t *)(record + 16), __ATOMIC_RELAXED);
    uint64_t w3 = __atomic_load_n((const uint64_t *)(record + 24), __ATOMIC_RELAXED);
    uint64_t w4 = __atomic_load_n((const uint64_t *)(record + 32), __ATOMIC_RELAXED);
    uint64_t w5 = __atomic_load_n((const uint64_t *)(record + 40), __ATOMIC_RELAXED);
    /* Key and value bytes read after this are at least as new as the header's words (the
     * writer's release fence in `RecordHeader.write`). */
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (header_checksum(seed, w0, w1, w2, w3, w4, w5) != (uint32_t)(w5 >> 32)) return other;
    uint64_t sequence = w2, expires_at = w3, stored_at = w4;
    uint64_t total = (HEADER_SIZE + key_length + stored_length + ALIGNMENT - 1) & ~(uint64_t)(ALIGNMENT - 1);
    if (total > room || sequence >= SEQUENCE_LIMIT || sequence < first_valid_sequence) return other;
    uint64_t flags = (uint8_t)(w0 >> 24);
    if (!(flags & COMPRESSED_FLAG) && raw_length != stored_length) return other;
    if (!same_bytes(record + HEADER_SIZE, key, key_length)) return other;
    /* The entry of this key. What this read does not do itself, the careful read does. */
    uint64_t status = LRD_ENTRY_UNSETTLED;
    /* A sliding entry's expiry is pushed by the careful read, which also reads its slide count. */
    if (!(flags & (COMPRESSED_FLAG | SLIDING_FLAG)) && stored_length <= capacity &&
        !((expires_at | maximum_age) != 0 && has_expired(expires_at, stored_at, maximum_age))) {
        const uint8_t *value = record + HEADER_SIZE + key_length;
        if (value_checksum(~key_register, destination, value, stored_length) == (uint32_t)w5)
            status = LRD_ENTRY_COPIED;
    }
    found->sequence = sequence;
    found->flags = flags;
    found->raw_length = raw_length;
    found->first_word = w0;
    return status;
}

static inline __attribute__((always_inline)) lrd_entry_outcome entry_copy(
    header_checksum_fn header_checksum, key_checksum_fn key_checksum, value_checksum_fn value_checksum,
    const uint8_t *record, uint64_t room, uint32_t seed, uint64_t first_valid_sequence,
    const uint8_t *key, size_t key_length, uint8_t *destination, size_t capacity, uint64_t maximum_age) {
    entry_found found = {0, 0, 0, 0};
    uint64_t status = entry_check_copy(header_checksum, key_checksum, value_checksum, record, room, seed,
                                       first_valid_sequence, key, key_length, destination, capacity, maximum_age,
                                       &found);
    return outcome(status, found.flags, found.raw_length, found.sequence);
}

#if defined(HARDWARE)
HARDWARE static lrd_entry_outcome entry_copy_hardware(const uint8_t *record, uint64_t room, uint32_t seed,
                                                                 uint64_t first_valid_sequence, const uint8_t *key,
                                                                 size_t key_length, uint8_t *destination, size_t capacity,
                                                                 uint64_t maximum_age) {
    return entry_copy(header_checksum_hardware, key_checksum_hardware, value_checksum_hardware, record, room, seed,
                      first_valid_sequence, key, key_length, destination, capacity, maximum_age);
}
#endif

lrd_entry_outcome lrd_entry_copy(const void *record, uint64_t room, uint32_t seed, uint64_t first_valid_sequence,
                                 const void *key, size_t key_length, void *destination, size_t capacity,
                                 uint64_t maximum_age) {
#if defined(HARDWARE)
    if (lrd_crc32c_hardware_present)
        return entry_copy_hardware((const uint8_t *)record, room, seed, first_valid_sequence, (const uint8_t *)key,
                                   key_length, (uint8_t *)destination, capacity, maximum_age);
#endif
    return entry_copy(header_checksum_any, key_checksum_any, value_checksum_any, (const uint8_t *)record, room, seed,
                      first_valid_sequence, (const uint8_t *)key, key_length, (uint8_t *)destination, capacity,
                      maximum_age);
}

/* The usual read through a published view (see CLarderSupport.h, lrd_view_get), as
 * `CacheStore.attemptCopy(forKey:in:toBuffer:)` makes it in Swift for a view with two tables.
 *
 * Invariant: the view's words are those `PublishedView.publish` stored, read whole under its
 * sequence lock; the active table then holds `count` slots, a power of two from 512 to 2^28, and
 * every slot index is masked. Records are read only through entry_check_copy, whose room is what
 * the view's limit leaves after the record's offset. */

enum {
    TAG_BITS = 28,
    SLOT_TOMBSTONE = 1,
    SEQUENCE_FIELD = 16,
};

/* What view_copy answers besides a value's length. */
enum {
    /* No entry of the key, in a settled index of the view's meta copy (counted as a miss). */
    LRD_VIEW_ABSENT = -1,
    /* Anything else (a view out of date, an index or record that changed, an entry not copied):
     * the fallback decides. */
    LRD_VIEW_UNSETTLED = -2,
    /* The first slot of the key's tag was not the key's live entry (a tag shared with another
     * key, a slot that names no record), or the index is migrating (two tables): the fallback
     * probes on. Nothing was counted. */
    LRD_VIEW_PROBE_ON = -3,
};
static const uint64_t LIVE_BIT = (uint64_t)1 << 32;
static const uint64_t VISITED_BIT = (uint64_t)1 << 40;

static inline uint64_t load_acquire(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static inline uint64_t load_relaxed(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }

/* The published view's words, whole (never half of one view and half of the next). */
typedef struct {
    uint64_t limit, first_valid_sequence, active_slots, active_count, draining_slots, change_counter, maximum_age;
} view_words;

static inline __attribute__((always_inline)) view_words view_load(const lrd_read_view *view) {
    for (;;) {
        uint64_t sequence = load_acquire(&view->words[0]);
        view_words w = {load_relaxed(&view->words[1]), load_relaxed(&view->words[2]), load_relaxed(&view->words[3]),
                        load_relaxed(&view->words[4]), load_relaxed(&view->words[5]), load_relaxed(&view->words[7]),
                        load_relaxed(&view->words[8])};
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if ((sequence & 1) == 0 && load_relaxed(&view->words[0]) == sequence && w.active_slots != 0) return w;
        lrd_spin_pause();
    }
}

/* Whether the record at `record`, checked with `sequence`, still is what it was: live, the same
 * sequence number, and the file's change counter still the view's (`ReadView.isUnchanged`).
 * Returns its first word then, 0 otherwise. */
static inline __attribute__((always_inline)) uint64_t view_unchanged(const lrd_read_view *view, const uint8_t *record,
                                                                     uint64_t sequence, uint64_t change_counter) {
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    uint64_t word = load_acquire((const uint64_t *)record);
    if (!(word & LIVE_BIT) || load_relaxed((const uint64_t *)(record + SEQUENCE_FIELD)) != sequence ||
        load_acquire(view->change_counter) != change_counter)
        return 0;
    return word;
}

/* A hit's bookkeeping (`CacheStore.countHit`): the access bit, set only in the word the entry was
 * checked with (`RecordHeader.markVisited`), and the hit counted. That word is `checked` with its
 * sixth byte clear: entry_check_copy took magic, kind, state and key length as they must be. */
static inline __attribute__((always_inline)) void view_count_hit(const lrd_read_view *view, const uint8_t *record,
                                                                 uint64_t word, uint64_t checked) {
    if (!view->read_only && !(word & VISITED_BIT)) {
        uint64_t expected = checked & ~((uint64_t)0xFF << 40);
        lrd_cas_u64((void *)record, expected, expected | VISITED_BIT);
    }
    lrd_fetch_add_u64(view->hits, 1);
}

/* The first slot of `tag` in the active table, or the empty slot that ends its probe sequence
 * (0), or SLOT_TOMBSTONE when every slot was looked at and none was empty (a damaged table). */
static inline __attribute__((always_inline)) uint64_t view_probe(const view_words *w, uint32_t tag) {
    const uint64_t *slots = (const uint64_t *)(uintptr_t)w->active_slots;
    uint64_t mask = w->active_count - 1, index = tag >> (TAG_BITS - __builtin_ctzll(w->active_count));
    for (uint64_t n = 0; n < w->active_count; n++, index++) {
        uint64_t slot = load_acquire(slots + (index & mask));
        if (slot == 0 || (slot > SLOT_TOMBSTONE && (uint32_t)(slot >> 36) == tag)) return slot;
    }
    return SLOT_TOMBSTONE;
}

static inline __attribute__((always_inline)) void view_count_miss(const lrd_read_view *view) {
    lrd_fetch_add_u64(view->misses, 1);
}

/* The probe is `HashTable.find`'s, from the tag's home to the first empty slot, but it stops at
 * the first slot of the key's tag: the record there is the key's but for a tag collision or a
 * damaged slot, which the caller's probe in Swift takes on. Without a loop around the record's
 * checks, what they keep in registers is not kept across the probe's iterations. */

static inline __attribute__((always_inline)) int64_t view_copy(
    header_checksum_fn header_checksum, key_checksum_fn key_checksum, value_checksum_fn value_checksum,
    const lrd_read_view *view, const uint8_t *key, size_t key_length, uint8_t *destination, size_t capacity) {
    /* The hash first: it depends on the key alone, and its registers are free before the rest. */
    uint32_t tag = (uint32_t)(lrd_xxh64(key, key_length, 0) >> 36);
    view_words w = view_load(view);
    if (load_acquire(view->change_counter) != w.change_counter) return LRD_VIEW_UNSETTLED;
    if (w.draining_slots != 0) return LRD_VIEW_PROBE_ON;
    uint64_t epoch = load_acquire(view->index_epoch);
    uint64_t slot = view_probe(&w, tag);
    if (slot == 0) {
        /* A miss holds only in an index no writer rearranged meanwhile, of the view's meta copy. */
        if ((epoch & 1) != 0 || load_acquire(view->index_epoch) != epoch ||
            load_acquire(view->change_counter) != w.change_counter)
            return LRD_VIEW_UNSETTLED;
        view_count_miss(view);
        return LRD_VIEW_ABSENT;
    }
    /* Every slot looked at, none empty (a damaged table): the careful probe's to judge. */
    if (slot == SLOT_TOMBSTONE) return LRD_VIEW_PROBE_ON;
    uint64_t offset = (slot & 0xFFFFFFFFFULL) << 4;
    if (offset < view->ring_start || offset >= w.limit) return LRD_VIEW_PROBE_ON;
    const uint8_t *record = view->base + offset;
    entry_found found;
    uint64_t status = entry_check_copy(header_checksum, key_checksum, value_checksum, record, w.limit - offset,
                                       view->seed, w.first_valid_sequence, key, key_length, destination, capacity,
                                       w.maximum_age, &found);
    if (status == LRD_ENTRY_OTHER) return LRD_VIEW_PROBE_ON;
    if (status != LRD_ENTRY_COPIED) return LRD_VIEW_UNSETTLED;
    uint64_t word = view_unchanged(view, record, found.sequence, w.change_counter);
    if (word == 0) return LRD_VIEW_UNSETTLED;
    view_count_hit(view, record, word, found.first_word);
    return (int64_t)found.raw_length;
}

/* larder_get's answer from view_copy's: the fallback, as the call's last step, for whatever the
 * view did not settle, with the caller's arguments, so that the caller keeps none of them past
 * the read. */
static inline __attribute__((always_inline)) int32_t view_get(
    header_checksum_fn header_checksum, key_checksum_fn key_checksum, value_checksum_fn value_checksum,
    const lrd_read_view *view, const void *key, size_t key_length, void *buffer, size_t buffer_length,
    size_t *value_length, void *handle, lrd_get_fallback fallback) {
    int64_t answer = view_copy(header_checksum, key_checksum, value_checksum, view, (const uint8_t *)key,
                               key_length, (uint8_t *)buffer, buffer_length);
    if (answer >= 0) {
        *value_length = (size_t)answer;
        return LARDER_OK;
    }
    if (answer == LRD_VIEW_ABSENT) return LARDER_NOT_FOUND;
    return fallback(handle, key, key_length, buffer, buffer_length, value_length);
}

#if defined(HARDWARE)
/* The fallback is called, not jumped to: for a jump, the handle and fallback this takes on the
 * stack (x86-64's seventh and eighth arguments) were copied into the frame first, on every get. */
HARDWARE static __attribute__((disable_tail_calls)) int32_t view_get_hardware(
    const lrd_read_view *view, const void *key, size_t key_length, void *buffer, size_t buffer_length,
    size_t *value_length, void *handle, lrd_get_fallback fallback) {
    return view_get(header_checksum_hardware, key_checksum_hardware, value_checksum_hardware, view, key, key_length,
                    buffer, buffer_length, value_length, handle, fallback);
}
#endif

int32_t lrd_view_get(const lrd_read_view *view, const void *key, size_t key_length, void *buffer,
                     size_t buffer_length, size_t *value_length, void *handle, lrd_get_fallback fallback) {
#if defined(HARDWARE)
    if (lrd_crc32c_hardware_present)
        return view_get_hardware(view, key, key_length, buffer, buffer_length, value_length, handle, fallback);
#endif
    return view_get(header_checksum_any, key_checksum_any, value_checksum_any, view, key, key_length, buffer,
                    buffer_length, value_length, handle, fallback);
}
