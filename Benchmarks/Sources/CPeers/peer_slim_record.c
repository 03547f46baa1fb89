/* A prototype of a slimmer record, to measure whether a format version 2 of the record would bring
 * 100-byte hits near the in-memory table (Benchmarks/ANALYSIS.md, "A slimmer record"). Not a
 * store: no eviction, no recovery, one process. Its get makes every check Larder's makes, on a
 * mapped file laid out as Larder's is (a shared page, an index of 8-byte slots, a ring of records):
 *   - the C call's argument checks, and the load of the handle's published view;
 *   - the change counter read before and after (a writer that moved the index is noticed);
 *   - every length bounds-checked against the mapped file before it is used;
 *   - the key compared in full;
 *   - ONE checksum (CRC32C) over header, key and value, computed while the value is copied,
 *     where version 1 has two (header, then key and value);
 *   - expiry and maximum age;
 *   - the re-check of the live bit and sequence after the copy;
 *   - a hit count and the access bit.
 * The record header is 40 bytes where version 1's is 48: no raw length (a compressed value would
 * carry it in front of its block) and no separate header checksum. The key hash follows XXH3's
 * structure for short keys (two 64x64->128 multiplications for 9 to 32 bytes) with constants of
 * its own: the instruction count is XXH3's, not its exact values.
 *
 * Header (little-endian): byte 0-1 magic, 2 kind, 3 flags, 4 state (bit 0 live), 5 access (bit 0
 * read), 6-7 key length; 8-11 value length, 12-15 checksum; 16-23 sequence; 24-31 expiry (ms since
 * the Unix epoch, 0 = never); 32-39 time stored. The checksum covers bytes 0-3, 6-11 and 16-39,
 * then the key, then the value; bytes 4-5 change after the write and are not covered. */
#include "CPeers.h"
#include "peer_util.h"
#include "../../../Sources/CLarderSupport/crc32c_chain.h"
#include "../../../Sources/CLarderSupport/include/CLarderSupport.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* The functions that checksum inline are compiled for the CRC instructions (the library checks
 * that the CPU has them before it takes this path; the prototype assumes it). */
#if defined(HARDWARE)
#define WITH_CRC HARDWARE
#else
#define WITH_CRC
#endif

enum {
    HEADER_SIZE = 40,
    ALIGNMENT = 8,
    MAGIC = 0x534C,
    KIND_ENTRY = 1,
    STATE_LIVE = 1,
    ACCESS_READ = 1,
    MAX_KEY = 4096,
    PAGE = 4096,
};

/* The shared page: words that every process would map. */
typedef struct shared_page {
    uint64_t change_counter;
    uint64_t first_valid_sequence;
    uint64_t maximum_age;
    uint32_t seed;
} shared_page;

/* What a reader takes without a lock, published by writers (as Larder's PublishedView). */
typedef struct view {
    uint8_t *base;
    uint64_t *slots;
    uint64_t mask;
    uint64_t ring_start;
    uint64_t ring_end;
    uint64_t counter;
} view;

typedef struct slim {
    uint32_t magic;
    int fd;
    pthread_mutex_t writer;
    view *published;
    view current;
    shared_page *shared;
    uint64_t head;
    uint64_t next_sequence;
    size_t size;
} slim;

#define HANDLE_MAGIC 0x534C494Du
static __thread uint64_t hits, misses;

/* ---- Hash: XXH3's shape for short keys -------------------------------------------------------- */

static const uint64_t SECRET[8] = {
    0xbe4ba423396cfeb8ull, 0x1cad21f72c81017cull, 0xdb979083e96dd4deull, 0x1f67b3b7a4a44072ull,
    0x78e5c0cc4ee679cbull, 0x2172ffcc7dd05a82ull, 0x8e2443f7744608b8ull, 0x4c263a81e69035e0ull,
};
static const uint64_t PRIME_1 = 0x9E3779B185EBCA87ull;

