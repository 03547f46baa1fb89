/*
 * CLarderSupport: the few primitives the Swift core needs that Swift cannot
 * spell portably. Every symbol is prefixed `lrd_` so it can never collide with
 * the public C API (`larder_*`, include/larder.h).
 *
 * Checksums, hashing, atomics on shared (mapped) memory, byte-range file locks
 * and two per-thread words; and the functions that know the record header (lrd_entry_copy and
 * lrd_view_get: the usual read, the format's checks in one call; lrd_entry_write; and
 * lrd_dead_entries, the tail's walk over dead entries).
 */
#ifndef CLARDER_SUPPORT_H
#define CLARDER_SUPPORT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CRC32C (Castagnoli, reflected polynomial 0x82F63B78), chainable:
 * lrd_crc32c(lrd_crc32c(0, a), b) == lrd_crc32c(0, a ++ b).
 * Uses SSE4.2 or the ARMv8 CRC instructions when the CPU has them, and on x86-64 CPUs with
 * VPCLMULQDQ folds buffers of 256 bytes and more with carry-less multiplication. */
uint32_t lrd_crc32c(uint32_t crc, const void *data, size_t length);

/* Whether long buffers may be folded (on by default; the result is the same either way). Tests
 * turn it off to check the other path on machines that fold. Returns whether long buffers are
 * folded from now on (never on a CPU that cannot). */
int lrd_crc32c_allow_folding(int allowed);

/* The CRC32C of `prefix ++ source` chained onto `crc`, copying `source` to `destination` on the
 * way (one call for a record's key and value). `source` and `destination` must not overlap. */
uint32_t lrd_crc32c_then_copy(uint32_t crc, const void *prefix, size_t prefix_length,
                              void *destination, const void *source, size_t length);

/* `lrd_crc32c_then_copy` for a copy into the cache file (a put): the same checksum and bytes; long
 * copies ask for the destination's lines ahead, which pays when they are not in cache. */
uint32_t lrd_crc32c_then_store(uint32_t crc, const void *prefix, size_t prefix_length,
                               void *destination, const void *source, size_t length);

/* The CRC32C of bytes 0-3 and 6-43 of a 48-byte record header chained onto `crc`: the header
 * checksum of docs/FORMAT.md, in one call with no length to dispatch on. */
uint32_t lrd_crc32c_record_header(uint32_t crc, const void *header);

/* Whether the 48-byte record header at `header` holds its header checksum (bytes 44-47 of `w5`)
 * chained onto `seed`, given its words 0, 1 and 5 as the caller loaded them (as stored): for a
 * writer, under whose lock no header changes but for the access byte, which the checksum leaves
 * out. Hidden: a direct call from the Swift core, without the export's indirection. */
__attribute__((visibility("hidden"))) int lrd_record_header_holds(uint32_t seed, const void *header, uint64_t w0,
                                                                  uint64_t w1, uint64_t w5);

/* What lrd_entry_copy found: the entry's sequence number, and in `outcome` a status (bits 0-7),
 * the entry's flags (bits 8-15) and its value's length as callers see it (bits 32-63). */
typedef struct {
    uint64_t sequence;
    uint64_t outcome;
} lrd_entry_outcome;

enum {
    /* Not a live, valid entry of the key: a lookup goes on probing. */
    LRD_ENTRY_OTHER = 0,
    /* The value was copied, and the data checksum holds over the copy. */
    LRD_ENTRY_COPIED = 1,
    /* The entry of the key, not copied or not checked: stored compressed, longer than the
     * capacity, expired, or its data checksum failed over the copy. The careful read decides. */
    LRD_ENTRY_UNSETTLED = 2,
};

/* The usual read of an entry, in one call: whether `record` (16-byte aligned, `room` bytes of
 * the file from it) is a live entry of `key` (header checksum, bounds, sequence at least
 * `first_valid_sequence` and below 2^62, key bytes), and if so, unless it is compressed, sliding,
 * too long for `capacity`, expired, or stored `maximum_age` ms or more ago (0: no maximum age),
 * copies its value to `destination` and checks the data checksum over the copy. The format's
 * checks (docs/FORMAT.md 4), as `RecordHeader.read` makes them. The caller re-checks the record
 * afterwards (live bit, sequence, change counter). */