static inline uint64_t fold128(uint64_t a, uint64_t b) {
    __uint128_t product = (__uint128_t)a * b;
    return (uint64_t)product ^ (uint64_t)(product >> 64);
}

static inline uint64_t avalanche(uint64_t h) {
    h ^= h >> 37;
    h *= 0x165667919E3779F9ull;
    return h ^ (h >> 32);
}

static inline uint64_t hash_key(const uint8_t *p, size_t n) {
    if (n > 16 && n <= 32) {
        uint64_t acc = n * PRIME_1;
        acc += fold128(load64(p) ^ SECRET[0], load64(p + 8) ^ SECRET[1]);
        acc += fold128(load64(p + n - 16) ^ SECRET[2], load64(p + n - 8) ^ SECRET[3]);
        return avalanche(acc);
    }
    if (n >= 8 && n <= 16) {
        uint64_t lo = load64(p) ^ SECRET[4], hi = load64(p + n - 8) ^ SECRET[5];
        return avalanche(n + __builtin_bswap64(lo) + hi + fold128(lo, hi));
    }
    /* Other lengths: a plain loop, rare in the measurement. */
    uint64_t h = n * PRIME_1;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return avalanche(h);
}

/* ---- Checksum ----------------------------------------------------------------------------------- */

#if defined(HARDWARE)
HARDWARE static ALWAYS_INLINE uint32_t header_chain(uint32_t seed, uint64_t w0, uint64_t w1, uint64_t w2, uint64_t w3,
                                                   uint64_t w4) {
    chain c = CRC16(CRC32(~seed, (uint32_t)w0), (uint16_t)(w0 >> 48));
    c = CRC32((uint32_t)c, (uint32_t)w1);
    return (uint32_t)CRC64(CRC64(CRC64(c, w2), w3), w4);
}

/* The record's checksum, copying the value to `destination`: one chain from header to value. */
HARDWARE static ALWAYS_INLINE uint32_t record_checksum(uint32_t seed, uint64_t w0, uint64_t w1, uint64_t w2,
                                                      uint64_t w3, uint64_t w4, const uint8_t *key, size_t key_length,
                                                      uint8_t *destination, const uint8_t *value, size_t length) {
    uint32_t crc = header_chain(seed, w0, w1, w2, w3, w4);
    crc = crc_chain(crc, 0, NULL, key, key_length);
    return ~crc_chain(crc, destination != NULL, destination, value, length);
}
#else
static uint32_t record_checksum(uint32_t seed, uint64_t w0, uint64_t w1, uint64_t w2, uint64_t w3, uint64_t w4,
                                const uint8_t *key, size_t key_length, uint8_t *destination, const uint8_t *value,
                                size_t length) {
    uint8_t image[34];
    memcpy(image, &w0, 4);
    memcpy(image + 4, (const uint8_t *)&w0 + 6, 2);
    memcpy(image + 6, &w1, 4);
    memcpy(image + 10, &w2, 8);
    memcpy(image + 18, &w3, 8);
    memcpy(image + 26, &w4, 8);
    uint32_t crc = lrd_crc32c(seed, image, sizeof image);
    crc = lrd_crc32c(crc, key, key_length);
    if (destination) memcpy(destination, value, length);
    return lrd_crc32c(crc, value, length);
}
#endif

/* ---- Open, put, delete: the simplest writer that lays records out as the get expects ------------ */