lrd_entry_outcome lrd_entry_copy(const void *record, uint64_t room, uint32_t seed, uint64_t first_valid_sequence,
                                 const void *key, size_t key_length, void *destination, size_t capacity,
                                 uint64_t maximum_age);

/* What lrd_view_get reads through, in process memory: the read view a store's in-process
 * writer published last (`words`, under a sequence lock: sequence, limit, first valid sequence,
 * active table, its slot count, draining table, its slot count, change counter, maximum age), the
 * parts of every view that never change, and the words a read checks and counts: the file's
 * change counter and index epoch (in its shared state), and this process's hits and misses.
 * Owned by `PublishedView`, which states its invariants. */
typedef struct {
    uint64_t words[9];
    const uint8_t *base;
    uint64_t ring_start;
    const uint64_t *change_counter;
    const uint64_t *index_epoch;
    uint64_t *hits;
    uint64_t *misses;
    uint32_t seed;
    /* Nonzero for a read-only mapping, which cannot take the access bit. */
    uint32_t read_only;
} lrd_read_view;

/* What lrd_view_get calls for a read its view did not settle: the careful read of the same
 * arguments, with the `handle` lrd_view_get was given. Returns a LARDER_ status. */
typedef int32_t (*lrd_get_fallback)(void *handle, const void *key, size_t key_length, void *buffer,
                                    size_t buffer_length, size_t *value_length);

/* lrd_view_get's answers without a fallback's: larder.h's LARDER_OK and LARDER_NOT_FOUND, for
 * callers in Swift that do not import larder.h. */
enum { LRD_VIEW_GET_FOUND = 0, LRD_VIEW_GET_ABSENT = 1 };

/* The usual read of `key` (1 to 4096 bytes) into `buffer`, in one call (larder_get's, and
 * `Cache.copyValue`'s): the published view taken, the key hashed, the active table probed to the
 * first slot of the key's tag, its record checked and copied by lrd_entry_copy's checks, then
 * re-checked (live bit, sequence number, change counter), its access bit set and the hit counted.
 * A hit stores the value's length in `*value_length` and returns LARDER_OK; a miss returns
 * LARDER_NOT_FOUND (both counted). Anything else (a view out of date, an index that migrates or
 * changed, a tag shared with another key, an entry not copied) returns `fallback`'s answer to the
 * same arguments, called last, when nothing was counted. */
int32_t lrd_view_get(const lrd_read_view *view, const void *key, size_t key_length, void *buffer,
                     size_t buffer_length, size_t *value_length, void *handle, lrd_get_fallback fallback);

/* The visited bit of lrd_entry_write's `flags`: the record goes live with its access bit set. */
#define LRD_ENTRY_VISITED 0x100u

/* The usual write of an entry's record at `record` (16-byte aligned; the caller holds the writer
 * lock and has checked that the whole record lies in the file), in one call: the key after the
 * 48-byte header, the value (the stored length of bytes) with the data checksum of key ++ value as
 * stored, then the header as `RecordHeader.write` stores it: the first word not live, a release
 * fence, the other words, and the first word live last, with its access bit if `flags` has
 * LRD_ENTRY_VISITED. Bits 0-7 of `flags` are the header's flag byte. Returns the data checksum.
 * The fields it stores: the key (NULL when it is in place already) and its length, the value, the
 * header's lengths word (stored length in bits 0-31, raw length in bits 32-63), its sequence
 * number and its times (ms since the Unix epoch). The value never overlaps the record; the key
 * does only when it is in place. */
uint32_t lrd_entry_write(void *record, uint32_t seed, uint32_t flags, const void *key, size_t key_length,
                         const void *value, uint64_t lengths, uint64_t sequence, uint64_t expires_at,
                         uint64_t stored_at);