static void *slim_open(const bench_config *config) {
    char path[PATH_MAX];
    bench_path(path, sizeof path, config->dir, "slim.records");
    uint64_t slot_count = 1024;
    while (slot_count < config->expected_keys * 2) slot_count <<= 1;
    /* Room for every update of the runs without eviction: a sparse file, mapped, never all touched. */
    size_t ring = (size_t)(config->expected_bytes + config->expected_keys * (HEADER_SIZE + ALIGNMENT)) * 16 + (64 << 20);
    size_t size = PAGE + slot_count * 8 + ring;
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)size) != 0) {
        bench_set_error("slim-record: cannot create %s", path);
        if (fd >= 0) close(fd);
        return NULL;
    }
    uint8_t *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        bench_set_error("slim-record: cannot map %s", path);
        close(fd);
        return NULL;
    }
    slim *s = calloc(1, sizeof *s);
    s->magic = HANDLE_MAGIC;
    s->fd = fd;
    s->size = size;
    pthread_mutex_init(&s->writer, NULL);
    s->shared = (shared_page *)base;
    s->shared->seed = 0x9747b28c;
    s->shared->first_valid_sequence = 1;
    s->next_sequence = 1;
    s->current = (view){base, (uint64_t *)(base + PAGE), slot_count - 1, PAGE + slot_count * 8, size, 0};
    s->head = s->current.ring_start;
    s->published = &s->current;
    return s;
}

/* A slot: 0 empty, 1 removed, else the record's offset / 8 above a 24-bit tag of the hash. */
static inline uint64_t slot_value(uint64_t offset, uint64_t hash) { return (offset / ALIGNMENT) << 24 | (hash >> 40); }
static inline uint64_t slot_offset(uint64_t slot) { return (slot >> 24) * ALIGNMENT; }
static inline int slot_matches(uint64_t slot, uint64_t hash) { return slot > 1 && (slot & 0xFFFFFF) == (hash >> 40); }

static inline int record_has_key(const uint8_t *record, const uint8_t *key, size_t key_length) {
    uint64_t w0 = load64(record);
    return (w0 & 0xFF) == (MAGIC & 0xFF) && (w0 >> 48) == key_length && memcmp(record + HEADER_SIZE, key, key_length) == 0;
}

/* The slot of `key`, or of where it would go (the first empty or removed one met). */
static uint64_t *writer_probe(slim *s, uint64_t hash, const uint8_t *key, size_t key_length, int *found) {
    view *v = &s->current;
    uint64_t *free_slot = NULL;
    for (uint64_t i = hash & v->mask;; i = (i + 1) & v->mask) {
        uint64_t slot = v->slots[i];
        if (slot == 0) { *found = 0; return free_slot ? free_slot : &v->slots[i]; }
        if (slot == 1) { if (!free_slot) free_slot = &v->slots[i]; continue; }
        if (slot_matches(slot, hash) && record_has_key(v->base + slot_offset(slot), key, key_length)) {
            *found = 1;
            return &v->slots[i];
        }
    }
}

WITH_CRC static int slim_put(void *handle, const void *key, size_t key_length, const void *value, size_t length) {
    slim *s = handle;
    if (!s || !key || key_length == 0 || key_length > MAX_KEY || (!value && length) || length > UINT32_MAX) return -1;
    uint64_t hash = hash_key(key, key_length);
    pthread_mutex_lock(&s->writer);
    uint64_t total = (HEADER_SIZE + key_length + length + ALIGNMENT - 1) & ~(uint64_t)(ALIGNMENT - 1);
    if (s->head + total > s->current.ring_end) {
        pthread_mutex_unlock(&s->writer);
        bench_set_error("slim-record: full (the prototype does not evict)");
        return -1;
    }
    uint8_t *record = s->current.base + s->head;
    uint64_t w0 = (uint64_t)MAGIC | (uint64_t)KIND_ENTRY << 16 | (uint64_t)STATE_LIVE << 32 | (uint64_t)key_length << 48;
    uint64_t w2 = s->next_sequence++, w3 = 0, w4 = 0;
    memcpy(record + HEADER_SIZE, key, key_length);
    memcpy(record + HEADER_SIZE + key_length, value, length);
    uint32_t checksum = record_checksum(s->shared->seed, w0, length, w2, w3, w4, key, key_length, NULL,
                                        record + HEADER_SIZE + key_length, length);
    uint64_t w1 = (uint64_t)length | (uint64_t)checksum << 32;
    memcpy(record + 8, &w1, 8);
    memcpy(record + 16, &w2, 8);
    memcpy(record + 24, &w3, 8);
    memcpy(record + 32, &w4, 8);
    __atomic_store_n((uint64_t *)record, w0, __ATOMIC_RELEASE);
    int found;
    uint64_t *slot = writer_probe(s, hash, key, key_length, &found);
    if (found) {
        uint8_t *old = s->current.base + slot_offset(*slot);
        __atomic_fetch_and((uint64_t *)old, ~((uint64_t)STATE_LIVE << 32), __ATOMIC_RELEASE);
    }
    __atomic_store_n(slot, slot_value(s->head, hash), __ATOMIC_RELEASE);
    s->head += total;
    pthread_mutex_unlock(&s->writer);
    return 0;
}