/* The bytes of the run of dead entries at `record` (16-byte aligned; the caller holds the writer
 * lock, and `room` bytes of the file follow `record`): entries with state 0 whose headers pass the
 * format's checks (docs/FORMAT.md 4), as `RecordHeader.read` makes them, each within `room`. The
 * run stops before the first other record, and before any record once `budget` bytes or more are
 * passed. 0 when `record` holds no such entry. The tail passes the run (dead_entries.c). */
uint64_t lrd_dead_entries(const void *record, uint64_t room, uint64_t budget, uint32_t seed);

/* Whether lrd_dead_entries may use the CPU's CRC instructions (on by default; the result is the
 * same either way). Tests turn it off to check the path of CPUs without them. Returns whether it
 * uses them from now on (never on a CPU without them). */
int lrd_dead_entries_allow_hardware(int allowed);

/* XXH64 with the given seed, bit-exact with the reference xxHash: lrd_xxh64 (inline). */
#include "lrd_xxhash64.h"

/* Atomics on memory that other threads or processes share through the map.
 * Swift's own atomics cannot be placed on a raw address, hence these. */
static inline uint64_t lrd_load_acquire_u64(const void *p) {
    return __atomic_load_n((const uint64_t *)p, __ATOMIC_ACQUIRE);
}
static inline void lrd_store_release_u64(void *p, uint64_t v) {
    __atomic_store_n((uint64_t *)p, v, __ATOMIC_RELEASE);
}
static inline uint64_t lrd_fetch_add_u64(void *p, uint64_t v) {
    return __atomic_fetch_add((uint64_t *)p, v, __ATOMIC_RELAXED);
}
static inline uint64_t lrd_exchange_u64(void *p, uint64_t v) {
    return __atomic_exchange_n((uint64_t *)p, v, __ATOMIC_RELAXED);
}
static inline uint64_t lrd_load_relaxed_u64(const void *p) {
    return __atomic_load_n((const uint64_t *)p, __ATOMIC_RELAXED);
}
static inline void lrd_store_relaxed_u64(void *p, uint64_t v) {
    __atomic_store_n((uint64_t *)p, v, __ATOMIC_RELAXED);
}
static inline int lrd_cas_u64(void *p, uint64_t expected, uint64_t desired) {
    return __atomic_compare_exchange_n((uint64_t *)p, &expected, desired, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}
static inline uint64_t lrd_fetch_and_u64(void *p, uint64_t v) {
    return __atomic_fetch_and((uint64_t *)p, v, __ATOMIC_RELEASE);
}
static inline uint64_t lrd_fetch_or_u64(void *p, uint64_t v) {
    return __atomic_fetch_or((uint64_t *)p, v, __ATOMIC_RELEASE);
}
static inline void lrd_store_seq_cst_u64(void *p, uint64_t v) {
    __atomic_store_n((uint64_t *)p, v, __ATOMIC_SEQ_CST);
}
static inline uint64_t lrd_load_seq_cst_u64(const void *p) {
    return __atomic_load_n((const uint64_t *)p, __ATOMIC_SEQ_CST);
}
static inline uint64_t lrd_fetch_add_seq_cst_u64(void *p, uint64_t v) {
    return __atomic_fetch_add((uint64_t *)p, v, __ATOMIC_SEQ_CST);
}
static inline uint64_t lrd_fetch_add_release_u64(void *p, uint64_t v) {
    return __atomic_fetch_add((uint64_t *)p, v, __ATOMIC_RELEASE);
}
static inline uint8_t lrd_load_relaxed_u8(const void *p) {
    return __atomic_load_n((const uint8_t *)p, __ATOMIC_RELAXED);
}
static inline void lrd_store_relaxed_u8(void *p, uint8_t v) {
    __atomic_store_n((uint8_t *)p, v, __ATOMIC_RELAXED);
}
static inline void lrd_fence_seq_cst(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void lrd_fence_acquire(void) { __atomic_thread_fence(__ATOMIC_ACQUIRE); }
static inline void lrd_fence_release(void) { __atomic_thread_fence(__ATOMIC_RELEASE); }

/* A hint to start loading the cache line at `p` (never faults, whatever the address). */
static inline void lrd_prefetch(const void *p) { __builtin_prefetch(p, 0, 3); }

/* Hints to start loading the cache lines after the one at `p` that hold its first `length`
 * bytes, at most 2 KiB (beyond that the hardware's stream prefetcher has caught on). Nothing for
 * 256 bytes or less: with 100-byte values the hints made no difference and cost 20 instructions. */
static inline void lrd_prefetch_following(const void *p, uint64_t length) {
    if (length <= 256) return;
    /* In integers: the range may run past the end of the mapping, which hints may. The line
     * after p's is always below the end (length > 256). */
    uintptr_t line = ((uintptr_t)p & ~(uintptr_t)63) + 64;
    uintptr_t end = (uintptr_t)p + (length < 2048 ? length : 2048);
    do {
        __builtin_prefetch((const void *)line, 0, 3);
        line += 64;
    } while (line < end);
}

/* A spin-wait hint to the CPU. */
static inline void lrd_spin_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Waiting for a 32-bit word of shared memory (a file mapping other processes share) to change:
 * a futex on Linux, the kernel's shared compare-and-wait on Apple platforms, a short sleep
 * elsewhere. lrd_wait_word returns at once unless the word holds `expected`; then it sleeps
 * until lrd_wake_word is called on the word, or `timeout_ms` passes, or a signal comes. Returns
 * 0 (woken, changed or interrupted: look again), 1 (timed out) or a negated errno. Works on a
 * read-only mapping. lrd_wake_word wakes every waiter of every process. */
int lrd_wait_word(const void *word, uint32_t expected, uint32_t timeout_ms);
void lrd_wake_word(const void *word);

/* Advisory byte-range lock on `fd` covering [start, start + 1).
 * Linux: open-file-description locks (F_OFD_SETLK), owned by the descriptor,
 * released when it closes or the process dies; or, when `process_owned` is set (tests run Apple
 * platforms' locking that way), POSIX record locks. Apple platforms: POSIX record locks
 * (F_SETLK), owned by the process, whatever `process_owned` says.
 * Returns 0, or an errno value (EAGAIN/EWOULDBLOCK/EACCES when `wait` is 0 and
 * another holder conflicts). */
enum { LRD_UNLOCK = 0, LRD_LOCK_SHARED = 1, LRD_LOCK_EXCLUSIVE = 2 };
int lrd_lock_byte(int fd, uint64_t start, int mode, int wait, int process_owned);

/* Whether another holder (another open file description on Linux, another process elsewhere
 * and with `process_owned`) has a lock, shared or exclusive, on byte `start`: 1 or 0; or
 * -errno. Takes no lock, so a read-only descriptor may ask. */
int lrd_byte_is_locked(int fd, uint64_t start, int process_owned);

/* The writer lock: one per cache file, in the file's shared-state page, excluding writers of
 * every process and thread. `area` points at LRD_WRITER_LOCK_SIZE bytes of the mapping.
 * Linux: a robust, process-shared pthread mutex; when its holder died, lrd_writer_lock returns
 * LRD_LOCK_OWNER_DIED with the lock held, and the caller repairs, then calls
 * lrd_writer_lock_consistent. Elsewhere: an fcntl lock on byte LRD_WRITER_LOCK_BYTE of `fd`
 * plus an in-area "held" word, which tells the next holder that the previous one died while
 * holding it (the kernel drops the fcntl lock of a dead process). Threads of one process must
 * serialize among themselves before calling these (POSIX record locks belong to the process).
 * Tests on Linux may take the second kind with lrd_use_record_writer_lock(1), in a process that
 * has no file open yet (a no-op elsewhere). */
enum { LRD_WRITER_LOCK_SIZE = 128, LRD_WRITER_LOCK_BYTE = 2 };
void lrd_use_record_writer_lock(int on);
enum { LRD_LOCK_ACQUIRED = 0, LRD_LOCK_OWNER_DIED = 1 };
/* Formats the area. Only when no other process can be using it. Returns 0 or an errno value. */
int lrd_writer_lock_init(void *area);
/* Returns LRD_LOCK_ACQUIRED, LRD_LOCK_OWNER_DIED (held, needs repair), or a negated errno. */
int lrd_writer_lock(void *area, int fd);
/* After a repair: marks the lock usable again. */
void lrd_writer_lock_consistent(void *area);
void lrd_writer_unlock(void *area, int fd);
/* lrd_writer_lock_fast and lrd_writer_unlock_fast, their usual paths inline: lrd_writer_lock.h. */

/* A reader-writer lock among the threads of one process, for short critical sections: waiters
 * spin, then yield, then sleep briefly, and never hand the lock over through the kernel. With a
 * writer thread and reader threads taking turns every microsecond, a parking lock
 * (pthread_rwlock) costs a context switch per operation. A waiting writer holds new readers back,
 * but only for a while, so that a read nested in a read (a value lent out, then another read)
 * can never deadlock against it; a reader that waited through a write is let in before the next
 * one (briefly: writers are not starved either). `word` points to two words: the state, which
 * starts at 0, and the count of forks (lrd_watch_forks()) the lock was made at. A child process
 * forked while a thread of the parent held the lock or waited for it has that thread's state,
 * not the thread: the first of the child's threads to find the lock taken clears it (only the
 * forking thread exists in a child at first). */
void lrd_rwlock_read_lock(uint64_t *word);
void lrd_rwlock_read_unlock(uint64_t *word);
void lrd_rwlock_write_lock_contended(uint64_t *word);

/* The word's bits: a writer holds the lock; a reader waited through a write (the rest of the
 * bits in rwlock.c). */
#define LRD_RWLOCK_WRITER (1ull << 63)
#define LRD_RWLOCK_READER_WAITING (1ull << 61)

/* Inline, for the write path: a lock that nobody holds, waits for or has waited for (the word is
 * 0) is taken with one compare-and-swap; any other goes through rwlock.c. */
static inline void lrd_rwlock_write_lock(uint64_t *word) {
    uint64_t expected = 0;
    if (__builtin_expect(__atomic_compare_exchange_n(word, &expected, LRD_RWLOCK_WRITER, 0, __ATOMIC_ACQUIRE,
                                                     __ATOMIC_RELAXED), 1))
        return;
    lrd_rwlock_write_lock_contended(word);
}

/* Clears the writer and waiting bits (another waiting writer sets its own again), keeps a
 * reader's. */
static inline void lrd_rwlock_write_unlock(uint64_t *word) {
    __atomic_fetch_and(word, LRD_RWLOCK_READER_WAITING, __ATOMIC_RELEASE);
}

/* Three words of per-thread state, a load or a store away (Swift has no thread-local storage of its
 * own; pthread_getspecific and pthread_setspecific are calls of 10 to 25 instructions, on every
 * read and write). Hidden, so that two copies of the library in one process never share them.
 * With glibc, initial-exec: one instruction to reach from libLarderC.so too, at the price of 24
 * bytes of the static TLS block, whose surplus (about 1.6 KiB, shared by every library loaded
 * later) glibc keeps for such libraries. musl and Android's bionic refuse initial-exec TLS in a
 * library opened with dlopen, so there (and on Apple platforms) the default model: a call, in a
 * shared library, that an executable's linker turns into a plain access. */
#if defined(__GLIBC__)
#define LRD_THREAD_LOCAL _Thread_local __attribute__((tls_model("initial-exec"), visibility("hidden")))
#elif defined(__ELF__)
#define LRD_THREAD_LOCAL _Thread_local __attribute__((visibility("hidden")))
#else
#define LRD_THREAD_LOCAL _Thread_local
#endif
/* The innermost of this thread's borrows (a list through its stack frames), or NULL
 * (BorrowMarker). */
extern LRD_THREAD_LOCAL void *lrd_thread_borrowed;
/* Whether this thread holds an error message for the C API (LastError). */
extern LRD_THREAD_LOCAL int lrd_thread_has_error_message;

/* This thread's number (lrd_thread_number), or 0 before its first call. */
extern LRD_THREAD_LOCAL uint32_t lrd_thread_number_value;
uint32_t lrd_assign_thread_number(void);
/* A number of this thread's own, never 0, the same on every call: threads are numbered in the
 * order of their first calls, so that threads started together get neighbouring numbers (which
 * wrap after 2^32 threads). */
static inline uint32_t lrd_thread_number(void) {
    uint32_t number = lrd_thread_number_value;
    return number != 0 ? number : lrd_assign_thread_number();
}

static inline void *lrd_borrowed(void) { return lrd_thread_borrowed; }
static inline void lrd_set_borrowed(void *owner) { lrd_thread_borrowed = owner; }
static inline int lrd_has_error_message(void) { return lrd_thread_has_error_message; }
static inline void lrd_set_has_error_message(int has) { lrd_thread_has_error_message = has; }

/* How many forks lie between the process that loaded the library and this one: 0 there, 1 in its
 * child, 2 in a grandchild. A handle records it when it is opened; a child of the process that
 * opened it sees another count, and leaves alone the file and the locks it shares with its parent.
 * Counted by a pthread_atfork child handler that lrd_watch_forks registers, once per process,
 * before it returns the count: a fork before the first call goes uncounted, and needs none, as no
 * handle was open then. */
extern __attribute__((visibility("hidden"))) uint64_t lrd_fork_generation_counter;
uint64_t lrd_watch_forks(void);
static inline uint64_t lrd_fork_generation(void) {
    return __atomic_load_n(&lrd_fork_generation_counter, __ATOMIC_RELAXED);
}

/* Whether process `pid` still exists (kill(pid, 0) does not fail with ESRCH). */
int lrd_process_exists(int64_t pid);

/* Closes the file `fd` names while keeping the number taken: it names /dev/null afterwards, until
 * it is closed. Returns 0 or an errno value (the file then stays open). Needs no free descriptor
 * once lrd_prepare_retirement has run (it opens /dev/null, once per process). */
int lrd_retire_descriptor(int fd);
void lrd_prepare_retirement(void);

/* Opens /dev/null on each of the descriptor numbers 0, 1 and 2 that is closed, to stay open for
 * the process's life. Called before a cache file is opened: a program that closed its standard
 * output would otherwise have the file opened under number 1, and what it (or any library it
 * uses) then prints would be written into the cache file, as SQLite learned (its robust_open).
 * Writes to a number filled this way fail, as they did while it was closed. */
void lrd_fill_standard_descriptors(void);

/* Reserve disk blocks for [offset, offset + length) so that later writes
 * through the map cannot fail with SIGBUS on a full disk. Extends the file
 * when the range ends past it. Returns 0 or an errno value. */
int lrd_preallocate(int fd, uint64_t offset, uint64_t length);

/* Reserves disk blocks for every hole in the first `size` bytes of the file (a file copied
 * sparse), keeping its bytes: a store through the map into a hole on a full disk would be
 * SIGBUS. One fstat when the file has a block for every byte. Returns 0 or an errno value. */
int lrd_reserve_holes(int fd, uint64_t size);

/* Maps the pages of [address, address + length), part of a shared writable file mapping, ready
 * for writing, as a write to each would, without writing (Linux 5.14 and later:
 * madvise(MADV_POPULATE_WRITE)). Returns 0, or an errno value: ENOTSUP where there is no such
 * call, EINVAL on an older kernel. A length of 0 only asks whether the call exists. */
int lrd_populate_for_writing(void *address, size_t length);

/* Runs lrd_populate_for_writing over [address, address + length) on a new detached thread (all
 * signals blocked, 1 MiB per call so that the process's memory-map lock is never held long),
 * then calls done(context) on that thread. A plain thread rather than a shared queue: it works
 * the same in a child after fork. Returns 0 when the thread started (done will be called), else
 * an errno value (done is not called). */
int lrd_populate_in_background(void *address, size_t length, void (*done)(void *context), void *context);

#include "lrd_writer_lock.h"

#ifdef __cplusplus
}
#endif
#endif