static int slim_del(void *handle, const void *key, size_t key_length) {
    slim *s = handle;
    if (!s || !key || key_length == 0 || key_length > MAX_KEY) return BENCH_ERROR;
    uint64_t hash = hash_key(key, key_length);
    pthread_mutex_lock(&s->writer);
    int found;
    uint64_t *slot = writer_probe(s, hash, key, key_length, &found);
    if (found) {
        uint8_t *old = s->current.base + slot_offset(*slot);
        __atomic_fetch_and((uint64_t *)old, ~((uint64_t)STATE_LIVE << 32), __ATOMIC_RELEASE);
        __atomic_store_n(slot, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&s->writer);
    return found ? BENCH_FOUND : BENCH_NOT_FOUND;
}

/* ---- Get: the hit being measured ------------------------------------------------------------------ */

static __attribute__((noinline)) int has_expired(uint64_t expires_at, uint64_t stored_at, uint64_t maximum_age) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000 + (uint64_t)(ts.tv_nsec / 1000000);
    return (expires_at != 0 && expires_at <= now) ||
           (maximum_age != 0 && stored_at <= now && now - stored_at >= maximum_age);
}

static inline int same_bytes(const uint8_t *a, const uint8_t *b, size_t n) {
    if (n > 16 && n <= 32) {
        size_t last = n - 16;
        return ((load64(a) ^ load64(b)) | (load64(a + 8) ^ load64(b + 8)) | (load64(a + last) ^ load64(b + last)) |
                (load64(a + last + 8) ^ load64(b + last + 8))) == 0;
    }
    if (n >= 8 && n <= 16) return ((load64(a) ^ load64(b)) | (load64(a + n - 8) ^ load64(b + n - 8))) == 0;
    return memcmp(a, b, n) == 0;
}

enum { OUTCOME_MISS, OUTCOME_HIT, OUTCOME_RETRY };

/* One attempt at the record in `slot` for the key: a hit, not this key (go on probing: returned as
 * a miss with *other set), or a retry (changed under the read). */
WITH_CRC static ALWAYS_INLINE int read_record(const view *v, const shared_page *shared, uint64_t slot, const uint8_t *key,
                                     size_t key_length, uint8_t *buf, size_t buf_len, size_t *value_len, int *other) {
    uint64_t offset = slot_offset(slot);
    *other = 1;
    if (offset < v->ring_start || offset > v->ring_end - HEADER_SIZE) return OUTCOME_MISS;
    const uint8_t *record = v->base + offset;
    uint64_t w0 = __atomic_load_n((const uint64_t *)record, __ATOMIC_ACQUIRE);
    uint64_t expected = (uint64_t)MAGIC | (uint64_t)KIND_ENTRY << 16 | (uint64_t)STATE_LIVE << 32 | (uint64_t)key_length << 48;
    if ((w0 & 0xFFFF0001FFFFFFFFull & ~0xFF000000ull) != expected) return OUTCOME_MISS;
    uint64_t w1 = __atomic_load_n((const uint64_t *)(record + 8), __ATOMIC_RELAXED);
    uint64_t w2 = __atomic_load_n((const uint64_t *)(record + 16), __ATOMIC_RELAXED);
    uint64_t w3 = __atomic_load_n((const uint64_t *)(record + 24), __ATOMIC_RELAXED);
    uint64_t w4 = __atomic_load_n((const uint64_t *)(record + 32), __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    uint64_t length = (uint32_t)w1;
    if (HEADER_SIZE + key_length + length > v->ring_end - offset) return OUTCOME_MISS;
    if (w2 < shared->first_valid_sequence) return OUTCOME_MISS;
    if (!same_bytes(record + HEADER_SIZE, key, key_length)) return OUTCOME_MISS;
    *other = 0;
    if ((w3 | shared->maximum_age) != 0 && has_expired(w3, w4, shared->maximum_age)) return OUTCOME_MISS;
    *value_len = length;
    if (length > buf_len) return OUTCOME_HIT; /* the caller's buffer is short: the length only */
    if (record_checksum(shared->seed, w0, w1, w2, w3, w4, key, key_length, buf, record + HEADER_SIZE + key_length,
                        length) != (uint32_t)(w1 >> 32))
        return OUTCOME_RETRY;
    /* The re-check: still live, still the same record, and no writer moved the index meanwhile. */
    uint64_t again = __atomic_load_n((const uint64_t *)record, __ATOMIC_ACQUIRE);
    if (!(again >> 32 & STATE_LIVE) || __atomic_load_n((const uint64_t *)(record + 16), __ATOMIC_RELAXED) != w2)
        return OUTCOME_RETRY;
    if (!(again >> 40 & ACCESS_READ))
        __atomic_fetch_or((uint8_t *)(record + 5), ACCESS_READ, __ATOMIC_RELAXED);
    return OUTCOME_HIT;
}

WITH_CRC static int slim_get(void *handle, const void *key_bytes, size_t key_length, void *buf, size_t buf_len,
                    size_t *value_len) {
    slim *s = handle;
    if (!s || s->magic != HANDLE_MAGIC || !key_bytes || key_length == 0 || key_length > MAX_KEY || !value_len ||
        (!buf && buf_len))
        return BENCH_ERROR;
    const uint8_t *key = key_bytes;
    uint64_t hash = hash_key(key, key_length);
    for (int attempt = 0; attempt < 8; attempt++) {
        const view *v = __atomic_load_n(&s->published, __ATOMIC_ACQUIRE);
        uint64_t counter = __atomic_load_n(&s->shared->change_counter, __ATOMIC_ACQUIRE);
        if (counter != v->counter) break; /* the careful read (not prototyped) would take the lock */
        int outcome = OUTCOME_MISS;
        for (uint64_t i = hash & v->mask;; i = (i + 1) & v->mask) {
            uint64_t slot = __atomic_load_n(&v->slots[i], __ATOMIC_ACQUIRE);
            if (slot == 0) break;
            if (!slot_matches(slot, hash)) continue;
            int other;
            outcome = read_record(v, s->shared, slot, key, key_length, buf, buf_len, value_len, &other);
            if (!other) break;
        }
        if (outcome != OUTCOME_RETRY && __atomic_load_n(&s->shared->change_counter, __ATOMIC_ACQUIRE) == counter) {
            if (outcome == OUTCOME_HIT) { hits++; return BENCH_FOUND; }
            misses++;
            return BENCH_NOT_FOUND;
        }
    }
    return BENCH_ERROR;
}

static void slim_close(void *handle) {
    slim *s = handle;
    if (!s) return;
    munmap(s->current.base, s->size);
    close(s->fd);
    pthread_mutex_destroy(&s->writer);
    free(s);
}

const bench_peer bench_peer_slim_record = {
    .name = "slim-record", .shared_handle = 1, .multi_process = 0, .multi_process_writer = 0,
    .open = slim_open, .put = slim_put, .get = slim_get, .del = slim_del, .close = slim_close,
};
